"""State-dict keys from hand-written layer tables, shared by the backbone and weight-loading tests
(tests/models/test_resnet.py, test_bn_inception.py, test_pretrained.py)."""

from __future__ import annotations

from torch import nn

from dmlbook.models import BNInception


def conv_keys(keys: dict, name: str, c_in: int, c_out: int, k: int, bias: bool = False) -> None:
    keys[f"{name}.weight"] = (c_out, c_in, k, k)
    if bias:
        keys[f"{name}.bias"] = (c_out,)


def bn_keys(keys: dict, name: str, c: int, counter: bool = True) -> None:
    for p in ("weight", "bias", "running_mean", "running_var"):
        keys[f"{name}.{p}"] = (c,)
    if counter:
        keys[f"{name}.num_batches_tracked"] = ()


def shapes(model: nn.Module) -> dict:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def port_style_state(model: BNInception) -> dict:
    """A state dict as older copies of the port store it: [1, C] BN tensors, no counters."""
    out = {}
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked"):
            continue
        out[k] = v.reshape(1, -1).clone() if "_bn." in k else v.clone()
    return out

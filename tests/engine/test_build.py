"""Tests of dmlbook.engine.build: device, optimiser groups from a config, the learning-rate schedule."""

from __future__ import annotations

import pytest
import torch
from tiny_run import tiny_config
from torch import nn

from dmlbook.engine import ConfigError, load_config
from dmlbook.engine.build import (
    build_loss,
    build_model,
    build_optimizer,
    lr_factor,
    milestones,
    resolve_device,
)


def test_lr_schedule_ms_official_and_warmup(tmp_path):
    cfg = load_config(tiny_config(tmp_path / "run"), ["optim.milestones=[0.4, 0.8]"])
    steps = milestones(cfg, 3000)
    assert steps == [1200, 2400]
    factors = [lr_factor(i, steps, 0.1, 0, 1.0) for i in (0, 1199, 1200, 2399, 2400, 2999)]
    assert factors == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    assert lr_factor(0, [], 0.1, 10, 0.01) == pytest.approx(0.01)
    assert lr_factor(5, [], 0.1, 10, 0.0) == pytest.approx(0.5)
    assert lr_factor(10, [], 0.1, 10, 0.0) == 1.0
    with pytest.raises(ConfigError, match="beyond"):
        milestones(load_config(tiny_config(tmp_path / "run"), ["optim.milestones=[5000]"]), 3000)


def test_config_optim_section_reaches_the_factory_and_is_validated(tmp_path):
    base = tiny_config(tmp_path / "run")
    cfg = load_config(base, ["optim.name=sgd", "optim.momentum=0", "optim.lr=0.05"])
    model = build_model(cfg, pretrained=False)
    opt = build_optimizer(cfg, model, build_loss(cfg))
    assert type(opt) is torch.optim.SGD
    assert {g["momentum"] for g in opt.param_groups} == {0.0}  # plain SGD is reachable
    cfg = load_config(base, ["optim.betas=[0.8, 0.99]", "optim.eps=1e-6"])
    group = build_optimizer(cfg, build_model(cfg, pretrained=False), build_loss(cfg)).param_groups[
        0
    ]
    assert (group["betas"], group["eps"]) == ((0.8, 0.99), 1e-6)
    with pytest.raises(ConfigError, match=r"optim.momentum must be in \[0, 1\)"):
        load_config(base, ["optim.momentum=1.5"])
    with pytest.raises(ConfigError, match="optim.nesterov needs momentum > 0"):
        load_config(base, ["optim.name=sgd", "optim.momentum=0", "optim.nesterov=true"])
    with pytest.raises(ConfigError, match="unknown optim.name 'rmsprop'; use one of adam"):
        load_config(base, ["optim.name=rmsprop"])
    with pytest.raises(ConfigError, match="optim.lr must be a positive finite number"):
        load_config(base, ["optim.lr=0"])


def test_devices_and_the_loss_parameters_join_the_head_group(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu") == resolve_device("cpu")
    with pytest.raises(ConfigError, match="train.device='cuda' but no CUDA device is available"):
        resolve_device("cuda")

    class ProxyLoss(nn.Module):  # a loss with a trained parameter (as proxy-based losses have)
        def __init__(self) -> None:
            super().__init__()
            self.proxies = nn.Parameter(torch.zeros(4, 16))

    cfg = load_config(tiny_config(tmp_path / "run"), ["optim.lr=0.002", "optim.head_lr_mult=10"])
    loss = ProxyLoss()
    opt = build_optimizer(cfg, build_model(cfg, pretrained=False), loss)
    by_name = {g["name"]: g for g in opt.param_groups}
    assert by_name["loss"]["params"] == [loss.proxies]
    assert by_name["loss"]["lr"] == pytest.approx(0.02)  # lr x head_lr_mult, as the head
    assert all(g["base_lr"] == g["lr"] for g in opt.param_groups)  # lr_factor scales base_lr
    assert sorted(round(g["lr"], 6) for g in opt.param_groups) == [0.002, 0.02, 0.02]


@pytest.mark.parametrize(
    ("name", "params", "where"),
    [
        ("multi_similarity", {"margin": float("nan")}, "loss.params.margin"),
        ("dro_kl_g", {"threshold": float("inf")}, "loss.params.threshold"),
        ("histogram", {"R": True}, "loss.params.R"),
    ],
)
def test_a_bad_loss_hyper_parameter_names_its_config_path(tmp_path, name, params, where):
    """Issue 45: ``margin: .nan`` passed ``--dry-run`` and trained at loss 0.0 (DRO-KL-G) or
    failed later blaming the embeddings (MS); the loss's declared check now names the key."""
    cfg = load_config(tiny_config(tmp_path, loss={"name": name, "params": params}))
    with pytest.raises(ConfigError, match=rf"^{where}: loss '{name}': .* must be"):
        build_loss(cfg)

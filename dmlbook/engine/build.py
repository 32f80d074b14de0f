"""From a :class:`~dmlbook.engine.config.Config` to objects: device, model, loss, optimiser, schedule.

Tests: ``tests/engine/test_build.py``.
"""

from __future__ import annotations

import bisect

import torch
from torch import nn

from ..losses import get_loss
from ..models.head import EmbeddingModel, build_backbone
from ..models.multilevel import MultiLevelEmbeddingModel
from ..training.optim import make_optimizer
from .config import Config, ConfigError

__all__ = [
    "resolve_device", "build_model", "build_loss", "build_optimizer", "lr_factor", "milestones",
]  # fmt: skip


def resolve_device(name: str) -> torch.device:
    """``"auto"``: CUDA when available, else the CPU. Raises if CUDA is asked for but absent."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"train.device={name!r} but no CUDA device is available; use auto or cpu."
        )
    return device


def build_model(cfg: Config, *, pretrained: bool = True) -> EmbeddingModel:
    """The backbone (with its pretrained weights unless ``pretrained=False``) and the head."""
    m = cfg.model
    backbone = build_backbone(
        m.backbone, m.pretrained if pretrained else None, **m.backbone_options
    )
    head = MultiLevelEmbeddingModel if m.head == "multilevel" else EmbeddingModel
    return head(backbone, m.dim, pooling=m.pooling, freeze_bn=m.freeze_bn)


def build_loss(cfg: Config) -> nn.Module:
    """``dmlbook.losses.get_loss(cfg.loss.name, **cfg.loss.params)``."""
    try:
        return get_loss(cfg.loss.name, **cfg.loss.params)
    except ValueError as err:  # a hyper-parameter's check names it: its config path
        where = f"loss.params.{err.parameter}" if getattr(err, "parameter", None) else "loss"
        raise ConfigError(f"{where}: {err}") from err


def build_optimizer(cfg: Config, model: EmbeddingModel, loss: nn.Module) -> torch.optim.Optimizer:
    """:func:`~dmlbook.training.optim.make_optimizer` over the backbone and head groups.

    The head's group learns at ``lr * head_lr_mult``; every ``optim`` setting (SGD momentum and
    nesterov, Adam betas and eps, weight decay) is passed on.

    Parameters of the loss (if any, e.g. proxies) join the head group. Every group keeps its
    starting learning rate as ``base_lr``; :func:`lr_factor` scales it.
    """
    o = cfg.optim
    groups = model.param_groups(o.lr, o.head_lr_mult)
    extra = list(loss.parameters())
    if extra:
        groups.append({"name": "loss", "params": extra, "lr": o.lr * o.head_lr_mult})
    for g in groups:
        g["base_lr"] = g["lr"]
    return make_optimizer(groups, o.name, o.lr, **o.settings())


def milestones(cfg: Config, total: int) -> list[int]:
    """The step-decay iterations; fractions in (0, 1) are taken of ``total``."""
    out = [round(m * total) if m < 1 else int(m) for m in cfg.optim.milestones]
    if any(m > total for m in out):
        raise ConfigError(
            f"optim.milestones {cfg.optim.milestones} lie beyond the run's {total} iterations."
        )
    return out


def lr_factor(iteration: int, steps: list[int], gamma: float, warmup: int, start: float) -> float:
    """Learning-rate multiplier of update number ``iteration`` (0-based).

    ``gamma ** (number of milestones <= iteration)``, times a linear warm-up from ``start`` to 1
    over the first ``warmup`` updates. MS (official code): milestones 1,200 and 2,400, gamma 0.1.
    """
    factor = gamma ** bisect.bisect_right(steps, iteration)
    if iteration < warmup:
        factor *= start + (1.0 - start) * iteration / warmup
    return factor

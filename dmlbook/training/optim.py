"""The one optimiser factory of the package: Adam, AdamW or SGD with every setting reachable.

:func:`dmlbook.training.fit` (the chapters) and the engine's configs (``optim:`` section, through
:func:`dmlbook.engine.build.build_optimizer`) both build their optimiser here, and
:func:`check_optimizer` is the single place that validates the settings (the config reports its
errors with the ``optim.`` prefix). SGD's momentum is a setting (default 0.9, as the papers' SGD
recipes; ``momentum=0`` is plain SGD); Adam's ``betas`` and ``eps`` are settings too.

Tests: ``tests/training/test_optim.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ..core.validation import is_number

__all__ = ["OPTIMIZERS", "OPTIMIZER_DEFAULTS", "check_optimizer", "make_optimizer"]

#: Optimiser names accepted by :func:`make_optimizer` (case-insensitive).
OPTIMIZERS = ("adam", "adamw", "sgd")

#: Defaults of the settings, declared once (the config's ``optim`` section uses them too).
OPTIMIZER_DEFAULTS: dict[str, Any] = {
    "weight_decay": 0.0,
    "momentum": 0.9,
    "nesterov": False,
    "betas": (0.9, 0.999),
    "eps": 1e-8,
}


def check_optimizer(
    name: str,
    lr: float,
    *,
    weight_decay: float = OPTIMIZER_DEFAULTS["weight_decay"],
    momentum: float = OPTIMIZER_DEFAULTS["momentum"],
    nesterov: bool = OPTIMIZER_DEFAULTS["nesterov"],
    betas: Sequence[float] = OPTIMIZER_DEFAULTS["betas"],
    eps: float = OPTIMIZER_DEFAULTS["eps"],
) -> str:
    """Validate optimiser settings; return the lower-case name.

    Every message starts with the setting's name (``"momentum must be ..."``), so that a config
    can prefix it with ``optim.``.

    Raises
    ------
    ValueError
        For an unknown name or a value out of range.
    """
    key = str(name).lower()
    if key not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {name!r}; use one of {', '.join(OPTIMIZERS)}.")
    if not (is_number(lr) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}.")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}.")
    if not (math.isfinite(momentum) and 0 <= momentum < 1):
        raise ValueError(f"momentum must be in [0, 1) (0: plain SGD), got {momentum!r}.")
    if nesterov and key == "sgd" and momentum == 0:
        raise ValueError("nesterov needs momentum > 0; set momentum (e.g. 0.9) or nesterov false.")
    if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
        raise ValueError(f"betas must be two numbers in [0, 1), got {list(betas)!r}.")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a positive number, got {eps!r}.")
    return key


def make_optimizer(
    params: Iterable[torch.nn.Parameter] | Iterable[dict[str, Any]],
    name: str = "adam",
    lr: float = 1e-3,
    weight_decay: float = OPTIMIZER_DEFAULTS["weight_decay"],
    *,
    momentum: float = OPTIMIZER_DEFAULTS["momentum"],
    nesterov: bool = OPTIMIZER_DEFAULTS["nesterov"],
    betas: Sequence[float] = OPTIMIZER_DEFAULTS["betas"],
    eps: float = OPTIMIZER_DEFAULTS["eps"],
) -> torch.optim.Optimizer:
    """Build the optimiser called ``name`` over ``params`` (tensors or parameter groups).

    Parameters
    ----------
    params : iterable of Parameter or of dict
        What to optimise; groups may carry their own ``lr``.
    name : {"adam", "adamw", "sgd"}
        Case-insensitive.
    lr, weight_decay : float
        Learning rate (of groups without their own) and L2 penalty (decoupled for AdamW).
    momentum, nesterov : float, bool
        SGD only: ``momentum=0`` is plain SGD; ignored by Adam and AdamW.
    betas, eps : sequence of two floats, float
        Adam and AdamW only; ignored by SGD.

    Raises
    ------
    ValueError
        From :func:`check_optimizer`, before anything is built.
    """
    settings = {"momentum": momentum, "nesterov": nesterov, "betas": betas, "eps": eps}
    key = check_optimizer(name, lr, weight_decay=weight_decay, **settings)
    if key == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay
        )
    cls = torch.optim.Adam if key == "adam" else torch.optim.AdamW
    return cls(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)

"""A refusal of the second derivative where a loss defines its gradient to first order only.

Some losses hold part of their gradient fixed as numbers: DRO's chi-square ``p*`` (solved by
sorting, detached: Danskin's theorem gives ``dF/dl = p*``), Liu et al.'s weights (footnote 6),
Circle loss's ``a_p, a_n`` with ``detach_weights=True``, HAP2S_E's soft-max, the sampled DRO-KL
and Xuan & Pless's designed gradient. Their first derivative is the one the papers define, but
autograd's second derivative would differentiate it with those numbers frozen and miss how they
move (``torch.autograd.gradgradcheck`` fails): a silently wrong Hessian or gradient penalty.

:func:`first_order_only` is the identity on a tensor whose first backward passes the gradient
through unchanged; differentiating that gradient again (``create_graph=True`` and then a
backward through it) raises ``RuntimeError`` with the reason. :func:`second_derivative_refusal`
says, for a loss module, whether and why (:data:`FIRST_ORDER`); ``PairLoss.forward`` applies it.
Tests: ``tests/losses/test_first_order.py`` (every registered loss, every setting of its
choices: ``gradgradcheck`` passes or this refusal is raised).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["FIRST_ORDER", "first_order_only", "second_derivative_refusal"]

_HELD = (
    "{name} has a first derivative only: {what}, so a second derivative (a Hessian, a gradient "
    "penalty) would miss how {them} move with the embeddings. Refused rather than wrong{hint}."
)


def _held(name: str, what: str, them: str = "they", hint: str = "") -> str:
    return _HELD.format(name=name, what=what, them=them, hint=hint)


CHI2 = _held(
    "dro with uncertainty='chi2'",
    "its p* is solved by sorting and held fixed (Danskin's theorem: dF/dl = p*)",
    "p* would",
    "; uncertainty='kl' (a closed form) has a true second derivative",
)
_LIU = "the paper's weights are numbers without gradient (Liu et al., footnote 6)"

#: Loss module class name -> the reason it refuses a second derivative for a module's settings
#: (``None``: it has a true one).
FIRST_ORDER: dict[str, Callable[[Any], str | None]] = {
    "DROLoss": lambda m: CHI2 if m.uncertainty == "chi2" else None,
    "CircleLoss": lambda m: (
        _held(
            "circle with detach_weights=True",
            "a_p and a_n are held as numbers (Sun et al.)",
            hint="; detach_weights=False differentiates through them",
        )
        if m.detach_weights
        else None
    ),
    "DROSampledLoss": lambda m: _held("dro_kl_sampled", "its pairs are drawn from a detached p*"),
    "HAP2SLoss": lambda m: _held("hap2s_e", "its soft-max weights are constants of the loss"),
    "PairPowerLoss": lambda m: _held("pair_p", _LIU),
    "PairExponentialLoss": lambda m: _held("pair_e", _LIU),
    "MSDistanceLoss": lambda m: _held("ms_distance", _LIU),
    "TripletPowerLoss": lambda m: _held("triplet_p", _LIU),
    "TripletExponentialLoss": lambda m: _held("triplet_e", _LIU),
    "GradientSurgeryLoss": lambda m: _held(
        "gradient_surgery", "its gradient is designed (Xuan & Pless) and computed as numbers"
    ),
}


def second_derivative_refusal(loss: torch.nn.Module) -> str | None:
    """Why ``loss`` (a module) refuses a second derivative with its settings; ``None`` if not."""
    reason = FIRST_ORDER.get(type(loss).__name__)
    return reason(loss) if reason else None


def first_order_only(x: torch.Tensor, why: str | None) -> torch.Tensor:
    """``x`` itself; a second backward through its gradient raises ``RuntimeError(why)``.

    ``why=None`` returns ``x`` unchanged (no refusal).
    """
    if why is None or not (torch.is_grad_enabled() and x.requires_grad):
        return x
    return _FirstOrderOnly.apply(x, why)


class _FirstOrderOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, why: str) -> torch.Tensor:
        ctx.why = why
        ctx.save_for_backward(x)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        if torch.is_grad_enabled():  # create_graph=True: this gradient may be differentiated
            (x,) = ctx.saved_tensors  # x ties the refusal to the graph even if grad is constant
            return _Refuse.apply(grad, x, ctx.why), None
        return grad, None


class _Refuse(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, grad: torch.Tensor, x: torch.Tensor, why: str) -> torch.Tensor:
        ctx.why = why
        return grad.clone()

    @staticmethod
    def backward(ctx: Any, *_: torch.Tensor) -> None:
        raise RuntimeError(ctx.why)

"""What the fused closed forms share: a core run on the detached ``S``, and ``dL/dS`` saved.

:class:`WithGradient` is the same backward for a value whose gradient was computed elsewhere
(the DRO closed forms, Liu et al.'s Pair-P/E, Triplet-P/E and MS on distances).

Each ``*ClosedForm`` autograd Function of the loss families (:mod:`~dmlbook.losses.ms_closed_form`,
:mod:`~dmlbook.losses.contrastive_closed_form`, :mod:`~dmlbook.losses.lifted_closed_form`,
:mod:`~dmlbook.losses.binomial_closed_form`) computes, in one forward pass, its value and the
matrix ``W = dL/dS`` of the paper's weights (a *core* function of the similarities, with no
graph); its backward pass is then one multiplication, ``W`` times the incoming gradient. These two
helpers are that forward and that backward. Tests: ``tests/losses/test_closed_forms.py`` and each
family's tests, which check the closed forms against their autograd paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..pairs import compute_dtype

__all__ = ["WithGradient", "forward_with_weights", "weights_backward"]


def forward_with_weights(
    ctx: Any, S: torch.Tensor, core: Callable[..., tuple[torch.Tensor, ...]], *args: Any
) -> tuple[torch.Tensor, ...]:
    """Run ``core(s, *args)`` on ``s = S.detach()`` and save its last output, ``W = dL/dS``.

    ``s`` is in the compute dtype (float32 for half precision) and outside autocast, as the
    losses' autograd paths compute. Returns the core's other outputs (the value, and e.g. which
    anchors count).
    """
    with torch.autocast(device_type=S.device.type, enabled=False):
        s = S.detach().to(compute_dtype(S))
        *outputs, W = core(s, *args)
    ctx.save_for_backward(W)
    ctx.input_dtype = S.dtype
    return tuple(outputs)


def weights_backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
    """``dL/dS``: the saved ``W`` times ``grad``, the gradient of the value, which is a scalar,
    one entry per anchor (a row of ``W``) or one per pair; in ``S``'s dtype."""
    (W,) = ctx.saved_tensors
    g = grad.to(W.dtype)
    if g.ndim == 1:
        g = g[:, None]
    return (W * g).to(ctx.input_dtype)


class WithGradient(torch.autograd.Function):
    """``WithGradient.apply(S, value, G)``: ``value`` (computed without a graph) with its gradient.

    ``G`` is ``d value / dS`` (B, B): for a scalar value its gradient, for one value per anchor
    ``G[i] = d value_i / dS_i.`` (anchor ``i`` reaches row ``i`` only). The backward is
    :func:`weights_backward`; a second derivative is refused (``G`` carries no graph).
    """

    @staticmethod
    def forward(ctx: Any, S: torch.Tensor, value: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(G)
        ctx.input_dtype = S.dtype
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return weights_backward(ctx, grad), None, None

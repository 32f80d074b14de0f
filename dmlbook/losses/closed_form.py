"""What the fused closed forms share: a core run on the detached ``S``, and ``dL/dS`` saved.

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

from ..pairs import compute_dtype

__all__ = ["forward_with_weights", "weights_backward"]


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

"""What the fused closed forms share: a core run on the detached ``S``, reduced, and attached.

Each loss family with a closed form (:mod:`~dmlbook.losses.ms_closed_form`,
:mod:`~dmlbook.losses.contrastive_closed_form`, :mod:`~dmlbook.losses.lifted_closed_form`,
:mod:`~dmlbook.losses.binomial_closed_form`, ...) has a *core*: a function of the detached
similarities that returns the loss (per anchor, or reduced) together with the matrix
``W = dL/dS`` of the paper's weights, in one pass and with no graph. :func:`closed_form_loss`
runs a core (:func:`run_core`), folds the reduction of :func:`dmlbook.pairs.reduce` into the
value and into ``W`` (:func:`fold_reduction`) and attaches ``W`` as the value's gradient
(:func:`attach`), so that the backward pass is one multiplication.

When ``S`` is the output of :func:`dmlbook.similarity.cosine_similarity` of the batch against
itself (what every loss module forms), :func:`attach` goes one step further: the value is
attached to the embeddings ``x`` directly, and its backward is ``W`` times the incoming
gradient followed by :func:`dmlbook.similarity.self_similarity_backward`, which is exactly what
``S``'s own node would do. One autograd node then stands between ``x`` and the loss instead of
five to ten (``S``'s, the closed form's, the reduction's), and at B = 80 that is a fifth of the
call (``bench/results/floor_cpu.md``). Values and gradients are the same bits either way.

Tests: ``tests/losses/test_closed_form.py``, ``tests/losses/test_closed_forms.py`` and each
family's tests, which check the closed forms against their autograd paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..pairs import compute_dtype
from ..similarity import self_similarity_backward, self_similarity_parts

__all__ = ["attach", "closed_form_loss", "fold_reduction", "run_core", "weights_backward"]


def run_core(S: torch.Tensor, core: Callable[..., tuple[Any, ...]], *args: Any) -> tuple:
    """``core(s, *args)`` on ``s = S.detach()``, in the compute dtype (float32 for half
    precision) and outside autocast, as the losses' autograd paths compute."""
    with torch.autocast(device_type=S.device.type, enabled=False):
        return core(S.detach().to(compute_dtype(S)), *args)


def fold_reduction(
    per: torch.Tensor, W: torch.Tensor, reduction: str, valid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(reduce(per, reduction, valid), W')``, with ``W'`` the gradient of that value.

    ``per`` holds the terms (one per anchor, whose row ``i`` of ``W`` is ``d per_i / dS_i.``,
    or one per pair, like ``W``). The value is :func:`dmlbook.pairs.reduce`'s, computed by the
    same operations, and ``W'`` is ``W`` times ``d value / d per``, the factor autograd would
    bring back through ``reduce`` (``1/count`` on the terms that count, 0 elsewhere), so the
    bits are the same as well. ``W`` is overwritten. For ``"none"`` the value stays per term.
    """
    if valid is None:
        if reduction in ("none", "sum"):
            return (per if reduction == "none" else per.sum()), W
        n = max(per.numel(), 1)
        return per.sum() / n, W.mul_(torch.ones((), dtype=W.dtype, device=W.device) / n)
    kept = torch.where(valid, per, 0.0)
    if reduction == "mean_nonzero":
        valid = valid & (kept > 0)
        kept = torch.where(valid, kept, 0.0)
    factor = valid.to(W.dtype)  # d value / d per_i, up to the 1/count of a mean
    if reduction in ("mean", "mean_nonzero"):
        count = valid.sum().clamp_min(1).to(per.dtype)
        kept = kept.sum() / count
        factor = factor.div_(count)
    elif reduction == "sum":
        kept = kept.sum()
    return kept, W.mul_(factor if factor.ndim == W.ndim else factor[:, None])


def weights_backward(G: torch.Tensor, grad: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``dL/dS``: ``G`` times ``grad``, the gradient of the value, which is a scalar, one entry
    per anchor (a row of ``G``) or one per pair; in ``dtype`` (``S``'s)."""
    g = grad.to(G.dtype)
    if g.ndim == 1:
        g = g[:, None]
    return (G * g).to(dtype)


def attach(S: torch.Tensor, value: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``value`` (computed without a graph) with ``d value / dS = G``.

    ``G`` is ``(B, B)``: for a scalar value its gradient, for one value per anchor
    ``G[i] = d value_i / dS_i.``, for one value per pair the elementwise derivative. When ``S``
    is ``cosine_similarity(x)`` the result hangs on ``x`` directly (module docstring); else on
    ``S``. A second derivative is refused (``G`` carries no graph): the autograd paths
    (``backward="autograd"``) give one.
    """
    parts = self_similarity_parts(S)
    if parts is None:
        return WithGradient.apply(S, value, G)
    x, u, norm = parts
    return _ThroughSimilarity.apply(x, value, G, S.dtype, u, norm)


def closed_form_loss(
    S: torch.Tensor,
    core: Callable[..., tuple[Any, ...]],
    *args: Any,
    reduction: str | None = None,
) -> torch.Tensor:
    """The loss of a closed-form ``core`` on ``S``: :func:`run_core`, then :func:`attach`.

    With ``reduction=None`` the core returns ``(value, W)``, already reduced; else it returns
    ``(per, valid, W)`` or ``(per, W)`` (every anchor counts), reduced by :func:`fold_reduction`.
    """
    *head, W = run_core(S, core, *args)
    if reduction is None:
        (value,) = head
    else:
        value, W = fold_reduction(head[0], W, reduction, head[1] if len(head) > 1 else None)
    return attach(S, value, W)


class WithGradient(torch.autograd.Function):
    """``WithGradient.apply(S, value, G)``: :func:`attach` on any ``S``."""

    @staticmethod
    def forward(ctx: Any, S: torch.Tensor, value: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(G)
        ctx.input_dtype = S.dtype
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (G,) = ctx.saved_tensors
        return weights_backward(G, grad, ctx.input_dtype), None, None


class _ThroughSimilarity(torch.autograd.Function):
    """:func:`attach` for ``S = cosine_similarity(x)``: ``dL/dx`` from ``G`` in one node."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        value: torch.Tensor,
        G: torch.Tensor,
        dtype: torch.dtype,
        u: torch.Tensor,
        norm: torch.Tensor | None,
    ) -> torch.Tensor:
        ctx.save_for_backward(G, u, norm)
        ctx.input_dtype = dtype
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        G, u, norm = ctx.saved_tensors
        grad_S = weights_backward(G, grad, ctx.input_dtype)
        return self_similarity_backward(grad_S, u, norm), None, None, None, None, None

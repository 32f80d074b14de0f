"""The fused closed form of the N-pair loss on its ``C x C`` block (Sohn's similarity form).

The fast path of :class:`dmlbook.losses.NPairLoss` when no masks are passed: with one anchor
``a_i`` and one positive ``p_i`` per class, anchor ``i``'s negatives are the other classes'
positives, so every pair the loss reads is an entry of the block ``S_ik = <a_i, p_k>`` of
anchors against positives (unit vectors), the positive pair on its diagonal, and

    L_i = log(1 + sum_{k != i} exp(S_ik - S_ii)) = LSE_k S_ik - S_ii,
    dL_i / dS_ik = softmax_k(S_i.)_k - [k = i]

(Liu et al., Eq. 13 in Sohn's similarity form; the weight is the GPW weight of
:mod:`dmlbook.losses.npair`). One forward pass normalises the ``2C`` rows, takes the one
``C x C x d`` product, and returns the loss while it saves the weights ``W``; the backward is
``G = grad * W``, two ``C x C x d`` products and the normalisation's backward written out (as
:func:`dmlbook.similarity.cosine_similarity`'s). A class of one sample has no pair; ``C = 1``
gives 0 with gradient 0, as :func:`~dmlbook.losses.npair_loss` does.

Tests: ``tests/losses/test_npair.py`` (against :func:`~dmlbook.losses.npair_loss` on the
whole ``S`` with autograd, and the loops of :mod:`dmlbook.reference.classic`);
``bench/bench_floor.py`` times it against pytorch-metric-learning's ``NPairsLoss``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from ..similarity import NORM_EPS, l2_normalize_backward

__all__ = ["NPairClosedForm"]


class NPairClosedForm(torch.autograd.Function):
    """``NPairClosedForm.apply(x, anchors, positives, scale)``: ``scale * sum_i L_i``.

    ``x`` holds the raw embeddings (B, d), ``anchors`` and ``positives`` the index lists of
    :func:`dmlbook.mining.npair_pairs` (disjoint, one pair per class), ``scale`` is ``1 / C``
    for the mean and 1 for the sum. The gradient of ``x`` is zero outside the ``2C`` rows.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, anchors: torch.Tensor, positives: torch.Tensor, scale: float
    ) -> torch.Tensor:
        keep = torch.cat([anchors, positives])
        u = x[keep]  # a fresh copy: normalised in place
        norm = u.norm(dim=1, keepdim=True)
        u.div_(norm.clamp_min(NORM_EPS))
        C = anchors.shape[0]
        W = u[:C] @ u[C:].T  # S_ik = <a_i, p_k>
        positive = W.diagonal().sum()
        top = W.amax(dim=1, keepdim=True)
        W.sub_(top).exp_()
        total = W.sum(dim=1, keepdim=True)
        value = ((top + total.log()).sum() - positive) * scale  # sum_i LSE_k S_ik - S_ii
        W.div_(total)  # softmax over each anchor's row
        W.diagonal().sub_(1.0)
        W.mul_(scale)
        ctx.save_for_backward(W, u, norm, keep)
        ctx.rows = x.shape[0]
        return value

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        W, u, norm, keep = ctx.saved_tensors
        G = W * grad
        C = W.shape[0]
        g_u = torch.cat([G @ u[C:], G.T @ u[:C]])  # dL/da_i, then dL/dp_k
        out = u.new_zeros(ctx.rows, u.shape[1])
        out.index_copy_(0, keep, l2_normalize_backward(g_u, u, norm))
        return out, None, None, None

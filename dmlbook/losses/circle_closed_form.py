"""The fused closed form of Circle loss (Sun et al. 2020) with detached weighting factors: one
forward pass over a few ``B x B`` buffers returns the loss and ``dL/dS``.

This is the fast path of :func:`dmlbook.losses.circle_loss` (``backward="closed_form"``, the
default, with ``detach_weights=True`` and a scalar reduction); the loss and its notation are
documented in :mod:`dmlbook.losses.circle`, whose autograd path it is tested against
(``tests/surgery/test_losses.py``, float64, hypothesis).

With ``u = S`` on negative pairs and ``u = 1 - S`` on positive pairs, both logits of Circle loss
are one expression, ``z = gamma [u + m]_+ (u - m)`` (``a_n (s_n - m)`` and
``-a_p (s_p - (1 - m))``). Anchor ``i``'s term is ``softplus(LSE_{P_i} z + LSE_{N_i} z)``, and
with the weights ``[u + m]_+`` held constant

    dL_i/dS_ij = gamma [u_ij + m]_+ sigmoid(LSE_P + LSE_N) (softmax_{N_i}(z)_j - softmax_{P_i}(z)_j),

a soft-max over the anchor's negatives and one over its positives (each zero off its set). The
positive pairs are taken as index lists (``K - 1`` per row in a P x K batch) and the negative
mask enters as the ``log`` of a 0./1. float (``-inf`` addends), not as ``torch.where`` on it,
so the ``B x B`` work is the negatives' soft-max alone.
"""

from __future__ import annotations

import torch

from ..pairs import softplus

__all__ = ["circle_core"]


def _negatives_softmax(z: torch.Tensor, neg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax_{N_i}(z)`` in place of ``z`` (0 off the negatives) and each row's
    ``LSE_{N_i} z`` (``-inf`` for a row without a negative, whose soft-max is all 0)."""
    z.add_(neg.to(z.dtype).log_())  # -inf off the negatives
    lse = z.amax(dim=1, keepdim=True)
    top = torch.where(lse == float("-inf"), 0.0, lse)  # (B, 1)
    z.sub_(top).exp_()
    total = z.sum(dim=1, keepdim=True)
    z.div_(total.clamp_min(torch.finfo(z.dtype).tiny))
    return z, (top + total.log()).squeeze(1)


def _positives_softmax(
    z: torch.Tensor, rows: torch.Tensor, B: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same over the positive pairs, given as a list ``z`` of logits with their ``rows``."""
    top = z.new_full((B,), float("-inf")).scatter_reduce_(0, rows, z, "amax")
    top = torch.where(top == float("-inf"), 0.0, top)
    e = (z - top[rows]).exp_()
    total = z.new_zeros(B).index_add_(0, rows, e)
    e.div_(total.clamp_min(torch.finfo(z.dtype).tiny)[rows])
    return e, top + total.log()


def circle_core(
    s: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, gamma: float, margin: float, mean: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Circle loss summed over the anchors with a positive and a negative (divided by their
    number if ``mean``), and ``dL/dS``, on detached ``s``; 0 with gradient 0 without one. The
    weighting factors are not differentiated (Sun et al.'s code)."""
    B = s.shape[0]
    rows, cols = pos.nonzero(as_tuple=True)  # positives as index lists (K - 1 per row)
    s_p = s[rows, cols]
    a_p = (1.0 + margin - s_p).clamp_min_(0.0)
    soft_p, lse_p = _positives_softmax(-gamma * a_p * (s_p - (1.0 - margin)), rows, B)
    a_n = (s + margin).clamp_min_(0.0)  # (B, B); only its negatives' entries are used
    soft_n, lse_n = _negatives_softmax((s - margin).mul_(a_n).mul_(gamma), neg)
    gap = lse_p + lse_n  # -inf for an anchor without a positive or a negative
    valid = gap > float("-inf")
    count = int(valid.sum())
    scale = 1.0 / max(count, 1) if mean else 1.0
    value = (softplus(gap) * valid).sum() * scale
    row = (gap.sigmoid() * valid).mul_(gamma * scale)  # dL/dLSE, times gamma
    W = soft_n.mul_(a_n).mul_(row[:, None])  # negatives: gamma a_n softmax_N
    W[rows, cols] = -(soft_p * a_p * row[rows])  # positives: -gamma a_p softmax_P
    return value, W

"""The fused closed form of the MS loss (Wang et al. 2019, Eq. 11-15): one pass that mines,
weighs and returns both Eq. 15's anchor terms and the matrix ``dL_i/dS_ij`` (Eq. 13-14).

This is the fast training path of :func:`dmlbook.losses.multi_similarity_loss` (its
``backward="closed_form"``) and of :func:`dmlbook.losses.ms_weights`; the equations and the
semantics are documented in :mod:`dmlbook.losses.multi_similarity`, whose autograd path (a masked
log-sum-exp) and the per-anchor loop of :mod:`dmlbook.reference.multi_similarity` it is tested
against (``tests/losses/test_multi_similarity.py``, ``tests/reference/test_ms_equivalence.py``).

Performance
-----------
On CPUs the cost of the element-wise work is not the arithmetic: ``torch.where`` (and
``masked_fill``) with a *data-dependent* mask such as a mined one runs a branchy kernel, tens of
times slower than a multiplication, and every extra ``B x B`` temporary is fresh memory whose
first-touch page faults can cost more than the matrix product (notably in VMs). The closed-form
path therefore keeps positives as index lists (``K - 1`` per row in a P x K batch), writes the
Eq. 11 mask as a float whose logarithm (0 or ``-inf``) is added to the exponent, and works in
one ``B x B`` buffer that becomes the saved weights. ``bench/bench_ms.py`` times it against
pytorch-metric-learning and the bare ``X X^T``.
"""

from __future__ import annotations

import torch

from ..pair_lists import positive_pairs

__all__ = ["ms_core"]


#: Up to this batch size :func:`ms_core` works on dense ``B x B`` masks (:func:`_ms_core_dense`:
#: fewer calls, where a call's fixed cost dominates); above it, positives are index lists
#: (:func:`dmlbook.pair_lists.positive_pairs`) and negatives one dense buffer (less memory traffic).
#: The pair-sum core of binomial deviance, BinLifted and LiftedStruct* switches here too.
DENSE_CORE_UP_TO = 128


def _kept_pairs(
    s: torch.Tensor,
    y: torch.Tensor,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
    epsilon: float | None,
    W: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """The mining step of :func:`ms_core` (Eq. 11-12); writes Eq. 11's kept negatives into ``W``.

    Returns ``(rows, cols, s_pos, min_pos, max_neg, keep_pos)``: the positive pairs as index
    lists and their similarities, each anchor's hardest positive and negative similarity, and
    which positives Eq. 12 keeps. ``W`` (B x B, overwritten) ends as the 0./1. mask of the kept
    negatives (times the candidate mask ``masks[1]`` where given).
    """
    B = s.shape[0]
    dt, dev = s.dtype, s.device
    inf = torch.full((), float("inf"), dtype=dt, device=dev)
    if masks is None:
        rows, cols = positive_pairs(y)
        W.copy_(s)  # hardest negative: the row maximum with positives and self excluded
        W[rows, cols] = -inf
        W.fill_diagonal_(-inf)
        max_neg = W.amax(dim=1)
    else:
        rows, cols = masks[0].nonzero(as_tuple=True)
        max_neg = torch.where(masks[1], s, -inf, out=W).amax(dim=1)
    s_pos = s[rows, cols]
    min_pos = torch.full((B,), float("inf"), dtype=dt, device=dev)
    min_pos.scatter_reduce_(0, rows, s_pos, "amin")
    if epsilon is None:
        keep_pos = torch.ones_like(s_pos, dtype=torch.bool)
        W.fill_(1.0)
    else:
        keep_pos = s_pos < (max_neg + epsilon)[rows]  # Eq. 12
        torch.gt(s, (min_pos - epsilon)[:, None], out=W)  # Eq. 11, as 0./1.
    if masks is not None:
        W.mul_(masks[1])
    return rows, cols, s_pos, min_pos, max_neg, keep_pos


def _ms_core_dense(
    s: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    alpha: float,
    beta: float,
    margin: float,
    epsilon: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`ms_core` with both halves as dense ``B x B`` masks: fewer, cheaper calls.

    For a small batch, where the cost of a call (not of its arithmetic) dominates: no index
    lists, no ``index_put``; a masked-out entry's exponent is ``-inf``, so its ``exp`` is 0.
    """
    inf = float("inf")
    s_pos = torch.where(pos, s, inf)  # +inf off the positives: never the hardest, never kept
    s_neg = torch.where(neg, s, -inf)
    min_pos, max_neg = s_pos.amin(dim=1), s_neg.amax(dim=1)
    if epsilon is not None:  # Eq. 11-12 (nothing is kept beside an empty half: its bound is inf)
        pos = s_pos < (max_neg + epsilon)[:, None]
        neg = s_neg > (min_pos - epsilon)[:, None]
    # an empty half's shift is -inf, clamped to 0 (its bound is +inf only for an infinite S)
    shifts = torch.stack([alpha * (margin - min_pos), beta * (max_neg - margin)]).clamp_min(0.0)
    c_p, c_n = shifts
    E_p = torch.where(pos, (alpha * margin) - alpha * s - c_p[:, None], -inf).exp_()
    E_n = torch.where(neg, beta * s - (beta * margin) - c_n[:, None], -inf).exp_()
    sums = torch.stack([E_p.sum(dim=1), E_n.sum(dim=1)])
    totals = torch.exp(-shifts).add_(sums)
    lse = torch.where(sums > 0, shifts + totals.log(), 0.0)
    per_anchor = lse[0] / alpha + lse[1] / beta
    inv = totals.reciprocal_()
    W = E_n.mul_(inv[1][:, None]).sub_(E_p.mul_(inv[0][:, None]))  # Eq. 13 minus Eq. 14
    return per_anchor, W


def ms_core(
    s: torch.Tensor,
    y: torch.Tensor,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
    alpha: float,
    beta: float,
    margin: float,
    epsilon: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 11-15 on detached similarities: the anchor terms and the matrix ``dL_i/dS_ij``.

    Parameters
    ----------
    s : Tensor (B, B)
        Similarities (no graph), in the compute dtype.
    y : Tensor (B,)
        Labels.
    masks : (pos, neg) bool Tensors (B, B), or None
        Candidate pairs; ``None`` means the label masks (the fast path: positives as index
        lists, negatives implicit).
    alpha, beta, margin : float
    epsilon : float or None
        Mine with Eq. 11-12 (``None``: keep every candidate).

    Returns
    -------
    per_anchor : Tensor (B,)
        Eq. 15's anchor terms (0 for an anchor with nothing kept).
    W : Tensor (B, B)
        ``dL_i/dS_ij``: ``+w^-_ij`` (Eq. 13) on kept negatives, ``-w^+_ij`` (Eq. 14) on kept
        positives, 0 elsewhere.

    Notes
    -----
    Up to ``B =`` :data:`DENSE_CORE_UP_TO` both halves are dense masks (:func:`_ms_core_dense`).
    Above, positive pairs are few (``K - 1`` per row in a P x K batch) and handled as index lists;
    negatives densely, in one ``B x B`` buffer that becomes ``W``. Every exponent is shifted by
    its row maximum (including the implicit 0 of the ``1 +``). Kept negatives are selected
    without a data-dependent ``torch.where`` (slow on CPUs): the 0/1 mask of Eq. 11 is written
    as a float, its logarithm (0 or ``-inf``) is added to the exponent, and ``exp(-inf) = 0``.
    """
    B = s.shape[0]
    if B <= DENSE_CORE_UP_TO:
        if masks is None:
            same = y[:, None] == y[None, :]
            masks = (same.clone().fill_diagonal_(False), same.logical_not_())
        return _ms_core_dense(s, masks[0], masks[1], alpha, beta, margin, epsilon)
    dt, dev = s.dtype, s.device
    W = torch.empty_like(s)
    rows, cols, s_pos, min_pos, max_neg, keep_pos = _kept_pairs(s, y, masks, epsilon, W)
    # Shifts: the largest exponent of each half (the hardest kept positive and negative are
    # the extremes whenever anything is kept), and 0 for the "1 +".
    zero = torch.zeros((), dtype=dt, device=dev)
    shifts = torch.stack([alpha * (margin - min_pos), beta * (max_neg - margin)]).clamp_min(0.0)
    shifts = torch.where(torch.isfinite(shifts), shifts, zero)
    c_p, c_n = shifts
    # negatives: log(mask) + beta (s - lambda) - c_n, then exp (masked-out entries -> 0)
    W.log_().add_(s, alpha=beta).add_((-beta * margin - c_n)[:, None])
    W.clamp_max_(0.0).exp_()
    if masks is None:
        W[rows, cols] = 0.0
        W.fill_diagonal_(0.0)
    sum_n = W.sum(dim=1)
    # positives, as a list: exp(-alpha (s - lambda) - c_p) on the kept ones
    e_pos = ((alpha * margin - c_p)[rows] - alpha * s_pos).clamp_max_(0.0).exp_() * keep_pos
    sum_p = torch.zeros(B, dtype=dt, device=dev).index_add_(0, rows, e_pos)
    sums = torch.stack([sum_p, sum_n])
    totals = torch.exp(-shifts) + sums
    lse = torch.where(sums > 0, shifts + totals.log(), zero)
    per_anchor = lse[0] / alpha + lse[1] / beta
    inv = 1.0 / totals
    W.mul_(inv[1][:, None])  # Eq. 13 on kept negatives
    W[rows, cols] = -e_pos * inv[0][rows]  # Eq. 14, with the sign of dL/dS
    return per_anchor, W

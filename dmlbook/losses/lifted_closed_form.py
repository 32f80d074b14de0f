"""The fused closed forms of the lifted structure losses: value and ``dL/dS`` in one pass.

The fast training path (``backward="closed_form"``, the default) of
:func:`dmlbook.losses.lifted_loss` (Wang et al. 2019, Eq. 6, whose weights are Eq. 7-8) and of
:func:`dmlbook.losses.lifted_structure_loss` (Song et al.; Liu et al., Eq. 14). The equations and
the semantics (empty sets, reductions, forms) are documented in :mod:`dmlbook.losses.lifted`,
whose autograd path (``backward="autograd"``, what ``book/05_lifted_structure.ipynb`` teaches)
and the loops of :mod:`dmlbook.reference.classic` these are tested against
(``tests/losses/test_lifted_closed_form.py``).

How
---
Both losses are soft maxima (log-sum-exp) over an anchor's positives and over its negatives.
Positives are few (``K - 1`` per row in a P x K batch) and kept as index lists
(:func:`dmlbook.pair_lists.positive_pairs`); negatives are handled densely in one ``B x B`` buffer
that holds the exponent, then the soft-max weights, then the saved ``dL/dS``. Positives and self
pairs are removed from it by writing ``-inf`` at their indices (``exp(-inf) = 0``), not with a
``B x B`` mask and a data-dependent ``torch.where``, which is slow on CPUs (see
:mod:`dmlbook.losses.ms_closed_form`). The chain rule through the form is a factor per pair:
``dd/dS = -1`` (similarity), ``-2`` (squared distance) or ``-1/D`` (distance, 0 where
:func:`dmlbook.pairs.safe_distance` returns 0).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..pair_lists import positive_pairs

__all__ = ["candidates", "form_and_slope", "lifted_core", "lifted_structure_core"]

Pairs = tuple[torch.Tensor, torch.Tensor]


def form_and_slope(
    s: torch.Tensor, form: str, pairs: Pairs
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | float]:
    """``-d`` for the dissimilarity ``d`` of :func:`dmlbook.pairs.dissimilarity`, ``d`` at
    ``pairs``, and ``dd/dS``; detached.

    The values are those of ``dissimilarity`` (``2 - 2 S``, then the root of the entries above
    the dtype's epsilon and 0 below, as :func:`~dmlbook.pairs.safe_distance`); the slope is a
    number for the similarity and squared-distance forms, a ``B x B`` tensor ``-1/D`` (0 where
    ``D = 0``, whose gradient ``safe_distance`` zeroes) for the distance form. ``-d`` is a fresh
    buffer the caller may overwrite.
    """
    if form == "similarity":
        return s.clone(), -s[pairs], -1.0
    sq = torch.rsub(s, 2.0, alpha=2.0)  # 2 - 2 S in one kernel (2 S is exact)
    if form == "squared_distance":
        d_pairs = sq[pairs]
        return sq.neg_(), d_pairs, -2.0
    D = F.threshold_(sq, torch.finfo(s.dtype).eps, 0.0).sqrt_()
    slope = D.reciprocal().nan_to_num_(posinf=0.0).neg_()
    d_pairs = D[pairs]
    return D.neg_(), d_pairs, slope


def candidates(
    y: torch.Tensor, masks: tuple[torch.Tensor, torch.Tensor] | None
) -> tuple[Pairs, torch.Tensor | None]:
    """The positive pairs as index lists, and the negative mask (``None``: the label negatives)."""
    if masks is None:
        return positive_pairs(y), None
    return masks[0].nonzero(as_tuple=True), masks[1]


def _negative_softmax(
    x: torch.Tensor, pairs: Pairs, neg: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Row-wise ``log sum_{N_i} e^{x_ik}`` and, in place in ``x``, the soft-max weights on ``N_i``.

    Returns ``(lse, has)``: the log-sum-exp (``-inf`` for a row without negatives) and which rows
    have any. ``x`` ends as ``e^{x_ij} / sum_{N_i} e^{x_ik}`` on the negatives, 0 elsewhere.
    """
    inf = float("inf")
    if neg is None:  # the label negatives: every pair but the positives and self
        x[pairs] = -inf
        x.fill_diagonal_(-inf)
    else:
        x.masked_fill_(neg.logical_not(), -inf)
    m = x.amax(dim=1)
    has = m > -inf
    m = torch.where(has, m, torch.zeros_like(m))
    total = x.sub_(m[:, None]).exp_().sum(dim=1)
    lse = m + total.log()
    x.mul_(torch.where(has, total.reciprocal(), torch.zeros_like(total))[:, None])
    return lse, has


def _positive_softmax(
    v: torch.Tensor, rows: torch.Tensor, B: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The same over index lists: ``(lse (B,), has (B,), weights of each pair)``."""
    m = v.new_full((B,), float("-inf")).scatter_reduce_(0, rows, v, "amax")
    has = m > float("-inf")
    m = torch.where(has, m, torch.zeros_like(m))
    e = (v - m[rows]).exp_()
    total = v.new_zeros(B).index_add_(0, rows, e)
    return m + total.log(), has, e.div_(total[rows])


def _apply_slope(W: torch.Tensor, slope: torch.Tensor | float) -> torch.Tensor:
    return W.mul_(slope)


def lifted_core(
    s: torch.Tensor,
    y: torch.Tensor,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
    margin: float,
    form: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eq. 6 on detached ``s``: the anchor terms, which anchors count, and ``d per_i / dS_ij``."""
    B = s.shape[0]
    pairs, neg = candidates(y, masks)
    rows, cols = pairs
    W, d_pos, slope = form_and_slope(s, form, pairs)
    lse_p, has_p, w_pos = _positive_softmax(d_pos, rows, B)  # Eq. 7 (up to the hinge)
    lse_n, has_n = _negative_softmax(W, pairs, neg)  # Eq. 8
    valid = has_p & has_n
    per = torch.relu(lse_p + lse_n + margin)
    per = torch.where(valid, per, torch.zeros_like(per))
    active = (per > 0).to(s.dtype)
    # d per_i / d d_ij: +w_pos on positives, -w_neg on negatives, on active anchors only
    W.mul_(active.neg()[:, None])
    W[rows, cols] = w_pos * active[rows]
    return per, valid, _apply_slope(W, slope)


def lifted_structure_core(
    s: torch.Tensor,
    y: torch.Tensor,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
    margin: float,
    form: str,
    squared_hinge: bool,
    joint_negatives: bool,
    reduction: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Song et al.'s loss (Liu et al., Eq. 14) on detached ``s``, reduced: ``(value, dL/dS)``."""
    pairs, neg = candidates(y, masks)
    rows, cols = pairs
    W, d_pos, slope = form_and_slope(s, form, pairs)
    lse, has = _negative_softmax(W, pairs, neg)  # r_i = margin + lse_i
    r = lse + margin
    r_i, r_j, h_i, h_j = r[rows], r[cols], has[rows], has[cols]
    if joint_negatives:
        valid = h_i | h_j
        # log(e^{r_i} + e^{r_j}) and each end's share of it (0 for an end without negatives)
        share_i = torch.sigmoid(r_i - r_j)
        share_i = torch.where(h_i, torch.where(h_j, share_i, 1.0), 0.0)
        neg_term = torch.where(h_i, r_i, r_j)
        both = h_i & h_j
        neg_term = torch.where(both, torch.logaddexp(r_i, r_j), neg_term)
        share_j = torch.where(h_j, 1.0 - share_i, 0.0)
    else:
        valid = h_i & h_j
        neg_term = r_i + r_j
        share_i = share_j = torch.ones_like(r_i)
    J = torch.where(valid, d_pos + neg_term, torch.zeros_like(d_pos))
    hinge = torch.relu(J)
    per = hinge.square() / 2 if squared_hinge else hinge
    g = hinge if squared_hinge else (J > 0).to(s.dtype)  # d per / d J
    count = 1.0 if reduction == "sum" else valid.sum().clamp_min(1).to(s.dtype)
    g = g / count
    value = per.sum() / count
    # dL/dr_i collects each pair's share; dr_i/dd_ik = -(soft-max weight of k in N_i)
    grad_r = torch.zeros_like(r).index_add_(0, rows, g * share_i).index_add_(0, cols, g * share_j)
    W.mul_(grad_r.neg()[:, None])
    W.index_put_(pairs, g, accumulate=True)
    return value, _apply_slope(W, slope)

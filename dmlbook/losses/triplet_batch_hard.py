"""Batch-hard triplets as index lists: the fast path of ``TripletLoss(mining="batch_hard")``.

:func:`dmlbook.mining.batch_hard_masks` returns the hardest positive and negative of each anchor
as two ``B x B`` masks, and :func:`dmlbook.losses.triplet_loss` then gathers ``S_ap`` and
``S_an`` with a masked sum over each row (and autograd scatters their gradient back through the
same masks): about twenty ``B x B`` passes for ``B`` numbers. :func:`batch_hard_triplets` selects
the same triplets as index lists (positives listed by :func:`dmlbook.pair_lists.positive_pairs`, the
hardest negative by one ``max`` over a copy of ``S`` with the positives and self set to
``-inf``), and :func:`batch_hard_triplet_loss` evaluates the hinge on the ``2 B`` gathered
similarities: the same triplets (ties to the lowest column, as ``batch_hard_masks``), the same
values and gradients. Tests: ``tests/losses/test_closed_forms.py`` (against the masks path and
the loops); chapter ``book/04_triplet.ipynb``, 4.3 "Mining: which triplets enter".
"""

from __future__ import annotations

import torch

from ..pair_lists import positive_pairs
from ..pairs import dissimilarity, reduce

__all__ = ["batch_hard_triplets", "batch_hard_triplet_loss"]


def _hardest_positive(
    s: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the column of the least similar positive (lowest column on ties) and whether any."""
    B = s.shape[0]
    s_pos = s[rows, cols]
    low = s.new_full((B,), float("inf")).scatter_reduce_(0, rows, s_pos, "amin")
    at_min = s_pos == low[rows]
    first = torch.full((B,), B, dtype=cols.dtype, device=cols.device)
    first.scatter_reduce_(0, rows, torch.where(at_min, cols, B), "amin")
    return first, first < B


def batch_hard_triplets(
    s: torch.Tensor, labels: torch.Tensor, masks: tuple[torch.Tensor, torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The batch-hard triplet ``(a, p, n)`` of every anchor that has a positive and a negative.

    Parameters
    ----------
    s : Tensor (B, B)
        Similarities, detached (mining carries no gradient).
    labels : Tensor (B,)
    masks : (pos, neg) bool Tensors, or None
        Candidate pairs (already combined with the label masks by
        :func:`dmlbook.pairs.resolve_masks`); ``None``: the label masks.

    Returns
    -------
    a, p, n : LongTensor
        Anchors, their least similar positive and most similar negative (ties to the lowest
        column), the triplets of :func:`dmlbook.mining.batch_hard_masks`.
    """
    inf = float("inf")
    if masks is None:
        rows, cols = positive_pairs(labels)
        p, has_p = _hardest_positive(s, rows, cols)
        x = s.clone()
        x[rows, cols] = -inf
        x.fill_diagonal_(-inf)
    else:
        pos, neg = masks
        p = torch.where(pos, s, inf).argmin(dim=1)
        has_p = pos.any(dim=1)
        x = torch.where(neg, s, -inf)
    top, n = x.max(dim=1)
    a = (has_p & (top > -inf)).nonzero().squeeze(1)
    return a, p[a], n[a]


def batch_hard_triplet_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    form: str,
    reduction: str,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """``[d_ap - d_an + margin]_+`` over the batch-hard triplets, reduced as ``triplet_loss``."""
    a, p, n = batch_hard_triplets(S.detach(), labels, masks)
    k = a.shape[0]
    d = dissimilarity(S[torch.cat([a, a]), torch.cat([p, n])], form)  # one gather, one scatter
    per = torch.relu(d[:k] - d[k:] + margin)
    return reduce(per, reduction, torch.ones_like(per, dtype=torch.bool))

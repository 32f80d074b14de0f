"""Pairs and triplets chosen by hardness: all pairs and triplets, batch-hard, easy-positive /
hard-negative, and the margin-based triplet selections (semi-hard, margin-violating).

Chapter: ``book/04_triplet.ipynb``, 4.3 "Mining: which triplets enter". Tests:
``tests/mining/test_triplets.py``; pytorch-metric-learning's miners are compared in
``tests/losses/test_pml_crosscheck.py``.
"""

from __future__ import annotations

import torch

from ..core.pairs import (
    FORMS,
    check_choice,
    check_similarity,
    dissimilarity,
    pair_masks,
    pair_sets,
    resolve_masks,
)
from ..core.validation import as_labels

#: Triplet selections by the margin ``t = d_an - d_ap`` of a triplet (``d`` the dissimilarity of
#: the loss's form). pytorch-metric-learning's ``TripletMarginMiner`` calls ``"violating"`` "all";
#: it is Liu et al.'s triplet-margin mining, Eq. 19 (``D_ap + m >= D_an``).
TRIPLET_KINDS: dict[str, str] = {
    "violating": "t <= margin (the triplet's hinge [d_ap - d_an + margin]_+ is active or at 0)",
    "hard": "t <= 0 (the negative is at least as close as the positive)",
    "semihard": "0 < t <= margin (farther than the positive, but inside the margin)",
    "easy": "t > margin (already satisfied)",
}


def all_pair_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All positive pairs ``i != j`` and all negative pairs of a batch (no mining).

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
    """
    return pair_masks(as_labels(labels))


def all_triplet_mask(
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Every valid triplet: ``T[a, p, n] = pos[a, p] and neg[a, n]``.

    Parameters
    ----------
    labels : Tensor of shape (B,)
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Narrow the label masks first (as the losses do).

    Returns
    -------
    bool Tensor of shape (B, B, B)
    """
    y = as_labels(labels)
    B = y.shape[0]
    pos, neg = resolve_masks(y, pos_mask, neg_mask, (B, B))
    return pos[:, :, None] & neg[:, None, :]


def batch_hard_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch-hard mining: per anchor, its least similar positive and its most similar negative.

    In distances: the farthest positive and the *nearest* negative. Liu et al. review this
    selection as their Eq. 20 but print the negative rule with ``max`` over the negative
    distances, which would pick the easiest negative; the hardest one is the ``min``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities. The hardest pairs are the same for every form of a loss, since the
        distance ``D = sqrt(2 - 2 S)`` is a decreasing function of ``S``.
    labels : Tensor of shape (B,)
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidates to choose from (narrowing the label masks).

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
        At most one ``True`` per row in each. An anchor that lacks a positive or a negative gets
        neither (an empty row in both), so a triplet loss fed these masks sees exactly one
        triplet ``(a, hardest p, hardest n)`` per anchor that has both, as pytorch-metric-learning's
        ``BatchHardMiner`` does. Ties go to the lowest column index.
    """
    return _one_triplet_per_anchor(S, labels, pos_mask, neg_mask, easiest_positive=False)


def easy_positive_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Easy-positive / hard-negative mining (Xuan & Pless, Sec. 4, after their ref. [23]): per
    anchor, its *most* similar positive and its most similar negative.

    Parameters and returns as :func:`batch_hard_masks` (one triplet per anchor that has both;
    ties to the lowest column index).
    """
    return _one_triplet_per_anchor(S, labels, pos_mask, neg_mask, easiest_positive=True)


def _one_triplet_per_anchor(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_mask: torch.Tensor | None,
    neg_mask: torch.Tensor | None,
    easiest_positive: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One positive (the least or the most similar) and the most similar negative per anchor."""
    s, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    B = S.shape[0]
    inf = torch.tensor(float("inf"), dtype=s.dtype, device=s.device)
    if easiest_positive:
        chosen_p = torch.where(pos, s, -inf).argmax(dim=1)
    else:
        chosen_p = torch.where(pos, s, inf).argmin(dim=1)
    chosen_n = torch.where(neg, s, -inf).argmax(dim=1)
    keep = pos.any(dim=1) & neg.any(dim=1)
    rows = torch.arange(B, device=S.device)
    out_p = torch.zeros_like(pos)
    out_n = torch.zeros_like(neg)
    out_p[rows[keep], chosen_p[keep]] = True
    out_n[rows[keep], chosen_n[keep]] = True
    return out_p, out_n


def margin_triplet_mask(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    kind: str = "violating",
    *,
    form: str = "similarity",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triplets selected by their margin ``t = d_an - d_ap`` (see :data:`TRIPLET_KINDS`).

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    margin : float
        The triplet loss's margin, in the units of ``form``.
    kind : {"violating", "hard", "semihard", "easy"}
        ``"violating"`` keeps the triplets that Wang et al. (below Eq. 5) call valid,
        ``S_an + lambda > S_ap`` (here with ``>=``, as pytorch-metric-learning does);
        ``"semihard"`` the semi-hard ones of Schroff et al. (FaceNet), ``d_ap < d_an <= d_ap + m``.
    form : {"similarity", "distance", "squared_distance"}
        What ``d`` is: ``-S``, ``D`` or ``D^2`` (the kinds are not the same in every form: a
        margin on ``S`` is not a margin on ``D``).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional

    Returns
    -------
    bool Tensor of shape (B, B, B)
        ``T[a, p, n]``; only valid triplets (``pos[a, p]`` and ``neg[a, n]``) can be ``True``.
    """
    check_choice(kind, tuple(TRIPLET_KINDS), "kind")
    check_choice(form, FORMS, "form")
    y = check_similarity(S, labels)
    valid = all_triplet_mask(y, pos_mask=pos_mask, neg_mask=neg_mask)
    d = dissimilarity(S.detach(), form)
    t = d[:, None, :] - d[:, :, None]  # t[a, p, n] = d_an - d_ap
    if kind == "violating":
        chosen = t <= margin
    elif kind == "hard":
        chosen = t <= 0
    elif kind == "semihard":
        chosen = (t > 0) & (t <= margin)
    else:
        chosen = t > margin
    return valid & chosen


def semihard_triplet_mask(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    *,
    form: str = "similarity",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Semi-hard triplets, ``0 < d_an - d_ap <= margin`` (Schroff et al.; see :func:`margin_triplet_mask`)."""
    return margin_triplet_mask(
        S, labels, margin, "semihard", form=form, pos_mask=pos_mask, neg_mask=neg_mask
    )

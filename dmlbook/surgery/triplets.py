"""Which triplets a designed gradient acts on, and the relative similarities of Eq. 12.

Xuan & Pless (Sec. 4) sample with the easy-positive / hard-negative protocol of their ref. [23]:
every anchor ``a`` with a positive and a negative in the batch forms one triplet with its most
similar positive (``p``, the *easy* positive) and its most similar negative (``n``, the *hard*
negative). The multi-similarity pair weights (Eq. 13-14) also read the anchor's other
similarities, ``R_ap^i`` (other positives) and ``R_an^j`` (other negatives), kept when they fall
in the sets of Eq. 12.

Chapter: ``book/13_gradient_surgery.ipynb`` (13.2). Tests: ``tests/surgery/test_triplets.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.similarity import pair_masks
from ..mining import easy_positive_masks

__all__ = ["Triplets", "ephn_triplets", "relative_sets"]


@dataclass(frozen=True)
class Triplets:
    """One triplet per usable anchor: index tensors ``a``, ``p``, ``n`` of shape (T,) and the
    similarities ``s_ap = S[a, p]``, ``s_an = S[a, n]``."""

    a: torch.Tensor
    p: torch.Tensor
    n: torch.Tensor
    s_ap: torch.Tensor
    s_an: torch.Tensor

    def __len__(self) -> int:
        return int(self.a.shape[0])


def ephn_triplets(S: torch.Tensor, labels: torch.Tensor) -> Triplets:
    """Easy-positive / hard-negative triplets (Xuan & Pless, Sec. 4; their ref. [23]).

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of the batch.
    labels : Tensor of shape (B,)

    Returns
    -------
    Triplets
        For every anchor with at least one positive and one negative: its most similar positive
        and its most similar negative (ties: the lowest index). Anchors without both are left out.
    """
    pos, neg = easy_positive_masks(S, labels)  # the miner: one triplet per anchor
    a = torch.nonzero(pos.any(dim=1)).flatten()
    p, n = pos[a].int().argmax(dim=1), neg[a].int().argmax(dim=1)
    return Triplets(a, p, n, S[a, p], S[a, n])


def relative_sets(
    S: torch.Tensor, labels: torch.Tensor, t: Triplets, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The masks of the relative sets of Eq. 12, one row per triplet.

    ``P = {R_ap^i : R_ap^i < max{S_an, R_an^j} + eps}`` holds the anchor's *other* positives
    (not ``p``) that are less similar than its hardest negative plus ``eps``;
    ``N = {R_an^j : R_an^j > min{S_ap, R_ap^i} - eps}`` its other negatives (not ``n``) more
    similar than its least similar positive minus ``eps``.

    Returns
    -------
    (in_P, in_N) : bool Tensors of shape (T, B)
        ``in_P[k, i]``: ``S[a_k, i]`` is in the set P of triplet ``k``; likewise ``in_N``.
    """
    pos, neg = pair_masks(labels)
    rows = S.detach()[t.a]
    pos, neg = pos[t.a], neg[t.a]
    k = torch.arange(len(t), device=S.device)
    other_pos, other_neg = pos.clone(), neg.clone()
    other_pos[k, t.p] = False
    other_neg[k, t.n] = False
    high, low = torch.finfo(S.dtype).max, torch.finfo(S.dtype).min
    max_neg = torch.where(neg, rows, low).amax(dim=1, keepdim=True)
    min_pos = torch.where(pos, rows, high).amin(dim=1, keepdim=True)
    in_P = other_pos & (rows < max_neg + epsilon)
    in_N = other_neg & (rows > min_pos - epsilon)
    return in_P, in_N

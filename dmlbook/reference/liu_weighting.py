"""Algorithm 1 of Liu et al., one anchor at a time: the paper-literal loops of Eq. 16-34 and 39.

**Reference semantics, not a training path.** Each function walks over the anchors ``z_i`` as
Algorithm 1's step 4 does: it mines the anchor's pairs on ``D`` (Eq. 16-17, optionally 22-23;
triplets Eq. 19), computes every weight as a Python number from the detached distance (the
paper's footnote 6), normalises over the anchor's own pairs (or, for ``"batch"``, over the
whole batch in a first pass), forms ``L_i`` with autograd, and returns ``L = (1/B) sum_i L_i``
(step 5). The vectorised code of :mod:`dmlbook.losses.liu_weighting` and
:mod:`dmlbook.losses.liu_triplet` is tested against these loops
(``tests/reference/test_liu_equivalence.py``); the loops themselves on hand-worked batches in
``tests/reference/test_liu_weighting.py``; the chapter is ``book/11_liu_weighting.ipynb``.
O(B^2) (pairs) or O(B^3) (triplets) Python iterations: use small batches.
"""

from __future__ import annotations

import math

import torch

from ..core.pairs import check_similarity, dissimilarity

__all__ = [
    "ms_distance_loss_reference",
    "pair_weighted_loss_reference",
    "triplet_weighted_loss_reference",
]


def _weight(x: float, weighting: str, exponent: float) -> float:
    """Eq. 24-31 for the base ``x >= 0`` (``0.0 ** 0 == 1.0`` in Python, as Eq. 24 needs)."""
    if weighting == "constant":
        return 1.0
    if weighting == "power":
        return x**exponent
    return math.exp(exponent * x)


def _anchor_pairs(d, y, i, m1, m2, epsilon):
    """Anchor ``i``'s mined positives and negatives (Eq. 16-17, then Eq. 22-23 if epsilon)."""
    B = len(y)
    positives = [j for j in range(B) if j != i and y[j] == y[i] and d[i][j] >= m1]
    negatives = [k for k in range(B) if y[k] != y[i] and d[i][k] <= m2]
    if epsilon is not None:
        if not positives or not negatives:
            return [], []
        nearest_negative = min(d[i][k] for k in negatives)
        farthest_positive = max(d[i][j] for j in positives)
        positives, negatives = (
            [j for j in positives if d[i][j] >= nearest_negative - epsilon],
            [k for k in negatives if d[i][k] <= farthest_positive + epsilon],
        )
    return positives, negatives


def _normalise(weights: list[dict], normalization: str) -> list[dict]:
    """Eq. 32-34: divide by the anchor's sum (``"anchor"``) or the batch's (``"batch"``)."""
    if normalization == "none":
        return weights
    if normalization == "batch":
        total = sum(sum(w.values()) for w in weights)
        return [{key: (v / total if total > 0 else 0.0) for key, v in w.items()} for w in weights]
    out = []
    for w in weights:
        total = sum(w.values())
        out.append({key: (v / total if total > 0 else 0.0) for key, v in w.items()})
    return out


def pair_weighted_loss_reference(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_margin: float = 0.0,
    neg_margin: float = 0.8,
    *,
    weighting: str = "power",
    pos_exponent: float = 0.0,
    neg_exponent: float = 1.0,
    normalization: str = "anchor",
    epsilon: float | None = None,
) -> torch.Tensor:
    """Algorithm 1 with Eq. 18: ``(1/B) sum_i L_i``, the weights from Eq. 24-27, 29-30, 32-33."""
    y = check_similarity(S, labels).tolist()
    D = dissimilarity(S, "distance")
    d = D.detach().tolist()
    B = len(y)
    sets = [_anchor_pairs(d, y, i, pos_margin, neg_margin, epsilon) for i in range(B)]
    w_pos, w_neg = [], []
    for i, (P, N) in enumerate(sets):  # Eq. 26-27 or 29-30, from the detached distances
        w_pos.append({j: _weight(d[i][j] - pos_margin, weighting, pos_exponent) for j in P})
        w_neg.append({k: _weight(neg_margin - d[i][k], weighting, neg_exponent) for k in N})
    w_pos, w_neg = _normalise(w_pos, normalization), _normalise(w_neg, normalization)
    total = S.new_zeros(())
    for i in range(B):
        for j, w in w_pos[i].items():
            total = total + w * torch.relu(D[i, j] - pos_margin)
        for k, w in w_neg[i].items():
            total = total + w * torch.relu(neg_margin - D[i, k])
    return total / B


def triplet_weighted_loss_reference(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 0.1,
    *,
    weighting: str = "power",
    exponent: float = 5.0,
    normalization: str = "anchor",
) -> torch.Tensor:
    """Eq. 21 one anchor at a time: triplets of Eq. 19, weights Eq. 25, 28, 31, 34."""
    y = check_similarity(S, labels).tolist()
    D = dissimilarity(S, "distance")
    d = D.detach().tolist()
    B = len(y)
    weights = []
    for i in range(B):
        w = {}
        for j in range(B):
            if j == i or y[j] != y[i]:
                continue
            for k in range(B):
                if y[k] != y[i] and d[i][j] + margin >= d[i][k]:  # Eq. 19
                    w[(j, k)] = _weight(d[i][j] - d[i][k] + margin, weighting, exponent)
        weights.append(w)
    weights = _normalise(weights, normalization)
    total = S.new_zeros(())
    for i in range(B):
        for (j, k), w in weights[i].items():
            total = total + w * torch.relu(D[i, j] - D[i, k] + margin)
    return total / B


def ms_distance_loss_reference(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 1.0,
    alpha: float = 2.0,
    beta: float = 50.0,
    *,
    version: str = "v2",
    epsilon: float | None = 0.1,
) -> torch.Tensor:
    """Liu et al.'s MS loss on distances, v1 (``log[1 + sum]``) or v2 (``log sum``), per anchor."""
    y = check_similarity(S, labels).tolist()
    D = dissimilarity(S, "distance")
    d = D.detach().tolist()
    B = len(y)
    one = 1.0 if version == "v1" else 0.0
    total = S.new_zeros(())
    for i in range(B):
        P, N = _anchor_pairs(d, y, i, 0.0, math.inf, epsilon)
        if P:
            s = sum(torch.exp(alpha * (D[i, j] - margin)) for j in P)
            total = total + torch.log(one + s) / alpha
        if N:
            s = sum(torch.exp(beta * (margin - D[i, k])) for k in N)
            total = total + torch.log(one + s) / beta
    return total / B

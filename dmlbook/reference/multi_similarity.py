"""A slow, literal per-anchor loop of the MS loss, written from Wang et al. 2019, Sec. 4.2.

**Reference semantics, not a training path.** :func:`multi_similarity_loss_reference` walks over
the anchors one at a time, mines each anchor's pairs with Eq. 11-12, and evaluates Eq. 15 with
plain autograd, sentence by sentence from the paper. It exists so that the vectorised
:func:`dmlbook.losses.multi_similarity_loss` can be checked against an independent reading of
the paper (``tests/reference/test_ms_equivalence.py``) and timed against it (``bench/bench_ms.py``). It is
O(B) Python iterations per call: use it on small batches. The loop itself is tested on a
hand-worked batch in ``tests/reference/test_multi_similarity.py``.

The choices the paper leaves open are made explicitly here, the same way as in the vectorised
code (see :mod:`dmlbook.losses.multi_similarity`, "Semantics"):

* the anchor itself is no pair (excluded by index, so an exact duplicate of the same class is a
  positive pair);
* the thresholds of Eq. 11-12 are taken over the anchor's *unmined* positives and negatives; an
  empty set has no minimum or maximum, so an anchor without positives mines no negative and an
  anchor without negatives mines no positive;
* an empty ``P_i`` or ``N_i`` contributes ``log(1 + 0) = 0``;
* the average is over all ``m = B`` anchors.
"""

from __future__ import annotations

import torch

from ..core.pairs import check_positive, check_similarity

__all__ = ["multi_similarity_loss_reference", "ms_mining_reference"]


def _anchor_sets(
    s: torch.Tensor, y: torch.Tensor, i: int, epsilon: float, mining: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Column indices of anchor ``i``'s sets ``P_i`` and ``N_i`` (Eq. 11-12 when ``mining``)."""
    cols = torch.arange(y.shape[0], device=y.device)
    positives = cols[(y == y[i]) & (cols != i)]
    negatives = cols[y != y[i]]
    if not mining:
        return positives, negatives
    if positives.numel() == 0 or negatives.numel() == 0:
        # no hardest positive (negative): Eq. 11 (Eq. 12) has no threshold, nothing is kept
        return positives[:0], negatives[:0]
    hardest_positive = s[i, positives].min()
    hardest_negative = s[i, negatives].max()
    # Eq. 11: a negative is kept if it is more similar than the hardest positive minus eps.
    kept_negatives = negatives[s[i, negatives] > hardest_positive - epsilon]
    # Eq. 12: a positive is kept if it is less similar than the hardest negative plus eps.
    kept_positives = positives[s[i, positives] < hardest_negative + epsilon]
    return kept_positives, kept_negatives


def ms_mining_reference(
    S: torch.Tensor, labels: torch.Tensor, epsilon: float = 0.1
) -> tuple[list[list[int]], list[list[int]]]:
    """Eq. 11-12, one anchor at a time: the index lists ``P_i`` and ``N_i`` of every anchor.

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    epsilon : float

    Returns
    -------
    P, N : list of list of int
        ``P[i]`` (``N[i]``): the columns of the positives (negatives) mined for anchor ``i``,
        in increasing order.
    """
    y = check_similarity(S, labels)
    s = S.detach()
    P: list[list[int]] = []
    N: list[list[int]] = []
    for i in range(y.shape[0]):
        kept_p, kept_n = _anchor_sets(s, y, i, epsilon, True)
        P.append(kept_p.tolist())
        N.append(kept_n.tolist())
    return P, N


def multi_similarity_loss_reference(
    S: torch.Tensor,
    labels: torch.Tensor,
    alpha: float = 2.0,
    beta: float = 50.0,
    margin: float = 0.5,
    epsilon: float = 0.1,
    *,
    mining: bool = True,
) -> torch.Tensor:
    """Eq. 15 of Wang et al. 2019 as a per-anchor loop (slow reference; see the module notes).

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    alpha, beta, margin, epsilon : float
        ``alpha``, ``beta``, ``lambda`` of Eq. 15 and ``epsilon`` of Eq. 11-12.
    mining : bool
        ``False`` uses every positive and negative pair ("MS weighting" of Table 2).

    Returns
    -------
    Tensor
        ``(1/B) sum_i [ (1/alpha) log(1 + sum_{P_i} e^{-alpha (S_ik - lambda)})
        + (1/beta) log(1 + sum_{N_i} e^{beta (S_ik - lambda)}) ]``, differentiable in ``S``
        by autograd. The exponentials are taken as written (no shift), so keep
        ``beta (S - lambda)`` below about 80 in float32.
    """
    alpha = check_positive(alpha, "alpha")
    beta = check_positive(beta, "beta")
    y = check_similarity(S, labels)
    s = S.detach()
    B = y.shape[0]
    total = S[0, 0] * 0  # attached to the graph, so a batch with no pair has a zero gradient
    for i in range(B):
        P_i, N_i = _anchor_sets(s, y, i, epsilon, mining)
        row = S[i]
        if P_i.numel():
            pos_sum = torch.exp(-alpha * (row[P_i] - margin)).sum()
            total = total + torch.log1p(pos_sum) / alpha
        if N_i.numel():
            neg_sum = torch.exp(beta * (row[N_i] - margin)).sum()
            total = total + torch.log1p(neg_sum) / beta
    return total / B

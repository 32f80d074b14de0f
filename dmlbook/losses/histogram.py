"""Histogram loss (Ustinova & Lempitsky 2016, as Wang et al. 2019 present it, supplement Eq. 3-5).

Chapter: ``book/08_three_similarities.ipynb``, 8.6 "The histogram loss: its column of Table 1"
(the loss, its weights by autograd against the supplement's Eq. 9, and the errata of the
supplement's Sec. 2). Tests: ``tests/losses/test_histogram.py`` (against a loop written from
Eq. 3-5, one pair and one node at a time).

The loss estimates two histograms on ``R`` nodes ``t_1 = -1 < t_2 < ... < t_R = 1``, spaced
``Delta = 2 / (R - 1)``: ``h^+`` of the similarities of the positive pairs and ``h^-`` of the
negative pairs (supplement Eq. 4). Each pair spreads a unit mass linearly over the two nodes
around its similarity (Eq. 5, the triangular kernel ``delta_ijr = [1 - |S_ij - t_r| / Delta]_+``),
and a histogram is the mean of its pairs' masses. The loss (Eq. 3) is

    L = sum_{r=1}^{R} h^-_r  sum_{q=1}^{r} h^+_q,

the estimated probability that a random negative pair is more similar than a random positive
one. The supplement prints the nodes as ``t_r = r Delta - 1``; they are ``t_r = (r - 1) Delta - 1``
(Ustinova & Lempitsky's nodes, from -1 to 1), see the erratum of Chapter 8.

Pairs are the ordered pairs ``(i, j)``, ``i != j``, of the batch (the off-diagonal entries of
``S``, as for every loss of dmlbook): on a symmetric ``S`` each unordered pair is counted twice
in numerator and denominator, so the histograms and the loss are those of the unordered pairs.
The code is the equations, differentiated by autograd.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ..core.declaration import declared
from ..core.pairs import pair_sets
from ..core.validation import Number
from .base import PairLoss

__all__ = ["HistogramLoss", "histogram_loss", "histograms"]

#: How far outside [-1, 1] a similarity may lie (rounding of a cosine) before it is refused.
_SLACK = 1e-3

#: ``R``, the number of nodes on [-1, 1]. Neither Wang et al.'s supplement nor the other seed
#: papers fix it; 101 nodes (``Delta = 0.02``) is dmlbook's default.
Nodes = Annotated[int, Number(2, 10**5, "histogram nodes on [-1, 1], e.g. 101", integer=True)]


def _histogram(s: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
    """Eq. 4-5: the mean over the similarities ``s`` of their triangular kernels at the nodes."""
    delta = 2.0 / (len(nodes) - 1)
    kernel = torch.relu(1 - (s[:, None] - nodes[None, :]).abs() / delta)  # delta_ijr, Eq. 5
    return kernel.sum(dim=0) / max(len(s), 1)


@declared
def histograms(
    S, labels, R: Nodes = 101, *, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """The histograms ``h^+`` and ``h^-`` of Wang et al.'s supplement, Eq. 4-5.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities, in [-1, 1].
    R : int
        Number of nodes, ``t_r = -1 + (r - 1) 2 / (R - 1)``.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Narrow the positive and negative pairs (a miner's masks).

    Returns
    -------
    (h_pos, h_neg) : two Tensors of shape (R,)
        Each sums to 1 when it has at least one pair (all zeros otherwise).

    Raises
    ------
    ValueError
        For a similarity of a pair outside [-1, 1] (beyond rounding): its mass would fall off the
        nodes. Normalise the embeddings (``loss(embeddings, labels)`` does).
    """
    dtype = S.dtype
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)  # half precision: nodes 0.02 apart
    pairs = S[pos | neg]  # need float32
    slack = max(_SLACK, 2 * torch.finfo(dtype).eps)  # bf16 rounds a cosine of 1 to 1.0078
    if pairs.numel() and float(pairs.detach().abs().max()) > 1 + slack:
        raise ValueError(
            "the histogram loss needs cosine similarities in [-1, 1]; a pair has "
            f"{float(pairs.detach().abs().max()):.4g} in absolute value. Pass the similarities "
            "of L2-normalised embeddings (HistogramLoss()(embeddings, labels) normalises them)."
        )
    nodes = torch.linspace(-1.0, 1.0, R, dtype=S.dtype, device=S.device)
    return _histogram(S[pos], nodes), _histogram(S[neg], nodes)


@declared(like=histograms)
def histogram_loss(S, labels, R, *, pos_mask, neg_mask) -> torch.Tensor:
    """Histogram loss, Wang et al. 2019, supplement Eq. 3 (Ustinova & Lempitsky 2016).

    ``L = sum_r h^-_r sum_{q <= r} h^+_q`` with the histograms of :func:`histograms`.

    Returns
    -------
    Tensor
        A scalar in [0, 1]. A batch without a positive or without a negative pair gives 0
        (with gradient 0).

    Notes
    -----
    The GPW weight of a pair (Wang et al., Eq. 1-3), by the supplement's Eq. 9: a positive pair
    with ``t_p < S_ij < t_{p+1}`` has ``-dL/dS_ij = h^-_p / (Delta |S^+|)``, a negative pair
    ``dL/dS_ij = h^+_{p+1} / (Delta |S^-|)``; ``|S^+|``, ``|S^-|`` count the (ordered) pairs.
    At a node exactly the kernel has no derivative; autograd then reads 0.
    """
    h_pos, h_neg = histograms(S, labels, R, pos_mask=pos_mask, neg_mask=neg_mask)
    if not (h_pos.any() and h_neg.any()):
        return (S * 0).sum()  # no positive or no negative pair: 0, with gradient 0
    return (h_neg * torch.cumsum(h_pos, dim=0)).sum()


class HistogramLoss(PairLoss):
    """Module form of :func:`histogram_loss` (Wang et al. 2019, supplement Eq. 3)."""

    loss_function = staticmethod(histogram_loss)

"""Liu et al.'s triplet-based weighting loss: Eq. 21 with the weights of Eq. 25, 28, 31, 34.

Chapter: ``book/11_liu_weighting.ipynb``, 11.2-11.3 and 11.5. Proofs: :mod:`dmlbook.symbolic.liu`
(Triplet-E per anchor is a log-sum-exp; normalised power weights are no gradient). Tests:
``tests/losses/test_liu_triplet.py``; the per-anchor loop of Algorithm 1 is
:func:`dmlbook.reference.triplet_weighted_loss_reference`
(``tests/reference/test_liu_equivalence.py``).

For anchor ``i``: ``L_i = sum_{(j, k)} w_ijk [D_ij - D_ik + m]_+`` over the triplets of Eq. 19
(``y_ij = 1``, ``y_ik = 0``, ``D_ij + m >= D_ik``), with detached weights ``w_ijk = 1`` (Eq. 25),
``(D_ij - D_ik + m)^p`` (Eq. 28) or ``e^{alpha (D_ij - D_ik + m)}`` (Eq. 31), normalised per
anchor (Eq. 34 as Algorithm 1 reads it), per batch or not at all; ``L = (1/B) sum_i L_i``.
Registered as ``"triplet_p"`` (Triplet-P, ``p = 5``) and ``"triplet_e"`` (Triplet-E, ``alpha =
40``), ``m = 0.1`` (0.2 on SOP). The semantics are those of :mod:`dmlbook.losses.liu_weighting`.

The loss sums over the triplets with :func:`dmlbook.losses.triplet.triplet_sums` (``O(B^2)``
memory: each anchor's positives as an index list, anchors in blocks); :func:`triplet_weights`,
which returns the weights of every triplet for inspection, is (B, B, B) by definition.
"""

from __future__ import annotations

import torch

from ..core.declaration import declared
from ..core.pairs import dissimilarity, pair_sets, reduce
from ..core.validation import NonNegative
from .base import PairLoss
from .liu_weighting import Normalization, Weighting, liu_weights, log_weights
from .triplet import triplet_sums

__all__ = [
    "TripletExponentialLoss",
    "TripletPowerLoss",
    "triplet_exponential_loss",
    "triplet_power_loss",
    "triplet_weighted_loss",
    "triplet_weights",
]


@declared
def triplet_weights(
    S,
    labels,
    margin: NonNegative = 0.1,
    *,
    weighting: Weighting = "power",
    exponent: NonNegative = 5.0,
    normalization: Normalization = "anchor",
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """The detached triplet weights ``w_ijk`` of Eq. 25, 28, 31, 34, shape (B, B, B).

    Zero outside the triplets of Eq. 19 (``y_ij = 1``, ``y_ik = 0``, ``D_ij + m >= D_ik``).
    ``exponent`` is ``p`` for ``"power"`` and ``alpha`` for ``"exponential"``. The GPW weights
    of Eq. 21 are ``dL/dD_ij = (1/B) sum_k w_ijk`` and ``dL/dD_ik = -(1/B) sum_j w_ijk`` over
    the triplets with ``D_ij - D_ik + m > 0``.
    """
    S, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    D = dissimilarity(S, "distance")
    t = D[:, :, None] - D[:, None, :] + margin
    mined = pos[:, :, None] & neg[:, None, :] & (t >= 0)  # Eq. 19
    return liu_weights(t, mined, weighting, exponent, normalization)


def _largest_log_weight(D, pos, neg, margin, weighting, exponent) -> torch.Tensor:
    """Per anchor, the largest :func:`~dmlbook.losses.liu_weighting.log_weights` of its triplets
    of Eq. 19 (0 for an anchor without one), from the (B, B) distances alone: the largest
    ``t`` is the farthest positive plus ``m`` minus the nearest negative whenever any triplet
    is mined."""
    inf = float("inf")
    farthest = D.masked_fill(~pos, -inf).amax(dim=1)
    nearest = D.masked_fill(~neg, inf).amin(dim=1)
    top = farthest + margin - nearest  # -inf or nan where an anchor lacks either kind
    has = top > 0
    return torch.where(has, log_weights(top.where(has, 1.0), weighting, exponent), 0.0)


@declared(like=triplet_weights)
def triplet_weighted_loss(
    S, labels, margin, *, weighting, exponent, normalization, reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """Liu et al.'s triplet-based weighting loss, Eq. 21, with any weighting of Eq. 25-34.

    Parameters are those of :func:`triplet_weights`, plus ``reduction`` (``"mean"``: ``(1/B)
    sum_i L_i``; ``"sum"``; ``"none"``: the ``L_i``). Each anchor's weighted hinges and its total
    weight are summed over its triplets (:func:`~dmlbook.losses.triplet.triplet_sums`), then
    normalised (Eq. 34). The weights are formed as ``e^{log w - c_i}`` with ``c_i`` the anchor's
    largest log-weight, a factor that normalisation cancels (and that ``"none"`` multiplies
    back, as printed: ``e^{c_i}`` overflows float32 once ``c_i > 88``).
    """
    dtype = S.dtype
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    D = dissimilarity(S, "distance")
    shift = _largest_log_weight(D.detach(), pos, neg, margin, weighting, exponent)

    def weighted_hinge(D_ap, D_an, valid, c):
        t = D_ap - D_an + margin
        mined = valid & (t.detach() >= 0)  # Eq. 19
        log_w = log_weights(t.detach(), weighting, exponent)  # numbers (footnote 6)
        w = torch.where(mined, torch.exp(log_w - c[:, None, None]), 0.0)
        return w * torch.relu(t), w

    hinges, totals = triplet_sums(weighted_hinge, D, pos, neg, row_data=(shift,))
    if normalization == "anchor":  # Eq. 34 per anchor (the shift cancels)
        per = torch.where(totals > 0, hinges / totals.clamp_min(torch.finfo(D.dtype).tiny), 0.0)
    elif normalization == "batch":  # Eq. 34 over the batch, every anchor on one scale
        scale = torch.exp(shift - shift.max())
        per = hinges * scale / (totals * scale).sum().clamp_min(torch.finfo(D.dtype).tiny)
    else:  # Eq. 25, 28, 31 as printed
        per = hinges * torch.exp(shift)
    return reduce(per, reduction).to(dtype)


@declared(like=triplet_weighted_loss)
def triplet_power_loss(
    S, labels, margin, *, p: NonNegative = 5.0, normalization, reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """Triplet-P: Eq. 21 with ``w_ijk = (D_ij - D_ik + m)^p`` (Eq. 28, 34)."""
    return triplet_weighted_loss(
        S, labels, margin, weighting="power", exponent=p, normalization=normalization,
        reduction=reduction, pos_mask=pos_mask, neg_mask=neg_mask,
    )  # fmt: skip


@declared(like=triplet_weighted_loss)
def triplet_exponential_loss(
    S, labels, margin, *, alpha: NonNegative = 40.0, normalization, reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """Triplet-E: Eq. 21 with ``w_ijk = e^{alpha (D_ij - D_ik + m)}`` (Eq. 31, 34)."""
    return triplet_weighted_loss(
        S, labels, margin, weighting="exponential", exponent=alpha,
        normalization=normalization, reduction=reduction, pos_mask=pos_mask, neg_mask=neg_mask,
    )  # fmt: skip


class TripletPowerLoss(PairLoss):
    """Triplet-P (:func:`triplet_power_loss`), registered as ``"triplet_p"``."""

    loss_function = staticmethod(triplet_power_loss)


class TripletExponentialLoss(PairLoss):
    """Triplet-E (:func:`triplet_exponential_loss`), registered as ``"triplet_e"``."""

    loss_function = staticmethod(triplet_exponential_loss)

"""Liu et al.'s pair-based weighting loss (Eq. 18, weights Eq. 24-33) and their MS on distances.

Chapter: ``book/11_liu_weighting.ipynb``, 11.2 "Weighting by design (Eq. 18, 21, 24-34)", 11.3
"Normalisation", 11.4 "MS v1 and v2 (Eq. 38-39, Fig. 5)", 11.5 "dmlbook's implementation".
Proofs: :mod:`dmlbook.symbolic.liu` (``tests/symbolic/test_liu.py``). Tests:
``tests/losses/test_liu_weighting.py``; the paper-literal per-anchor loops of Algorithm 1 are in
:mod:`dmlbook.reference.liu_weighting` (``tests/reference/test_liu_equivalence.py``).

On Euclidean distances ``D = sqrt(2 - 2 S)`` of unit vectors (Liu et al., Eq. 1):

* **pair-based** (Eq. 18): ``L_i = sum_{P_i} w+_ij [D_ij - m1]_+ + sum_{N_i} w-_ij [m2 - D_ij]_+``
  with ``P_i``, ``N_i`` the pairs kept by the thresholds of Eq. 16-17
  (:func:`dmlbook.mining.threshold_pair_masks`);
* **triplet-based** (Eq. 21): in :mod:`dmlbook.losses.liu_triplet` (same semantics);
* the weights are **numbers without gradient** (the paper's footnote 6: ``D.detach()``):
  constant (Eq. 24-25), p-th power (Eq. 26-28) or exponential (Eq. 29-31), optionally
  normalised (Eq. 32-34): :func:`pair_weights`, which :func:`pair_weighted_loss` calls;
* the batch loss is ``L = (1/B) sum_i L_i`` (Algorithm 1, step 5);
* **MS v1 and v2** (Sec. IV-B5, Eq. 39; :func:`ms_distance_loss`): Wang et al.'s MS loss
  written on ``D`` with one margin ``m`` and the mining of Eq. 22-23, with (v1) or without (v2)
  the "+1" inside its logarithms. v2's weights are the per-anchor normalised exponential
  weights of Eq. 29-30, 32-33 without hinge: the margin then changes no gradient.

Registered as ``"pair_p"`` (Pair-P), ``"pair_e"`` (Pair-E) and ``"ms_distance"``, with the
defaults of Liu et al.'s Sec. IV-B4 and Fig. 5 (m1 = 0, m2 = 0.8; Pair-P (p, q) = (0, 1),
Pair-E (alpha, beta) = (0, 2); MS alpha, beta = 2, 50, m = 1, epsilon = 0.1, v2; on SOP pass
``neg_margin=1.0``).

Semantics (what the paper leaves open, and what dmlbook chose)
---------------------------------------------------------------
* **Scope of the normalisation** (Eq. 32-34 sum over ``y_ij = 1`` without naming the anchor).
  ``normalization="anchor"`` divides each anchor's positive weights by their sum over ``P_i``,
  its negative weights by their sum over ``N_i`` (triplets: over the anchor's triplets). This is
  the reading of **Algorithm 1**, whose step 4 computes the weights and ``L_i`` inside the loop
  over anchors ``z_i``, and of the paper's remark that for ``p, q = 0, 0`` the normalisation "is
  just the average operation" (per anchor, ``1/|P_i|`` and ``1/|N_i|``). It is Table III's v1
  and v2. ``"batch"`` divides by the sum over every positive (negative) pair or every triplet
  of the batch; ``"none"`` is Table III's v0.
* **Which pairs are normalised over**: the mined ones (Eq. 16-17, or Eq. 19 for triplets). A
  pair exactly on a threshold is mined but gets a power weight ``0^p = 0`` for ``p > 0`` and a
  hinge of 0; ``0^0`` is 1 (Eq. 24: ``p = q = 0`` is the constant weight).
* **Empty sets** contribute 0; a normalising sum of 0 (every mined weight 0) gives weights 0.
* ``epsilon`` adds the MS mining on distances of Eq. 22-23 after the thresholds
  (:func:`dmlbook.mining.ms_distance_mining_masks`; Table II "+ triplet margin").

Numerics: normalised weights are soft-max weights of their logarithms (``p log x``, ``alpha x``;
:func:`dmlbook.core.pairs.masked_softmax`, max-shifted) and never overflow; un-normalised (v0) weights
are ``x^p`` and ``exp(alpha x)`` as printed, and the exponential overflows float32 once
``alpha x > 88``. MS v1/v2 are masked log-sum-exps (:func:`dmlbook.core.pairs.masked_logsumexp`).
"""

from __future__ import annotations

from typing import Literal

import torch

from ..core.declaration import declared
from ..core.pairs import dissimilarity, masked_logsumexp, masked_softmax, pair_sets, reduce
from ..core.validation import NonNegative, Scale
from ..mining import ms_distance_mining_masks, threshold_pair_masks
from ..mining.distance import margins_in_order
from .base import PairLoss

__all__ = [
    "MS_VERSIONS", "NORMALIZATIONS", "WEIGHTINGS", "MSDistanceLoss", "PairExponentialLoss",
    "PairPowerLoss", "liu_weights", "log_weights", "ms_distance_loss", "ms_distance_weights",
    "pair_exponential_loss", "pair_power_loss", "pair_weighted_loss", "pair_weights",
]  # fmt: skip

Weighting = Literal["constant", "power", "exponential"]
Normalization = Literal["none", "anchor", "batch"]

#: The weightings of Liu et al., Sec. III-B.
WEIGHTINGS: dict[str, str] = {
    "constant": "Eq. 24-25: w = 1",
    "power": "Eq. 26-28: w+ = (D - m1)^p, w- = (m2 - D)^q, w_ijk = (D_ij - D_ik + m)^p",
    "exponential": "Eq. 29-31: w+ = e^{alpha (D - m1)}, w- = e^{beta (m2 - D)}, "
    "w_ijk = e^{alpha (D_ij - D_ik + m)}",
}

#: The scopes of the weight normalisation of Eq. 32-34 (see the module's "Semantics").
NORMALIZATIONS: dict[str, str] = {
    "none": "no normalisation (Table III, v0)",
    "anchor": "per anchor, positives and negatives apart (Algorithm 1; Table III, v1 and v2)",
    "batch": "over every positive (negative) pair or triplet of the batch",
}

#: Liu et al.'s two MS variants of Fig. 5.
MS_VERSIONS: dict[str, str] = {
    "v1": "the MS loss: log[1 + sum exp] (Eq. 39 with the '+1')",
    "v2": "the MS loss without adding 1: log sum exp (Eq. 39 without the '+1')",
}


# ----------------------------------------------------------------------------- weights


def log_weights(x: torch.Tensor, weighting: str, exponent: float) -> torch.Tensor:
    """The logarithm of Eq. 24-31's weight of each base ``x >= 0``: 0 for the constant weight
    (and for an exponent 0: ``0^0 = 1``, as Eq. 24 needs), ``p log x`` for the power (``-inf``,
    a weight 0, at ``x = 0``), ``alpha x`` for the exponential."""
    if weighting == "constant" or exponent == 0:
        return torch.zeros_like(x)
    if weighting == "power":
        return exponent * torch.log(x.clamp_min(0.0))
    return exponent * x


def liu_weights(
    x: torch.Tensor, mask: torch.Tensor, weighting: str, exponent: float, normalization: str
) -> torch.Tensor:
    """Eq. 24-31 of the bases ``x >= 0`` on ``mask`` (0 elsewhere), normalised by Eq. 32-34.

    ``x`` has one row per anchor (pairs ``(B, B)``, triplets ``(B, B, B)``), normalised over each
    row (``"anchor"``), over everything (``"batch"``) or not (``"none"``). Normalised weights are
    soft-max weights of :func:`log_weights` (``(D - m1)^p`` at ``p = 100`` overflows float32, its
    normalised form does not); unnormalised ones are the printed ``x^p`` or ``e^{alpha x}``.
    """
    rows = x.shape[0] if normalization == "anchor" else 1
    log_w = log_weights(x.reshape(rows, -1), weighting, exponent)
    keep = mask.reshape(rows, -1) & (log_w > float("-inf"))  # a weight 0 stays out of the sum
    if normalization == "none":
        return torch.where(keep, log_w.exp(), 0.0).reshape(x.shape)
    return masked_softmax(log_w, keep, dim=1).reshape(x.shape)


@declared(rules=(margins_in_order,))
def pair_weights(
    S,
    labels,
    pos_margin: NonNegative = 0.0,
    neg_margin: NonNegative = 0.8,
    *,
    weighting: Weighting = "power",
    pos_exponent: NonNegative = 0.0,
    neg_exponent: NonNegative = 1.0,
    normalization: Normalization = "anchor",
    epsilon: NonNegative | None = None,
    pos_mask,
    neg_mask,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The detached pair weights ``w+`` and ``w-`` of Eq. 24-27, 29-30, 32-33.

    ``pos_exponent``/``neg_exponent`` are ``p``/``q`` for ``weighting="power"`` and
    ``alpha``/``beta`` for ``"exponential"`` (ignored for ``"constant"``). Returns two (B, B)
    tensors in the compute dtype, zero outside the mined pairs (Eq. 16-17, then Eq. 22-23 when
    ``epsilon`` is given). The GPW weight of Eq. 18 is ``dL/dD_ij = w+_ij / B`` on a mined
    positive with ``D_ij > m1`` and ``-w-_ij / B`` on a mined negative with ``D_ij < m2``
    (proved in :mod:`dmlbook.symbolic.liu`).
    """
    S, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    pos, neg = threshold_pair_masks(S, labels, pos_margin, neg_margin, pos_mask=pos, neg_mask=neg)
    if epsilon is not None:  # Eq. 22-23 on what the thresholds (Eq. 16-17) keep
        pos, neg = ms_distance_mining_masks(S, labels, epsilon, pos_mask=pos, neg_mask=neg)
    D = dissimilarity(S, "distance")
    w_pos = liu_weights(D - pos_margin, pos, weighting, pos_exponent, normalization)
    w_neg = liu_weights(neg_margin - D, neg, weighting, neg_exponent, normalization)
    return w_pos, w_neg


@declared(like=pair_weights)
def pair_weighted_loss(
    S,
    labels,
    pos_margin,
    neg_margin,
    *,
    weighting,
    pos_exponent,
    neg_exponent,
    normalization,
    epsilon,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Liu et al.'s pair-based weighting loss, Eq. 18, with any weighting of Eq. 24-33.

    Parameters are those of :func:`pair_weights`, plus ``reduction`` (``"mean"``: Algorithm 1's
    ``(1/B) sum_i L_i``; ``"sum"``; ``"none"``: the ``L_i``). The weights are detached numbers
    (footnote 6), so autograd's gradient is ``dL/dS = dL/dD * dD/dS`` with ``dL/dD`` the weights
    where the hinge is open. See the module's "Semantics".
    """
    w_pos, w_neg = pair_weights(
        S, labels, pos_margin, neg_margin, weighting=weighting, pos_exponent=pos_exponent,
        neg_exponent=neg_exponent, normalization=normalization, epsilon=epsilon,
        pos_mask=pos_mask, neg_mask=neg_mask,
    )  # fmt: skip
    D = dissimilarity(S.to(w_pos.dtype), "distance")
    per_pair = w_pos * torch.relu(D - pos_margin) + w_neg * torch.relu(neg_margin - D)
    return reduce(per_pair.sum(dim=1), reduction).to(S.dtype)


@declared(like=pair_weighted_loss)
def pair_power_loss(
    S,
    labels,
    pos_margin,
    neg_margin,
    *,
    p: NonNegative = 0.0,
    q: NonNegative = 1.0,
    normalization,
    epsilon,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Pair-P: Eq. 18 with the power weights ``(D - m1)^p``, ``(m2 - D)^q`` (Eq. 26-27, 32-33)."""
    return pair_weighted_loss(
        S, labels, pos_margin, neg_margin, weighting="power", pos_exponent=p, neg_exponent=q,
        normalization=normalization, epsilon=epsilon, reduction=reduction, pos_mask=pos_mask,
        neg_mask=neg_mask,
    )  # fmt: skip


@declared(like=pair_weighted_loss)
def pair_exponential_loss(
    S,
    labels,
    pos_margin,
    neg_margin,
    *,
    alpha: NonNegative = 0.0,
    beta: NonNegative = 2.0,
    normalization,
    epsilon,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Pair-E: Eq. 18 with ``e^{alpha (D - m1)}``, ``e^{beta (m2 - D)}`` (Eq. 29-30, 32-33)."""
    return pair_weighted_loss(
        S, labels, pos_margin, neg_margin, weighting="exponential", pos_exponent=alpha,
        neg_exponent=beta, normalization=normalization, epsilon=epsilon, reduction=reduction,
        pos_mask=pos_mask, neg_mask=neg_mask,
    )  # fmt: skip


class PairPowerLoss(PairLoss):
    """Pair-P (:func:`pair_power_loss`), registered as ``"pair_p"``."""

    loss_function = staticmethod(pair_power_loss)


class PairExponentialLoss(PairLoss):
    """Pair-E (:func:`pair_exponential_loss`), registered as ``"pair_e"``."""

    loss_function = staticmethod(pair_exponential_loss)


# ----------------------------------------------------------------------------- MS on distances


def _ms_distance_terms(S, labels, margin, alpha, beta, epsilon, pos_mask, neg_mask):
    """``D`` in the compute dtype, and the exponents of Eq. 39 on the mined pairs (Eq. 22-23)."""
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    if epsilon is not None:  # else every pair
        pos, neg = ms_distance_mining_masks(S, labels, epsilon, pos_mask=pos, neg_mask=neg)
    D = dissimilarity(S, "distance")
    return (alpha * (D - margin), pos), (beta * (margin - D), neg)


# MS on distances: defaults are Liu et al.'s Fig. 5 settings, with version="v2", the variant
# Fig. 5 finds better.


@declared
def ms_distance_loss(
    S,
    labels,
    margin: NonNegative = 1.0,
    alpha: Scale = 2.0,
    beta: Scale = 50.0,
    *,
    version: Literal["v1", "v2"] = "v2",
    epsilon: NonNegative | None = 0.1,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """MS v1 or v2 on distances (Liu et al., the MS loss above Eq. 39, and Fig. 5).

    Per anchor ``i``, v1 is ``(1/alpha) log[1 + sum_{P_i} e^{alpha (D_ij - m)}] + (1/beta)
    log[1 + sum_{N_i} e^{beta (m - D_ij)}]``; v2 drops the ``1 +``. Empty ``P_i`` or ``N_i``
    contribute 0 (v1: ``log 1``; v2: by convention).

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of unit vectors.
    margin, alpha, beta : float
        ``m`` (a distance), ``alpha``, ``beta`` (> 0).
    version : {"v1", "v2"}
        With or without the "+1" inside the logarithms.
    epsilon : float or None
        Eq. 22-23 mining margin; ``None`` uses every pair.
    reduction : {"mean", "sum", "none"}
        ``"mean"`` divides by all ``B`` anchors.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs (narrowed before mining).

    Notes
    -----
    Not Wang et al.'s MS loss (on ``S``): Liu et al. keep Wang's numbers but put them on ``D``,
    where ``D = 1`` is ``S = 0.5``. Its weights, Eq. 39, are :func:`ms_distance_weights`.
    """
    terms = _ms_distance_terms(S, labels, margin, alpha, beta, epsilon, pos_mask, neg_mask)
    (x_pos, pos), (x_neg, neg) = terms
    lse_pos, _ = masked_logsumexp(x_pos, pos, dim=1, add_one=version == "v1")
    lse_neg, _ = masked_logsumexp(x_neg, neg, dim=1, add_one=version == "v1")
    return reduce(lse_pos / alpha + lse_neg / beta, reduction).to(S.dtype)


@declared(like=ms_distance_loss)
def ms_distance_weights(
    S, labels, margin, alpha, beta, *, version, epsilon, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 39's weights ``w+``, ``w-`` (with the "+1" for v1, without for v2), shape (B, B).

    ``w+_ij = e^{alpha (D_ij - m)} / ([1 +] sum_{P_i} e^{alpha (D_ik - m)})`` and ``w-_ij =
    e^{beta (m - D_ij)} / ([1 +] sum_{N_i} e^{beta (m - D_ik)})``, detached and max-shifted:
    ``dL_i/dD_ij = w+_ij`` on a mined positive and ``-w-_ij`` on a mined negative, so the
    batch-mean gradient is these divided by ``B``.
    """
    terms = _ms_distance_terms(S.detach(), labels, margin, alpha, beta, epsilon, pos_mask, neg_mask)
    w_pos, w_neg = (masked_softmax(x, m, dim=1, add_one=version == "v1") for x, m in terms)
    return w_pos, w_neg


class MSDistanceLoss(PairLoss):
    """:func:`ms_distance_loss` as a module, registered as ``"ms_distance"``.

    ``MSDistanceLoss(version="v1")`` is Liu et al.'s "MS loss (v1)" of Fig. 5,
    ``MSDistanceLoss()`` (``version="v2"``) their "MS loss (v2)".
    """

    loss_function = staticmethod(ms_distance_loss)

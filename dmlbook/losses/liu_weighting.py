"""Liu et al.'s general pair-based weighting loss: Eq. 18, weights Eq. 24-33 (triplets: Eq. 21).

Chapter: ``book/11_liu_weighting.ipynb``, 11.2 "Weighting by design (Eq. 18, 21, 24-34)", 11.3
"Normalisation", 11.5 "dmlbook's implementation". Proofs: :mod:`dmlbook.symbolic.liu`
(``tests/symbolic/test_liu.py``). Tests: ``tests/losses/test_liu_weighting.py``; the
paper-literal per-anchor loop of Algorithm 1 is :mod:`dmlbook.reference.liu_weighting`.

On Euclidean distances ``D = sqrt(2 - 2 S)`` of unit vectors (Liu et al., Eq. 1):

* **pair-based** (Eq. 18): ``L_i = sum_{P_i} w+_ij [D_ij - m1]_+ + sum_{N_i} w-_ij [m2 - D_ij]_+``
  with ``P_i``, ``N_i`` the pairs kept by the thresholds of Eq. 16-17
  (:func:`dmlbook.mining.threshold_pair_masks`);
* **triplet-based** (Eq. 21): ``L_i = sum_{(j, k)} w_ijk [D_ij - D_ik + m]_+`` over the triplets
  of Eq. 19 (``D_ij + m >= D_ik``), in :mod:`dmlbook.losses.liu_triplet` (same semantics);
* the weights are **numbers without gradient** (the paper's footnote 6: ``D.detach()``):
  constant (Eq. 24-25), p-th power (Eq. 26-28) or exponential (Eq. 29-31), optionally
  normalised (Eq. 32-34);
* the batch loss is ``L = (1/B) sum_i L_i`` (Algorithm 1, step 5).

Registered as ``"pair_p"`` (Pair-P), ``"pair_e"`` (Pair-E), ``"triplet_p"`` (Triplet-P) and
``"triplet_e"`` (Triplet-E), with the defaults of Liu et al.'s Sec. IV-B4 (m1 = 0, m2 = 0.8,
m = 0.1; Pair-P (p, q) = (0, 1), Pair-E (alpha, beta) = (0, 2), Triplet-P p = 5, Triplet-E
alpha = 40; on SOP pass ``neg_margin=1.0`` or ``margin=0.2``).

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
* **Self pairs** are excluded by index, as everywhere in dmlbook.
* ``epsilon`` (pair losses only) adds the MS mining on distances of Eq. 22-23 after the
  thresholds (:func:`dmlbook.mining.ms_distance_mining_masks`; Table II "+ triplet margin").

Numerics: normalised exponential weights are formed as ``exp(log w - max log w)`` per
normalisation scope and never overflow; un-normalised (v0) exponential weights are
``exp(alpha x)`` as printed and overflow float32 once ``alpha x > 88``. Power weights are
``torch.pow`` of a base in ``[0, 2]``.

Performance: the default backward is the closed form ``dL/dS_ij = -w_ij / D_ij`` of the
detached weights (one ``B x B`` tensor saved), computed with the forward on masks held as 0/1
numbers (on CPU ``torch.where`` and a bool-to-float conversion each cost several plain
products over a ``B x B`` matrix); ``backward="autograd"`` differentiates the same formula with
autograd. ``bench/bench_liu.py`` times the losses against the bare ``X X^T``
(``bench/results/liu_cpu.md``).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..mining import ms_distance_mining_masks, threshold_pair_masks
from ..pairs import BACKWARDS, REDUCTIONS, check_nonnegative, compute_dtype
from .base import (
    HyperParameters,
    PairLoss,
    check_choice,
    check_similarity,
    dissimilarity,
    reduce,
    resolve_masks,
)
from .closed_form import attach, fold_reduction

__all__ = [
    "BACKWARDS",
    "NORMALIZATIONS",
    "WEIGHTINGS",
    "PairPowerHyperParameters",
    "PairExponentialHyperParameters",
    "pair_weights",
    "pair_weighted_loss",
    "pair_power_loss",
    "pair_exponential_loss",
    "PairPowerLoss",
    "PairExponentialLoss",
]

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


def check_common(hp: HyperParameters) -> None:
    """The checks every Liu et al. family shares: ``normalization`` and ``reduction``."""
    check_choice(hp.normalization, tuple(NORMALIZATIONS), "normalization")
    check_choice(hp.reduction, REDUCTIONS, "reduction")


@dataclass(frozen=True)
class _PairHyperParameters(HyperParameters):
    pos_margin: float = 0.0
    neg_margin: float = 0.8

    def _check_pair(self, exponents: tuple[str, str]) -> None:
        self._set("pos_margin", check_nonnegative(self.pos_margin, "pos_margin"))
        self._set("neg_margin", check_nonnegative(self.neg_margin, "neg_margin"))
        if self.pos_margin > self.neg_margin:
            raise ValueError(
                "Eq. 16-17 need 0 <= pos_margin <= neg_margin, got "
                f"pos_margin={self.pos_margin}, neg_margin={self.neg_margin}."
            )
        for name in exponents:
            self._set(name, check_nonnegative(getattr(self, name), name))
        check_choice(self.backward, BACKWARDS, "backward")
        if self.epsilon is not None:
            self._set("epsilon", check_nonnegative(self.epsilon, "epsilon", " or None"))
        check_common(self)


@dataclass(frozen=True)
class PairPowerHyperParameters(_PairHyperParameters):
    """Pair-P (Eq. 18 with Eq. 26-27): margins ``m1 <= m2`` on D, exponents ``p, q >= 0``."""

    _: KW_ONLY
    p: float = 0.0
    q: float = 1.0
    normalization: str = "anchor"
    epsilon: float | None = None
    reduction: str = "mean"
    backward: str = "closed_form"

    def check(self) -> None:
        self._check_pair(("p", "q"))


@dataclass(frozen=True)
class PairExponentialHyperParameters(_PairHyperParameters):
    """Pair-E (Eq. 18 with Eq. 29-30): margins ``m1 <= m2`` on D, ``alpha, beta >= 0``."""

    _: KW_ONLY
    alpha: float = 0.0
    beta: float = 2.0
    normalization: str = "anchor"
    epsilon: float | None = None
    reduction: str = "mean"
    backward: str = "closed_form"

    def check(self) -> None:
        self._check_pair(("alpha", "beta"))


# ----------------------------------------------------------------------------- weights


def as_float(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool mask as 0/1 numbers of ``dtype`` (through ``uint8``: on CPU a direct bool to float
    conversion is several times slower than an elementwise product)."""
    return mask.view(torch.uint8).to(dtype)


def compare(op, a: torch.Tensor, b: torch.Tensor | float) -> torch.Tensor:
    """``op(a, b)`` (``torch.ge``, ``torch.gt``, ...) as 0/1 numbers of ``a``'s dtype.

    Against a number the comparison writes the numbers directly; against a tensor (a per-row
    threshold, broadcast) it compares to bool first and converts (:func:`as_float`), which is
    twice as fast on CPU as writing a broadcast comparison into a float output.
    """
    if isinstance(b, torch.Tensor):
        return as_float(op(a, b), a.dtype)
    return op(a, b, out=torch.empty(a.shape, dtype=a.dtype, device=a.device))


def distances(S: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Detached ``D = sqrt(2 - 2 S)`` (Eq. 1) in the compute dtype, and ``keep = D > 0``.

    The arithmetic of :func:`dmlbook.pairs.dissimilarity` with ``"distance"`` (through
    :func:`dmlbook.pairs.safe_distance`: ``D = 0`` where ``2 - 2 S <= eps``, coincident points),
    in fewer passes over the (B, B) matrix. ``keep`` (0/1 numbers) is where ``dD/dS = -1/D``
    (0 elsewhere).
    """
    sq = S.detach().to(compute_dtype(S)).mul(-2.0).add_(2.0).clamp_min_(0.0)
    keep = compare(torch.gt, sq, torch.finfo(sq.dtype).eps)
    return sq.sqrt_().mul_(keep), keep


def slope_to_gradient(slope: torch.Tensor, D: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """``dL/dS = dL/dD * dD/dS = -slope / D`` where ``D > 0`` and 0 elsewhere, in place."""
    return slope.mul_(keep).div_(D.clamp_min(torch.finfo(D.dtype).tiny)).neg_()


def _mined_distances(S, labels, m1, m2, epsilon, pos_mask, neg_mask):
    """``D`` (detached, compute dtype) and the pairs kept by Eq. 16-17 (then Eq. 22-23)."""
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    if epsilon is not None:  # Eq. 22-23 after the thresholds, through the miners
        pos, neg = threshold_pair_masks(S, y, m1, m2, pos_mask=pos, neg_mask=neg)
        pos, neg = ms_distance_mining_masks(S, y, epsilon, pos_mask=pos, neg_mask=neg)
    D, _ = distances(S)
    if epsilon is None:  # threshold_pair_masks, inlined on the D computed here
        pos, neg = pos & (D >= m1), neg & (D <= m2)
    return D, pos, neg


def _weights(D, pos, neg, m1, m2, weighting, a, b, normalization) -> torch.Tensor:
    """``w+`` on ``pos`` and ``w-`` on ``neg`` in one (B, B) tensor (the masks are disjoint).

    Power weights are formed directly (``torch.pow``, ``0^0 = 1``) and bounded by ``2^p``;
    exponential weights in the log domain, shifted by their maximum per normalisation scope
    (:func:`_side`, on the masks as 0/1 numbers).
    """
    dims = (1,) if normalization == "anchor" else (0, 1)
    pos, neg = as_float(pos, D.dtype), as_float(neg, D.dtype)
    w_pos, _ = _side(D, pos, (D - m1).clamp_min_(0.0), a, weighting, normalization, dims)
    w_neg, _ = _side(D, neg, (m2 - D).clamp_min_(0.0), b, weighting, normalization, dims)
    return w_pos.add_(w_neg)


def pair_weights(
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
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The detached pair weights ``w+`` and ``w-`` of Eq. 24-27, 29-30, 32-33.

    ``pos_exponent``/``neg_exponent`` are ``p``/``q`` for ``weighting="power"`` and
    ``alpha``/``beta`` for ``"exponential"`` (ignored for ``"constant"``). Returns two (B, B)
    tensors in the compute dtype, zero outside the mined pairs. The GPW weight of Eq. 18 is
    ``dL/dD_ij = w+_ij / B`` on a mined positive with ``D_ij > m1`` and ``-w-_ij / B`` on a
    mined negative with ``D_ij < m2`` (proved in :mod:`dmlbook.symbolic.liu`).
    """
    check_choice(weighting, tuple(WEIGHTINGS), "weighting")
    check_choice(normalization, tuple(NORMALIZATIONS), "normalization")
    D, pos, neg = _mined_distances(S, labels, pos_margin, neg_margin, epsilon, pos_mask, neg_mask)
    w = _weights(D, pos, neg, pos_margin, neg_margin, weighting, pos_exponent, neg_exponent,
                 normalization)  # fmt: skip
    return torch.where(pos, w, 0.0), torch.where(neg, w, 0.0)


def _side(D, mask, hinge, a, weighting, normalization, dims):
    """One side (positives or negatives) of Eq. 18 as 0/1-masked numbers: ``(w, hinge)``.

    ``hinge`` (``[D - m1]_+`` or ``[m2 - D]_+``) is >= 0; the weights of Eq. 24-33 are formed on
    it (power: ``torch.pow``, ``0^0 = 1``; exponential: shifted by the scope's largest exponent,
    which is ``a`` times the largest mined hinge since rounding is monotone) and normalised.
    """
    if weighting == "exponential":
        if normalization == "none":
            return torch.where(mask > 0, (a * hinge).exp(), 0.0), hinge
        top = (hinge * mask).amax(dim=dims, keepdim=True)
        w = (a * hinge).sub_(a * top).clamp_max_(0.0).exp_().mul_(mask)
    else:
        w = hinge.pow(0.0 if weighting == "constant" else a).mul_(mask)
    if normalization != "none":
        w = w.div_(w.sum(dim=dims, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny))
    return w, hinge


def _pair_weighted_rows(D, w, pos, neg, m1: float, m2: float):
    """Eq. 18 per anchor and its closed-form gradient (the weights are constants): ``(L_i, G)``.

    ``L_i = sum_j w+_ij [D_ij - m1]_+ + w-_ij [m2 - D_ij]_+`` and ``G[i] = dL_i/dS_i. =
    -(w+_ij 1[D > m1] - w-_ij 1[D < m2]) / D_ij`` (0 where ``D = 0``, as
    :func:`dmlbook.pairs.safe_distance`'s gradient), all on the detached ``D``. The masks enter
    as 0/1 numbers (no ``torch.where`` over the B x B matrix).
    """
    pos, neg = as_float(pos, D.dtype), as_float(neg, D.dtype)
    # signed hinge: D - m1 on the positives, m2 - D on the negatives (the masks are disjoint);
    # ``buf`` is reused for each intermediate (fewer fresh B x B allocations)
    buf = (m2 - D).clamp_min_(0.0).mul_(neg)
    hinge = (D - m1).clamp_min_(0.0).mul_(pos).add_(buf)
    rows = torch.mul(w, hinge, out=buf).sum(dim=1)
    slope = torch.gt(hinge, 0.0, out=buf).mul_(w).mul_(pos.sub_(neg))  # dL_i/dD_ij
    return rows, slope_to_gradient(slope, D, torch.gt(D, 0.0, out=hinge))


def pair_weighted_loss(
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
    reduction: str = "mean",
    backward: str = "closed_form",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Liu et al.'s pair-based weighting loss, Eq. 18, with any weighting of Eq. 24-33.

    Parameters are those of :func:`pair_weights`, plus ``reduction`` (``"mean"``: Algorithm 1's
    ``(1/B) sum_i L_i``; ``"sum"``; ``"none"``: the ``L_i``) and ``backward``:
    ``"closed_form"`` (default; the gradient ``dL/dS = -w/D`` of the detached weights, one
    ``B x B`` tensor saved) or ``"autograd"`` (the same formula through autograd; supports
    double backward). See the module's "Semantics".
    """
    check_choice(reduction, REDUCTIONS, "reduction")
    check_choice(backward, BACKWARDS, "backward")
    check_choice(weighting, tuple(WEIGHTINGS), "weighting")
    check_choice(normalization, tuple(NORMALIZATIONS), "normalization")
    D, pos, neg = _mined_distances(S, labels, pos_margin, neg_margin, epsilon, pos_mask, neg_mask)
    w = _weights(D, pos, neg, pos_margin, neg_margin, weighting, pos_exponent, neg_exponent,
                 normalization)  # fmt: skip
    if backward == "closed_form":
        rows, G = _pair_weighted_rows(D, w, pos, neg, pos_margin, neg_margin)
        return attach(S, *fold_reduction(rows, G, reduction)).to(S.dtype)
    w_pos, w_neg = torch.where(pos, w, 0.0), torch.where(neg, w, 0.0)
    D = dissimilarity(S.to(w.dtype), "distance")
    per_pair = w_pos * torch.relu(D - pos_margin) + w_neg * torch.relu(neg_margin - D)
    return reduce(per_pair.sum(dim=1), reduction).to(S.dtype)


def pair_power_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_margin: float = PairPowerHyperParameters.pos_margin,
    neg_margin: float = PairPowerHyperParameters.neg_margin,
    *,
    p: float = PairPowerHyperParameters.p,
    q: float = PairPowerHyperParameters.q,
    normalization: str = PairPowerHyperParameters.normalization,
    epsilon: float | None = PairPowerHyperParameters.epsilon,
    reduction: str = PairPowerHyperParameters.reduction,
    backward: str = PairPowerHyperParameters.backward,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pair-P: Eq. 18 with the power weights ``(D - m1)^p``, ``(m2 - D)^q`` (Eq. 26-27, 32-33)."""
    hp = PairPowerHyperParameters(
        pos_margin, neg_margin, p=p, q=q, normalization=normalization, epsilon=epsilon,
        reduction=reduction, backward=backward,
    )  # fmt: skip
    return pair_weighted_loss(
        S, labels, hp.pos_margin, hp.neg_margin, weighting="power", pos_exponent=hp.p,
        neg_exponent=hp.q, normalization=hp.normalization, epsilon=hp.epsilon,
        reduction=hp.reduction, backward=hp.backward, pos_mask=pos_mask, neg_mask=neg_mask,
    )  # fmt: skip


def pair_exponential_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_margin: float = PairExponentialHyperParameters.pos_margin,
    neg_margin: float = PairExponentialHyperParameters.neg_margin,
    *,
    alpha: float = PairExponentialHyperParameters.alpha,
    beta: float = PairExponentialHyperParameters.beta,
    normalization: str = PairExponentialHyperParameters.normalization,
    epsilon: float | None = PairExponentialHyperParameters.epsilon,
    reduction: str = PairExponentialHyperParameters.reduction,
    backward: str = PairExponentialHyperParameters.backward,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pair-E: Eq. 18 with ``e^{alpha (D - m1)}``, ``e^{beta (m2 - D)}`` (Eq. 29-30, 32-33)."""
    hp = PairExponentialHyperParameters(
        pos_margin, neg_margin, alpha=alpha, beta=beta, normalization=normalization,
        epsilon=epsilon, reduction=reduction, backward=backward,
    )  # fmt: skip
    return pair_weighted_loss(
        S, labels, hp.pos_margin, hp.neg_margin, weighting="exponential",
        pos_exponent=hp.alpha, neg_exponent=hp.beta, normalization=hp.normalization,
        epsilon=hp.epsilon, reduction=hp.reduction, backward=hp.backward, pos_mask=pos_mask,
        neg_mask=neg_mask,
    )  # fmt: skip


# ------------------------------------------------------------------------------ modules


class PairPowerLoss(PairLoss):
    """Pair-P (:func:`pair_power_loss`), registered as ``"pair_p"``."""

    loss_function = staticmethod(pair_power_loss)
    hyper = PairPowerHyperParameters


class PairExponentialLoss(PairLoss):
    """Pair-E (:func:`pair_exponential_loss`), registered as ``"pair_e"``."""

    loss_function = staticmethod(pair_exponential_loss)
    hyper = PairExponentialHyperParameters

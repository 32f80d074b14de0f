"""Liu et al.'s triplet-based weighting loss: Eq. 21 with the weights of Eq. 25, 28, 31, 34.

Chapter: ``book/11_liu_weighting.ipynb``, 11.2-11.3 and 11.5. Proofs: :mod:`dmlbook.symbolic.liu`
(Triplet-E per anchor is a log-sum-exp; normalised power weights are no gradient). Tests:
``tests/losses/test_liu_weighting.py`` and ``tests/losses/test_liu_triplet_scale.py`` (blocks,
memory at B = 1000); the per-anchor loop of Algorithm 1 is
:func:`dmlbook.reference.triplet_weighted_loss_reference`
(``tests/reference/test_liu_equivalence.py``).

For anchor ``i``: ``L_i = sum_{(j, k)} w_ijk [D_ij - D_ik + m]_+`` over the triplets of Eq. 19
(``y_ij = 1``, ``y_ik = 0``, ``D_ij + m >= D_ik``), with detached weights ``w_ijk = 1`` (Eq. 25),
``(D_ij - D_ik + m)^p`` (Eq. 28) or ``e^{alpha (D_ij - D_ik + m)}`` (Eq. 31), normalised per
anchor (Eq. 34 as Algorithm 1 reads it), per batch or not at all; ``L = (1/B) sum_i L_i``.
Registered as ``"triplet_p"`` (Triplet-P, ``p = 5``) and ``"triplet_e"`` (Triplet-E, ``alpha =
40``), ``m = 0.1`` (0.2 on SOP). The semantics are those of :mod:`dmlbook.losses.liu_weighting`.

The loss never builds the (B, B, B) tensor of all triplets: it gathers each anchor's positives
(``K - 1`` of them in a P x K batch) and takes the triplets in blocks of anchors and positives
with at most :data:`CHUNK_ENTRIES` entries, so its memory is O(B^2) and its time O(B^2 K). :func:`triplet_weights`, which
returns the weights of every triplet for inspection, is (B, B, B) by definition.
``bench/bench_liu.py`` times the loss at ``B = 320`` and ``1000``.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..pair_lists import positive_lists
from ..pairs import REDUCTIONS, check_nonnegative, compute_dtype
from .base import (
    HyperParameters,
    PairLoss,
    check_choice,
    check_similarity,
    dissimilarity,
    resolve_masks,
)
from .closed_form import attach, fold_reduction
from .liu_weighting import (
    NORMALIZATIONS,
    WEIGHTINGS,
    check_common,
    compare,
    distances,
    slope_to_gradient,
)

__all__ = [
    "TripletPowerHyperParameters",
    "TripletExponentialHyperParameters",
    "normalized_weights",
    "triplet_weights",
    "triplet_weighted_loss",
    "triplet_power_loss",
    "triplet_exponential_loss",
    "TripletPowerLoss",
    "TripletExponentialLoss",
]


@dataclass(frozen=True)
class TripletPowerHyperParameters(HyperParameters):
    """Triplet-P (Eq. 21 with Eq. 28): the margin ``m >= 0`` on D, the exponent ``p >= 0``."""

    margin: float = 0.1
    _: KW_ONLY
    p: float = 5.0
    normalization: str = "anchor"
    reduction: str = "mean"

    def check(self) -> None:
        self._set("margin", check_nonnegative(self.margin, "margin"))
        self._set("p", check_nonnegative(self.p, "p"))
        check_common(self)


@dataclass(frozen=True)
class TripletExponentialHyperParameters(HyperParameters):
    """Triplet-E (Eq. 21 with Eq. 31): the margin ``m >= 0`` on D, ``alpha >= 0``."""

    margin: float = 0.1
    _: KW_ONLY
    alpha: float = 40.0
    normalization: str = "anchor"
    reduction: str = "mean"

    def check(self) -> None:
        self._set("margin", check_nonnegative(self.margin, "margin"))
        self._set("alpha", check_nonnegative(self.alpha, "alpha"))
        check_common(self)


def normalized_weights(
    log_w: torch.Tensor, valid: torch.Tensor, normalization: str, dims: tuple[int, ...]
) -> torch.Tensor:
    """``w = exp(log_w)`` on ``valid``, 0 elsewhere, normalised over ``dims`` (Eq. 32-34).

    Parameters
    ----------
    log_w : Tensor
        Log-weights (``-inf`` for a weight 0).
    valid : bool Tensor like ``log_w``
        The mined pairs or triplets.
    normalization : {"none", "anchor", "batch"}
        ``"anchor"`` sums over ``dims`` (the anchor's pairs or triplets), ``"batch"`` over all.
    dims : tuple of int
        The dimensions of one anchor's pairs (``(1,)``) or triplets (``(1, 2)``).
    """
    neg_inf = torch.full((), float("-inf"), dtype=log_w.dtype, device=log_w.device)
    log_w = torch.where(valid, log_w, neg_inf)
    if normalization == "none":
        return log_w.exp()
    scope = dims if normalization == "anchor" else tuple(range(log_w.dim()))
    shift = log_w.amax(dim=scope, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    w = (log_w - shift).exp()
    total = w.sum(dim=scope, keepdim=True)
    return torch.where(total > 0, w / total.clamp_min(torch.finfo(w.dtype).tiny), 0.0)


def _triplet_margins(D: torch.Tensor, margin: float) -> torch.Tensor:
    """``t[i, j, k] = D_ij - D_ik + m``."""
    return D[:, :, None] - D[:, None, :] + margin


def triplet_weights(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 0.1,
    *,
    weighting: str = "power",
    exponent: float = 5.0,
    normalization: str = "anchor",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """The detached triplet weights ``w_ijk`` of Eq. 25, 28, 31, 34, shape (B, B, B).

    Zero outside the triplets of Eq. 19 (``y_ij = 1``, ``y_ik = 0``, ``D_ij + m >= D_ik``).
    ``exponent`` is ``p`` for ``"power"`` and ``alpha`` for ``"exponential"``. The GPW weights
    of Eq. 21 are ``dL/dD_ij = (1/B) sum_k w_ijk`` and ``dL/dD_ik = -(1/B) sum_j w_ijk`` over
    the triplets with ``D_ij - D_ik + m > 0``.
    """
    check_choice(weighting, tuple(WEIGHTINGS), "weighting")
    check_choice(normalization, tuple(NORMALIZATIONS), "normalization")
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    D = dissimilarity(S.detach().to(compute_dtype(S)), "distance")
    t = _triplet_margins(D, margin)
    valid = pos[:, :, None] & neg[:, None, :] & (t >= 0)  # Eq. 19
    if weighting == "exponential":
        return normalized_weights(exponent * t, valid, normalization, (1, 2))
    # power (constant: p = 0) weights directly, 0^0 = 1; bounded by (2 + m)^p, no shift needed
    w = torch.where(valid, t.clamp_min_(0.0).pow_(exponent if weighting == "power" else 0.0), 0.0)
    if normalization == "none":
        return w
    total = w.sum(dim=(1, 2) if normalization == "anchor" else (0, 1, 2), keepdim=True)
    return torch.where(total > 0, w / total.clamp_min(torch.finfo(w.dtype).tiny), 0.0)


#: Entries of one (r, c, B) working block of the triplet loss (r anchors, c positives each):
#: 2^18, 1 MiB in float32, small enough to stay in cache between the block's elementwise passes.
CHUNK_ENTRIES = 2**18


def _power(t: torch.Tensor, p: float) -> torch.Tensor:
    """``t^p`` in place for ``t >= 0``: repeated squaring for an integer ``p <= 16`` (a few
    multiplications, within a few ulp of ``torch.pow``, which is several times slower here)."""
    if p != int(p) or p > 16:
        return t.pow_(p)
    out, base, k = None, t, int(p)
    while k:
        if k & 1:
            out = base.clone() if out is None else out.mul_(base)
        k >>= 1
        if k:
            base = base.mul_(base)  # t is the caller's to overwrite
    return out


def _exponential_factors(Ap, Dn, alpha, normalization):
    """``e^{alpha t_ijk} = u_ij v_ik c_i`` with ``u, v <= 1``: the shifted factors of Eq. 31.

    ``u = e^{alpha (D_ij + m - max_j (D_ij + m))}`` (r, P) over the positives (0 for padding),
    ``v = e^{alpha (min_k D_ik - D_ik)}`` (r, B) over the negatives (0 elsewhere), and ``c_i``
    the rest of the exponent: 1 for ``"anchor"`` (a per-anchor factor cancels in Eq. 34), the
    batch's shift for ``"batch"`` (0 where the anchor has no triplet), ``e^{alpha max t}`` for
    ``"none"``. Every weight is then at most 1 (normalised) and never overflows.
    """
    hi, lo = Ap.amax(dim=1, keepdim=True), Dn.amin(dim=1, keepdim=True)
    # an anchor without positives (negatives) has hi = -inf (lo = +inf): shift by 0 there
    u = (alpha * (Ap - hi.nan_to_num(0.0, 0.0, 0.0))).exp_()
    v = (alpha * (lo.nan_to_num(0.0, 0.0, 0.0) - Dn)).exp_()
    if normalization == "anchor":
        return u, v, None
    top = torch.where(hi >= lo, alpha * (hi - lo), float("-inf"))[:, 0]  # alpha max_jk t_ijk
    if normalization == "batch" and bool(torch.isfinite(top).any()):
        top = top - top.amax()
    return u, v, top.exp_()


def _block_terms(Ap, Dn, weighting, exponent, u=None, v=None):
    """Sums of one block of anchors and positives over ``t = D_ij - D_ik + m``, (r, c, B).

    ``Ap`` (r, c) holds ``D_ij + m`` of the positives (``-inf`` for padding), ``Dn`` (r, B) the
    negatives' distances (``+inf`` elsewhere), so that ``t >= 0`` is exactly Eq. 19 (``t =
    -inf`` outside). Exponential weights are ``u v`` (:func:`_exponential_factors`). Returns
    the unnormalised weight total, ``sum w t`` over ``t > 0``, and ``dL/dD`` of the block's
    positives (r, c) and negatives (r, B).
    """
    t = Ap[:, :, None] - Dn[:, None, :]
    if weighting == "exponential":  # one mask buffer, reused (fewer fresh allocations)
        mask = compare(torch.ge, t, 0.0)
        A = (u[:, :, None] * v[:, None, :]).mul_(mask)
        total = A.sum(dim=(1, 2))
        t.clamp_min_(0.0)
        A.mul_(torch.gt(t, 0.0, out=mask))  # a tie is mined (in the total) but has no hinge
    elif weighting == "power" and exponent > 0:  # 0^p = 0 on a tie and outside Eq. 19
        t.clamp_min_(0.0)
        A = _power(t.clone(), exponent)
        total = None
    else:  # constant, or p = 0: 0^0 = 1 on every mined triplet, the hinge on t > 0
        total = compare(torch.ge, t, 0.0).sum(dim=(1, 2))
        A = compare(torch.gt, t, 0.0)
        t.clamp_min_(0.0)
    g_pos, g_neg = A.sum(dim=2), A.sum(dim=1)
    total = g_pos.sum(dim=1) if total is None else total
    return total, t.mul_(A).sum(dim=(1, 2)), g_pos, g_neg


def _blocks(Ap, Dn, idx, weighting, exponent, u, v, r: int, c: int):
    """:func:`_block_terms` over blocks of ``r`` anchors and ``c`` positives, accumulated:
    ``(total, rows, dL/dD)`` of every triplet."""
    B = Dn.shape[0]
    total, rows, G = Dn.new_zeros(B), Dn.new_zeros(B), Dn.new_zeros(B, B)
    for i in range(0, B, r):
        for j in range(0, idx.shape[1], c):
            terms = _block_terms(
                Ap[i : i + r, j : j + c], Dn[i : i + r], weighting, exponent,
                None if u is None else u[i : i + r, j : j + c],
                None if v is None else v[i : i + r],
            )  # fmt: skip
            total[i : i + r] += terms[0]
            rows[i : i + r] += terms[1]
            G[i : i + r].scatter_add_(1, idx[i : i + r, j : j + c], terms[2])
            G[i : i + r] -= terms[3]
    return total, rows, G


def _triplet_rows(D, pos, neg, margin, weighting, exponent, normalization):
    """``L_i`` (B,) and ``dL_i/dD_i.`` (B, B) of Eq. 21, never with a (B, B, B) tensor.

    Each anchor's positives are gathered (``K - 1`` in a P x K batch) and taken in blocks of
    anchors and positives whose ``t = D_ij - D_ik + m`` has at most :data:`CHUNK_ENTRIES`
    entries (:func:`_block_terms`): O(B^2 K) time. The totals normalise at the end.
    """
    B = D.shape[0]
    idx, present = positive_lists(pos)
    if idx.shape[1] == 0:  # no anchor has a positive: no triplet
        return D.new_zeros(B), D.new_zeros(B, B)
    Ap = D.gather(1, idx).add_(margin).masked_fill_(~present, float("-inf"))
    Dn = D.masked_fill(~neg, float("inf"))
    u = v = scale = None
    if weighting == "exponential" and exponent > 0:
        u, v, scale = _exponential_factors(Ap, Dn, exponent, normalization)
    elif weighting == "exponential":  # e^0 = 1
        weighting = "constant"
    c = max(1, min(idx.shape[1], CHUNK_ENTRIES // B))
    r = max(1, CHUNK_ENTRIES // (c * B))
    if r >= B and c >= idx.shape[1]:  # one block holds every triplet (a small batch)
        total, rows, g_pos, g_neg = _block_terms(Ap, Dn, weighting, exponent, u, v)
        G = g_neg.neg_().scatter_add_(1, idx, g_pos)
    else:
        total, rows, G = _blocks(Ap, Dn, idx, weighting, exponent, u, v, r, c)
    if scale is not None:
        total, rows, G = total * scale, rows * scale, G * scale[:, None]
    if normalization != "none":
        if normalization == "batch":
            total = total.sum().expand_as(total)
        norm = torch.where(total > 0, 1.0 / total.clamp_min(torch.finfo(D.dtype).tiny), 0.0)
        rows, G = rows.mul_(norm), G.mul_(norm[:, None])  # fresh tensors, in place
    return rows, G


def triplet_weighted_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 0.1,
    *,
    weighting: str = "power",
    exponent: float = 5.0,
    normalization: str = "anchor",
    reduction: str = "mean",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Liu et al.'s triplet-based weighting loss, Eq. 21, with any weighting of Eq. 25-34.

    Parameters are those of :func:`triplet_weights`, plus ``reduction`` (``"mean"``: ``(1/B)
    sum_i L_i``; ``"sum"``; ``"none"``: the ``L_i``). The backward is the closed form of the
    detached weights, computed with the forward (:func:`_triplet_rows`, the anchors' positives a
    chunk at a time: memory O(B^2 P) for P positives per anchor, each temporary at most
    :data:`CHUNK_ENTRIES` entries); the per-anchor loop
    :func:`dmlbook.reference.triplet_weighted_loss_reference` is plain autograd, and the tests
    compare the two.
    """
    check_choice(reduction, REDUCTIONS, "reduction")
    check_choice(weighting, tuple(WEIGHTINGS), "weighting")
    check_choice(normalization, tuple(NORMALIZATIONS), "normalization")
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    D, keep = distances(S)
    rows, G = _triplet_rows(D, pos, neg, margin, weighting, exponent, normalization)
    G = slope_to_gradient(G, D, keep)  # dD/dS = -1/D (0 where D = 0, as safe_distance's)
    return attach(S, *fold_reduction(rows, G, reduction)).to(S.dtype)


def triplet_power_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = TripletPowerHyperParameters.margin,
    *,
    p: float = TripletPowerHyperParameters.p,
    normalization: str = TripletPowerHyperParameters.normalization,
    reduction: str = TripletPowerHyperParameters.reduction,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triplet-P: Eq. 21 with ``w_ijk = (D_ij - D_ik + m)^p`` (Eq. 28, 34)."""
    hp = TripletPowerHyperParameters(margin, p=p, normalization=normalization, reduction=reduction)
    return triplet_weighted_loss(
        S, labels, hp.margin, weighting="power", exponent=hp.p,
        normalization=hp.normalization, reduction=hp.reduction, pos_mask=pos_mask,
        neg_mask=neg_mask,
    )  # fmt: skip


def triplet_exponential_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = TripletExponentialHyperParameters.margin,
    *,
    alpha: float = TripletExponentialHyperParameters.alpha,
    normalization: str = TripletExponentialHyperParameters.normalization,
    reduction: str = TripletExponentialHyperParameters.reduction,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triplet-E: Eq. 21 with ``w_ijk = e^{alpha (D_ij - D_ik + m)}`` (Eq. 31, 34)."""
    hp = TripletExponentialHyperParameters(
        margin, alpha=alpha, normalization=normalization, reduction=reduction
    )
    return triplet_weighted_loss(
        S, labels, hp.margin, weighting="exponential", exponent=hp.alpha,
        normalization=hp.normalization, reduction=hp.reduction, pos_mask=pos_mask,
        neg_mask=neg_mask,
    )  # fmt: skip


class TripletPowerLoss(PairLoss):
    """Triplet-P (:func:`triplet_power_loss`), registered as ``"triplet_p"``."""

    loss_function = staticmethod(triplet_power_loss)
    hyper = TripletPowerHyperParameters


class TripletExponentialLoss(PairLoss):
    """Triplet-E (:func:`triplet_exponential_loss`), registered as ``"triplet_e"``."""

    loss_function = staticmethod(triplet_exponential_loss)
    hyper = TripletExponentialHyperParameters

"""Liu et al.'s triplet-based weighting loss: Eq. 21 with the weights of Eq. 25, 28, 31, 34.

Chapter: ``book/11_liu_weighting.ipynb``, 11.2-11.3 and 11.5. Proofs: :mod:`dmlbook.symbolic.liu`
(Triplet-E per anchor is a log-sum-exp; normalised power weights are no gradient). Tests:
``tests/losses/test_liu_weighting.py``; the per-anchor loop of Algorithm 1 is
:func:`dmlbook.reference.triplet_weighted_loss_reference`
(``tests/reference/test_liu_equivalence.py``).

For anchor ``i``: ``L_i = sum_{(j, k)} w_ijk [D_ij - D_ik + m]_+`` over the triplets of Eq. 19
(``y_ij = 1``, ``y_ik = 0``, ``D_ij + m >= D_ik``), with detached weights ``w_ijk = 1`` (Eq. 25),
``(D_ij - D_ik + m)^p`` (Eq. 28) or ``e^{alpha (D_ij - D_ik + m)}`` (Eq. 31), normalised per
anchor (Eq. 34 as Algorithm 1 reads it), per batch or not at all; ``L = (1/B) sum_i L_i``.
Registered as ``"triplet_p"`` (Triplet-P, ``p = 5``) and ``"triplet_e"`` (Triplet-E, ``alpha =
40``), ``m = 0.1`` (0.2 on SOP). The semantics are those of :mod:`dmlbook.losses.liu_weighting`.

The loss builds (B, B, B) tensors (1 G entries at ``B = 1000``): it is meant for the batch sizes
of the paper (``P x K = 80`` or ``320``); ``bench/bench_liu.py`` times it.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..pairs import REDUCTIONS, check_nonnegative, compute_dtype
from .base import (
    HyperParameters,
    PairLoss,
    check_choice,
    check_similarity,
    dissimilarity,
    reduce,
    resolve_masks,
)
from .liu_weighting import NORMALIZATIONS, WEIGHTINGS, check_common

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


class _TripletWeighted(torch.autograd.Function):
    """Eq. 21 per anchor with its closed-form backward (the weights are constants).

    With ``A = w 1[t > 0]``: ``L_i = sum_jk A_ijk t_ijk``, ``dL_i/dD_ij = sum_k A_ijk``,
    ``dL_i/dD_ik = -sum_j A_ijk``, and ``dD/dS = -1/D`` (0 where ``D = 0``).
    """

    @staticmethod
    def forward(ctx, S, D, w, margin: float):  # type: ignore[override]
        t = _triplet_margins(D, margin)
        A = torch.where(t > 0, w, 0.0)
        per_anchor = (A * t).sum(dim=(1, 2))
        G = A.sum(dim=2) - A.sum(dim=1)
        ctx.save_for_backward(torch.where(D > 0, G / D.clamp_min(1e-30), 0.0).neg_())
        ctx.in_dtype = S.dtype
        return per_anchor

    @staticmethod
    def backward(ctx, grad_rows):  # type: ignore[override]
        (G,) = ctx.saved_tensors
        return (G * grad_rows[:, None].to(G.dtype)).to(ctx.in_dtype), None, None, None


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
    detached weights (:class:`_TripletWeighted`); the per-anchor loop
    :func:`dmlbook.reference.triplet_weighted_loss_reference` is plain autograd, and the tests
    compare the two.
    """
    check_choice(reduction, REDUCTIONS, "reduction")
    w = triplet_weights(
        S, labels, margin, weighting=weighting, exponent=exponent,
        normalization=normalization, pos_mask=pos_mask, neg_mask=neg_mask,
    )  # fmt: skip
    D = dissimilarity(S.detach().to(w.dtype), "distance")
    return reduce(_TripletWeighted.apply(S, D, w, margin), reduction).to(S.dtype)


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

"""The Multi-Similarity loss as Liu et al. write it on distances: MS v1 (with the "+1") and v2 (without).

Chapter: ``book/11_liu_weighting.ipynb``, 11.4 "MS v1 and v2 (Eq. 38-39, Fig. 5)". Proofs:
:mod:`dmlbook.symbolic.liu` (``tests/symbolic/test_liu.py``). Tests:
``tests/losses/test_ms_distance.py``; per-anchor loop: :mod:`dmlbook.reference.liu_weighting`.

Liu et al. (Sec. IV-B5) compare their Pair-E loss with the MS loss written on distances
``D = sqrt(2 - 2 S)``, one margin ``m`` for both kinds of pairs, and the pairs mined with Eq.
22-23 (``epsilon = 0.1``, :func:`dmlbook.mining.ms_distance_mining_masks`). Per anchor ``i``:

* **v1** (the MS loss as printed above Eq. 39)::

      L_i = (1/alpha) log[1 + sum_{P_i} e^{alpha (D_ij - m)}] + (1/beta) log[1 + sum_{N_i} e^{beta (m - D_ij)}]

  whose GPW weights are Eq. 39's ``w+_ij = e^{alpha (D_ij - m)} / (1 + sum_{P_i} ...)`` and
  ``w-_ij = e^{beta (m - D_ij)} / (1 + sum_{N_i} ...)``;
* **v2** ("the multi-similarity loss without adding 1"): the same with ``log sum`` in place of
  ``log[1 + sum]``, whose weights are Eq. 39's without the "+1" in the denominators: the
  per-anchor normalised exponential weights of Eq. 29-30, 32-33 (with ``m1 = m2 = m`` and no
  hinge). The margin ``m`` then only shifts the loss by a constant: it changes no gradient
  (:mod:`dmlbook.symbolic.liu` proves v2 is LiftedStruct* on distances plus a constant).

This is *not* Wang et al.'s MS loss (:mod:`dmlbook.losses.multi_similarity`), which is written on
cosine similarities: Liu et al. keep Wang's numbers (``alpha, beta = 2, 50``, ``m = 1``) but put
them on ``D``, where ``D = 1`` is ``S = 0.5``.

Semantics: empty ``P_i`` or ``N_i`` contribute 0 (v1: ``log 1``; v2: by convention, the empty
log-sum-exp is ``-inf``); the mean divides by all ``B`` anchors; mining reads ``S`` detached.

Performance: the default ``backward="closed_form"`` computes the loss and Eq. 39's weights in
one pass (:func:`_ms_distance_rows`: ``D`` formed once, Eq. 22-23 inlined on it, the masks as 0/1
numbers, the mined extremes reused as the log-sum-exps' shifts) and saves ``dL/dS = -(w+ - w-)
/ D`` for the backward; ``backward="autograd"`` is the readable form (:func:`_anchor_terms`
through autograd; supports double backward). Both give the same values and gradients up to
rounding (``tests/losses/test_ms_distance.py``, float64).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..mining import ms_distance_mining_masks
from ..pairs import BACKWARDS, REDUCTIONS, check_nonnegative, compute_dtype
from .base import (
    HyperParameters,
    PairLoss,
    check_choice,
    check_similarity,
    dissimilarity,
    masked_logsumexp,
    reduce,
    resolve_masks,
)
from .closed_form import attach, fold_reduction
from .liu_weighting import as_float, compare, distances, slope_to_gradient

__all__ = [
    "MS_VERSIONS",
    "MSDistanceHyperParameters",
    "ms_distance_weights",
    "ms_distance_loss",
    "MSDistanceLoss",
]

#: Liu et al.'s two MS variants of Fig. 5.
MS_VERSIONS: dict[str, str] = {
    "v1": "the MS loss: log[1 + sum exp] (Eq. 39 with the '+1')",
    "v2": "the MS loss without adding 1: log sum exp (Eq. 39 without the '+1')",
}


@dataclass(frozen=True)
class MSDistanceHyperParameters(HyperParameters):
    """MS on distances: margin ``m``, scales ``alpha, beta > 0``, the version, mining ``epsilon``.

    Defaults are Liu et al.'s Fig. 5 settings (``alpha, beta = 2, 50``, ``m = 1``, ``epsilon =
    0.1``) with ``version="v2"``, the variant Fig. 5 finds better. ``backward`` is
    ``"closed_form"`` (Eq. 39's weights, computed with the loss) or ``"autograd"``.
    """

    margin: float = 1.0
    alpha: float = 2.0
    beta: float = 50.0
    _: KW_ONLY
    version: str = "v2"
    epsilon: float | None = 0.1
    reduction: str = "mean"
    backward: str = "closed_form"

    def check(self) -> None:
        self._positive("alpha", "beta")
        self._set("margin", check_nonnegative(self.margin, "margin"))
        if self.epsilon is not None:
            self._set("epsilon", check_nonnegative(self.epsilon, "epsilon", " or None"))
        check_choice(self.version, tuple(MS_VERSIONS), "version")
        check_choice(self.reduction, REDUCTIONS, "reduction")
        check_choice(self.backward, BACKWARDS, "backward")


def _masks(S, labels, epsilon, pos_mask, neg_mask):
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    if epsilon is not None:
        pos, neg = ms_distance_mining_masks(S, y, epsilon, pos_mask=pos, neg_mask=neg)
    return pos, neg


def _anchor_terms(
    D: torch.Tensor, pos, neg, margin: float, alpha: float, beta: float, add_one: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    lse_pos, _ = masked_logsumexp(alpha * (D - margin), pos, add_one=add_one)
    lse_neg, _ = masked_logsumexp(beta * (margin - D), neg, add_one=add_one)
    return lse_pos / alpha, lse_neg / beta


def _mined(S, labels, epsilon, pos_mask, neg_mask):
    """``D`` (detached, compute dtype), ``D > 0``, the mined pairs (0/1 numbers) and extremes.

    :func:`dmlbook.mining.ms_distance_mining_masks` inlined on ``D`` from
    :func:`dmlbook.losses.liu_weighting.distances` (the same numbers as its ``D``, and the same
    comparisons), so that ``D`` and each anchor's ``max_{P_i} D`` and ``min_{N_i} D`` are formed
    once. Mining keeps the farthest positive and the nearest negative whenever it keeps any, so
    these (``-inf`` / ``+inf`` for none) are also the extremes of the mined pairs.
    """
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    D, keep = distances(S)
    has_pos, has_neg = pos.any(dim=1, keepdim=True), neg.any(dim=1, keepdim=True)
    pos, neg = as_float(pos, D.dtype), as_float(neg, D.dtype)
    # D is in [0, 2]: D * pos and D + 4 (1 - neg) keep the pairs' D exact and bury the others
    farthest = (D * pos).amax(dim=1, keepdim=True).masked_fill_(~has_pos, float("-inf"))
    nearest = neg.mul(-4.0).add_(4.0).add_(D).amin(dim=1, keepdim=True)
    nearest = nearest.masked_fill_(~has_neg, float("inf"))
    if epsilon is not None:  # Eq. 22-23; the extremes of what is kept (or +-inf: nothing is)
        pos = pos.mul_(compare(torch.ge, D, nearest - epsilon))
        neg = neg.mul_(compare(torch.le, D, farthest + epsilon))
        farthest, nearest = (
            farthest.masked_fill(farthest < nearest - epsilon, float("-inf")),
            nearest.masked_fill(nearest > farthest + epsilon, float("inf")),
        )
    return D, keep, pos, neg, farthest, nearest


def _exp_terms(D, mask, scale: float, offset: float, extreme, add_one: bool):
    """``e^{x - c}`` on ``mask`` (0 elsewhere) for ``x = scale D + offset``, its row sum, ``c``.

    ``c = scale * extreme + offset`` is the row's largest ``x`` on ``mask`` (the same arithmetic
    as ``x``, and rounding is monotone), with the "+1" of v1 (``e^0``) at least 0, and 0 for an
    empty row. Every exponent on ``mask`` is then ``<= 0``; those off it are clamped to 0 before
    ``exp`` so that none overflows (and ``inf * 0`` never makes a NaN).
    """
    c = extreme * scale + offset
    # an empty row's extreme is -inf / +inf, so c = -inf there (never NaN: the scale is finite)
    c = c.clamp_min(0.0) if add_one else c.nan_to_num(0.0, 0.0, 0.0)
    e = (D * scale).add_(offset).sub_(c).clamp_max_(0.0).exp_().mul_(mask)
    total = e.sum(dim=1, keepdim=True)
    if add_one:
        total += (-c).exp()
    return e, total, c


def _ms_distance_rows(D, keep, pos, neg, far, near, m: float, alpha: float, beta: float, v1: bool):
    """MS v1/v2 on distances per anchor and the closed-form gradient of Eq. 39's weights.

    ``L_i = (1/alpha) log[(1) + sum_{P_i} e^{alpha (D - m)}] + (1/beta) log[(1) + sum_{N_i}
    e^{beta (m - D)}]`` on the detached ``D``, and ``G[i] = dL_i/dS_i.``: ``dL_i/dD_ij = w+_ij -
    w-_ij`` (Eq. 39) times ``dD/dS = -1/D`` (0 where ``D = 0``).
    """
    e_pos, t_pos, c_pos = _exp_terms(D, pos, alpha, -alpha * m, far, v1)
    e_neg, t_neg, c_neg = _exp_terms(D, neg, -beta, beta * m, near, v1)
    rows = []
    for t, c, scale in ((t_pos, c_pos, alpha), (t_neg, c_neg, beta)):
        value = (c + t.log()).masked_fill_(t <= 0, 0.0)  # empty v2 row: log 0 -> 0
        rows.append(value[:, 0] / scale)
    tiny = torch.finfo(D.dtype).tiny  # an empty row of v2: 0 / 0 -> 0
    W = e_pos.div_(t_pos.clamp_min(tiny)).sub_(e_neg.div_(t_neg.clamp_min(tiny)))
    return rows[0] + rows[1], slope_to_gradient(W, D, keep)


def ms_distance_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = MSDistanceHyperParameters.margin,
    alpha: float = MSDistanceHyperParameters.alpha,
    beta: float = MSDistanceHyperParameters.beta,
    *,
    version: str = MSDistanceHyperParameters.version,
    epsilon: float | None = MSDistanceHyperParameters.epsilon,
    reduction: str = MSDistanceHyperParameters.reduction,
    backward: str = MSDistanceHyperParameters.backward,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """MS v1 or v2 on distances (Liu et al., the MS loss above Eq. 39, and Fig. 5).

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of unit vectors.
    labels : Tensor of shape (B,)
    margin, alpha, beta : float
        ``m`` (a distance), ``alpha``, ``beta`` (> 0).
    version : {"v1", "v2"}
        With or without the "+1" inside the logarithms.
    epsilon : float or None
        Eq. 22-23 mining margin; ``None`` uses every pair.
    reduction : {"mean", "sum", "none"}
        ``"mean"`` divides by all ``B`` anchors.
    backward : {"closed_form", "autograd"}
        ``"closed_form"``: Eq. 39's weights computed with the loss, one ``B x B`` tensor saved
        (no double backward); ``"autograd"``: the formula below through autograd.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs (narrowed before mining).
    """
    hp = MSDistanceHyperParameters(
        margin, alpha, beta, version=version, epsilon=epsilon, reduction=reduction,
        backward=backward,
    )  # fmt: skip
    if hp.backward == "closed_form":
        D, keep, pos, neg, far, near = _mined(S, labels, hp.epsilon, pos_mask, neg_mask)
        args = (hp.margin, hp.alpha, hp.beta, hp.version == "v1")
        rows, G = _ms_distance_rows(D, keep, pos, neg, far, near, *args)
        return attach(S, *fold_reduction(rows, G, hp.reduction)).to(S.dtype)
    pos, neg = _masks(S, labels, hp.epsilon, pos_mask, neg_mask)
    D = dissimilarity(S.to(compute_dtype(S)), "distance")
    t_pos, t_neg = _anchor_terms(D, pos, neg, hp.margin, hp.alpha, hp.beta, version == "v1")
    return reduce(t_pos + t_neg, hp.reduction).to(S.dtype)


def ms_distance_weights(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = MSDistanceHyperParameters.margin,
    alpha: float = MSDistanceHyperParameters.alpha,
    beta: float = MSDistanceHyperParameters.beta,
    *,
    version: str = MSDistanceHyperParameters.version,
    epsilon: float | None = MSDistanceHyperParameters.epsilon,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 39's weights ``w+``, ``w-`` (with the "+1" for v1, without for v2), shape (B, B).

    Closed form, detached: ``dL_i/dD_ij = w+_ij`` on a mined positive and ``-w-_ij`` on a mined
    negative, so the batch-mean gradient is these divided by ``B``.
    """
    hp = MSDistanceHyperParameters(margin, alpha, beta, version=version, epsilon=epsilon)
    pos, neg = _masks(S, labels, hp.epsilon, pos_mask, neg_mask)
    D = dissimilarity(S.detach().to(compute_dtype(S)), "distance")
    one = 1.0 if version == "v1" else 0.0
    out = []
    for x, mask in ((hp.alpha * (D - hp.margin), pos), (hp.beta * (hp.margin - D), neg)):
        e = torch.where(mask, x.exp(), torch.zeros_like(x))
        out.append(torch.where(mask, e / (one + e.sum(dim=1, keepdim=True)), 0.0))
    return out[0], out[1]


class MSDistanceLoss(PairLoss):
    """:func:`ms_distance_loss` as a module, registered as ``"ms_distance"``.

    ``MSDistanceLoss(version="v1")`` is Liu et al.'s "MS loss (v1)" of Fig. 5,
    ``MSDistanceLoss()`` (``version="v2"``) their "MS loss (v2)".
    """

    loss_function = staticmethod(ms_distance_loss)
    hyper = MSDistanceHyperParameters

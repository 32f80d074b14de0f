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
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..mining import ms_distance_mining_masks
from ..pairs import REDUCTIONS, check_nonnegative, compute_dtype
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
    0.1``) with ``version="v2"``, the variant Fig. 5 finds better.
    """

    margin: float = 1.0
    alpha: float = 2.0
    beta: float = 50.0
    _: KW_ONLY
    version: str = "v2"
    epsilon: float | None = 0.1
    reduction: str = "mean"

    def check(self) -> None:
        self._positive("alpha", "beta")
        self._set("margin", check_nonnegative(self.margin, "margin"))
        if self.epsilon is not None:
            self._set("epsilon", check_nonnegative(self.epsilon, "epsilon", " or None"))
        check_choice(self.version, tuple(MS_VERSIONS), "version")
        check_choice(self.reduction, REDUCTIONS, "reduction")


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
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs (narrowed before mining).
    """
    hp = MSDistanceHyperParameters(
        margin, alpha, beta, version=version, epsilon=epsilon, reduction=reduction
    )
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

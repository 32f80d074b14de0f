"""Binomial deviance loss (Wang et al. 2019, Eq. 9-10) and BinLifted (their supplement, Eq. 10).

Chapter: ``book/06_binomial_deviance.ipynb``, 6.1 "The loss and its weights (Wang et al., Eq.
9-10)", 6.3 "Numbers: softplus, not the formula as printed", 6.4 "The implementation"; BinLifted
and Binomial_m in ``book/10_multi_similarity.ipynb``, 10.7 "Table 2, re-run on `synthetic`".
Proof: the ``sy.prove_equal`` cells of 6.1-6.2 and 6.5 "Symbolic weights against autograd".
Tests: ``tests/losses/test_binomial.py`` (loops: :mod:`dmlbook.reference.classic`; the float64
exactness of issue 17 against mpmath).

Binomial deviance replaces the contrastive hinge by a softplus (Wang et al. 2019, Eq. 9):

    L_i = (1/P_i) sum_{P_i} log[1 + e^{alpha (lambda - S_ij)}] + (1/N_i) sum_{N_i} log[1 + e^{beta (S_ij - lambda)}]

whose GPW weights (Eq. 10) are sigmoids of the pair's *own* similarity,
``w_ij^- = (beta / N_i) sigma(beta (S_ij - lambda))``: a soft version of the contrastive loss's
step ``1[S_ij > lambda]``.

BinLifted is the ablation baseline of Wang et al. (Table 2) that averages the weight of the
binomial loss and that of LiftedStruct* (Eq. 16). Their supplementary material, Eq. 10, defines
it for a negative pair as

    w_ij = 1/2 ( sigma(beta (S_ij - lambda)) + e^{beta S_ij} / sum_{N_i} e^{beta S_ik} ),

the binomial weight without its ``beta / N_i`` factor plus the LiftedStruct* weight.
:func:`binlifted_loss` is the loss whose gradient is exactly that weight (see its notes for the
construction and for the positive side, which the paper describes only as "analogous").
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..pairs import BACKWARDS, REDUCTIONS, given_masks, softplus
from .base import (
    HyperParameters,
    PairLoss,
    check_choice,
    check_similarity,
    masked_logsumexp,
    reduce,
    resolve_masks,
)
from .binomial_closed_form import PairSumTerms, pair_sum_core
from .closed_form import closed_form_loss

__all__ = [
    "BinomialHyperParameters",
    "binomial_deviance_loss",
    "BinomialDevianceLoss",
    "binlifted_loss",
    "BinLiftedLoss",
]


@dataclass(frozen=True)
class BinomialHyperParameters(HyperParameters):
    """Binomial deviance and BinLifted: ``alpha``, ``beta`` (> 0), ``margin`` (``lambda``).

    Defaults follow the scale Wang et al. use for their MS loss (``alpha = 2``, ``beta = 50``);
    Eq. 9 fixes no values.
    """

    alpha: float = 2.0
    beta: float = 50.0
    margin: float = 0.5
    _: KW_ONLY
    reduction: str = "mean"
    backward: str = "closed_form"

    def check(self) -> None:
        self._positive("alpha", "beta")
        check_choice(self.reduction, REDUCTIONS, "reduction")
        check_choice(self.backward, BACKWARDS, "backward")

    def check_module(self) -> None:
        super().check_module()
        self._set("margin", float(self.margin))


_H = BinomialHyperParameters
_BINOMIAL = PairSumTerms(softplus="mean", lse=0.0)  # Eq. 9
_BINLIFTED = PairSumTerms(softplus="half", lse=0.5)  # supplement Eq. 10


def binomial_deviance_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    alpha: float = _H.alpha,
    beta: float = _H.beta,
    margin: float = _H.margin,
    *,
    reduction: str = _H.reduction,
    backward: str = _H.backward,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Binomial deviance loss, Wang et al. 2019, Eq. 9.

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    alpha, beta : float
        Slopes of the positive and negative softplus (> 0), see
        :class:`BinomialHyperParameters`.
    margin : float
        ``lambda``, the similarity at which a pair's softplus bends.
    reduction : {"mean", "sum", "none"}
        ``"sum"``: Eq. 9 as printed (sum over anchors), whose gradient is exactly Eq. 10.
        ``"mean"``: the average over the anchors that have at least one pair, so the weights are
        Eq. 10 divided by that count. ``"none"``: the (B,) vector of anchor terms.
    backward : {"closed_form", "autograd"}
        ``"closed_form"`` (default): value and weights in one pass
        (:mod:`dmlbook.losses.binomial_closed_form`; single backward only). ``"autograd"``:
        autograd through the code below (double backward too).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional

    Returns
    -------
    Tensor
        A scalar (or (B,)). Each half is an average over its own set (``1/P_i``, ``1/N_i``); an
        anchor without positives (or negatives) has an empty half, taken as 0 with gradient 0,
        and keeps the other half. A batch without any pair gives 0.

    Notes
    -----
    ``log(1 + e^x)`` is :func:`dmlbook.pairs.softplus`, linear above ``x = 20`` in float32 and
    above ``x = 40`` in float64, so nothing overflows for ``beta = 50`` and any ``S`` in
    [-1, 1], and float64 values and gradients are exact to rounding.
    """
    hp = _H(alpha, beta, margin, reduction=reduction, backward=backward)
    y = check_similarity(S, labels)
    if backward == "closed_form":
        masks = given_masks(y, pos_mask, neg_mask, tuple(S.shape))
        args = (hp.alpha, hp.beta, hp.margin, _BINOMIAL)
        return closed_form_loss(S, pair_sum_core, y, masks, *args, reduction=reduction)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    zero = torch.zeros_like(S)
    pos_sum = torch.where(pos, softplus(hp.alpha * (margin - S)), zero).sum(dim=1)
    neg_sum = torch.where(neg, softplus(hp.beta * (S - margin)), zero).sum(dim=1)
    n_pos = pos.sum(dim=1).clamp_min(1).to(S.dtype)
    n_neg = neg.sum(dim=1).clamp_min(1).to(S.dtype)
    per = pos_sum / n_pos + neg_sum / n_neg
    return reduce(per, reduction, pos.any(dim=1) | neg.any(dim=1))


def binlifted_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    alpha: float = _H.alpha,
    beta: float = _H.beta,
    margin: float = _H.margin,
    *,
    reduction: str = _H.reduction,
    backward: str = _H.backward,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """BinLifted: the loss whose negative-pair weight is Wang et al. 2019, supplement Eq. 10.

    Anchor term::

        L_i = 1/(2 beta)  [ sum_{N_i} log(1 + e^{beta (S_ik - lambda)}) + log sum_{N_i} e^{beta S_ik} ]
            + 1/(2 alpha) [ sum_{P_i} log(1 + e^{alpha (lambda - S_ik)}) + log sum_{P_i} e^{-alpha S_ik} ]

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    alpha, beta : float
        Temperatures (> 0), as in binomial deviance (Eq. 9) and LiftedStruct* (Eq. 16).
    margin : float
        ``lambda``.
    reduction : {"mean", "sum", "none"}
        ``"sum"`` has gradient exactly supplement Eq. 10 on every negative pair; ``"mean"``
        averages over the anchors that have at least one pair (weights divided by that count).
    backward : {"closed_form", "autograd"}
        ``"closed_form"`` (default): value and weights in one pass
        (:mod:`dmlbook.losses.binomial_closed_form`; single backward only). ``"autograd"``:
        autograd through the code below (double backward too).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional

    Returns
    -------
    Tensor
        A scalar (or (B,)). Empty halves are 0 with gradient 0, as in
        :func:`binomial_deviance_loss` and :func:`dmlbook.losses.lifted_star_loss`.

    Notes
    -----
    ``d/dS_ij`` of ``(1/beta) softplus(beta (S_ij - lambda))`` is ``sigma(beta (S_ij - lambda))``
    and of ``(1/beta) log sum_{N_i} e^{beta S_ik}`` it is ``e^{beta S_ij} / sum_{N_i}
    e^{beta S_ik}``; half their sum is supplement Eq. 10. The paper gives only the negative
    weight and says positives are "analyzed analogously"; the positive half above is that
    analogy (binomial's positive softplus with ``alpha`` plus LiftedStruct*'s positive
    log-sum-exp), a choice of dmlbook. Note that, unlike Eq. 9, supplement Eq. 10 has no
    ``1/N_i`` and no ``beta`` factor on the binomial part.
    """
    hp = _H(alpha, beta, margin, reduction=reduction, backward=backward)
    alpha, beta = hp.alpha, hp.beta
    y = check_similarity(S, labels)
    if backward == "closed_form":
        masks = given_masks(y, pos_mask, neg_mask, tuple(S.shape))
        args = (alpha, beta, hp.margin, _BINLIFTED)
        return closed_form_loss(S, pair_sum_core, y, masks, *args, reduction=reduction)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    zero = torch.zeros_like(S)
    neg_soft = torch.where(neg, softplus(beta * (S - margin)), zero).sum(dim=1)
    pos_soft = torch.where(pos, softplus(alpha * (margin - S)), zero).sum(dim=1)
    neg_lse, has_neg = masked_logsumexp(beta * S, neg, dim=1)
    pos_lse, has_pos = masked_logsumexp(-alpha * S, pos, dim=1)
    per = (neg_soft + neg_lse) / (2 * beta) + (pos_soft + pos_lse) / (2 * alpha)
    return reduce(per, reduction, has_pos | has_neg)


class BinomialDevianceLoss(PairLoss):
    """Module form of :func:`binomial_deviance_loss` (Wang et al. 2019, Eq. 9)."""

    loss_function = staticmethod(binomial_deviance_loss)
    hyper = BinomialHyperParameters


class BinLiftedLoss(BinomialDevianceLoss):
    """Module form of :func:`binlifted_loss` (Wang et al. 2019, supplement Eq. 10).

    Same hyper-parameters as :class:`BinomialDevianceLoss`.
    """

    loss_function = staticmethod(binlifted_loss)

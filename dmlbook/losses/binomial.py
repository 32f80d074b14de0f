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

import torch

from ..core.declaration import declared
from ..core.pairs import masked_logsumexp, masked_softmax, pair_sets, reduce, softplus
from ..core.validation import Real, Scale
from .base import PairLoss

__all__ = [
    "binomial_deviance_loss",
    "binomial_weights",
    "BinomialDevianceLoss",
    "binlifted_loss",
    "binlifted_weights",
    "BinLiftedLoss",
]


# Defaults: the scale Wang et al. use for their MS loss (alpha = 2, beta = 50, lambda = 0.5);
# Eq. 9 fixes no values. BinLifted and the weights functions take the same ones (like=).
@declared
def binomial_deviance_loss(
    S,
    labels,
    alpha: Scale = 2.0,
    beta: Scale = 50.0,
    margin: Real = 0.5,
    *,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Binomial deviance loss, Wang et al. 2019, Eq. 9.

    Parameters
    ----------
    alpha, beta : float
        Slopes of the positive and negative softplus (> 0).
    margin : float
        ``lambda``, the similarity at which a pair's softplus bends.
    reduction : {"mean", "sum", "none"}
        ``"sum"``: Eq. 9 as printed (sum over anchors), whose gradient is exactly Eq. 10.
        ``"mean"``: the average over the anchors that have at least one pair, so the weights are
        Eq. 10 divided by that count (:func:`binomial_weights`). ``"none"``: the (B,) vector
        of anchor terms.

    Returns
    -------
    Tensor
        A scalar (or (B,)). Each half is an average over its own set (``1/P_i``, ``1/N_i``); an
        anchor without positives (or negatives) has an empty half, taken as 0 with gradient 0,
        and keeps the other half. A batch without any pair gives 0.

    Notes
    -----
    ``log(1 + e^x)`` is :func:`dmlbook.core.pairs.softplus`, linear above ``x = 20`` in float32 and
    above ``x = 40`` in float64, so nothing overflows for ``beta = 50`` and any ``S`` in
    [-1, 1], and float64 values and gradients are exact to rounding. Half precision is computed
    in float32 (:func:`dmlbook.core.pairs.pair_sets`): ``alpha (lambda - S)`` passes float16's 65,504
    long before the loss does.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    zero = torch.zeros_like(S)
    pos_sum = torch.where(pos, softplus(alpha * (margin - S)), zero).sum(dim=1)
    neg_sum = torch.where(neg, softplus(beta * (S - margin)), zero).sum(dim=1)
    n_pos = pos.sum(dim=1).clamp_min(1).to(S.dtype)
    n_neg = neg.sum(dim=1).clamp_min(1).to(S.dtype)
    per = pos_sum / n_pos + neg_sum / n_neg
    return reduce(per, reduction, pos.any(dim=1) | neg.any(dim=1))


@declared(like=binomial_deviance_loss)
def binlifted_loss(
    S, labels, alpha, beta, margin, *, reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """BinLifted: the loss whose negative-pair weight is Wang et al. 2019, supplement Eq. 10.

    Anchor term::

        L_i = 1/(2 beta)  [ sum_{N_i} log(1 + e^{beta (S_ik - lambda)}) + log sum_{N_i} e^{beta S_ik} ]
            + 1/(2 alpha) [ sum_{P_i} log(1 + e^{alpha (lambda - S_ik)}) + log sum_{P_i} e^{-alpha S_ik} ]

    Parameters
    ----------
    alpha, beta : float
        Temperatures (> 0), as in binomial deviance (Eq. 9) and LiftedStruct* (Eq. 16).
    margin : float
        ``lambda``.
    reduction : {"mean", "sum", "none"}
        ``"sum"`` has gradient exactly supplement Eq. 10 on every negative pair; ``"mean"``
        averages over the anchors that have at least one pair (weights divided by that count;
        :func:`binlifted_weights`).

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
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    zero = torch.zeros_like(S)
    neg_soft = torch.where(neg, softplus(beta * (S - margin)), zero).sum(dim=1)
    pos_soft = torch.where(pos, softplus(alpha * (margin - S)), zero).sum(dim=1)
    neg_lse, has_neg = masked_logsumexp(beta * S, neg, dim=1)
    pos_lse, has_pos = masked_logsumexp(-alpha * S, pos, dim=1)
    per = (neg_soft + neg_lse) / (2 * beta) + (pos_soft + pos_lse) / (2 * alpha)
    return reduce(per, reduction, has_pos | has_neg)


@declared(like=binomial_deviance_loss)
def binomial_weights(
    S, labels, alpha, beta, margin, *, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """The GPW weights of Eq. 9 as Wang et al. 2019 print them, Eq. 10.

    ``w_ij^+ = (1/P_i) alpha e^{alpha (lambda - S_ij)} / (1 + e^{alpha (lambda - S_ij)})`` on a
    positive pair and ``w_ij^- = (1/N_i) beta e^{beta (S_ij - lambda)} / (1 + e^{beta (S_ij -
    lambda)})`` on a negative pair, 0 elsewhere; the fractions are sigmoids, computed as such (no
    overflow). Detached magnitudes: autograd of :func:`binomial_deviance_loss` with
    ``reduction="sum"`` is ``w^- - w^+`` (``tests/losses/test_binomial.py``).

    Returns
    -------
    w_pos, w_neg : Tensor of shape (B, B)
    """
    S, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    n_pos = pos.sum(dim=1, keepdim=True).clamp_min(1)
    n_neg = neg.sum(dim=1, keepdim=True).clamp_min(1)
    w_pos = alpha * torch.sigmoid(alpha * (margin - S)) / n_pos
    w_neg = beta * torch.sigmoid(beta * (S - margin)) / n_neg
    return torch.where(pos, w_pos, 0.0), torch.where(neg, w_neg, 0.0)


@declared(like=binomial_deviance_loss)
def binlifted_weights(
    S, labels, alpha, beta, margin, *, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """BinLifted's weights, Wang et al. 2019, supplement Eq. 10, and their positive analogue.

    ``w_ij^- = 1/2 (e^{beta (S_ij - lambda)} / (1 + e^{beta (S_ij - lambda)}) + e^{beta S_ij} /
    sum_{N_i} e^{beta S_ik})`` on a negative pair; on a positive pair the same with ``-alpha``
    and ``P_i`` (the paper's "analogously"; :func:`binlifted_loss`). A sigmoid and a soft-max
    (max-shifted), so nothing overflows. Detached magnitudes: autograd of
    :func:`binlifted_loss` with ``reduction="sum"`` is ``w^- - w^+``.

    Returns
    -------
    w_pos, w_neg : Tensor of shape (B, B)
    """
    S, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    w_pos = (torch.sigmoid(alpha * (margin - S)) + masked_softmax(-alpha * S, pos)) / 2
    w_neg = (torch.sigmoid(beta * (S - margin)) + masked_softmax(beta * S, neg)) / 2
    return torch.where(pos, w_pos, 0.0), torch.where(neg, w_neg, 0.0)


class BinomialDevianceLoss(PairLoss):
    """Module form of :func:`binomial_deviance_loss` (Wang et al. 2019, Eq. 9)."""

    loss_function = staticmethod(binomial_deviance_loss)


class BinLiftedLoss(BinomialDevianceLoss):
    """Module form of :func:`binlifted_loss` (Wang et al. 2019, supplement Eq. 10).

    Same hyper-parameters as :class:`BinomialDevianceLoss`.
    """

    loss_function = staticmethod(binlifted_loss)

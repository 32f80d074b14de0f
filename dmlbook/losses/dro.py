"""The DRO loss over all pairs of a batch (DRO paper, Eq. 1): its per-pair base losses and its
uncertainty sets.

``F = max_{p in U} sum_ij p_ij l_ij`` with ``l_ij`` a per-pair base loss (:func:`pair_losses`):
the DRO paper treats deep metric learning as binary classification of pairs (Sec. 3,
"Preliminaries"), and its tables use two base losses, the subscripts ``M`` and ``B``:

* margin (Wu et al. 2017; DRO Sec. 3.3): ``l_ij = [m + y_ij (lambda - S_ij)]_+``;
* binomial (Yi et al.; Wang et al. 2019, Eq. 9 per pair): ``log(1 + e^{alpha (lambda - S_ij)})``
  on a positive pair and ``log(1 + e^{beta (S_ij - lambda)})`` on a negative pair.

Erratum (named in ``book/12_dro.ipynb``, 12.1): the preliminaries define ``y_ij in {0, 1}``, but
the margin loss needs ``y_ij in {+1, -1}`` (the supplement's Eq. 19 writes ``y_ij = -1``): with
``y_ij = 0`` every negative pair would have the constant loss ``m`` and no gradient. Here ``+1``
is a positive pair and ``-1`` a negative one. Self-pairs: the paper's footnote 1 counts the
``B^2`` pairs including ``(i, i)``; dmlbook's label masks leave them out (for the margin loss
with ``m + lambda <= 1`` a self-pair has zero loss, so nothing changes once zero-loss pairs are
dropped; for the binomial loss it would add a constant-weight positive pair).

The uncertainty set ``U`` is one hyper-parameter, ``uncertainty``:

* ``"uniform"`` (Sec. 3, ``F_avg``): ``U = {1/n}``; the plain average the paper argues against;
* ``"simplex"`` (Sec. 3.1): ``U = Delta``; ``F = max_ij l_ij``, the maximal loss;
* ``"topk"`` (Sec. 3.2, DRO-TopK): ``0 <= p_ij <= 1/K``; ``F`` = sum of the ``K`` largest / K;
* ``"topk_pn"`` (Sec. 3.2, DRO-TopK-PN): the ``K/2`` largest positive and the ``K/2`` largest
  negative losses, averaged over ``K``;
* ``"kl"`` (Sec. 3.2, DRO-KL): ``max_p sum p l - gamma KL(p || 1/n)``, closed form
  ``F = gamma log((1/n) sum e^{l/gamma})``, ``p* = softmax(l / gamma)``;
* ``"chi2"`` (Sec. 3.1): ``D_phi(p || 1/n) <= rho/n`` with ``phi(t) = (t-1)^2/2``;
  ``p*_i`` proportional to ``[l_i - nu]_+``, solved exactly by sorting (:func:`chi2_weights`);
  when ``min_i l_i >= mean(l) - sqrt(n Var_n(l) / (2 rho))`` this is the paper's
  ``F = mean(l) + sqrt(2 rho Var_n(l) / n)``.

``n`` counts the candidate pairs: positives and negatives of the label masks, narrowed by any
miner's masks and, with ``drop_zero=True`` (the paper's Sec. 3.2: "we can simply eliminate" zero
losses), without the pairs whose loss is 0.

Lemma 1: where ``p*`` is unique and the losses smooth, ``dF/dS_ij = p*_ij dl_ij/dS_ij``. The
values below are written so that autograd gives exactly that gradient (top-K through
``torch.topk``, KL through a log-sum-exp, chi-square through the envelope theorem with ``p*``
held fixed, so chi-square refuses a second derivative: :mod:`dmlbook.losses.first_order`); :func:`dro_weights` returns ``p*`` and :func:`base_loss_slope` ``dl/dS``, which the
tests multiply and compare with autograd. The sampling variant of DRO-KL
(:func:`dmlbook.losses.dro_grouped.dro_kl_sampled_loss`) draws pairs from ``p*`` and averages
their losses: an unbiased estimate of that gradient.

Chapter: ``book/12_dro.ipynb`` (12.1-12.4). Proofs: :mod:`dmlbook.symbolic.dro`. Reference
loops: :mod:`dmlbook.reference.dro`. Tests: ``tests/losses/test_dro.py``,
``tests/symbolic/test_dro.py``.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch

from ..core.declaration import declared
from ..core.pairs import Mask, pair_sets, softplus
from ..core.validation import Count, Real, Scale
from .base import PairLoss
from .first_order import CHI2, first_order_only

__all__ = [
    "BASE_LOSSES",
    "UNCERTAINTY_SETS",
    "DROLoss",
    "base_loss_slope",
    "chi2_weights",
    "dro_candidates",
    "dro_loss",
    "dro_weights",
    "pair_losses",
]

#: The uncertainty sets of Eq. 1 this module implements.
Uncertainty = Literal["uniform", "simplex", "topk", "topk_pn", "kl", "chi2"]
UNCERTAINTY_SETS = get_args(Uncertainty)

#: The base losses of the paper's tables: ``"margin"`` (subscript M), ``"binomial"`` (B).
Base = Literal["margin", "binomial"]
BASE_LOSSES = get_args(Base)


# Defaults (the paper's): K = 160 is 2 B at the paper's B = 80 (Sec. 4.2.2; Table 1 tunes it in
# {160, 200, 240, 280}); gamma = 0.1 is the value of the runtime study (Sec. 4.2.4); margin =
# 0.2 and threshold = 0.5 are Table 2's m and lambda; alpha = 2, beta = 50 follow Wang et al.
# (the paper does not print the binomial slopes); rho = 1 is dmlbook's choice (Sec. 3.1 fixes
# no radius). dmlbook.losses.dro_grouped declares the same ones.


def even_k_for_topk_pn(uncertainty: str, K: int) -> None:
    """DRO-TopK-PN keeps ``K/2`` positive and ``K/2`` negative pairs."""
    if uncertainty == "topk_pn" and K % 2:
        raise ValueError(
            f"DRO-TopK-PN keeps K/2 positive and K/2 negative pairs, so K must be even; got K={K}."
        )


@declared
def pair_losses(
    S,
    pos: torch.Tensor,
    neg: torch.Tensor,
    base: Base = "margin",
    margin: Real = 0.2,
    threshold: Real = 0.5,
    alpha: Scale = 2.0,
    beta: Scale = 50.0,
) -> torch.Tensor:
    """The (B, B) matrix of per-pair losses ``l_ij``; 0 (with gradient 0) off ``pos | neg``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities.
    pos, neg : bool Tensor of shape (B, B)
        The positive (``y_ij = +1``) and negative (``y_ij = -1``) pairs.
    base : {"margin", "binomial"}
        ``"margin"``: ``[m + y_ij (lambda - S_ij)]_+`` (DRO Sec. 3.3, Eq. 19);
        ``"binomial"``: ``softplus(alpha (lambda - S_ij))`` on positives,
        ``softplus(beta (S_ij - lambda))`` on negatives (Wang et al. 2019, Eq. 9, one pair).
    margin : float
        ``m`` of the margin loss (the paper's Table 2 uses 0.2); unused by the binomial loss.
    threshold : float
        ``lambda``, the similarity both losses bend at (0.5 in Table 2).
    alpha, beta : float
        Slopes of the binomial loss (> 0); unused by the margin loss.

    Returns
    -------
    Tensor of shape (B, B)
    """
    pair = pos | neg
    if base == "margin":  # one hinge for both signs: y (lambda - S) with y = +1 / -1
        t = threshold - S
        return torch.where(pair, torch.relu(margin + torch.where(pos, t, -t)), 0.0)
    lp = softplus(alpha * (threshold - S))
    ln = softplus(beta * (S - threshold))
    return torch.where(pos, lp, torch.where(neg, ln, 0.0))


@declared(like=pair_losses)
def base_loss_slope(S, pos, neg, base, margin, threshold, alpha, beta) -> torch.Tensor:
    """``dl_ij / dS_ij`` in closed form (no autograd): what Lemma 1 multiplies by ``p*_ij``.

    Margin loss: ``-y_ij`` where the hinge is open (``l_ij > 0``), else 0. Binomial loss:
    ``-alpha sigma(alpha (lambda - S_ij))`` on a positive pair, ``beta sigma(beta (S_ij - lambda))``
    on a negative one. Zero off ``pos | neg``. The tests compare autograd of every DRO loss with
    ``p* * base_loss_slope`` (``tests/losses/test_dro.py``).
    """
    zero = torch.zeros_like(S)
    if base == "margin":
        t = threshold - S  # the same rounding as pair_losses
        sp = torch.where(margin + t > 0, -torch.ones_like(S), zero)
        sn = torch.where(margin + (-t) > 0, torch.ones_like(S), zero)
    else:
        sp = -alpha * torch.sigmoid(alpha * (threshold - S))
        sn = beta * torch.sigmoid(beta * (S - threshold))
    return torch.where(pos, sp, torch.where(neg, sn, zero))


def dro_candidates(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_mask: Mask,
    neg_mask: Mask,
    drop_zero: bool,
    **base_loss: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(l, candidates, pos, neg)``: per-pair losses, the pairs ``p`` lives on, the label masks.

    ``base_loss`` are :func:`pair_losses`' settings. ``pos`` and ``neg`` are the (narrowed)
    label masks, not intersected with the candidates. ``l`` is 0 off ``pos | neg``, so with
    ``drop_zero`` the candidates are just ``l > 0``. Half precision is computed in float32.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    l = pair_losses(S, pos, neg, **base_loss)
    cand = l.detach() > 0 if drop_zero else pos | neg
    return l, cand, pos, neg


def _topk_sum(l: torch.Tensor, cand: torch.Tensor, k: int) -> torch.Tensor:
    """Sum of the ``k`` largest ``l`` among ``cand`` (all of them if fewer).

    Non-candidates enter as 0 (no gradient): the losses are >= 0, so a 0 picked in place of a
    missing candidate adds nothing, and no count is needed.
    """
    flat = torch.where(cand, l, 0.0).reshape(-1)
    return flat.topk(min(k, flat.numel())).values.sum()


def chi2_weights(losses: torch.Tensor, rho: float) -> torch.Tensor:
    """``p*`` of ``max {p.l : p in Delta, (1/n) sum (n p_i - 1)^2 / 2 <= rho / n}`` (Sec. 3.1).

    KKT: ``p_i = [l_i - nu]_+ / sum_k [l_k - nu]_+`` with the ball's constraint tight,
    ``n sum p_i^2 = c = 1 + 2 rho / n``. With the ``k`` largest losses in the support, mean
    ``mu_k`` and variance ``V_k``, tightness gives ``nu = mu_k - sqrt(n V_k / (c k - n))``; the
    right ``k`` is the one whose ``nu`` lies in ``[l_(k+1), l_(k))``. If the max-loss vertex is
    inside the ball (``c >= n / #argmax``) or all losses are equal, ``p*`` is uniform on the
    argmax set (for equal losses, every ``p`` is optimal; the uniform one is returned).

    Parameters
    ----------
    losses : Tensor of shape (n,), n >= 1
    rho : float

    Returns
    -------
    Tensor of shape (n,), detached, in ``losses``' dtype (solved in float64).
    """
    l = losses.detach().double()  # a sort and cumulative sums over n numbers: float64 is cheap
    n = l.numel()
    c = 1.0 + 2.0 * rho / n
    top = l.max()
    ties = l >= top
    if c * int(ties.sum()) >= n or bool((l == top).all()):
        return (ties.double() / ties.sum()).to(losses.dtype)
    order = torch.sort(l, descending=True)
    v = order.values - top
    k = torch.arange(1, n + 1, dtype=l.dtype, device=l.device)
    mu = v.cumsum(0) / k
    var = ((v * v).cumsum(0) / k - mu * mu).clamp_min(0)
    slack = c * k - n
    t = torch.sqrt(n * var / slack.clamp_min(1e-300))
    nu = mu - t
    nxt = torch.cat([v[1:], v.new_tensor([-math.inf])])
    ok = (slack > 0) & (nu >= nxt) & (nu <= v)
    kk = int(torch.nonzero(ok)[0]) if bool(ok.any()) else n - 1
    w = (v - nu[kk]).clamp_min(0)
    w[kk + 1 :] = 0
    p = torch.empty_like(l)
    p[order.indices] = w / w.sum()
    return p.to(losses.dtype)


@declared(rules=(even_k_for_topk_pn,))
def dro_loss(
    S,
    labels,
    uncertainty: Uncertainty = "topk",
    base: Base = "margin",
    K: Count = 160,
    gamma: Scale = 0.1,
    rho: Scale = 1.0,
    margin: Real = 0.2,
    threshold: Real = 0.5,
    alpha: Scale = 2.0,
    beta: Scale = 50.0,
    *,
    drop_zero: bool = True,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """The robust loss ``F`` of Eq. 1 for one uncertainty set (a scalar).

    Parameters
    ----------
    uncertainty : {"uniform", "simplex", "topk", "topk_pn", "kl", "chi2"}
        The set ``U`` (see the module docstring).
    base : {"margin", "binomial"}
        The per-pair loss (:func:`pair_losses`).
    K : int
        Pairs kept by top-K (even for TopK-PN). With fewer candidates than ``K`` (or ``K/2`` of
        a sign) all of them count, each with weight ``1/K``: the optimum over ``sum p <= 1``,
        which is Eq. 1's top-K set whenever it is feasible (``K <= n``).
    gamma : float
        KL temperature (> 0): ``gamma -> 0`` gives the maximal loss, ``gamma -> inf`` the mean.
    rho : float
        Chi-square radius (> 0).
    margin, threshold, alpha, beta : float
        The base loss's ``m``, ``lambda``, ``alpha``, ``beta``.
    drop_zero : bool
        Remove pairs with zero loss from the candidates (Sec. 3.2).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Narrow the pairs (e.g. from a miner).

    Returns
    -------
    Tensor
        ``F``; 0 with gradient 0 when there is no candidate pair.

    Notes
    -----
    DRO-TopK-PN is printed (Sec. 3.2) as a 0/1 programme whose value is the *sum* of the kept
    losses; the paper's implementation averages them ("compute averaged gradient"), which is
    the value here (``1/K`` times the printed one). Its LP relaxation over ``[0, 1/K]`` has the
    same optimum (the constraint matrix is an interval matrix, totally unimodular).
    """
    base_loss = dict(base=base, margin=margin, threshold=threshold, alpha=alpha, beta=beta)
    drop = drop_zero and uncertainty not in ("topk", "topk_pn")  # top-K: no need, zeros add 0
    l, cand, pos, neg = dro_candidates(S, labels, pos_mask, neg_mask, drop, **base_loss)
    if uncertainty == "topk":
        return _topk_sum(l, pos | neg, K) / K
    if uncertainty == "topk_pn":
        return (_topk_sum(l, pos, K // 2) + _topk_sum(l, neg, K // 2)) / K
    n = int(cand.sum())
    if n == 0:
        return (S * 0).sum()
    if uncertainty == "kl":
        z = torch.where(cand, l / gamma, torch.full_like(l, -math.inf)).reshape(-1)
        return gamma * (torch.logsumexp(z, 0) - math.log(n))
    if uncertainty == "uniform":
        return torch.where(cand, l, torch.zeros_like(l)).sum() / n
    if uncertainty == "simplex":
        return torch.where(cand, l, torch.full_like(l, -math.inf)).amax()
    p = torch.zeros_like(l)
    p[cand] = chi2_weights(l[cand], rho)
    return (p * first_order_only(l, CHI2)).sum()  # p* held fixed: no second derivative


@declared(like=dro_loss)
def dro_weights(
    S,
    labels,
    uncertainty,
    base,
    K,
    gamma,
    rho,
    margin,
    threshold,
    alpha,
    beta,
    *,
    drop_zero,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """The optimal distribution ``p*`` of Eq. 1 as a (B, B) matrix (detached; 0 off candidates).

    Closed forms: uniform, ``1/n`` on every candidate; simplex, uniform on the argmax;
    top-K, ``1/K`` on the ``K`` largest;
    TopK-PN, ``1/K`` on the ``K/2`` largest of each sign; KL, ``softmax(l / gamma)``
    (Namkoong and Duchi 2016); chi-square, :func:`chi2_weights`. For top-K with fewer than ``K``
    candidates every candidate gets ``1/K`` (the set ``sum p <= 1``, see :func:`dro_loss`).
    Parameters as :func:`dro_loss`.
    """
    base_loss = dict(base=base, margin=margin, threshold=threshold, alpha=alpha, beta=beta)
    l, cand, pos, neg = dro_candidates(S, labels, pos_mask, neg_mask, drop_zero, **base_loss)
    l = l.detach()
    p = torch.zeros_like(l)
    if not bool(cand.any()):
        return p
    if uncertainty == "kl":
        z = torch.where(cand, l / gamma, torch.full_like(l, -math.inf))
        return torch.softmax(z.reshape(-1), 0).reshape(l.shape)
    if uncertainty == "chi2":
        p[cand] = chi2_weights(l[cand], rho)
        return p
    if uncertainty == "uniform":
        return cand.to(l.dtype) / cand.sum()
    if uncertainty == "simplex":
        top = l[cand].max()
        ties = cand & (l == top)
        return ties.to(l.dtype) / ties.sum()
    if uncertainty == "topk":
        groups = [(cand, K)]
    else:
        groups = [(pos & cand, K // 2), (neg & cand, K // 2)]
    flat = p.reshape(-1)
    for group, k in groups:
        k = min(k, int(group.sum()))
        if k:
            idx = torch.where(group, l, torch.full_like(l, -math.inf)).reshape(-1).topk(k).indices
            flat[idx] = 1.0 / K
    return p


class DROLoss(PairLoss):
    """Module form of :func:`dro_loss` (Eq. 1); registered as ``"dro"``.

    ``get_loss("dro", uncertainty="topk_pn", K=160)`` is DRO-TopK-PN_M of Table 1.
    """

    loss_function = staticmethod(dro_loss)

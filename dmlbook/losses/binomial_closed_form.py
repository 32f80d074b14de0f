"""The fused closed form of the per-anchor softplus and log-sum-exp losses of Table 2.

One pass computes the anchor terms and ``d L_i / dS_ij`` of binomial deviance (Wang et al. 2019,
Eq. 9, whose weights are Eq. 10), LiftedStruct* (Eq. 16) and BinLifted (supplement Eq. 10): each
anchor term is

    L_i = c^-_i sum_{N_i} softplus(beta (S_ik - lambda)) + (t / beta) log sum_{N_i} e^{beta S_ik}
        + c^+_i sum_{P_i} softplus(alpha (lambda - S_ik)) + (t / alpha) log sum_{P_i} e^{-alpha S_ik}

with ``c^-_i = 1/|N_i|``, ``c^+_i = 1/|P_i|``, ``t = 0`` (binomial), ``c = 0``, ``t = 1``
(LiftedStruct*) and ``c^- = 1/(2 beta)``, ``c^+ = 1/(2 alpha)``, ``t = 1/2`` (BinLifted); an empty
set's terms are 0. Its weights are sigmoids of the pair's own similarity (Similarity-S) plus
soft-max weights within the anchor's set (Similarity-N):

    dL_i/dS_ij = c^-_i beta sigma(beta (S_ij - lambda)) + t e^{beta S_ij} / sum_{N_i} e^{beta S_ik}

on a negative, and minus the ``alpha`` analogue on a positive.

This is the fast path (``backward="closed_form"``, the default) of
:func:`dmlbook.losses.binomial_deviance_loss`, :func:`dmlbook.losses.binlifted_loss` and
:func:`dmlbook.losses.lifted_star_loss`; their modules document the semantics, and
``tests/losses/test_closed_forms.py`` tests it against their autograd paths and the loops of
:mod:`dmlbook.reference.classic`. Up to ``DENSE_CORE_UP_TO`` samples (the MS core's switch) both
halves are one dense ``(2, B, B)`` stack, so that each call serves both
(``tests/losses/test_binomial_closed_form.py`` checks that the two agree). Above it, as in
:mod:`dmlbook.losses.lifted_closed_form`, positives are index lists and negatives one ``B x B``
buffer (the exponent ``beta (S - lambda)``, ``-inf`` at
the positives and self, then the weights), without a data-dependent ``torch.where``. The
soft-max is shift-invariant, so it is taken on ``beta (S - lambda)`` and the log-sum-exp of
``beta S`` is that of ``beta (S - lambda)`` plus ``beta lambda``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..pairs import resolve_masks, softplus
from . import ms_closed_form
from .lifted_closed_form import Pairs, candidates

__all__ = ["PairSumTerms", "pair_sum_core"]


@dataclass(frozen=True)
class PairSumTerms:
    """Which terms an anchor sums (see the module docstring).

    Attributes
    ----------
    softplus : {"mean", "half", "none"}
        ``"mean"``: ``c^-_i = 1/|N_i|``, ``c^+_i = 1/|P_i|`` (binomial); ``"half"``:
        ``1/(2 beta)``, ``1/(2 alpha)`` (BinLifted); ``"none"``: no softplus terms.
    lse : float
        ``t``, the factor of the log-sum-exp terms (0, 1/2 or 1).
    """

    softplus: str
    lse: float


def _softmax_rows(
    x: torch.Tensor, lse_shift: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(log sum_k e^{x_ik} + lse_shift, has, soft-max weights)`` of rows with ``-inf`` outside."""
    m = x.amax(dim=1)
    has = m > float("-inf")
    m = torch.where(has, m, torch.zeros_like(m))
    e = (x - m[:, None]).exp_()
    total = e.sum(dim=1)
    lse = torch.where(has, m + total.log() + lse_shift, torch.zeros_like(m))
    return lse, has, e.mul_(torch.where(has, total.reciprocal(), torch.zeros_like(m))[:, None])


def _softmax_pairs(
    v: torch.Tensor, rows: torch.Tensor, B: int, lse_shift: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same over index lists: ``(log-sum-exp per row, weight of each pair)``."""
    m = v.new_full((B,), float("-inf")).scatter_reduce_(0, rows, v, "amax")
    has = m > float("-inf")
    m = torch.where(has, m, torch.zeros_like(m))
    e = (v - m[rows]).exp_()
    total = v.new_zeros(B).index_add_(0, rows, e)
    lse = torch.where(has, m + total.log() + lse_shift, torch.zeros_like(m))
    return lse, e.div_(total[rows])


def _counts(
    y: torch.Tensor, rows: torch.Tensor, neg: torch.Tensor | None, B: int
) -> tuple[torch.Tensor, torch.Tensor]:
    n_pos = torch.bincount(rows, minlength=B)
    n_neg = B - 1 - n_pos if neg is None else neg.sum(dim=1)
    return n_pos, n_neg


def _scales(
    terms: PairSumTerms, n: torch.Tensor, temperature: float, dtype: torch.dtype
) -> torch.Tensor | float:
    if terms.softplus == "mean":
        return 1.0 / n.clamp_min(1).to(dtype)
    return 1.0 / (2 * temperature) if terms.softplus == "half" else 0.0


def pair_sum_core(
    s: torch.Tensor,
    y: torch.Tensor,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
    alpha: float,
    beta: float,
    margin: float,
    terms: PairSumTerms,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The anchor terms, which anchors have a pair, and ``dL_i/dS_ij``, on detached ``s``.

    Up to :data:`~dmlbook.losses.ms_closed_form.DENSE_CORE_UP_TO` samples both halves are dense
    (:func:`_pair_sum_core_dense`); above, positives are index lists.
    """
    B = s.shape[0]
    if B <= ms_closed_form.DENSE_CORE_UP_TO:
        pos, neg = masks if masks is not None else resolve_masks(y, None, None, (B, B))
        return _pair_sum_core_dense(s, pos, neg, alpha, beta, margin, terms)
    pairs, neg = candidates(y, masks)
    rows, cols = pairs
    n_pos, n_neg = _counts(y, rows, neg, B)
    # negatives: x = beta (S - lambda), -inf outside N_i (softplus, sigmoid and exp give 0 there)
    x = torch.sub(s, margin).mul_(beta)
    _exclude(x, pairs, neg)
    c_n = _scales(terms, n_neg, beta, s.dtype)
    per = torch.zeros(B, dtype=s.dtype, device=s.device)
    W = None
    if terms.lse:
        lse_n, _, W = _softmax_rows(x, beta * margin)
        per.add_(lse_n, alpha=terms.lse / beta)
        W.mul_(terms.lse)
    if terms.softplus != "none":
        per.add_(softplus(x).sum(dim=1).mul_(c_n))
        sig = x.sigmoid_()
        c = c_n * beta
        coef = c[:, None] if isinstance(c, torch.Tensor) else c
        W = sig.mul_(coef) if W is None else W.addcmul_(sig, torch.as_tensor(coef, dtype=s.dtype))
    # positives, as index lists: z = alpha (lambda - S)
    z = torch.rsub(s[rows, cols], margin).mul_(alpha)
    c_p = _scales(terms, n_pos, alpha, s.dtype)
    w_pos = torch.zeros_like(z)
    if terms.lse:
        lse_p, soft = _softmax_pairs(z, rows, B, -alpha * margin)
        per.add_(lse_p, alpha=terms.lse / alpha)
        w_pos.add_(soft, alpha=terms.lse)
    if terms.softplus != "none":
        c_row = c_p[rows] if isinstance(c_p, torch.Tensor) else c_p
        per.index_add_(0, rows, softplus(z) * c_row)
        w_pos.add_(z.sigmoid() * c_row * alpha)
    W[pairs] = -w_pos
    return per, (n_pos > 0) | (n_neg > 0), W


def _pair_sum_core_dense(
    s: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    alpha: float,
    beta: float,
    margin: float,
    terms: PairSumTerms,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`pair_sum_core` with both halves in one dense ``(2, B, B)`` stack: fewer calls.

    Slice 0 holds the negatives' exponents ``beta (S - lambda)``, slice 1 the positives'
    ``alpha (lambda - S)``, ``-inf`` outside each set; every operation then serves both halves
    at once (for a small batch the number of calls, not their arithmetic, sets the time).
    """
    X = torch.stack([s, s]).sub_(margin).mul_(s.new_tensor([[[beta]], [[-alpha]]]))
    X.masked_fill_(torch.stack([neg, pos]).logical_not_(), float("-inf"))
    n = torch.stack([neg.sum(dim=1), pos.sum(dim=1)])  # (2, B): |N_i|, |P_i|
    temperature = s.new_tensor([[beta], [alpha]])
    per = s.new_zeros(2, s.shape[0])
    W = None
    if terms.lse:  # (t / temperature) log sum e^{X}, shifted back by +-temperature lambda
        m = X.amax(dim=2, keepdim=True)
        has = m > float("-inf")
        m.masked_fill_(has.logical_not(), 0.0)
        e = (X - m).exp_()
        total = e.sum(dim=2, keepdim=True)
        lse = (m + total.log())[..., 0].add_(s.new_tensor([[beta * margin], [-alpha * margin]]))
        per.add_(torch.where(has[..., 0], lse.div_(temperature), 0.0), alpha=terms.lse)
        W = e.div_(total.clamp_min_(1.0)).mul_(terms.lse)  # total >= 1 (e^0) where not empty
    if terms.softplus != "none":
        if terms.softplus == "mean":
            c = n.clamp_min(1).to(s.dtype).reciprocal_()  # 1/|N_i|, 1/|P_i|
        else:
            c = (0.5 / temperature).expand_as(per)  # 1/(2 beta), 1/(2 alpha)
        per.addcmul_(softplus(X).sum(dim=2), c)
        sig = X.sigmoid_().mul_((c * temperature)[..., None])
        W = sig if W is None else W.add_(sig)
    return per.sum(dim=0), (n > 0).any(dim=0), W[0].sub_(W[1])


def _exclude(x: torch.Tensor, pairs: Pairs, neg: torch.Tensor | None) -> None:
    """``-inf`` outside the negatives: at the positive pairs and self, or where ``neg`` is False."""
    if neg is None:
        x[pairs] = float("-inf")
        x.fill_diagonal_(float("-inf"))
    else:
        x.masked_fill_(neg.logical_not(), float("-inf"))

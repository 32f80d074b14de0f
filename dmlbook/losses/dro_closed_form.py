"""The DRO losses' fast paths: each value and Lemma 1's gradient in one pass, without autograd.

Lemma 1 of the DRO paper: where ``p*`` is unique and the losses smooth, ``dF/dS_ij = p*_ij
dl_ij/dS_ij``. The functions here compute the per-pair losses ``l`` and their slopes
``dl/dS`` in closed form (:func:`losses_and_slopes`, on the masks as 0/1 numbers), then
``F`` and ``p*`` of one uncertainty set, and return ``F`` with ``p* dl/dS`` attached as its
gradient (one ``B x B`` tensor saved, no graph through the ``B x B`` losses):

* DRO-TopK and DRO-TopK-PN (:func:`topk_value`): the same ``torch.topk`` calls on the same
  numbers as :func:`dmlbook.losses.dro.dro_loss`, so the same pairs are kept;
* DRO-KL (:func:`kl_value`): ``F = gamma (c + log sum e^{l/gamma - c} - log n)`` with ``c`` the
  largest ``l / gamma``, ``p* = softmax(l / gamma)``;
* DRO-KL-G (:func:`grouped_kl_rows`, Eq. 7 and the pseudo pairs of Eq. 23): the same per
  anchor and sign, shifted by each group's largest ``l / gamma``.

They are the ``backward="closed_form"`` paths of :func:`dmlbook.losses.dro.dro_loss` and
:func:`dmlbook.losses.dro_grouped.dro_kl_grouped_loss` (the default); ``backward="autograd"``
is the readable form that ``book/12_dro.ipynb`` prints. Values and gradients agree to rounding:
``tests/losses/test_dro_closed_form.py`` (float64, against the autograd paths and the loops of
:mod:`dmlbook.reference.dro`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from ..pairs import check_choice, check_positive, check_similarity, resolve_masks, softplus
from .closed_form import attach, fold_reduction
from .pair_losses import BASE_LOSSES

if TYPE_CHECKING:  # annotations only (dro and dro_grouped import this module)
    from .dro import DROHyperParameters
    from .dro_grouped import DROGroupedHyperParameters

__all__ = [
    "dro_grouped_value",
    "dro_value",
    "grouped_kl_rows",
    "kl_value",
    "losses_and_slopes",
    "topk_value",
]


def _as_float(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool mask as 0/1 numbers (through ``uint8``: a bool to float conversion is slow on CPU)."""
    return mask.view(torch.uint8).to(dtype)


def losses_and_slopes(
    S: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    base: str,
    margin: float,
    threshold: float,
    alpha: float,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Detached ``l`` (the numbers of :func:`dmlbook.losses.pair_losses.pair_losses`) and ``dl/dS``.

    Margin: ``l = [m + y (lambda - S)]_+`` with ``y = pos - neg`` (``t * 1 = t``, ``t * (-1) =
    -t``: the same rounding as ``pair_losses``' ``where``), slope ``-y`` where ``l > 0``.
    Binomial: ``softplus`` on each sign, slopes ``-alpha sigma(alpha (lambda - S))`` and ``beta
    sigma(beta (S - lambda))`` (:func:`dmlbook.losses.pair_losses.base_loss_slope`). Both 0 off
    ``pos | neg``; ``l >= 0`` everywhere.
    """
    check_choice(base, BASE_LOSSES, "base")
    S = S.detach()
    p, n = _as_float(pos, S.dtype), _as_float(neg, S.dtype)
    if base == "margin":
        y = p - n
        l = (threshold - S).mul_(y).add_(margin).clamp_min_(0.0).mul_(p.add_(n))
        return l, torch.gt(l, 0.0, out=torch.empty_like(l)).mul_(y).neg_()
    up = (threshold - S).mul_(check_positive(alpha, "alpha"))
    un = (S - threshold).mul_(check_positive(beta, "beta"))
    l = softplus(up).mul_(p).add_(softplus(un).mul_(n))
    slope = up.sigmoid_().mul_(-alpha).mul_(p).add_(un.sigmoid_().mul_(beta).mul_(n))
    return l, slope


def _topk_part(l, mask, k: int):
    """The ``k`` largest of ``l * mask`` (flat): their sum and flat indices."""
    top = (l * mask).reshape(-1).topk(min(k, l.numel()))
    return top.values.sum(), top.indices


def topk_value(
    S: torch.Tensor,
    l: torch.Tensor,
    slope: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    K: int,
    per_sign: bool,
) -> torch.Tensor:
    """DRO-TopK (``per_sign=False``) or DRO-TopK-PN: ``F`` with ``dF/dS = dl/dS / K`` on the kept.

    Non-candidates enter as 0 (``l >= 0``), as in :func:`dmlbook.losses.dro.dro_loss`; a 0 kept
    in place of a missing candidate gets no gradient (its slope is masked).
    """
    p, n = _as_float(pos, l.dtype), _as_float(neg, l.dtype)
    groups = [(p, K // 2), (n, K // 2)] if per_sign else [(p + n, K)]
    G = torch.zeros_like(l).reshape(-1)
    value = l.new_zeros(())
    for mask, k in groups:
        total, idx = _topk_part(l, mask, k)
        value = value + total
        G.index_add_(0, idx, (slope * mask).reshape(-1)[idx])
    return attach(S, value / K, G.reshape(l.shape).div_(K))


def kl_value(
    S: torch.Tensor, l: torch.Tensor, slope: torch.Tensor, cand: torch.Tensor, gamma: float
) -> torch.Tensor:
    """DRO-KL, ``F = gamma log((1/n) sum_cand e^{l/gamma})``, with ``dF/dS = p* dl/dS``.

    ``l >= 0`` and ``l = 0`` off the pairs, so the largest ``l / gamma`` over the candidates is
    the overall one (the candidates are the pairs, or those with ``l > 0``). 0 with gradient 0
    when there is no candidate.
    """
    c = _as_float(cand, l.dtype)
    n = int(c.sum())
    if n == 0:
        return (S * 0).sum()
    z = l / gamma
    top = z.amax()
    e = z.sub_(top).exp_().mul_(c)
    total = e.sum()
    value = gamma * (top + total.log() - math.log(n))
    return attach(S, value, e.div_(total).mul_(slope))


def _group(l, mask, gamma: float, pseudo: float | None):
    """One sign of Eq. 7 per anchor: ``(F_i, p*)``; an empty group gives 0 (pseudo: ``l_0``)."""
    count = mask.sum(dim=1, keepdim=True)
    c = (l * mask).amax(dim=1, keepdim=True).div_(gamma)  # l >= 0: the group's largest l/gamma
    if pseudo is not None:
        c = c.masked_fill_(count == 0, -math.inf).clamp_min_(pseudo / gamma)
        count = count + 1
    e = (l / gamma).sub_(c).clamp_max_(0.0).exp_().mul_(mask)
    total = e.sum(dim=1, keepdim=True)
    if pseudo is not None:
        total += (pseudo / gamma - c).exp_()
    value = (c + total.log() - count.clamp_min(1.0).log()).mul_(gamma)
    value = value.masked_fill_(count == 0, 0.0)[:, 0]
    return value, e.div_(total.clamp_min(torch.finfo(l.dtype).tiny))


def grouped_kl_rows(
    l: torch.Tensor,
    slope: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    gamma_pos: float,
    gamma_neg: float,
    pseudo_loss: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DRO-KL-G per anchor (Eq. 7; Eq. 23 with ``pseudo_loss`` not None) and Lemma 1's
    gradient: ``(L_i, G)`` with ``G[i] = dL_i/dS_i.``.

    ``pos``, ``neg``: the groups (bool, zero-loss pairs already removed if asked).
    """
    p, n = _as_float(pos, l.dtype), _as_float(neg, l.dtype)
    v_pos, w_pos = _group(l, p, gamma_pos, pseudo_loss)
    v_neg, w_neg = _group(l, n, gamma_neg, pseudo_loss)
    return v_pos + v_neg, w_pos.add_(w_neg).mul_(slope)


def dro_value(
    S: torch.Tensor,
    labels: torch.Tensor,
    hp: DROHyperParameters,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`dmlbook.losses.dro.dro_loss` for ``hp.uncertainty`` in topk, topk_pn, kl (fast path).

    ``hp`` is a :class:`dmlbook.losses.dro.DROHyperParameters`.
    """
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    args = (hp.base, hp.margin, hp.threshold, hp.alpha, hp.beta)
    l, slope = losses_and_slopes(S, pos, neg, *args)
    if hp.uncertainty == "kl":
        cand = l > 0 if hp.drop_zero else pos | neg
        return kl_value(S, l, slope, cand, hp.gamma).to(S.dtype)
    return topk_value(S, l, slope, pos, neg, hp.K, hp.uncertainty == "topk_pn").to(S.dtype)


def dro_grouped_value(
    S: torch.Tensor,
    labels: torch.Tensor,
    hp: DROGroupedHyperParameters,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`dmlbook.losses.dro_grouped.dro_kl_grouped_loss` (fast path), reduced.

    ``hp`` is a :class:`dmlbook.losses.dro_grouped.DROGroupedHyperParameters`.
    """
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    l, slope = losses_and_slopes(S, pos, neg, hp.base, hp.margin, hp.threshold, hp.alpha, hp.beta)
    if hp.drop_zero:
        kept = l > 0
        pos, neg = pos & kept, neg & kept
    pseudo = hp.pseudo_loss if hp.pseudo_pairs else None
    rows, G = grouped_kl_rows(l, slope, pos, neg, hp.gamma_pos, hp.gamma_neg, pseudo)
    valid = pos.any(dim=1) | neg.any(dim=1)
    return attach(S, *fold_reduction(rows, G, hp.reduction, valid)).to(S.dtype)

"""The fused closed forms of the contrastive losses: value and ``dL/dS`` in one pass.

The fast path (``backward="closed_form"``, the default) of
:func:`dmlbook.losses.contrastive_loss` (Wang et al. 2019, Eq. 4) and
:func:`dmlbook.losses.contrastive_distance_loss` (Liu et al., Eq. 11, 35, 36), whose modules
document the semantics; ``tests/losses/test_closed_forms.py`` tests them against their autograd
paths and the loops of :mod:`dmlbook.reference.classic`.

Every pair's term depends on its own ``S_ij`` only, so ``dL/dS`` is a matrix of per-pair slopes:
for Eq. 4, ``-1/n`` on a kept positive and ``1/n`` on a kept negative with ``S_ij > lambda``
(``n`` the number of kept pairs); for the distance forms the hinge's slope (``1``, or ``2 [.]_+``
squared) times ``dd/dS`` (``-1/D``, 0 where :func:`~dmlbook.pairs.safe_distance` returns 0, or
``-2`` for ``D^2``). As in :mod:`dmlbook.losses.lifted_closed_form`, positives are index lists
and negatives one ``B x B`` buffer (the hinge, then its slope, then ``dL/dS``); the positives
and self are zeroed at their indices, not with a ``B x B`` mask and ``torch.where``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .lifted_closed_form import Pairs, candidates

__all__ = ["contrastive_core", "contrastive_distance_core"]


def _drop_non_negatives(x: torch.Tensor, pairs: Pairs, neg: torch.Tensor | None) -> torch.Tensor:
    """Zero ``x`` at the positive pairs and self (``neg is None``) or outside ``neg``."""
    if neg is None:
        x[pairs] = 0.0
        return x.fill_diagonal_(0.0)
    return x.mul_(neg)


def _n_pairs(y: torch.Tensor, masks: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """The number of kept ordered pairs (every ``i != j`` for the label masks)."""
    B = y.shape[0]
    if masks is None:
        return torch.tensor(float(B * (B - 1)), dtype=torch.float64, device=y.device)
    return (masks[0] | masks[1]).sum().to(torch.float64)


def contrastive_core(
    s: torch.Tensor, y: torch.Tensor, masks: tuple[torch.Tensor, torch.Tensor] | None, margin: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 4's mean over the kept pairs, and ``dL/dS``, on detached ``s``."""
    pairs, neg = candidates(y, masks)
    h = torch.sub(s, margin).clamp_min_(0.0)  # [S - lambda]_+ (relu's arithmetic)
    _drop_non_negatives(h, pairs, neg)
    n = _n_pairs(y, masks).clamp_min(1.0).to(s.dtype)
    value = (h.sum() - s[pairs].sum()) / n
    W = h.sign_()  # relu's slope: 1 where S - lambda > 0
    W[pairs] = -1.0
    return value, W.div_(n)


def _distance(s: torch.Tensor, squared: bool) -> torch.Tensor:
    """``D^2 = 2 - 2 S`` or ``D`` as :func:`~dmlbook.pairs.safe_distance` (0 below eps)."""
    sq = torch.rsub(s, 2.0, alpha=2.0)  # 2 - 2 S in one kernel (2 S is exact)
    if squared:
        return sq
    return F.threshold_(sq, torch.finfo(s.dtype).eps, 0.0).sqrt_()


def contrastive_distance_core(
    s: torch.Tensor,
    y: torch.Tensor,
    masks: tuple[torch.Tensor, torch.Tensor] | None,
    pos_margin: float,
    neg_margin: float,
    variant: str,
    reduction: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Liu et al.'s Eq. 11/35/36, reduced (or the (B, B) terms), and ``d result / dS``."""
    pairs, neg = candidates(y, masks)
    squared_d, squared_hinge = variant == "squared_distance", variant == "squared_hinge"
    d = _distance(s, squared_d)
    d_pos = d[pairs]
    h = torch.rsub(d, neg_margin).clamp_min_(0.0)  # [m2 - d]_+ on every pair
    _drop_non_negatives(h, pairs, neg)
    h_pos = (d_pos - pos_margin).clamp_min_(0.0)  # [d - m1]_+ on the positives
    # g: the hinge's slope, d term / d d = -g on a negative and +g on a positive
    if squared_hinge:
        terms, pos_terms = h.square(), h_pos.square()
        g, g_pos = h.mul_(2.0), h_pos.mul(2.0)
    else:
        terms, pos_terms = h, h_pos
        g, g_pos = h.sign(), h_pos.sign()
    # times d d / d S: -2 for D^2, -1/D for D (0 where D = 0, as safe_distance's gradient)
    if squared_d:
        W, w_pos = g.mul_(2.0), g_pos * -2.0
    else:
        W = g.div_(d).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        w_pos = torch.where(d_pos > 0, -g_pos / d_pos, 0.0)
    W[pairs] = w_pos
    if reduction == "none":
        terms[pairs] = pos_terms
        return terms, W
    total = terms.sum() + pos_terms.sum()
    if reduction == "sum":
        return total, W
    n = _n_pairs(y, masks).clamp_min(1.0).to(s.dtype)
    return total / n, W.div_(n)

"""Circle loss (Sun et al. 2020), the Circle row of Xuan & Pless's Table 1.

Chapter: ``book/13_gradient_surgery.ipynb`` (13.3 "Table 1, row by row"). Proof: the Circle row in
:mod:`dmlbook.symbolic.gradient_surgery`. Tests: ``tests/losses/test_circle.py``.

For an anchor with positives ``s_p`` and negatives ``s_n`` (cosine similarities), Circle loss is

    L = log[1 + sum_n sum_p exp(gamma (a_n (s_n - D_n) - a_p (s_p - D_p)))]
      = softplus(LSE_n gamma a_n (s_n - D_n) + LSE_p -gamma a_p (s_p - D_p)),

with ``a_p = [1 + m - s_p]_+``, ``a_n = [s_n + m]_+``, ``D_p = 1 - m``, ``D_n = m``. Sun et al.
call ``a_p``, ``a_n`` weighting factors and their reference code does not differentiate them
(``detach_weights=True``, the default); with ``detach_weights=False`` autograd goes through them
too. Xuan & Pless's Table 1 reads its gradient as direction ``e^cos``, pair weight ``P^lin`` and
triplet weight ``T^cir``; which of the two forms, and which ``m``, make that exact is the
chapter's 13.3.
"""

from __future__ import annotations

import torch

from ..core.declaration import declared
from ..core.pairs import masked_logsumexp, pair_sets, reduce, softplus
from ..core.validation import Real, Scale
from .base import PairLoss

__all__ = ["CircleLoss", "circle_loss"]


@declared
def circle_loss(
    S,
    labels,
    gamma: Scale = 80.0,
    margin: Real = 0.4,
    *,
    detach_weights: bool = True,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Circle loss of a batch (Sun et al. 2020, pair-wise form; Xuan & Pless, Table 1).

    Parameters
    ----------
    gamma, margin : float
        Scale and relaxation ``m`` (module docstring); Sun et al.'s fine-grained retrieval
        setting is ``gamma = 80``, ``m = 0.4``.
    detach_weights : bool
        Treat ``a_p``, ``a_n`` as constants in the gradient (Sun et al.'s code) or not.
    reduction : {"mean", "sum", "none"}
        Over the anchors that have a positive and a negative.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Pair masks from a miner (e.g. one easy positive and one hard negative per anchor).

    Returns
    -------
    Tensor
        A scalar (or (B,) for ``"none"``); 0 with gradient 0 when no anchor has both pairs.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    a_p = (1 + margin - S).clamp_min(0)
    a_n = (S + margin).clamp_min(0)
    if detach_weights:
        a_p, a_n = a_p.detach(), a_n.detach()
    lse_p, has_p = masked_logsumexp(-gamma * a_p * (S - (1 - margin)), pos, dim=1)
    lse_n, has_n = masked_logsumexp(gamma * a_n * (S - margin), neg, dim=1)
    valid = has_p & has_n
    per = torch.where(valid, softplus(lse_p + lse_n), torch.zeros_like(lse_p))
    return reduce(per, reduction, valid)


class CircleLoss(PairLoss):
    """Module form of :func:`circle_loss` (``get_loss("circle", gamma=80, margin=0.4)``)."""

    loss_function = staticmethod(circle_loss)

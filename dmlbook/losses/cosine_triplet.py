"""The cosine (NCA) triplet loss of Xuan & Pless, Eq. 4, on every triplet or on the
easy-positive / hard-negative ones.

Chapter: ``book/13_gradient_surgery.ipynb`` (13.1, 13.3). Proof: Eq. 6 and the "Triplet (cosine)"
row of Table 1 in :mod:`dmlbook.symbolic.gradient_surgery`. Tests: ``tests/surgery/test_losses.py``.

For a triplet ``(a, p, n)``:

    L = -log( e^{tau S_ap} / (e^{tau S_ap} + e^{tau S_an}) ) = softplus(tau (S_an - S_ap)),

whose gradient is Eq. 6: ``tau T^cos`` times the cosine directions, with
``T^cos = sigmoid(tau (S_an - S_ap))`` (Eq. 16).

``mining="ephn"`` keeps one triplet per anchor, its most similar positive and most similar
negative (the sampling of Xuan & Pless, Sec. 4); ``"all"`` every valid triplet, in blocks of
anchors with the gradient in closed form (:mod:`dmlbook.losses.cosine_triplet_all`, ``O(B^2)``
memory).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import torch

from ..pairs import softplus
from .base import HyperParameters, PairLoss, check_choice, check_similarity, reduce, resolve_masks
from .closed_form import closed_form_loss
from .cosine_triplet_all import cosine_triplet_all_core

__all__ = ["COSINE_TRIPLET_MINING", "CosineTripletHyperParameters", "CosineTripletLoss",
           "cosine_triplet_loss"]  # fmt: skip

COSINE_TRIPLET_MINING: tuple[str, ...] = ("ephn", "all")


@dataclass(frozen=True)
class CosineTripletHyperParameters(HyperParameters):
    """Eq. 4: the scale ``tau`` (> 0), the triplets (``mining``) and the reduction."""

    tau: float = 16.0
    _: KW_ONLY
    mining: str = "ephn"
    reduction: str = "mean"

    def check(self) -> None:
        self._positive("tau")
        check_choice(self.mining, COSINE_TRIPLET_MINING, "mining")
        check_choice(self.reduction, ("mean", "sum"), "reduction")


_K = CosineTripletHyperParameters


def _ephn_terms(
    S: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, tau: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each anchor's term of Eq. 4 on its easy positive and hard negative, and which anchors
    have both (ties: the lowest index). ``O(B^2)``: one triplet per row, gathered from ``S``."""
    low = torch.finfo(S.dtype).min
    s = S.detach()
    rows = torch.arange(S.shape[0], device=S.device)
    p = torch.where(pos, s, low).argmax(dim=1)
    n = torch.where(neg, s, low).argmax(dim=1)
    keep = pos.any(dim=1) & neg.any(dim=1)
    return softplus(tau * (S[rows, n] - S[rows, p])), keep


def cosine_triplet_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    tau: float = _K.tau,
    *,
    mining: str = _K.mining,
    reduction: str = _K.reduction,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Cosine / NCA triplet loss (Xuan & Pless, Eq. 4), averaged (or summed) over triplets.

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    tau : float
        The scale ``tau`` of Eq. 4.
    mining : {"ephn", "all"}
        One easy-positive / hard-negative triplet per anchor, or every valid triplet. Given
        pair masks narrow the pairs first.
    reduction : {"mean", "sum"}
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional

    Returns
    -------
    Tensor
        A scalar; 0 with gradient 0 without any triplet.
    """
    _K(tau, mining=mining, reduction=reduction)
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    if mining == "all":  # blocks of anchors, closed-form gradient: O(B^2) memory
        args = (pos, neg, tau, reduction == "mean")
        return closed_form_loss(S, cosine_triplet_all_core, *args).to(S.dtype)
    per, keep = _ephn_terms(S, pos, neg, tau)
    return reduce(per, reduction, keep)


class CosineTripletLoss(PairLoss):
    """Module form of :func:`cosine_triplet_loss` (``get_loss("cosine_triplet", tau=16)``)."""

    loss_function = staticmethod(cosine_triplet_loss)
    hyper = CosineTripletHyperParameters

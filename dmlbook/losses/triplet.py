"""Triplet loss in the similarity form and the two distance forms.

For an anchor ``a``, a positive ``p`` (same class) and a negative ``n`` (other class):

* Wang et al. 2019, Eq. 5 (``form="similarity"``): ``[S_an - S_ap + lambda]_+``;
* Liu et al., Eq. 12 (``form="distance"``): ``[D_ap - D_an + m]_+``;
* Liu et al., Eq. 37 (``form="squared_distance"``, Schroff et al.'s original):
  ``[D_ap^2 - D_an^2 + m]_+``.

All three are ``[d_ap - d_an + m]_+`` for a dissimilarity ``d`` (``-S``, ``D``, ``D^2``). On unit
vectors ``D^2 = 2 - 2 S``, so Eq. 37 is ``2 [S_an - S_ap + m / 2]_+``: the squared-distance form is
Eq. 5 with half the margin, scaled by 2. The plain distance form is not: ``D = sqrt(2 - 2 S)``
bends the hinge, and its GPW weight, ``dL/dS_an = 1 / D_an`` per active triplet, grows as the
negative comes closer.

Which triplets enter: all valid ones (``pos[a, p]`` and ``neg[a, n]``, from the label masks
narrowed by any pair masks), further narrowed by an optional (B, B, B) triplet mask from
:mod:`dmlbook.mining` (semi-hard, margin-violating). Batch-hard mining is a pair-mask miner
(:func:`dmlbook.mining.batch_hard_masks`): one triplet per anchor.
"""

from __future__ import annotations

import torch

from .base import (
    FORMS,
    PairLoss,
    check_choice,
    check_similarity,
    dissimilarity,
    masked_mean,
    resolve_masks,
)

__all__ = ["triplet_loss", "TripletLoss", "TRIPLET_MINING", "TRIPLET_REDUCTIONS"]

TRIPLET_REDUCTIONS: tuple[str, ...] = ("mean", "mean_nonzero", "sum", "none")
#: Mining strategies of :class:`TripletLoss`.
TRIPLET_MINING: tuple[str, ...] = ("all", "batch_hard", "semihard")


def _at_most_one_per_row(mask: torch.Tensor) -> bool:
    return mask.shape[0] == 0 or int(mask.sum(dim=1).max()) <= 1


def triplet_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = 0.1,
    *,
    form: str = "similarity",
    reduction: str = "mean",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
    triplet_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triplet loss over the batch's triplets (Wang et al. 2019, Eq. 5; Liu et al., Eq. 12, 37).

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarity matrix of the batch.
    labels : Tensor of shape (B,)
    margin : float
        ``lambda`` (Eq. 5) or ``m`` (Eq. 12, 37), in the units of ``form``.
    form : {"similarity", "distance", "squared_distance"}
        Eq. 5, Eq. 12 or Eq. 37.
    reduction : {"mean", "mean_nonzero", "sum", "none"}
        ``"mean"``: average of the per-triplet hinge over all selected triplets (the plain
        average of Eq. 5; pytorch-metric-learning's ``MeanReducer``). ``"mean_nonzero"``:
        average over the triplets whose hinge is positive (Hermans et al.'s batch-all;
        pytorch-metric-learning's default ``AvgNonZeroReducer``); the count is not
        differentiated. ``"sum"``: the sum. ``"none"``: the (B, B, B) tensor ``L[a, p, n]``,
        zero outside the selected triplets.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Pair masks from a miner (e.g. :func:`dmlbook.mining.batch_hard_masks`).
    triplet_mask : bool Tensor of shape (B, B, B), optional
        A triplet-level selection ``T[a, p, n]`` (e.g. :func:`dmlbook.mining.semihard_triplet_mask`).

    Returns
    -------
    Tensor
        A scalar (or (B, B, B) for ``"none"``). With no selected triplet (a batch of one
        class, of one sample, or anchors without a positive or a negative) it is ``0`` with a
        zero gradient; such anchors simply contribute no triplet.

    Notes
    -----
    The GPW weight of a negative pair in the similarity form is ``dL/dS_an = c * #{p : the
    triplet (a, p, n) is selected and violated}`` with ``c`` the reduction's ``1/count``: every
    violated triplet counts equally, as Wang et al. note below Eq. 5.

    Memory is ``O(B^3)`` unless the pair masks keep at most one positive and one negative per
    anchor (batch-hard), in which case the single triplet of each anchor is computed in
    ``O(B^2)``.
    """
    check_choice(form, FORMS, "form")
    check_choice(reduction, TRIPLET_REDUCTIONS, "reduction")
    y = check_similarity(S, labels)
    B = S.shape[0]
    pos, neg = resolve_masks(y, pos_mask, neg_mask, (B, B))
    d = dissimilarity(S, form)
    zero = torch.zeros((), dtype=S.dtype, device=S.device)

    if (
        triplet_mask is None
        and reduction != "none"
        and _at_most_one_per_row(pos)
        and _at_most_one_per_row(neg)
    ):
        # One triplet per anchor at most: gather d_ap and d_an row by row in O(B^2).
        valid = pos.any(dim=1) & neg.any(dim=1)
        d_ap = torch.where(pos, d, zero).sum(dim=1)
        d_an = torch.where(neg, d, zero).sum(dim=1)
        per = torch.where(valid, torch.relu(d_ap - d_an + margin), zero)
    else:
        valid = pos[:, :, None] & neg[:, None, :]
        if triplet_mask is not None:
            if triplet_mask.shape != (B, B, B) or triplet_mask.dtype != torch.bool:
                raise ValueError(
                    f"triplet_mask must be a bool tensor of shape {(B, B, B)} (T[a, p, n]), "
                    f"got dtype {triplet_mask.dtype} and shape {tuple(triplet_mask.shape)}."
                )
            valid = valid & triplet_mask.to(valid.device)
        per = torch.where(valid, torch.relu(d[:, :, None] - d[:, None, :] + margin), zero)
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    if reduction == "mean_nonzero":
        return masked_mean(per, valid & (per > 0))
    return masked_mean(per, valid)


class TripletLoss(PairLoss):
    """Module form of :func:`triplet_loss`, with its miner built in.

    Parameters
    ----------
    margin : float
    form : {"similarity", "distance", "squared_distance"}
    mining : {"all", "batch_hard", "semihard"}
        ``"all"``: every valid triplet; ``"batch_hard"``: one triplet per anchor, its hardest
        positive and hardest negative (:func:`dmlbook.mining.batch_hard_masks`); ``"semihard"``:
        the semi-hard triplets for this margin and form
        (:func:`dmlbook.mining.semihard_triplet_mask`).
    reduction : {"mean", "mean_nonzero", "sum"}
    """

    hyper_parameters = ("margin", "form", "mining", "reduction")

    def __init__(
        self,
        margin: float = 0.1,
        *,
        form: str = "similarity",
        mining: str = "all",
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        check_choice(form, FORMS, "form")
        check_choice(mining, TRIPLET_MINING, "mining")
        check_choice(reduction, ("mean", "mean_nonzero", "sum"), "reduction")
        if not float(margin) >= 0.0:
            raise ValueError(f"margin must be >= 0, got {margin}.")
        self.margin = float(margin)
        self.form = form
        self.mining = mining
        self.reduction = reduction

    def loss_on_similarity(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from .. import mining as miners  # deferred: dmlbook.mining imports dmlbook.losses.base

        triplet_mask = None
        if self.mining == "batch_hard":
            pos_mask, neg_mask = miners.batch_hard_masks(
                S, labels, pos_mask=pos_mask, neg_mask=neg_mask
            )
        elif self.mining == "semihard":
            triplet_mask = miners.semihard_triplet_mask(
                S, labels, self.margin, form=self.form, pos_mask=pos_mask, neg_mask=neg_mask
            )
        return triplet_loss(
            S,
            labels,
            self.margin,
            form=self.form,
            reduction=self.reduction,
            pos_mask=pos_mask,
            neg_mask=neg_mask,
            triplet_mask=triplet_mask,
        )

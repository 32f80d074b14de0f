"""Triplet loss in the similarity form and the two distance forms.

Chapter: ``book/04_triplet.ipynb``, 4.1 "The similarity form (Wang et al. 2019, Eq. 5)", 4.2 "The
distance forms (Liu et al., Eq. 12 and 37)", 4.4 "The implementation in `dmlbook`". Proof: the
``sy.prove_equal`` cells of 4.1-4.2 and 4.5 "Symbolic weights against autograd". Tests:
``tests/losses/test_triplet.py`` (loops: :mod:`dmlbook.reference.classic`); the miners
(:mod:`dmlbook.mining`, 4.3 "Mining: which triplets enter") in ``tests/test_mining.py``.

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

from dataclasses import KW_ONLY, dataclass

import torch

from .. import mining as miners
from ..pair_lists import positive_pairs
from ..pairs import given_masks
from .base import (
    FORMS,
    HyperParameters,
    PairLoss,
    check_choice,
    check_similarity,
    dissimilarity,
    reduce,
    resolve_masks,
)
from .closed_form import closed_form_loss
from .lifted_closed_form import form_and_slope
from .triplet_batch_hard import batch_hard_triplet_loss

__all__ = [
    "AllTriplets",
    "all_triplets_label_core",
    "TRIPLET_BLOCK",
    "TripletHyperParameters",
    "triplet_loss",
    "TripletLoss",
    "TRIPLET_MINING",
    "TRIPLET_REDUCTIONS",
]

TRIPLET_REDUCTIONS: tuple[str, ...] = ("mean", "mean_nonzero", "sum", "none")
#: Mining strategies of :class:`TripletLoss`.
TRIPLET_MINING: tuple[str, ...] = ("all", "batch_hard", "semihard")


@dataclass(frozen=True)
class TripletHyperParameters(HyperParameters):
    """The triplet loss: margin (a module needs >= 0), form, the module's miner, reduction."""

    module_reductions = ("mean", "mean_nonzero", "sum")

    margin: float = 0.1
    _: KW_ONLY
    form: str = "similarity"
    mining: str = "all"
    reduction: str = "mean"

    def check(self) -> None:
        check_choice(self.form, FORMS, "form")
        check_choice(self.reduction, TRIPLET_REDUCTIONS, "reduction")

    def check_module(self) -> None:
        check_choice(self.mining, TRIPLET_MINING, "mining")
        super().check_module()
        if not float(self.margin) >= 0.0:
            raise ValueError(f"margin must be >= 0, got {self.margin}.")
        self._set("margin", float(self.margin))


_T = TripletHyperParameters


def _at_most_one_per_row(mask: torch.Tensor) -> bool:
    return mask.shape[0] == 0 or int(mask.sum(dim=1).max()) <= 1


def triplet_loss(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float = _T.margin,
    *,
    form: str = _T.form,
    reduction: str = _T.reduction,
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

    Memory is ``O(B^2)`` (:class:`AllTriplets`: the valid triplets, a block of positive pairs at
    a time, within a fixed budget) unless a ``triplet_mask`` or ``reduction="none"`` asks for the
    ``(B, B, B)`` tensor itself. When the pair masks keep at most one positive and one negative
    per anchor (batch-hard), the single triplet of each anchor is gathered row by row.
    """
    _T(margin, form=form, reduction=reduction)
    y = check_similarity(S, labels)
    B = S.shape[0]
    if triplet_mask is None and reduction != "none" and pos_mask is None and neg_mask is None:
        args = (y, margin, form, reduction)  # the label masks
        return closed_form_loss(S, all_triplets_label_core, *args).to(S.dtype)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, (B, B))
    zero = torch.zeros((), dtype=S.dtype, device=S.device)

    if triplet_mask is None and reduction != "none":
        if not (_at_most_one_per_row(pos) and _at_most_one_per_row(neg)):
            # Every valid triplet, a block of positive pairs at a time: O(B^2) memory.
            return AllTriplets.apply(dissimilarity(S, form), pos, neg, margin, reduction)
        # One triplet per anchor at most: gather S_ap and S_an row by row, then d of those.
        valid = pos.any(dim=1) & neg.any(dim=1)
        d_ap = dissimilarity(torch.where(pos, S, zero).sum(dim=1), form)
        d_an = dissimilarity(torch.where(neg, S, zero).sum(dim=1), form)
        per = torch.where(valid, torch.relu(d_ap - d_an + margin), zero)
    else:
        d = dissimilarity(S, form)
        valid = pos[:, :, None] & neg[:, None, :]
        if triplet_mask is not None:
            if triplet_mask.shape != (B, B, B) or triplet_mask.dtype != torch.bool:
                raise ValueError(
                    f"triplet_mask must be a bool tensor of shape {(B, B, B)} (T[a, p, n]), "
                    f"got dtype {triplet_mask.dtype} and shape {tuple(triplet_mask.shape)}."
                )
            valid = valid & triplet_mask.to(valid.device)
        per = torch.where(valid, torch.relu(d[:, :, None] - d[:, None, :] + margin), zero)
    return reduce(per, reduction, valid)


#: Entries of the (positive pairs x B) block that :class:`AllTriplets` evaluates at once (8 MB in
#: float32): its memory is ``O(B^2)`` plus this fixed budget, whatever the batch.
TRIPLET_BLOCK = 1 << 21


def all_triplets_core(
    d_ap: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    d_n: torch.Tensor,
    margin: float,
    reduction: str,
    n_valid: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reduced hinge over every valid triplet and ``dL/dd``: the loop of :class:`AllTriplets`.

    ``d_ap`` are the positive pairs' dissimilarities (pair ``k`` is ``(rows[k], cols[k])``),
    ``d_n`` the dissimilarities with ``+inf`` outside the negatives, ``n_valid`` the number of
    valid triplets (the count of ``"mean"``).
    """
    W = torch.zeros_like(d_n)
    total = d_n.new_zeros(())
    n_active = torch.zeros((), dtype=torch.long, device=d_n.device)
    step = max(1, TRIPLET_BLOCK // max(d_n.shape[0], 1))
    for lo in range(0, rows.shape[0], step):
        r, c = rows[lo : lo + step], cols[lo : lo + step]
        t = d_n.index_select(0, r)  # t[k, n] = d_ap - d_an + margin for pair k = (r_k, c_k)
        torch.sub(d_ap[lo : lo + step, None], t, out=t).add_(margin).clamp_min_(0.0)
        total += t.sum()
        weight = t.sign_()  # 1 on the active triplets (t > 0), 0 elsewhere
        per_pair = weight.sum(dim=1)
        n_active += per_pair.sum().long()
        W.index_put_((r, c), per_pair, accumulate=True)  # dL/dd_ap: active n
        W.index_add_(0, r, weight, alpha=-1)  # dL/dd_an: minus the active p
    if reduction == "sum":
        count = torch.ones((), dtype=d_n.dtype, device=d_n.device)
    else:
        n = n_active if reduction == "mean_nonzero" else n_valid
        count = n.clamp_min(1).to(d_n.dtype)
    return total / count, W.div_(count)


class AllTriplets(torch.autograd.Function):
    """The triplet loss over every valid triplet, ``O(B^2)`` memory, gradient in closed form.

    A valid triplet is a positive pair ``(a, p)`` (``pos[a, p]``) with a negative ``n`` of the
    same anchor (``neg[a, n]``): the positive pairs are listed once (``K - 1`` per anchor in a
    P x K batch), and for a block of them the hinges of all their negatives, ``t = d_ap - d_an +
    margin`` (the arithmetic of the ``(B, B, B)`` form, in the same order), are evaluated at once.
    The gradient is counted in the same pass: ``dL/dd_ap = #{n : t > 0} / c`` and ``dL/dd_an =
    -#{p : t > 0} / c``, with ``c`` the reduction's count (1 for ``"sum"``, the valid triplets for
    ``"mean"``, the active ones for ``"mean_nonzero"``), exactly the derivative of the hinge (0 at
    ``t = 0``, as ``relu``'s). It is piecewise constant, so a second derivative is 0.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        d: torch.Tensor,
        pos: torch.Tensor,
        neg: torch.Tensor,
        margin: float,
        reduction: str,
    ) -> torch.Tensor:
        dd = d.detach()
        rows, cols = pos.nonzero(as_tuple=True)
        # d_an, +inf outside the negatives: there t = -inf, a hinge of 0 and no weight
        d_n = torch.where(neg, dd, float("inf"))
        n_valid = neg.sum(dim=1)[rows].sum()
        value, W = all_triplets_core(dd[rows, cols], rows, cols, d_n, margin, reduction, n_valid)
        ctx.save_for_backward(W)
        return value

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        (W,) = ctx.saved_tensors
        return W * grad, None, None, None, None


def all_triplets_label_core(
    s: torch.Tensor, y: torch.Tensor, margin: float, form: str, reduction: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """:class:`AllTriplets` on detached ``s`` for the label masks, the form's ``dd/dS`` folded
    into ``dL/dS``.

    Positives are index lists (:func:`dmlbook.pair_lists.positive_pairs`), the dissimilarity and its
    slope come from :func:`~dmlbook.losses.lifted_closed_form.form_and_slope` without autograd,
    and ``+inf`` is written at the positives and self: no ``B x B`` label mask, no ``where``.
    """
    B = s.shape[0]
    pairs = positive_pairs(y)
    rows, cols = pairs
    neg_d, d_ap, slope = form_and_slope(s, form, pairs)
    d_n = neg_d.neg_()
    d_n[pairs] = float("inf")
    d_n.fill_diagonal_(float("inf"))
    n_neg = B - 1 - torch.bincount(rows, minlength=B)
    value, W = all_triplets_core(d_ap, rows, cols, d_n, margin, reduction, n_neg[rows].sum())
    return value, W.mul_(slope)


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

    loss_function = staticmethod(triplet_loss)
    hyper = TripletHyperParameters

    def loss_on_similarity(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:func:`triplet_loss` on the mined triplets; batch-hard ones as index lists.

        ``mining="batch_hard"`` takes :func:`~dmlbook.losses.triplet_batch_hard.batch_hard_triplet_loss`:
        the triplets of :meth:`mine` without its ``B x B`` masks, the same value and gradient.
        """
        if self.mining != "batch_hard":
            return super().loss_on_similarity(S, labels, pos_mask=pos_mask, neg_mask=neg_mask)
        y = check_similarity(S, labels)
        _T(self.margin, form=self.form, reduction=self.reduction)
        masks = given_masks(y, pos_mask, neg_mask, tuple(S.shape))
        return batch_hard_triplet_loss(S, y, self.margin, self.form, self.reduction, masks)

    def mine(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        pos_mask: torch.Tensor | None,
        neg_mask: torch.Tensor | None,
    ) -> dict[str, torch.Tensor | None]:
        """The built-in miner: batch-hard pair masks, or the semi-hard triplet mask."""
        if self.mining == "batch_hard":
            pos_mask, neg_mask = miners.batch_hard_masks(
                S, labels, pos_mask=pos_mask, neg_mask=neg_mask
            )
        elif self.mining == "semihard":
            triplet_mask = miners.semihard_triplet_mask(
                S, labels, self.margin, form=self.form, pos_mask=pos_mask, neg_mask=neg_mask
            )
            return {"pos_mask": pos_mask, "neg_mask": neg_mask, "triplet_mask": triplet_mask}
        return {"pos_mask": pos_mask, "neg_mask": neg_mask}

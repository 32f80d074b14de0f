"""The triplet family: the hinge in its similarity and distance forms, and the cosine (NCA) triplet.

Chapter: ``book/04_triplet.ipynb``, 4.1 "The similarity form (Wang et al. 2019, Eq. 5)", 4.2 "The
distance forms (Liu et al., Eq. 12 and 37)", 4.4 "The implementation in `dmlbook`"; the cosine
triplet in ``book/13_gradient_surgery.ipynb`` (13.1, 13.3). Proofs: the ``sy.prove_equal`` cells
of 4.1-4.2 and 4.5; Eq. 6 and the "Triplet (cosine)" row of Table 1 in
:mod:`dmlbook.symbolic.gradient_surgery`. Tests: ``tests/losses/test_triplet.py`` (loops:
:mod:`dmlbook.reference.classic`, :func:`dmlbook.reference.cosine_triplet_loss_reference`); the
miners (:mod:`dmlbook.mining`, 4.3 "Mining: which triplets enter") in ``tests/mining/test_triplets.py``.

For an anchor ``a``, a positive ``p`` (same class) and a negative ``n`` (other class):

* Wang et al. 2019, Eq. 5 (``form="similarity"``): ``[S_an - S_ap + lambda]_+``;
* Liu et al., Eq. 12 (``form="distance"``): ``[D_ap - D_an + m]_+``;
* Liu et al., Eq. 37 (``form="squared_distance"``, Schroff et al.'s original):
  ``[D_ap^2 - D_an^2 + m]_+``;
* Xuan & Pless, Eq. 4 (:func:`cosine_triplet_loss`): ``softplus(tau (S_an - S_ap))``, the NCA
  form, whose gradient is Eq. 6: ``tau T^cos`` with ``T^cos = sigmoid(tau (S_an - S_ap))``.

The hinges are ``[d_ap - d_an + m]_+`` for a dissimilarity ``d`` (``-S``, ``D``, ``D^2``). On unit
vectors ``D^2 = 2 - 2 S``, so Eq. 37 is ``2 [S_an - S_ap + m / 2]_+``: the squared-distance form is
Eq. 5 with half the margin, scaled by 2. The plain distance form is not: ``D = sqrt(2 - 2 S)``
bends the hinge, and its GPW weight, ``dL/dS_an = 1 / D_an`` per active triplet, grows as the
negative comes closer.

Which triplets enter: all valid ones (``pos[a, p]`` and ``neg[a, n]``, from the label masks
narrowed by any pair masks), further narrowed by an optional (B, B, B) triplet mask from
:mod:`dmlbook.mining` (semi-hard, margin-violating). Batch-hard and easy-positive / hard-negative
mining are pair-mask miners: one triplet per anchor. Every reduction but ``"none"`` sums over
the triplets with :func:`triplet_sums`, which never holds the (B, B, B) tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch.utils.checkpoint import checkpoint

from .. import mining as miners
from ..core.declaration import declared
from ..core.pair_lists import positive_lists
from ..core.pairs import Form, Mask, check_triplet_mask, dissimilarity, pair_sets, softplus
from ..core.validation import NonNegative, Scale
from .base import PairLoss

__all__ = [
    "COSINE_TRIPLET_MINING",
    "CosineTripletLoss",
    "TRIPLET_BLOCK",
    "TRIPLET_MINING",
    "TRIPLET_REDUCTIONS",
    "TripletLoss",
    "cosine_triplet_loss",
    "triplet_loss",
    "triplet_sums",
]

TRIPLET_REDUCTIONS: tuple[str, ...] = ("mean", "mean_nonzero", "sum", "none")
#: Mining strategies of :class:`TripletLoss`.
TRIPLET_MINING: tuple[str, ...] = ("all", "batch_hard", "semihard")
#: Triplets of :func:`cosine_triplet_loss`: easy-positive / hard-negative, or all.
COSINE_TRIPLET_MINING: tuple[str, ...] = ("ephn", "all")
#: Entries (anchors x positives x candidates) of one block of :func:`triplet_sums`: 2^22, 16 MB
#: per tensor in float32, whatever the batch.
TRIPLET_BLOCK = 1 << 22

# ----------------------------------------------------------------------------- every triplet


def triplet_sums(
    term: Callable[..., tuple[torch.Tensor, ...]],
    x: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    triplet_mask: Mask = None,
    row_data: tuple[torch.Tensor, ...] = (),
) -> tuple[torch.Tensor, ...]:
    """Per anchor ``a``, sums over its valid triplets ``(a, p, n)`` of ``term(x_ap, x_an, valid)``.

    ``term`` gets ``x_ap`` (b, K, 1), ``x_an`` (b, 1, B) and the valid triplets (b, K, B) of a
    block of ``b`` anchors (then the block's rows of each tensor of ``row_data``) and returns a
    tuple of (b, K, B) tensors, 0 off the valid triplets; the result is a tuple of (B,) tensors,
    their sums per anchor. A valid triplet has ``pos[a, p]``, ``neg[a, n]`` and, if given,
    ``triplet_mask[a, p, n]``.

    This layout exists for memory, not speed. The (B, B, B) tensor of every triplet is 4 GB at
    B = 1000 in float32, and autograd would keep several. Here each anchor's positives are an
    index list (``K`` of them: ``k - 1`` in a P x k batch, one after batch-hard mining;
    :func:`dmlbook.core.pair_lists.positive_lists`), so ``b`` anchors take (b, K, B) entries, and the
    anchors go in blocks of at most :data:`TRIPLET_BLOCK` entries. With more than one block, each
    runs under :func:`torch.utils.checkpoint.checkpoint`: autograd keeps only the block's rows of
    ``x`` and computes the block again in the backward pass, so memory stays ``O(B^2)`` plus
    one block, at the price of a second forward pass of each block.
    """
    index, real = positive_lists(pos)
    B, K = index.shape

    def block(x_rows, index_rows, real_rows, neg_rows, mask_rows, *data_rows):
        valid = real_rows[:, :, None] & neg_rows[:, None, :]
        if mask_rows is not None:
            valid = valid & mask_rows.gather(1, index_rows[:, :, None].expand(-1, -1, B))
        x_ap = x_rows.gather(1, index_rows)[:, :, None]
        terms = term(x_ap, x_rows[:, None, :], valid, *data_rows)
        return tuple(t.sum(dim=(1, 2)) for t in terms)

    step = max(1, TRIPLET_BLOCK // max(K * B, 1))
    parts = []
    for lo in range(0, B, step):
        tensors = (x, index, real, neg, triplet_mask, *row_data)
        rows = [t if t is None else t[lo : lo + step] for t in tensors]
        if step >= B:
            parts.append(block(*rows))
        else:
            parts.append(checkpoint(block, *rows, use_reentrant=False, preserve_rng_state=False))
    return tuple(torch.cat(sums) for sums in zip(*parts, strict=True))


# ----------------------------------------------------------------------------- the hinge


@declared
def triplet_loss(
    S,
    labels,
    margin: NonNegative = 0.1,
    *,
    form: Form = "similarity",
    reduction: Literal["mean", "mean_nonzero", "sum", "none"] = "mean",
    pos_mask,
    neg_mask,
    triplet_mask,
) -> torch.Tensor:
    """Triplet loss over the batch's triplets (Wang et al. 2019, Eq. 5; Liu et al., Eq. 12, 37).

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarity matrix of the batch.
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
    violated triplet counts equally, as Wang et al. note below Eq. 5. The sums go through
    :func:`triplet_sums` (``O(B^2)`` memory, its docstring says why).
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    check_triplet_mask(triplet_mask, S.shape[0])
    d = dissimilarity(S, form)
    if reduction == "none":  # the (B, B, B) tensor of every triplet, as asked
        valid = pos[:, :, None] & neg[:, None, :]
        if triplet_mask is not None:
            valid = valid & triplet_mask.to(valid.device)
        return torch.where(valid, torch.relu(d[:, :, None] - d[:, None, :] + margin), 0.0)

    def hinge(d_ap, d_an, valid):  # [d_ap - d_an + m]_+, the valid triplets, the active ones
        h = torch.where(valid, torch.relu(d_ap - d_an + margin), 0.0)
        return h, valid, h > 0

    total, n_valid, n_active = triplet_sums(hinge, d, pos, neg, triplet_mask)
    if reduction == "sum":
        return total.sum()
    count = n_active if reduction == "mean_nonzero" else n_valid
    return total.sum() / count.sum().clamp_min(1)


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
    module_reductions = ("mean", "mean_nonzero", "sum")

    @staticmethod
    def module_options(*, mining: Literal["all", "batch_hard", "semihard"] = "all") -> None:
        """The module's built-in miner (:data:`TRIPLET_MINING`)."""

    def mine(
        self, S: torch.Tensor, labels: torch.Tensor, pos_mask: Mask, neg_mask: Mask
    ) -> dict[str, Mask]:
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


# ----------------------------------------------------------------------------- cosine / NCA


@declared
def cosine_triplet_loss(
    S,
    labels,
    tau: Scale = 16.0,
    *,
    mining: Literal["ephn", "all"] = "ephn",
    reduction: Literal["mean", "sum"] = "mean",
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Cosine / NCA triplet loss (Xuan & Pless, Eq. 4), averaged (or summed) over triplets.

    For a triplet ``(a, p, n)``, ``-log(e^{tau S_ap} / (e^{tau S_ap} + e^{tau S_an})) =
    softplus(tau (S_an - S_ap))``.

    Parameters
    ----------
    tau : float
        The scale ``tau`` of Eq. 4.
    mining : {"ephn", "all"}
        ``"ephn"``: one triplet per anchor, its most similar positive and most similar negative
        (Xuan & Pless, Sec. 4; :func:`dmlbook.mining.easy_positive_masks`); ``"all"``: every
        valid triplet. Given pair masks narrow the pairs first.
    reduction : {"mean", "sum"}

    Returns
    -------
    Tensor
        A scalar; 0 with gradient 0 without any triplet.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    if mining == "ephn":
        pos, neg = miners.easy_positive_masks(S, labels, pos_mask=pos, neg_mask=neg)

    def nca(s_ap, s_an, valid):  # Eq. 4 on the valid triplets, and how many there are
        return torch.where(valid, softplus(tau * (s_an - s_ap)), 0.0), valid

    total, count = triplet_sums(nca, S, pos, neg)
    if reduction == "sum":
        return total.sum()
    return total.sum() / count.sum().clamp_min(1)


class CosineTripletLoss(PairLoss):
    """Module form of :func:`cosine_triplet_loss` (``get_loss("cosine_triplet", tau=16)``)."""

    loss_function = staticmethod(cosine_triplet_loss)

"""Contrastive loss in the similarity form of the General Pair Weighting view, and its distance forms.

Chapter: ``book/03_contrastive.ipynb``, 3.1 "The similarity form (Wang et al. 2019, Eq. 4)",
3.2 "The distance forms (Liu et al., Eq. 11, 35, 36)", 3.4 "The implementations in `dmlbook`".
Proof: the ``sy.prove_equal`` cells of 3.1-3.3 and 3.5 "Symbolic weights against autograd"
(:mod:`dmlbook.symbolic`). Tests: ``tests/losses/test_contrastive.py`` (loops:
:mod:`dmlbook.reference.classic`), ``tests/losses/test_pml_crosscheck.py``.

Wang et al. 2019, Eq. 4, for one pair ``(i, j)`` with ``I_ij = 1`` when the labels agree:

    L_ij = (1 - I_ij) [S_ij - lambda]_+  -  I_ij S_ij

A positive pair is pulled together with a constant weight; a negative pair is pushed apart only
while its similarity exceeds the margin ``lambda``.

Liu et al. review the same loss on Euclidean distances ``D`` of the embeddings, in three variants
(``m1`` a positive margin, ``m2`` a negative margin):

* Eq. 11 (``variant="hinge"``): ``I_ij [D_ij - m1]_+ + (1 - I_ij) [m2 - D_ij]_+`` (printed with
  ``m1 = 0``; the positive margin is the one pytorch-metric-learning's ``ContrastiveLoss`` adds);
* Eq. 35 (``variant="squared_hinge"``, Hadsell et al.'s original): the same hinges squared;
* Eq. 36 (``variant="squared_distance"``): hinges on ``D^2`` instead of ``D``.

On unit vectors ``D = sqrt(2 - 2 S)``, so every variant is still a function of ``S``
(:func:`contrastive_distance_loss`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import torch

from ..core.declaration import declared
from ..core.pairs import dissimilarity, pair_sets, reduce
from ..core.validation import NonNegative, Number
from .base import PairLoss

__all__ = [
    "contrastive_loss",
    "ContrastiveLoss",
    "contrastive_distance_loss",
    "ContrastiveDistanceLoss",
    "CONTRASTIVE_VARIANTS",
]

#: A margin that is a cosine similarity: at 1 no negative is ever penalised, at -1 all always.
Cosine = Annotated[float, Number(-1.0, 1.0, "a cosine similarity", open=True)]

#: Distance variants of the contrastive loss, by Liu et al.'s equation number.
CONTRASTIVE_VARIANTS: dict[str, str] = {
    "hinge": "Liu et al. Eq. 11: [D - m1]_+ and [m2 - D]_+",
    "squared_hinge": "Liu et al. Eq. 35: [D - m1]_+^2 and [m2 - D]_+^2",
    "squared_distance": "Liu et al. Eq. 36: [D^2 - m1]_+ and [m2 - D^2]_+",
}


@declared
def contrastive_loss(S, labels, margin: Cosine = 0.5, *, pos_mask, neg_mask) -> torch.Tensor:
    """Mean of Wang et al. 2019, Eq. 4 over the batch's ordered pairs ``i != j``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarity matrix of the batch.
    margin : float
        ``lambda`` of Eq. 4, in (-1, 1): negative pairs with ``S_ij <= margin`` contribute nothing.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Pairs kept by a miner; they narrow the label masks.

    Returns
    -------
    Tensor
        A scalar. For a batch with no pair at all (``B = 1``) it is ``0`` with a zero gradient.

    Notes
    -----
    The GPW weight (``dL/dS_ij``) is ``-1/n`` for every kept positive pair and ``1/n`` for a kept
    negative pair with ``S_ij > margin`` (``n`` the number of kept pairs): equal weights on the
    selected pairs, as Wang et al. note below Eq. 4.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    per_pair = torch.where(pos, -S, torch.zeros_like(S)) + torch.where(
        neg, torch.relu(S - margin), torch.zeros_like(S)
    )
    return reduce(per_pair, "mean", pos | neg)


class ContrastiveLoss(PairLoss):
    """Module form of :func:`contrastive_loss`: ``ContrastiveLoss(margin)(embeddings, labels)``.

    Embeddings are L2-normalised before ``S`` is formed.
    """

    loss_function = staticmethod(contrastive_loss)


def ordered_margins(pos_margin: float, neg_margin: float) -> None:
    """Liu et al.'s margins are distances with ``m1 < m2``."""
    if not pos_margin < neg_margin:
        raise ValueError(
            "margins are distances and need 0 <= pos_margin < neg_margin, "
            f"got pos_margin={pos_margin}, neg_margin={neg_margin}."
        )


@declared(rules=(ordered_margins,))
def contrastive_distance_loss(
    S,
    labels,
    pos_margin: NonNegative = 0.0,
    neg_margin: NonNegative = 1.0,
    *,
    variant: Literal["hinge", "squared_hinge", "squared_distance"] = "hinge",
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """Contrastive loss on Euclidean distances of unit vectors (Liu et al., Eq. 11, 35, 36).

    With ``D_ij = sqrt(2 - 2 S_ij)`` and ``I_ij = 1`` for a positive pair, the per-pair term is

    * ``variant="hinge"`` (Eq. 11): ``I_ij [D_ij - m1]_+ + (1 - I_ij) [m2 - D_ij]_+``;
    * ``variant="squared_hinge"`` (Eq. 35): ``I_ij [D_ij - m1]_+^2 + (1 - I_ij) [m2 - D_ij]_+^2``;
    * ``variant="squared_distance"`` (Eq. 36): ``I_ij [D_ij^2 - m1]_+ + (1 - I_ij) [m2 - D_ij^2]_+``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarity matrix of the batch (rows are unit vectors, so ``D^2 = 2 - 2 S``).
    pos_margin : float
        ``m1``: positive pairs closer than this are left alone (0 in Liu et al.'s Eq. 11).
    neg_margin : float
        ``m2``: negative pairs farther apart than this are left alone. For ``variant=
        "squared_distance"`` both margins are on ``D^2``.
    variant : {"hinge", "squared_hinge", "squared_distance"}
    reduction : {"mean", "sum", "none"}
        ``"mean"``: average over the kept ordered pairs ``i != j`` (each unordered pair counted
        twice, as in :func:`contrastive_loss`; Liu et al. write a sum, which ``"sum"`` gives);
        ``"none"``: the (B, B) matrix of per-pair terms, zero outside the kept pairs.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Pairs kept by a miner; they narrow the label masks.

    Returns
    -------
    Tensor
        A scalar (or the (B, B) matrix for ``reduction="none"``). With no pair at all it is ``0``
        with a zero gradient. The square root has a finite gradient at ``S = 1`` (a positive pair
        at distance 0 gets gradient 0 from its ``[D - m1]_+`` term).

    Notes
    -----
    pytorch-metric-learning's ``ContrastiveLoss(pos_margin, neg_margin)`` computes the ``"hinge"``
    terms but averages the positive and negative terms separately over the *non-zero* ones and
    adds the two means (``AvgNonZeroReducer``); ``reduction="none"`` gives what is needed to
    reproduce that (see ``tests/losses/test_pml_crosscheck.py``).
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    d = dissimilarity(S, "squared_distance" if variant == "squared_distance" else "distance")
    pos_term = torch.relu(d - pos_margin)
    neg_term = torch.relu(neg_margin - d)
    if variant == "squared_hinge":
        pos_term, neg_term = pos_term.square(), neg_term.square()
    zero = torch.zeros_like(S)
    per_pair = torch.where(pos, pos_term, zero) + torch.where(neg, neg_term, zero)
    return reduce(per_pair, reduction, pos | neg)


class ContrastiveDistanceLoss(PairLoss):
    """Module form of :func:`contrastive_distance_loss` (Liu et al., Eq. 11, 35, 36).

    Parameters
    ----------
    pos_margin, neg_margin : float
        ``m1`` and ``m2``; ``0 <= m1 < m2`` (distances of unit vectors lie in [0, 2], squared
        distances in [0, 4]).
    variant : {"hinge", "squared_hinge", "squared_distance"}
    reduction : {"mean", "sum"}
    """

    loss_function = staticmethod(contrastive_distance_loss)

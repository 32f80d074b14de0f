"""N-pair loss (Sohn; Liu et al., Eq. 13).

Chapter: ``book/07_npair.ipynb``, 7.1 "The loss (Liu et al., Eq. 13)", 7.4 "The N-pair batch".
Proof: the ``sy.prove_equal`` cells of 7.2-7.3 and 7.5 "Symbolic weights against autograd".
Tests: ``tests/losses/test_npair.py`` (loops: :mod:`dmlbook.reference.classic`); the N-pair
construction is :func:`dmlbook.mining.npair_masks` (``tests/mining/test_npair.py``).

A batch of ``N`` pairs ``(x_i, x_i^+)`` from ``N`` different classes; anchor ``x_i`` must pick its
own positive out of all ``N`` positives, a soft-max over one positive and ``N - 1`` negatives:

    L_i = log(1 + sum_{k != i} exp(D_ii+ - D_ik+))            (Liu et al., Eq. 13, distances)
        = log(1 + sum_{k != i} exp(S_ik+ - S_ii+))            (Sohn's similarity form)

Both are ``log(1 + sum_{k in N_i} exp(d_ij - d_ik))`` for a dissimilarity ``d`` and a positive
pair ``(i, j)``. With the N-pair construction every pair lies in the ``C x C`` block of anchors
against positives, and :func:`npair_loss` computes ``log sum_k e^{-d_ik} + d_ii`` over a row of
it (the ``k = i`` term is the ``1 +``); with ``sampling="all"``, ``softplus(d_ij + log
sum_{N_i} e^{-d_ik})`` over the whole ``S``.

The GPW weight of a negative pair (similarity form) is
``e^{S_ik} / (e^{S_ij} + sum_{N_i} e^{S_il})``: a soft-max over the anchor's negatives *and its
positive*, like NCA's (Wang et al., supplement Eq. 2).
"""

from __future__ import annotations

from typing import Literal

import torch

from ..core.declaration import declared
from ..core.pairs import (
    Form,
    Mask,
    check_batch,
    dissimilarity,
    masked_logsumexp,
    pair_sets,
    reduce,
    softplus,
)
from ..core.similarity import cosine_similarity
from ..mining import npair_pairs
from .base import PairLoss

__all__ = ["npair_block_terms", "npair_loss", "NPairLoss", "NPAIR_SAMPLING"]

#: How :func:`npair_loss` picks its pairs before any masks narrow them.
NPAIR_SAMPLING: dict[str, str] = {
    "npair": "one (anchor, positive) pair per class, negatives = the other classes' positives",
    "all": "every positive pair (i, j), negatives = every negative pair of the anchor i",
}


@declared
def npair_loss(
    S,
    labels,
    *,
    form: Form = "similarity",
    sampling: Literal["npair", "all"] = "npair",
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """N-pair loss, Liu et al. Eq. 13, averaged over its positive pairs.

    Parameters
    ----------
    form : {"similarity", "distance", "squared_distance"}
        ``"similarity"``: Sohn's form on cosine similarities (what pytorch-metric-learning's
        ``NPairsLoss`` computes by default); ``"distance"``: Liu et al.'s Eq. 13 on ``D``.
    sampling : {"npair", "all"}
        ``"npair"`` (default): the N-pair construction of
        :func:`dmlbook.mining.npair_masks` (first two samples of each class as anchor and
        positive; an anchor's negatives are the other classes' positives). ``"all"``: every
        positive pair, each against all the anchor's negatives (a multi-positive extension).
    reduction : {"mean", "sum", "none"}
        ``"mean"``: average over the selected positive pairs (Eq. 13 sums; Sohn averages).
        ``"none"``: the (B, B) matrix of pair terms.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Narrow the sampled pairs further.

    Returns
    -------
    Tensor
        A scalar (or (B, B)). A positive pair whose anchor has no negative has the term
        ``log(1 + 0) = 0`` (with gradient 0) and still counts in the mean, as in Eq. 13. A batch
        with no positive pair (every class a singleton, or ``B = 1``) gives 0.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    B = S.shape[0]
    if sampling == "all":
        d = dissimilarity(S, form)
        r, has_neg = masked_logsumexp(-d, neg, dim=1)  # r_i = log sum_{N_i} e^{-d_ik}
        per = torch.where(has_neg[:, None], softplus(d + r[:, None]), torch.zeros_like(d))
        return reduce(per, reduction, pos)
    # The N-pair construction: anchor a_i, positive p_i, negatives the other classes' p_k, so
    # every pair is in the (C, C) block of anchors against positives.
    anchors, positives = npair_pairs(torch.as_tensor(labels, device=S.device))
    d = dissimilarity(S[anchors][:, positives], form)
    per = npair_block_terms(d, neg[anchors][:, positives])
    if reduction == "none":  # the (B, B) matrix of pair terms
        terms = reduce(per, "none", pos[anchors, positives])
        return S.new_zeros(B, B).index_put((anchors, positives), terms)
    return reduce(per, reduction, pos[anchors, positives])


def npair_block_terms(d: torch.Tensor, negatives: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 13 on the ``(C, C)`` block ``d`` of anchors (rows) against positives (columns), the
    positive pair on the diagonal: ``log(1 + sum_{k != i} e^{d_ii - d_ik}) = log sum_k e^{-d_ik} +
    d_ii`` (the ``k = i`` term is the ``1 +``), over the ``k`` that ``negatives`` keeps (all when
    ``None``). As a soft-max over the row, it is the cross-entropy of ``-d`` with the diagonal as
    the target (pytorch-metric-learning's ``NPairsLoss``)."""
    if negatives is None:
        return torch.logsumexp(-d, dim=1) + d.diagonal()
    others = negatives.clone().fill_diagonal_(True)
    return torch.logsumexp((-d).masked_fill(~others, float("-inf")), dim=1) + d.diagonal()


class NPairLoss(PairLoss):
    """Module form of :func:`npair_loss` (Liu et al., Eq. 13).

    Sohn's original also adds an L2 penalty on unnormalised embeddings; this module, like every
    dmlbook loss module, normalises the embeddings instead, so there is nothing to penalise.
    """

    loss_function = staticmethod(npair_loss)

    def forward(
        self, embeddings: torch.Tensor, labels: torch.Tensor, **masks: Mask
    ) -> torch.Tensor:
        """The loss of a batch; with the N-pair sampling, only the ``C x C`` block of ``S``.

        Every pair of the N-pair construction is between an anchor and a positive (one of each
        per class), so the similarities of anchors against positives are all :func:`npair_loss`
        reads: this forms that block alone (a ``C x C`` product instead of ``B x B``) and applies
        the same :func:`npair_block_terms`. Given any of :meth:`PairLoss.forward`'s masks
        (``pos_mask``, ``neg_mask``), or with ``sampling="all"``, that method forms the whole
        ``S`` and calls :func:`npair_loss`.
        """
        if self.sampling != "npair" or masks:
            return super().forward(embeddings, labels, **masks)
        x, y = check_batch(embeddings, labels)
        anchors, positives = npair_pairs(y)
        d = dissimilarity(cosine_similarity(x[anchors], x[positives]), self.form)
        return reduce(npair_block_terms(d), self.reduction)  # every class's pair counts

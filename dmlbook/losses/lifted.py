"""Lifted structure losses: the per-anchor form, the original pairwise form, and LiftedStruct*.

Chapter: ``book/05_lifted_structure.ipynb``, 5.1 "The generalised lifted structure loss (Wang et
al., Eq. 6)", 5.3 "The original pairwise form (Song et al.; Liu et al., Eq. 14)", 5.4
"LiftedStruct* (Wang et al., Eq. 16)", 5.5 "The implementations". Proof: the ``sy.prove_equal``
cells of 5.2-5.4 and 5.6 "Symbolic weights against autograd". Tests:
``tests/losses/test_lifted.py`` (loops: :mod:`dmlbook.reference.classic`).

Three members of one family, all log-sum-exp "soft maxima" over a batch's pairs:

* :func:`lifted_loss`, Wang et al. 2019, Eq. 6 (the generalised lifted structure loss, per anchor):

      L_i = [ log sum_{P_i} e^{lambda - S_ik} + log sum_{N_i} e^{S_ik} ]_+

  with GPW weights Eq. 7 (positives, ``e^{-S_ij} / sum_{P_i} e^{-S_ik}``) and Eq. 8 (negatives,
  ``e^{S_ij} / sum_{N_i} e^{S_ik}``) wherever the hinge is active.
* :func:`lifted_structure_loss`, the original pairwise form of Song et al. as reviewed by Liu et
  al., Eq. 14: for every positive pair ``(i, j)``

      J_ij = D_ij + log( sum_{N_i} e^{m - D_ik} + sum_{N_j} e^{m - D_jl} ),   loss  [J_ij]_+^2 / 2

  (Song et al.'s squared hinge and joint log-sum-exp; Liu et al.'s Eq. 14 as printed takes two
  separate logs and a plain hinge, available with ``joint_negatives=False, squared_hinge=False``).
* :func:`lifted_star_loss`, LiftedStruct* of Wang et al. 2019, Eq. 16, used in their ablation
  (Table 2): no hinge, and temperatures ``alpha``, ``beta`` that sharpen the soft maxima:

      L_i = (1/alpha) log sum_{P_i} e^{-alpha S_ik} + (1/beta) log sum_{N_i} e^{beta S_ik}.

Every log-sum-exp goes through :func:`dmlbook.core.pairs.masked_logsumexp` (max-shifted), so no
value or gradient overflows, even at ``beta = 50`` in float32.
"""

from __future__ import annotations

import torch

from ..core.declaration import declared
from ..core.pairs import (
    Form,
    dissimilarity,
    masked_logsumexp,
    masked_softmax,
    pair_sets,
    reduce,
)
from ..core.validation import Real, Scale
from .base import PairLoss

__all__ = [
    "lifted_loss",
    "lifted_weights",
    "LiftedLoss",
    "lifted_structure_loss",
    "LiftedStructureLoss",
    "lifted_star_loss",
    "LiftedStarLoss",
]


@declared
def lifted_loss(
    S, labels, margin: Real = 1.0, *, form: Form = "similarity", reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """Lifted structure loss per anchor, Wang et al. 2019, Eq. 6 (and its distance form).

    For a dissimilarity ``d`` (``-S``, ``D`` or ``D^2``, see ``form``) the anchor term is
    ``[log sum_{P_i} e^{d_ik} + log sum_{N_i} e^{-d_ik} + margin]_+``. With ``d = -S`` this is
    exactly Eq. 6 (``lambda = margin``); with ``d = D`` it is ``[log sum_P e^{D - m_p} +
    log sum_N e^{m_n - D}]_+`` (the "generalised lifted structure" of pytorch-metric-learning)
    for ``margin = m_n - m_p``: only the difference of the two margins matters.

    Parameters
    ----------
    margin : float
        ``lambda`` of Eq. 6.
    form : {"similarity", "distance", "squared_distance"}
    reduction : {"mean", "sum", "none"}
        ``"sum"``: Eq. 6 as printed (a sum over anchors). ``"mean"``: the average over the
        anchors that have at least one positive *and* one negative. ``"none"``: the (B,) vector
        of anchor terms.

    Returns
    -------
    Tensor
        A scalar (or (B,)). An anchor without a positive or without a negative has an empty
        log-sum-exp (``log 0 = -inf``), so its hinge is 0: it contributes 0 with gradient 0 and
        is not counted in the mean. A single-class batch or a batch of one gives 0.

    Notes
    -----
    With cosine similarities the hinge of Eq. 6 can only switch off when ``lambda < 2 -
    log(|P_i| |N_i|)``: ``log sum_P e^{-S} >= -1 + log |P_i|`` and ``log sum_N e^{S} >= -1 +
    log |N_i|``. At ``lambda = 1`` every anchor with ``|P_i| |N_i| >= 3`` is always active, and
    its negative weights are exactly Eq. 8 (:func:`lifted_weights`).
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    d = dissimilarity(S, form)
    lse_pos, has_pos = masked_logsumexp(d, pos, dim=1)
    lse_neg, has_neg = masked_logsumexp(-d, neg, dim=1)
    valid = has_pos & has_neg
    per = torch.relu(lse_pos + lse_neg + margin)
    return reduce(per, reduction, valid)


@declared(like=lifted_loss)
def lifted_weights(S, labels, margin, *, pos_mask, neg_mask) -> tuple[torch.Tensor, torch.Tensor]:
    """The GPW weights of Eq. 6 as Wang et al. 2019 print them, Eq. 7-8 (similarity form).

    ``w_ij^+ = e^{lambda - S_ij} / sum_{P_i} e^{lambda - S_ik}`` on a positive pair (Eq. 7) and
    ``w_ij^- = e^{S_ij} / sum_{N_i} e^{S_ik}`` on a negative pair (Eq. 8), for the anchors whose
    hinge is active (the others get no weight); 0 elsewhere. Detached magnitudes: autograd of
    :func:`lifted_loss` with ``reduction="sum"`` is ``w^- - w^+``
    (``tests/losses/test_lifted.py``). Both are soft-max weights, computed with the row's
    maximum subtracted (:func:`dmlbook.core.pairs.masked_softmax`), so none overflows.

    Returns
    -------
    w_pos, w_neg : Tensor of shape (B, B)
    """
    S, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    active = lifted_loss(S, labels, margin, reduction="none", pos_mask=pos, neg_mask=neg) > 0
    keep = active[:, None]
    w_pos = masked_softmax(margin - S, pos & keep, dim=1)  # Eq. 7
    w_neg = masked_softmax(S, neg & keep, dim=1)  # Eq. 8
    return w_pos, w_neg


@declared
def lifted_structure_loss(
    S,
    labels,
    margin: Real = 1.0,
    *,
    form: Form = "distance",
    squared_hinge: bool = True,
    joint_negatives: bool = True,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """The original, pairwise lifted structure loss (Song et al.; Liu et al., Eq. 14).

    For every kept ordered positive pair ``(i, j)`` and a dissimilarity ``d`` (``D`` by default):

    * ``joint_negatives=True`` (Song et al.): ``J_ij = d_ij + log(sum_{N_i} e^{m - d_ik} +
      sum_{N_j} e^{m - d_jl})``, one log over the negatives of both ends of the pair;
    * ``joint_negatives=False`` (Liu et al.'s Eq. 14 as printed): ``J_ij = d_ij + log sum_{N_i}
      e^{m - d_ik} + log sum_{N_j} e^{m - d_jl}``.

    The pair's term is ``[J_ij]_+^2 / 2`` (``squared_hinge=True``, Song et al.) or ``[J_ij]_+``.

    Parameters
    ----------
    margin : float
        ``m``. In pytorch-metric-learning's ``LiftedStructureLoss(neg_margin, pos_margin)`` the
        pair term is ``J - pos_margin`` with ``m = neg_margin``; only ``neg_margin - pos_margin``
        matters, and it is this ``margin``.
    form : {"distance", "similarity", "squared_distance"}
        Song et al. and Liu et al. use the Euclidean distance ``D``.
    squared_hinge, joint_negatives : bool
        Defaults reproduce Song et al. (and pytorch-metric-learning).
    reduction : {"mean", "sum", "none"}
        ``"mean"``: the average over the kept ordered positive pairs that have a negative term
        (each unordered pair appears twice with the same ``J``, so this is Song et al.'s
        ``1 / (2 |P|) sum_P [J]_+^2`` for ``squared_hinge``). ``"sum"``: the sum over ordered
        pairs. ``"none"``: the (B, B) matrix of pair terms.

    Returns
    -------
    Tensor
        A scalar (or (B, B)). A positive pair with no negative to compare with (an empty log,
        ``-inf``; for ``joint_negatives=False`` either end without negatives) contributes 0 with
        gradient 0 and is not counted. A single-class batch or a batch of one gives 0.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    d = dissimilarity(S, form)
    r, has_neg = masked_logsumexp(margin - d, neg, dim=1)  # r_i = log sum_{N_i} e^{m - d_ik}
    r_i, r_j = r[:, None], r[None, :]
    h_i, h_j = has_neg[:, None], has_neg[None, :]
    if joint_negatives:
        has_terms = h_i | h_j
        # An end without negatives enters as log 0 = -inf; where neither end has any, both enter
        # as 0 (a finite placeholder, masked below) so that logaddexp's gradient stays finite.
        neg_inf = torch.tensor(float("-inf"), dtype=d.dtype, device=d.device)
        zero = torch.zeros((), dtype=d.dtype, device=d.device)
        a = torch.where(h_i, r_i, torch.where(has_terms, neg_inf, zero))
        b = torch.where(h_j, r_j, torch.where(has_terms, neg_inf, zero))
        both = torch.logaddexp(a, b)
        neg_term = torch.where(has_terms, both, torch.zeros_like(d))
    else:
        has_terms = h_i & h_j
        neg_term = r_i + r_j
    J = d + neg_term
    per = torch.relu(J)
    if squared_hinge:
        per = per.square() / 2
    return reduce(per, reduction, pos & has_terms)


@declared
def lifted_star_loss(
    S, labels, alpha: Scale = 2.0, beta: Scale = 50.0, *, reduction, pos_mask, neg_mask
) -> torch.Tensor:
    """LiftedStruct*, Wang et al. 2019, Eq. 16.

    Anchor term ``(1/alpha) log sum_{P_i} e^{-alpha S_ik} + (1/beta) log sum_{N_i} e^{beta S_ik}``.
    Its GPW weights are soft-max weights within the anchor's positives and within its negatives:
    ``w_ij^- = e^{beta S_ij} / sum_{N_i} e^{beta S_ik}`` (Eq. 8 at temperature ``1/beta``),
    ``w_ij^+ = e^{-alpha S_ij} / sum_{P_i} e^{-alpha S_ik}`` (Eq. 7 likewise).

    Parameters
    ----------
    alpha, beta : float
        Positive temperatures; Wang et al. use ``alpha = 2``, ``beta = 50``.
    reduction : {"mean", "sum", "none"}
        ``"mean"``: Eq. 16's ``1/m`` average over anchors, taken over the anchors that have at
        least one pair. ``"sum"``, ``"none"`` (the (B,) anchor terms).

    Returns
    -------
    Tensor
        A scalar (or (B,)). The two halves are independent (there is no hinge), so an anchor
        without positives keeps its negative half and vice versa; an empty half is 0 with
        gradient 0. A batch without any pair gives 0.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    lse_pos, has_pos = masked_logsumexp(-alpha * S, pos, dim=1)
    lse_neg, has_neg = masked_logsumexp(beta * S, neg, dim=1)
    per = lse_pos / alpha + lse_neg / beta  # an empty half is exactly 0 already
    return reduce(per, reduction, has_pos | has_neg)


class LiftedLoss(PairLoss):
    """Module form of :func:`lifted_loss` (Wang et al. 2019, Eq. 6)."""

    loss_function = staticmethod(lifted_loss)


class LiftedStructureLoss(PairLoss):
    """Module form of :func:`lifted_structure_loss` (Song et al.; Liu et al., Eq. 14)."""

    loss_function = staticmethod(lifted_structure_loss)


class LiftedStarLoss(PairLoss):
    """Module form of :func:`lifted_star_loss` (LiftedStruct*, Wang et al. 2019, Eq. 16)."""

    loss_function = staticmethod(lifted_star_loss)

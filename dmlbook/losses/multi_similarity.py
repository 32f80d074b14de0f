"""The Multi-Similarity (MS) loss of Wang et al. 2019: mining (Eq. 11-12), weighting (Eq. 13-14), loss (Eq. 15).

Chapter: ``book/10_multi_similarity.ipynb``, 10.1 "Mining with Similarity-P (Eq. 11-12)", 10.2
"The loss, and its weights (Eq. 13-15)", 10.4 "dmlbook's implementation". Proof: the
``sy.prove_equal`` cells of 10.2 and 10.5 (:mod:`dmlbook.symbolic`). Tests:
``tests/losses/test_multi_similarity.py``; the paper-literal per-anchor loop is
:func:`dmlbook.reference.multi_similarity_loss_reference` (``tests/reference/test_ms_equivalence.py``).

MS works in two steps on the similarity matrix ``S`` of a batch, and each step is usable alone:

1. **Mining** with *Similarity-P* (:func:`dmlbook.mining.ms_mining_masks`). For anchor ``i`` a negative pair is
   kept when it is more similar than the anchor's hardest positive minus a margin ``epsilon``
   (Eq. 11), a positive pair when it is less similar than the anchor's hardest negative plus
   ``epsilon`` (Eq. 12)::

       S_ij^- > min_{y_k = y_i} S_ik - epsilon,        S_ij^+ < max_{y_k != y_i} S_ik + epsilon.

   The kept index sets are ``P_i`` and ``N_i``.
2. **Weighting** with *Similarity-S* and *Similarity-N* (:func:`ms_weights`, Eq. 13-14)::

       w_ij^- = e^{beta (S_ij - lambda)}   / (1 + sum_{k in N_i} e^{beta (S_ik - lambda)}),
       w_ij^+ = e^{-alpha (S_ij - lambda)} / (1 + sum_{k in P_i} e^{-alpha (S_ik - lambda)}).

The MS loss (Eq. 15, :func:`multi_similarity_loss`) is the function whose GPW weights are exactly
these, ``dL_i/dS_ij = +w_ij^-`` on a mined negative and ``-w_ij^+`` on a mined positive::

    L_MS = (1/m) sum_i { (1/alpha) log[1 + sum_{P_i} e^{-alpha (S_ik - lambda)}]
                         + (1/beta) log[1 + sum_{N_i} e^{beta (S_ik - lambda)}] }.

:func:`ms_mining_loss` is the "MS mining" row of the paper's ablation (Table 2): the mined pairs
with equal weights. :mod:`dmlbook.losses.ablation` builds every row of Table 2, and
:mod:`dmlbook.reference.multi_similarity` holds a slow per-anchor loop written from the paper's
text, which the tests compare this vectorised code with.

Semantics (what the paper leaves open, and what dmlbook chose)
---------------------------------------------------------------
* **Self pairs** are excluded *by index* (:func:`dmlbook.core.similarity.pair_masks`), so a duplicate
  image of the same class (``S = 1``) is a positive pair. The authors' code instead drops every
  positive with ``S >= 1 - 1e-5``, duplicates included.
* **Thresholds** come from the *unmined* sets: Eq. 11 uses the minimum over all the anchor's
  positives, Eq. 12 the maximum over all its negatives (as in the authors' code and in
  pytorch-metric-learning's ``MultiSimilarityMiner``). Inequalities are strict and evaluated as
  printed, ``S > min - epsilon`` and ``S < max + epsilon`` (the reference codes write
  ``S + epsilon > min`` and ``S - epsilon < max``: the same sets except for ties within one
  rounding error).
* **Both or neither.** An anchor's hardest positive is mined iff
  ``min_P S < max_N S + epsilon`` and its hardest negative iff ``max_N S > min_P S - epsilon``,
  the same condition (up to a tie within one rounding error), so an anchor gets mined positives
  *and* negatives, or nothing at all (also when it has no positive, e.g. a singleton class, or
  no negative, e.g. a one-class batch).
* **Empty sets.** An empty ``P_i`` or ``N_i`` contributes ``log(1 + 0) = 0`` with gradient 0; an
  anchor with nothing mined contributes 0. The mean divides by **all** ``B`` anchors (the paper's
  ``1/m`` with ``m`` the batch size; the authors' code and pytorch-metric-learning do the same),
  so such anchors still count. ``reduction="sum"`` and ``"none"`` are available.
* **Mining carries no gradient**: it reads ``S`` detached, so the loss is differentiable
  wherever no pair sits exactly on a mining threshold, with the gradient of Eq. 15 for the fixed
  sets ``P_i``, ``N_i``.

Numerics
--------
Both log-sum-exps go through :func:`dmlbook.core.pairs.masked_logsumexp`, which shifts every exponent
by its row's maximum (including the implicit ``0`` of the ``1 +``), so nothing overflows for any
``alpha, beta > 0``, ``lambda`` and finite ``S``, in float32 as in float64, and an empty set is
0 with gradient 0. Half-precision inputs (``bfloat16``/``float16``, e.g. ``S`` from a matmul
under ``torch.autocast``) are computed in float32 and the gradient is returned in the input's
dtype. Autograd differentiates :func:`multi_similarity_loss` as written (double backward works);
:func:`ms_weights` computes Eq. 13-14 as printed, and the tests hold the two equal.
``bench/bench_ms.py`` times the loss against pytorch-metric-learning and the bare ``X X^T``.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ..core.declaration import declared
from ..core.pairs import masked_logsumexp, masked_softmax, pair_sets, reduce
from ..core.validation import NonNegative, Number, Real, Scale
from ..mining.multi_similarity import ms_mining_masks
from .base import PairLoss

__all__ = [
    "MSMiningLoss",
    "MultiSimilarityLoss",
    "ms_anchor_weights",
    "ms_case_weights",
    "ms_mining_loss",
    "ms_weights",
    "multi_similarity_loss",
]

# Defaults (every function here): alpha = 2, beta = 50, epsilon = 0.1 are the paper's Sec. 5
# values; margin = 0.5 is the authors' public code's and pytorch-metric-learning's ``base``. The
# paper's Sec. 5 states lambda = 1, for which a negative at S = 0.5 gets weight at most e^{-25}
# (Eq. 13): pass it explicitly.


@declared
def ms_weights(
    S, labels, alpha: Scale = 2.0, beta: Scale = 50.0, margin: Real = 0.5, *, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """MS pair weighting with *Similarity-S* and *Similarity-N*, Wang et al. 2019, Eq. 13-14.

    Parameters
    ----------
    alpha, beta : float
        Scales of the positive and negative weights (> 0).
    margin : float
        ``lambda``.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        The sets ``P_i``, ``N_i`` (e.g. from :func:`ms_mining_masks`); without them every
        positive and every negative pair is weighted ("MS weighting" of Table 2).

    Returns
    -------
    w_pos, w_neg : Tensor of shape (B, B)
        The GPW weights (magnitudes, ``>= 0``) of Eq. 14 on ``P_i`` and Eq. 13 on ``N_i``; 0
        elsewhere. They are the gradient of :func:`multi_similarity_loss` with
        ``reduction="sum"``: ``dL/dS = w_neg - w_pos``. Detached (weights are numbers, Eq. 2).

    Notes
    -----
    Written as ``w_ij^- = exp(beta (S_ij - lambda) - log(1 + sum_{N_i} e^{beta (S_ik - lambda)}))``
    with the row maximum subtracted first (:func:`dmlbook.core.pairs.masked_softmax`), so it is
    finite for any ``S``, ``alpha``, ``beta``. The weights of one anchor's negatives sum to less
    than 1: the ``1 +`` is the share left to *Similarity-S* (an anchor whose negatives are all
    far below ``lambda`` has tiny weights).
    """
    S, pos, neg = pair_sets(S.detach(), labels, pos_mask, neg_mask)
    w_pos = masked_softmax(-alpha * (S - margin), pos, dim=1, add_one=True)  # Eq. 14
    w_neg = masked_softmax(beta * (S - margin), neg, dim=1, add_one=True)  # Eq. 13
    return w_pos, w_neg


@declared(like=ms_weights)
def ms_anchor_weights(
    s_pos: torch.Tensor, s_neg: torch.Tensor, alpha, beta, margin
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 13-14 for one anchor, given its (already mined) similarities; batched over leading dims.

    Parameters
    ----------
    s_pos : Tensor of shape (..., P)
        The anchor's similarities to its positives ``P_i`` (``P = 0`` allowed).
    s_neg : Tensor of shape (..., N)
        Its similarities to its negatives ``N_i``.
    alpha, beta, margin : float

    Returns
    -------
    w_pos, w_neg : Tensor of shapes (..., P) and (..., N)
        GPW weights (magnitudes). Handy for plots: put a grid of configurations in the leading
        dimensions (e.g. the blog's Case 1/2/3 of a negative pair).
    """
    s_pos, s_neg = torch.as_tensor(s_pos), torch.as_tensor(s_neg)

    def weights(x: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)
        lse = torch.logsumexp(torch.cat([x, zeros], dim=-1), dim=-1, keepdim=True)
        return torch.exp(x - lse)

    return weights(-alpha * (s_pos - margin)), weights(beta * (s_neg - margin))


@declared(like=ms_weights)
def ms_case_weights(
    s: torch.Tensor | float,
    others_harder_by: float,
    n_others: Annotated[int, Number(0, 10**6, "other pairs", integer=True)] = 5,
    *,
    positive: bool = False,
    alpha,
    beta,
    margin,
) -> torch.Tensor:
    """Weight of one pair against ``n_others`` pairs of the same kind that are all equally hard.

    The set-up of the three cases in the blog post on MS (seed 001): an anchor's negative (or
    positive) pair at similarity ``s`` and ``n_others`` other negatives (positives) of the same
    anchor, all at the same similarity. A harder negative is a *more* similar one, a harder
    positive a *less* similar one, so the others sit at ``s + others_harder_by`` (negatives) or
    ``s - others_harder_by`` (positives), clipped to [-1, 1]. Case 1 is ``others_harder_by < 0``,
    Case 2 ``= 0``, Case 3 ``> 0``; Eq. 13-14 give Case 1 > Case 2 > Case 3.

    Parameters
    ----------
    s : Tensor or float
        Similarities of the pair (any shape; one weight per entry).
    others_harder_by : float
        How much harder the other pairs are, in similarity units.
    n_others : int
        Number of other pairs (0: the pair alone, whose weight is then
        ``sigmoid(beta (s - lambda))`` for a negative, binomial deviance's Similarity-S shape).
    positive : bool
        Weigh a positive pair (Eq. 14) instead of a negative one (Eq. 13).
    alpha, beta, margin : float

    Returns
    -------
    Tensor
        The weight (magnitude), shaped like ``s``.
    """
    s = torch.as_tensor(s, dtype=torch.get_default_dtype() if not torch.is_tensor(s) else None)
    sign = -1.0 if positive else 1.0
    others = (s + sign * others_harder_by).clamp(-1.0, 1.0)
    row = torch.cat([s[..., None], others[..., None].expand(*s.shape, n_others)], dim=-1)
    none = row[..., :0]
    w_pos, w_neg = ms_anchor_weights(
        row if positive else none, none if positive else row, alpha, beta, margin
    )
    return (w_pos if positive else w_neg)[..., 0]


@declared(like=ms_weights)
def multi_similarity_loss(
    S,
    labels,
    alpha,
    beta,
    margin,
    epsilon: NonNegative = 0.1,
    *,
    mining: bool = True,
    reduction,
    pos_mask,
    neg_mask,
) -> torch.Tensor:
    """The Multi-Similarity loss, Wang et al. 2019, Eq. 15 (with the mining of Eq. 11-12).

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of the batch (any floating dtype; half precision is computed in
        float32).
    alpha, beta : float
        Scales of the positive and negative terms (> 0). Defaults: the paper's Sec. 5 values
        ``alpha = 2``, ``beta = 50``.
    margin : float
        ``lambda``. Default 0.5, the value of the authors' public code and of
        pytorch-metric-learning (``base``). The paper's Sec. 5 states ``lambda = 1``; then a
        negative at ``S = 0.5`` gets weight at most ``e^{-25}`` (Eq. 13), so only negatives
        close to ``S = 1`` are pushed at all. Pass it explicitly.
    epsilon : float
        Mining margin of Eq. 11-12 (paper: 0.1). Ignored when ``mining=False``.
    mining : bool
        ``True``: ``P_i``, ``N_i`` are the pairs mined by :func:`ms_mining_masks` (the MS loss).
        ``False``: every pair is kept ("MS weighting" of Table 2).
    reduction : {"mean", "sum", "none"}
        ``"mean"``: the paper's ``1/m`` average over **all** ``B`` anchors (anchors with
        nothing mined count, with 0). ``"sum"``: its gradient is exactly Eq. 13-14
        (:func:`ms_weights`). ``"none"``: the (B,) anchor terms.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs; they narrow the label masks before mining.

    Returns
    -------
    Tensor
        A scalar (or (B,)) in the compute dtype (float32 for half-precision ``S``). Never NaN
        for finite ``S``: empty sets contribute 0 with gradient 0, a batch of one gives 0.

    Examples
    --------
    >>> S = torch.tensor([[1.0, 0.5, 0.45], [0.5, 1.0, 0.1], [0.45, 0.1, 1.0]])
    >>> round(float(multi_similarity_loss(S, torch.tensor([0, 0, 1]), margin=0.5)), 4)
    0.1161
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    if mining:  # Eq. 11-12
        pos, neg = ms_mining_masks(S, labels, epsilon, pos_mask=pos, neg_mask=neg)
    x = S - margin
    # Eq. 15: log(1 + sum_{P_i} e^{-alpha (S_ik - lambda)}) over the positives and
    # log(1 + sum_{N_i} e^{beta (S_ik - lambda)}) over the negatives, in one masked log-sum-exp
    exponents, sets = torch.stack([-alpha * x, beta * x]), torch.stack([pos, neg])
    lse, _ = masked_logsumexp(exponents, sets, dim=2, add_one=True)
    per = lse[0] / alpha + lse[1] / beta
    return reduce(per, reduction)


@declared(like=multi_similarity_loss)
def ms_mining_loss(S, labels, epsilon, *, mining, reduction, pos_mask, neg_mask) -> torch.Tensor:
    """The "MS mining" row of Wang et al. 2019, Table 2: mined pairs, each with the same weight.

    Anchor term ``sum_{k in N_i} S_ik - sum_{k in P_i} S_ik``, so that ``dL_i/dS_ij = +1`` on
    every mined negative and ``-1`` on every mined positive: mining by *Similarity-P* (Eq. 11-12)
    and nothing else (Sec. 5.1 gives every selected pair the same weight). The loss is linear in
    ``S``; the mining keeps it in check, dropping a positive once it is more similar than every
    negative (plus ``epsilon``) and a negative once it is less similar than every positive
    (minus ``epsilon``).

    Parameters
    ----------
    epsilon : float
        Mining margin (Eq. 11-12).
    mining : bool
        ``False`` keeps every pair (an equal-weight loss without any similarity).
    reduction : {"mean", "sum", "none"}
        As in :func:`multi_similarity_loss` (``"mean"`` divides by all ``B`` anchors).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs, narrowing the label masks before mining.
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    if mining:  # Eq. 11-12
        pos, neg = ms_mining_masks(S, labels, epsilon, pos_mask=pos, neg_mask=neg)
    zero = torch.zeros((), dtype=S.dtype, device=S.device)
    per = torch.where(neg, S, zero).sum(dim=1) - torch.where(pos, S, zero).sum(dim=1)
    return reduce(per, reduction)


class MultiSimilarityLoss(PairLoss):
    """Module form of :func:`multi_similarity_loss` (Wang et al. 2019, Eq. 11-15).

    ``MultiSimilarityLoss()(embeddings, labels)`` normalises the embeddings, forms ``S``, mines
    (Eq. 11-12) and returns Eq. 15. Defaults: ``alpha=2, beta=50, epsilon=0.1`` (paper, Sec. 5)
    and ``margin=0.5`` (authors' code, pytorch-metric-learning; the paper states ``lambda = 1``).
    """

    loss_function = staticmethod(multi_similarity_loss)


class MSMiningLoss(PairLoss):
    """Module form of :func:`ms_mining_loss` ("MS mining" of Wang et al. 2019, Table 2)."""

    loss_function = staticmethod(ms_mining_loss)

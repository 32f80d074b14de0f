"""Mining: which pairs (or triplets) of a batch a loss is allowed to see, as boolean masks.

Every miner of dmlbook is here, and this module imports only the pair algebra
(:mod:`dmlbook.pairs`), so the losses can import it without a cycle. Chapters:
``book/04_triplet.ipynb``, 4.3 "Mining: which triplets enter"; ``book/07_npair.ipynb``, 7.4 "The
N-pair batch"; ``book/10_multi_similarity.ipynb``, 10.1 "Mining with Similarity-P (Eq. 11-12)".
Tests: ``tests/test_mining.py``; the per-anchor MS mining loop is
:func:`dmlbook.reference.ms_mining_reference` (``tests/reference/test_ms_equivalence.py``).

Every miner here returns masks, never index lists, so that its output composes with the
losses of :mod:`dmlbook.losses` (which take ``pos_mask``/``neg_mask``) by logical and.

Pair masks, shape (B, B), are enough for every selection that is made *per pair* or *per anchor*:
all pairs, batch-hard (one hardest positive and one hardest negative per anchor, Hermans et al.
as implemented by pytorch-metric-learning's ``BatchHardMiner``), easy-positive / hard-negative
(Xuan & Pless, Sec. 4), the N-pair construction
(Liu et al., Eq. 13) and MS mining with *Similarity-P* (Wang et al. 2019, Eq. 11-12). A triplet loss fed pair masks uses every triplet ``(a, p, n)`` with
``pos[a, p]`` and ``neg[a, n]``.

Selections that depend on the *triplet* (semi-hard negatives: ``d_ap < d_an < d_ap + m``; the
margin-violating triplets of Wang et al.'s Eq. 5 discussion) cannot be written as pair masks: a
negative can be semi-hard for one positive of its anchor and not for another. For those this
module returns a (B, B, B) bool *triplet mask* ``T[a, p, n]``, which
:func:`dmlbook.losses.triplet_loss` accepts as ``triplet_mask``. Its memory grows as ``B^3``
(16 M entries, 16 MB, at B = 256), the same as the all-triplets loss itself.

Miners never carry gradients: they read ``S`` detached.
"""

from __future__ import annotations

import torch

from .pairs import (
    FORMS,
    check_choice,
    check_nonnegative,
    check_similarity,
    compute_dtype,
    dissimilarity,
    pair_masks,
    resolve_masks,
)
from .validation import as_labels

__all__ = [
    "TRIPLET_KINDS",
    "all_pair_masks",
    "all_triplet_mask",
    "batch_hard_masks",
    "easy_positive_masks",
    "margin_triplet_mask",
    "ms_distance_mining_masks",
    "ms_mining_masks",
    "npair_masks",
    "npair_negatives",
    "npair_pairs",
    "threshold_pair_masks",
    "semihard_triplet_mask",
]

#: Triplet selections by the margin ``t = d_an - d_ap`` of a triplet (``d`` the dissimilarity of
#: the loss's form). pytorch-metric-learning's ``TripletMarginMiner`` calls ``"violating"`` "all";
#: it is Liu et al.'s triplet-margin mining, Eq. 19 (``D_ap + m >= D_an``).
TRIPLET_KINDS: dict[str, str] = {
    "violating": "t <= margin (the triplet's hinge [d_ap - d_an + margin]_+ is active or at 0)",
    "hard": "t <= 0 (the negative is at least as close as the positive)",
    "semihard": "0 < t <= margin (farther than the positive, but inside the margin)",
    "easy": "t > margin (already satisfied)",
}


def all_pair_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All positive pairs ``i != j`` and all negative pairs of a batch (no mining).

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
    """
    return pair_masks(as_labels(labels))


def all_triplet_mask(
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Every valid triplet: ``T[a, p, n] = pos[a, p] and neg[a, n]``.

    Parameters
    ----------
    labels : Tensor of shape (B,)
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Narrow the label masks first (as the losses do).

    Returns
    -------
    bool Tensor of shape (B, B, B)
    """
    y = as_labels(labels)
    B = y.shape[0]
    pos, neg = resolve_masks(y, pos_mask, neg_mask, (B, B))
    return pos[:, :, None] & neg[:, None, :]


def batch_hard_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch-hard mining: per anchor, its least similar positive and its most similar negative.

    In distances: the farthest positive and the *nearest* negative. Liu et al. review this
    selection as their Eq. 20 but print the negative rule with ``max`` over the negative
    distances, which would pick the easiest negative; the hardest one is the ``min``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities. The hardest pairs are the same for every form of a loss, since the
        distance ``D = sqrt(2 - 2 S)`` is a decreasing function of ``S``.
    labels : Tensor of shape (B,)
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidates to choose from (narrowing the label masks).

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
        At most one ``True`` per row in each. An anchor that lacks a positive or a negative gets
        neither (an empty row in both), so a triplet loss fed these masks sees exactly one
        triplet ``(a, hardest p, hardest n)`` per anchor that has both, as pytorch-metric-learning's
        ``BatchHardMiner`` does. Ties go to the lowest column index.
    """
    return _one_triplet_per_anchor(S, labels, pos_mask, neg_mask, easiest_positive=False)


def easy_positive_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Easy-positive / hard-negative mining (Xuan & Pless, Sec. 4, after their ref. [23]): per
    anchor, its *most* similar positive and its most similar negative.

    Parameters and returns as :func:`batch_hard_masks` (one triplet per anchor that has both;
    ties to the lowest column index).
    """
    return _one_triplet_per_anchor(S, labels, pos_mask, neg_mask, easiest_positive=True)


def _one_triplet_per_anchor(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_mask: torch.Tensor | None,
    neg_mask: torch.Tensor | None,
    easiest_positive: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One positive (the least or the most similar) and the most similar negative per anchor."""
    y = check_similarity(S, labels)
    B = S.shape[0]
    pos, neg = resolve_masks(y, pos_mask, neg_mask, (B, B))
    s = S.detach()
    inf = torch.tensor(float("inf"), dtype=s.dtype, device=s.device)
    if easiest_positive:
        chosen_p = torch.where(pos, s, -inf).argmax(dim=1)
    else:
        chosen_p = torch.where(pos, s, inf).argmin(dim=1)
    chosen_n = torch.where(neg, s, -inf).argmax(dim=1)
    keep = pos.any(dim=1) & neg.any(dim=1)
    rows = torch.arange(B, device=S.device)
    out_p = torch.zeros_like(pos)
    out_n = torch.zeros_like(neg)
    out_p[rows[keep], chosen_p[keep]] = True
    out_n[rows[keep], chosen_n[keep]] = True
    return out_p, out_n


def margin_triplet_mask(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    kind: str = "violating",
    *,
    form: str = "similarity",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triplets selected by their margin ``t = d_an - d_ap`` (see :data:`TRIPLET_KINDS`).

    Parameters
    ----------
    S : Tensor of shape (B, B)
    labels : Tensor of shape (B,)
    margin : float
        The triplet loss's margin, in the units of ``form``.
    kind : {"violating", "hard", "semihard", "easy"}
        ``"violating"`` keeps the triplets that Wang et al. (below Eq. 5) call valid,
        ``S_an + lambda > S_ap`` (here with ``>=``, as pytorch-metric-learning does);
        ``"semihard"`` the semi-hard ones of Schroff et al. (FaceNet), ``d_ap < d_an <= d_ap + m``.
    form : {"similarity", "distance", "squared_distance"}
        What ``d`` is: ``-S``, ``D`` or ``D^2`` (the kinds are not the same in every form: a
        margin on ``S`` is not a margin on ``D``).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional

    Returns
    -------
    bool Tensor of shape (B, B, B)
        ``T[a, p, n]``; only valid triplets (``pos[a, p]`` and ``neg[a, n]``) can be ``True``.
    """
    check_choice(kind, tuple(TRIPLET_KINDS), "kind")
    check_choice(form, FORMS, "form")
    y = check_similarity(S, labels)
    valid = all_triplet_mask(y, pos_mask=pos_mask, neg_mask=neg_mask)
    d = dissimilarity(S.detach(), form)
    t = d[:, None, :] - d[:, :, None]  # t[a, p, n] = d_an - d_ap
    if kind == "violating":
        chosen = t <= margin
    elif kind == "hard":
        chosen = t <= 0
    elif kind == "semihard":
        chosen = (t > 0) & (t <= margin)
    else:
        chosen = t > margin
    return valid & chosen


def semihard_triplet_mask(
    S: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    *,
    form: str = "similarity",
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Semi-hard triplets, ``0 < d_an - d_ap <= margin`` (Schroff et al.; see :func:`margin_triplet_mask`)."""
    return margin_triplet_mask(
        S, labels, margin, "semihard", form=form, pos_mask=pos_mask, neg_mask=neg_mask
    )


def npair_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The N-pair construction (Sohn; Liu et al., Eq. 13) as pair masks.

    From every class with at least two samples, its first sample (lowest index) is the anchor
    ``a_c`` and its second sample the positive ``p_c``. Anchor ``a_c`` is contrasted with the
    positives of the other classes, ``p_k`` for ``k != c`` (one negative per other class).
    Classes with one sample take no part. This is the pair choice of pytorch-metric-learning's
    ``NPairsLoss`` (first positive pair per label in index order).

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
        ``pos[a_c, p_c]`` for every class ``c``; ``neg[a_c, p_k]`` for every pair of classes
        ``c != k``. Every other entry is ``False``.
    """
    y = as_labels(labels)
    B = y.shape[0]
    anchors, positives = npair_pairs(y)
    pos = torch.zeros(B, B, dtype=torch.bool, device=y.device)
    pos[anchors, positives] = True
    neg = torch.zeros_like(pos)
    neg[anchors] = npair_negatives(y, anchors, positives)
    return pos, neg


def npair_pairs(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The N-pair construction as index lists: the anchor and the positive of every class.

    ``anchors[c]`` is the first sample (lowest index) of the c-th class with at least two samples
    (classes in increasing label order), ``positives[c]`` its second sample; see
    :func:`npair_masks`, whose pairs these are.
    """
    B = labels.shape[0]
    dev = labels.device
    if B < 2:
        empty = torch.zeros(0, dtype=torch.long, device=dev)
        return empty, empty
    order = torch.sort(labels, stable=True).indices
    ys = labels[order]
    starts = torch.ones(B, dtype=torch.bool, device=dev)
    starts[1:] = ys[1:] != ys[:-1]
    idx = torch.arange(B, device=dev)
    start_of = torch.cummax(torch.where(starts, idx, torch.zeros_like(idx)), dim=0).values
    second = (idx - start_of) == 1  # position of each sorted sample within its class
    return order[torch.nonzero(second).flatten() - 1], order[second]


def npair_negatives(
    labels: torch.Tensor, anchors: torch.Tensor, positives: torch.Tensor
) -> torch.Tensor:
    """The rows of :func:`npair_masks`' negative mask at ``anchors``: the other classes' positives.

    Returns a bool Tensor of shape ``(len(anchors), B)``.

    Examples
    --------
    >>> labels = torch.tensor([0, 0, 1, 1, 2, 2])
    >>> anchors, positives = npair_pairs(labels)
    >>> npair_negatives(labels, anchors, positives).int()
    tensor([[0, 0, 0, 1, 0, 1],
            [0, 1, 0, 0, 0, 1],
            [0, 1, 0, 1, 0, 0]], dtype=torch.int32)
    """
    chosen = torch.zeros(labels.shape[0], dtype=torch.bool, device=labels.device)
    chosen[positives] = True
    return chosen[None, :] & (labels[anchors, None] != labels[None, :])


# ----------------------------------------------------------------------------- MS mining


def check_epsilon(epsilon: float) -> float:
    """The MS mining margin ``epsilon`` of Eq. 11-12: a finite number >= 0, as a float."""
    return check_nonnegative(epsilon, "epsilon", " (Wang et al. use 0.1)")


def hardest(
    s: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the least similar positive (``+inf`` if none), the most similar negative (``-inf``)."""
    inf = torch.full((), float("inf"), dtype=s.dtype, device=s.device)
    min_pos = torch.where(pos, s, inf).amin(dim=1)
    max_neg = torch.where(neg, s, -inf).amax(dim=1)
    return min_pos, max_neg


def ms_mining_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    epsilon: float = 0.1,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MS pair mining with *Similarity-P*, Wang et al. 2019, Eq. 11-12.

    For anchor ``i`` a negative pair is kept when it is more similar than the anchor's hardest
    positive minus ``epsilon`` (Eq. 11), a positive pair when it is less similar than the
    anchor's hardest negative plus ``epsilon`` (Eq. 12)::

        S_ij^- > min_{y_k = y_i} S_ik - epsilon,        S_ij^+ < max_{y_k != y_i} S_ik + epsilon.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities (read detached: mining carries no gradient).
    labels : Tensor of shape (B,)
    epsilon : float
        The margin ``epsilon`` of Eq. 11-12 (>= 0; the paper uses 0.1).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs. They narrow the label masks *before* mining, so the thresholds are
        taken over the candidates.

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
        ``pos[i, j]`` iff ``j`` is a positive of ``i`` with ``S_ij < max_{N} S_ik + epsilon``
        (Eq. 12); ``neg[i, j]`` iff ``j`` is a negative of ``i`` with
        ``S_ij > min_{P} S_ik - epsilon`` (Eq. 11). The thresholds come from the unmined sets;
        the diagonal is never a pair. An anchor gets mined positives and negatives, or neither
        (see the "Semantics" of :mod:`dmlbook.losses.multi_similarity`): in particular an
        anchor with no positive (a singleton class) or no negative (a one-class batch) gets an
        empty row in both.

    Examples
    --------
    >>> S = torch.tensor([[1.0, 0.5, 0.45, -0.2], [0.5, 1.0, 0.1, 0.0],
    ...                   [0.45, 0.1, 1.0, 0.3], [-0.2, 0.0, 0.3, 1.0]])
    >>> pos, neg = ms_mining_masks(S, torch.tensor([0, 0, 1, 1]))
    >>> pos[0].tolist(), neg[0].tolist()
    ([False, True, False, False], [False, False, True, False])
    """
    eps = check_epsilon(epsilon)
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    s = S.detach().to(compute_dtype(S))
    min_pos, max_neg = hardest(s, pos, neg)  # thresholds from the unmined sets
    mined_pos = pos & (s < (max_neg + eps)[:, None])  # Eq. 12
    mined_neg = neg & (s > (min_pos - eps)[:, None])  # Eq. 11
    return mined_pos, mined_neg


# ----------------------------------------------------------------------------- Liu et al.: mining on D
#
# Liu et al.'s own miners (Sec. III-A) work on Euclidean distances ``D = sqrt(2 - 2 S)`` of unit
# vectors. Chapter: ``book/11_liu_weighting.ipynb``, 11.1 "Mining on distances". Tests:
# ``tests/test_mining_liu.py``; the per-anchor loop is :mod:`dmlbook.reference.liu_weighting`.


def _distances(S: torch.Tensor) -> torch.Tensor:
    """Detached Euclidean distances of unit vectors, ``D = sqrt(2 - 2 S)`` (Liu et al., Eq. 1)."""
    return dissimilarity(S.detach().to(compute_dtype(S)), "distance")


def threshold_pair_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_margin: float = 0.0,
    neg_margin: float = 0.8,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positive and negative thresholds on distances, Liu et al., Eq. 16-17.

    A positive pair is kept when ``D_ij >= m1`` (Eq. 16), a negative pair when ``D_ij <= m2``
    (Eq. 17); ``0 <= m1 <= m2``. Inequalities are evaluated as printed (non-strict). The pairs
    on a threshold are kept, but their hinge ``[D - m1]_+`` or ``[m2 - D]_+`` in Eq. 18 is 0, so
    they carry no gradient.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of unit vectors (read detached; ``D = sqrt(2 - 2 S)``).
    labels : Tensor of shape (B,)
    pos_margin, neg_margin : float
        ``m1`` and ``m2`` (Liu et al. use ``m1 = 0``, ``m2 = 0.8``; ``m2 = 1.0`` on SOP).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs; they narrow the label masks.

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
    """
    m1 = check_nonnegative(pos_margin, "pos_margin", " (Liu et al. use m1 = 0)")
    m2 = check_nonnegative(neg_margin, "neg_margin", " (Liu et al. use m2 = 0.8)")
    if m1 > m2:
        raise ValueError(
            f"Eq. 16-17 need 0 <= pos_margin <= neg_margin, got pos_margin={m1}, neg_margin={m2}."
        )
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    D = _distances(S)
    return pos & (D >= m1), neg & (D <= m2)


def ms_distance_mining_masks(
    S: torch.Tensor,
    labels: torch.Tensor,
    epsilon: float = 0.1,
    *,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """MS mining written on distances, Liu et al., Eq. 22-23.

    For anchor ``i``::

        D_ij^+ >= min_{y_ik = 0} D_ik - epsilon       (Eq. 22, a positive is kept)
        D_ik^- <= max_{y_ij = 1} D_ij + epsilon       (Eq. 23, a negative is kept)

    This is *not* Wang et al.'s Eq. 11-12 (:func:`ms_mining_masks`) with ``S`` replaced by
    ``-D``: the margin ``epsilon`` is a distance here and a similarity there, and ``D = sqrt(2 -
    2 S)`` is not affine in ``S``, so the same ``epsilon`` keeps different pairs (the
    inequalities are also non-strict here, strict there). Both rules agree at ``epsilon = 0``
    up to ties; ``tests/test_mining_liu.py`` shows a batch where they differ at ``epsilon = 0.1``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of unit vectors (read detached).
    labels : Tensor of shape (B,)
    epsilon : float
        The margin ``epsilon`` of Eq. 22-23, a distance (>= 0; Liu et al. use 0.1).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs; they narrow the label masks *before* mining, so the hardest pairs are
        taken over the candidates (e.g. the pairs kept by :func:`threshold_pair_masks`, as in
        Liu et al.'s Table II "+ triplet margin").

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
        An anchor without a negative keeps no positive and one without a positive keeps no
        negative (the minimum or maximum of an empty set does not exist).
    """
    eps = check_epsilon(epsilon)
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    D = _distances(S)
    # On -D the hardest pairs are :func:`hardest`'s: -(farthest positive), -(nearest negative).
    minus_farthest_pos, minus_nearest_neg = hardest(-D, pos, neg)
    keep_pos = D >= (-minus_nearest_neg - eps)[:, None]
    return pos & keep_pos, neg & (D <= (eps - minus_farthest_pos)[:, None])

"""Liu et al.'s miners on distances (Sec. III-A): Eq. 16-17 thresholds and MS mining written on
``D`` (Eq. 22-23).

They work on Euclidean distances ``D = sqrt(2 - 2 S)`` of unit vectors. Chapter:
``book/11_liu_weighting.ipynb``, 11.1 "Mining on distances". Tests:
``tests/mining/test_distance.py``; the per-anchor loop is :mod:`dmlbook.reference.liu_weighting`.
"""

from __future__ import annotations

from typing import Annotated

import torch

from ..core.declaration import declared
from ..core.pairs import dissimilarity, pair_sets
from ..core.validation import Number
from .multi_similarity import hardest, ms_mining_masks

#: Liu et al.'s thresholds ``m1``, ``m2`` of Eq. 16-17, distances of unit vectors.
Threshold = Annotated[float, Number(0.0, 1e6, "a distance; Liu et al. use m1 = 0, m2 = 0.8")]


def _distances(S: torch.Tensor) -> torch.Tensor:
    """Detached Euclidean distances of unit vectors, ``D = sqrt(2 - 2 S)`` (Liu et al., Eq. 1).

    ``S`` comes from :func:`~dmlbook.core.pairs.pair_sets`, already in the dtype the miners
    compute in (float32 for half precision)."""
    return dissimilarity(S.detach(), "distance")


def margins_in_order(pos_margin: float, neg_margin: float) -> None:
    """Eq. 16-17 keep a positive pair above ``m1`` and a negative one below ``m2 >= m1``."""
    if pos_margin > neg_margin:
        raise ValueError(
            "Eq. 16-17 need 0 <= pos_margin <= neg_margin, got "
            f"pos_margin={pos_margin}, neg_margin={neg_margin}."
        )


@declared(rules=(margins_in_order,))
def threshold_pair_masks(
    S, labels, pos_margin: Threshold = 0.0, neg_margin: Threshold = 0.8, *, pos_mask, neg_mask
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
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    D = _distances(S)
    return pos & (D >= pos_margin), neg & (D <= neg_margin)


@declared(like=ms_mining_masks)
def ms_distance_mining_masks(
    S, labels, epsilon, *, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """MS mining written on distances, Liu et al., Eq. 22-23.

    For anchor ``i``::

        D_ij^+ >= min_{y_ik = 0} D_ik - epsilon       (Eq. 22, a positive is kept)
        D_ik^- <= max_{y_ij = 1} D_ij + epsilon       (Eq. 23, a negative is kept)

    This is *not* Wang et al.'s Eq. 11-12 (:func:`ms_mining_masks`) with ``S`` replaced by
    ``-D``: the margin ``epsilon`` is a distance here and a similarity there, and ``D = sqrt(2 -
    2 S)`` is not affine in ``S``, so the same ``epsilon`` keeps different pairs (the
    inequalities are also non-strict here, strict there). Both rules agree at ``epsilon = 0``
    up to ties; ``tests/mining/test_distance.py`` shows a batch where they differ at ``epsilon = 0.1``.

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
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    D = _distances(S)
    # On -D the hardest pairs are :func:`hardest`'s: -(farthest positive), -(nearest negative).
    minus_farthest_pos, minus_nearest_neg = hardest(-D, pos, neg)
    keep_pos = D >= (-minus_nearest_neg - epsilon)[:, None]
    return pos & keep_pos, neg & (D <= (epsilon - minus_farthest_pos)[:, None])

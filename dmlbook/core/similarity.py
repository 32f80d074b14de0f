"""Similarities, distances and pair masks: the objects every pair-based loss is written on.

On the unit sphere the squared Euclidean distance and the cosine similarity are tied by
``D^2 = 2 - 2 S`` (Liu et al., Sec. III), so a loss written on ``S`` can always be read as a
loss on distances and vice versa.
"""

from __future__ import annotations

import torch

#: The default lower bound on a norm (:func:`l2_normalize`, :func:`cosine_similarity`).
NORM_EPS = 1e-12

__all__ = [
    "l2_normalize",
    "cosine_similarity",
    "euclidean_distances",
    "squared_distance_from_similarity",
    "pair_masks",
]


def l2_normalize(x: torch.Tensor, eps: float = NORM_EPS) -> torch.Tensor:
    """Scale every row of ``x`` to unit Euclidean norm.

    Parameters
    ----------
    x : Tensor of shape (N, d)
    eps : float
        Lower bound on the norm, so that a zero row stays finite.
    """
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def cosine_similarity(
    x: torch.Tensor, y: torch.Tensor | None = None, *, normalize: bool = True
) -> torch.Tensor:
    """Cosine similarity matrix ``S_ij = <x_i, y_j> / (|x_i| |y_j|)`` (Wang et al. 2019, Sec. 3).

    Plain autograd: every loss of :mod:`dmlbook.losses` forms its ``S`` here and trains through
    it, and a second derivative works (e.g. for a gradient penalty).

    Parameters
    ----------
    x : Tensor of shape (N, d)
    y : Tensor of shape (M, d), optional
        Defaults to ``x`` (the batch against itself).
    normalize : bool
        Normalise the rows first. Pass ``False`` when the inputs are already unit vectors.

    Returns
    -------
    Tensor of shape (N, M)
    """
    if normalize:
        x = l2_normalize(x)
        y = x if y is None else l2_normalize(y)
    elif y is None:
        y = x
    return x @ y.T


def euclidean_distances(
    x: torch.Tensor, y: torch.Tensor | None = None, *, squared: bool = False, eps: float = 1e-12
) -> torch.Tensor:
    """Pairwise Euclidean distances ``D_ij = |x_i - y_j|``.

    Computed as ``|x|^2 + |y|^2 - 2 x y^T`` clamped at 0. The square root is taken of
    ``max(D^2, eps)`` so that the gradient at coincident points stays finite, and zero
    distances are then restored exactly.

    Parameters
    ----------
    x : Tensor of shape (N, d)
    y : Tensor of shape (M, d), optional
    squared : bool
        Return ``D^2`` instead of ``D``.
    """
    y_ = x if y is None else y
    sq = (x * x).sum(1, keepdim=True) + (y_ * y_).sum(1)[None, :] - 2.0 * (x @ y_.T)
    sq = sq.clamp_min(0.0)
    if squared:
        return sq
    zero = sq <= eps
    return torch.where(zero, torch.zeros_like(sq), sq.clamp_min(eps).sqrt())


def squared_distance_from_similarity(S: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distance between unit vectors: ``D^2 = 2 - 2 S``."""
    return 2.0 - 2.0 * S


def pair_masks(
    labels: torch.Tensor, other_labels: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks of positive and negative pairs.

    Parameters
    ----------
    labels : Tensor of shape (N,)
        Class id of each row of ``S``.
    other_labels : Tensor of shape (M,), optional
        Class id of each column. When omitted the columns are the same samples as the rows,
        and the diagonal (a sample paired with itself) is excluded from the positives *by index*,
        so that two identical images with the same label still form a positive pair.

    Returns
    -------
    pos, neg : Tensor of shape (N, M), dtype bool
        ``pos[i, j]`` iff ``i`` and ``j`` share a label (and ``i != j`` within one batch);
        ``neg[i, j]`` iff their labels differ.
    """
    cols = labels if other_labels is None else other_labels
    same = labels[:, None] == cols[None, :]
    neg = ~same
    if other_labels is None:
        same = same & ~torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return same, neg

"""The N-pair batch (Sohn 2016; Liu et al., Eq. 13): one anchor-positive pair per class, every
other class's positive as a negative.

Chapter: ``book/07_npair.ipynb``, 7.4 "The N-pair batch". Tests: ``tests/mining/test_npair.py``.
"""

from __future__ import annotations

import torch

from ..core.validation import as_labels


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

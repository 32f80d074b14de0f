"""Pairs as index lists: each anchor's few positives, the form in which the triplet losses hold
every triplet without the (B, B, B) tensor.

A P x K batch has ``K - 1`` positives per anchor against ``B - K`` negatives, so
:func:`dmlbook.losses.triplet.triplet_sums` lists each row's positives (:func:`positive_lists`)
and takes the negatives densely: ``(B, K, B)`` entries instead of ``(B, B, B)``. Tests:
``tests/core/test_pair_lists.py``.
"""

from __future__ import annotations

import torch

__all__ = ["positive_lists"]


def positive_lists(pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's positives of the mask ``pos`` as a padded ``(B, K)`` index list (``K`` the
    largest count, ``K - 1`` in a P x K batch; padding 0) and the ``(B, K)`` mask of its real
    entries: the form in which the triplet losses gather ``(B, K, B)`` instead of ``(B, B, B)``."""
    B = pos.shape[0]
    rows, cols = pos.nonzero(as_tuple=True)
    counts = torch.bincount(rows, minlength=B)
    K = int(counts.max()) if rows.numel() else 0
    slot = torch.arange(rows.numel(), device=pos.device) - (counts.cumsum(0) - counts)[rows]
    index = torch.zeros(B, K, dtype=torch.long, device=pos.device)
    real = torch.zeros(B, K, dtype=torch.bool, device=pos.device)
    index[rows, slot] = cols
    real[rows, slot] = True
    return index, real

"""Pairs as index lists (``dmlbook/core/pair_lists.py``), against a loop."""

from __future__ import annotations

import hypothesis.strategies as st
import torch
from hypothesis import given
from loss_cases import FAST

from dmlbook.core.pair_lists import positive_lists


@FAST
@given(st.integers(0, 9), st.integers(0, 2**16))
def test_positive_lists_pad_each_rows_positives(B, seed):
    """Row i of the index list is the columns of row i's True entries, in order, then padding."""
    pos = torch.rand(B, B, generator=torch.Generator().manual_seed(seed)) < 0.4
    index, real = positive_lists(pos)
    K = max((int(row.sum()) for row in pos), default=0)
    assert index.shape == real.shape == (B, K)
    for i in range(B):
        cols = [j for j in range(B) if pos[i, j]]
        assert real[i].tolist() == [True] * len(cols) + [False] * (K - len(cols))
        assert index[i, : len(cols)].tolist() == cols

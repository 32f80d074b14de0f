"""Pairs as index lists (``dmlbook/pair_lists.py``), against the masks and a loop."""

from __future__ import annotations

import hypothesis.strategies as st
import torch
from hypothesis import given
from loss_cases import FAST

from dmlbook import pair_lists
from dmlbook.pair_lists import positive_lists, positive_pairs


@FAST
@given(st.lists(st.integers(0, 4), min_size=0, max_size=12), st.booleans())
def test_positive_pairs_are_the_positive_mask(labels, dense):
    """Both constructions (the mask's nonzero, the sorted labels) list exactly the positive pairs."""
    y = torch.tensor(labels, dtype=torch.long)
    pos = y[:, None] == y[None, :]
    pos.fill_diagonal_(False)
    old = pair_lists.DENSE_PAIRS_UP_TO
    pair_lists.DENSE_PAIRS_UP_TO = 10**9 if dense else -1
    try:
        rows, cols = positive_pairs(y)
    finally:
        pair_lists.DENSE_PAIRS_UP_TO = old
    got = sorted(zip(rows.tolist(), cols.tolist(), strict=True))
    assert got == sorted(map(tuple, pos.nonzero().tolist()))


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

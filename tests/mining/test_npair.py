"""The N-pair batch of :mod:`dmlbook.mining.npair` (Sohn 2016; Liu et al., Eq. 13) against the
construction written out here: the first two samples of each class, every other class's second
sample as a negative. Chapter: ``book/07_npair.ipynb``, 7.4.
"""

from __future__ import annotations

import hypothesis.strategies as st
import torch
from hypothesis import given, settings

from dmlbook.mining import npair_masks

FAST = settings(max_examples=40, deadline=None)


@FAST
@given(st.lists(st.integers(0, 4), min_size=0, max_size=12))
def test_npair_masks_take_the_first_two_of_each_class(labels):
    y = torch.tensor(labels, dtype=torch.long)
    pos, neg = npair_masks(y)
    first: dict[int, list[int]] = {}
    for i, c in enumerate(labels):
        first.setdefault(c, []).append(i)
    pairs = [(m[0], m[1]) for m in first.values() if len(m) >= 2]
    assert sorted(map(tuple, pos.nonzero().tolist())) == sorted(pairs)
    want_neg = sorted((a, q) for a, _ in pairs for b, q in pairs if labels[b] != labels[a])
    assert sorted(map(tuple, neg.nonzero().tolist())) == want_neg

"""The closed form's two constructions (``dmlbook/losses/ms_closed_form.py``): dense masks up to
``DENSE_PAIRS_UP_TO`` and index lists above agree on the pairs, the loss and ``dL/dS``."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.losses import ms_closed_form
from dmlbook.losses.ms_closed_form import ms_core
from dmlbook.similarity import cosine_similarity, pair_masks

labels_st = st.lists(st.integers(0, 6), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(labels_st)
def test_index_lists_hold_every_positive_pair(labels):
    y = torch.tensor(labels)
    expected = {
        (i, j) for i, a in enumerate(labels) for j, b in enumerate(labels) if a == b and i != j
    }
    rows, cols = ms_closed_form._positive_pairs(y)
    got = list(zip(rows.tolist(), cols.tolist(), strict=True))
    assert sorted(got) == sorted(expected) and len(got) == len(expected)
    for i in set(rows.tolist()):  # each row's partners in increasing order
        partners = [c for r, c in got if r == i]
        assert partners == sorted(partners)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 12),
    st.integers(0, 10_000),
    st.sampled_from([None, 0.0, 0.1, 0.5]),
    st.booleans(),
)
def test_dense_and_index_list_cores_agree(B, classes, seed, epsilon, given_masks):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (B,), generator=g)
    s = cosine_similarity(torch.randn(B, 6, generator=g, dtype=torch.float64))
    masks = None
    if given_masks:  # a miner's narrower candidates (possibly leaving an anchor with none)
        pos, neg = pair_masks(y)
        keep = torch.rand(B, B, generator=g) < 0.6
        masks = (pos & keep, neg & keep)
    out = {}
    for dense_up_to in (0, 10**9):
        original = ms_closed_form.DENSE_PAIRS_UP_TO
        ms_closed_form.DENSE_PAIRS_UP_TO = dense_up_to
        try:
            out[dense_up_to] = ms_core(s, y, masks, 2.0, 50.0, 0.5, epsilon)
        finally:
            ms_closed_form.DENSE_PAIRS_UP_TO = original
    (per_a, W_a), (per_b, W_b) = out.values()
    assert torch.allclose(per_a, per_b, rtol=1e-12, atol=1e-12)
    assert torch.allclose(W_a, W_b, rtol=1e-12, atol=1e-12)

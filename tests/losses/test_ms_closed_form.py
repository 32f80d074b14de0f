"""The closed form's two constructions (``dmlbook/losses/ms_closed_form.py``): dense masks up to
``DENSE_CORE_UP_TO`` and index lists above agree on the loss and ``dL/dS``."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.losses import ms_closed_form
from dmlbook.losses.ms_closed_form import ms_core
from dmlbook.similarity import cosine_similarity, pair_masks


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
        original = ms_closed_form.DENSE_CORE_UP_TO
        ms_closed_form.DENSE_CORE_UP_TO = dense_up_to
        try:
            out[dense_up_to] = ms_core(s, y, masks, 2.0, 50.0, 0.5, epsilon)
        finally:
            ms_closed_form.DENSE_CORE_UP_TO = original
    (per_a, W_a), (per_b, W_b) = out.values()
    assert torch.allclose(per_a, per_b, rtol=1e-12, atol=1e-12)
    assert torch.allclose(W_a, W_b, rtol=1e-12, atol=1e-12)

"""The closed form's two constructions (``dmlbook/losses/ms_closed_form.py``): dense masks up to
``DENSE_CORE_UP_TO`` and index lists above agree on the loss and ``dL/dS``."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_cases import candidate_masks, dense_and_index_lists

from dmlbook.losses.ms_closed_form import ms_core
from dmlbook.similarity import cosine_similarity


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
    masks = candidate_masks(y, g) if given_masks else None
    (per_a, W_a), (per_b, W_b) = dense_and_index_lists(
        ms_core, s, y, masks, 2.0, 50.0, 0.5, epsilon
    )
    assert torch.allclose(per_a, per_b, rtol=1e-12, atol=1e-12)
    assert torch.allclose(W_a, W_b, rtol=1e-12, atol=1e-12)

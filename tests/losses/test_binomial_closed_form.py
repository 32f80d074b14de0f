"""The pair-sum core's two constructions (``dmlbook/losses/binomial_closed_form.py``): the dense
``(2, B, B)`` stack up to ``DENSE_CORE_UP_TO`` and index lists above agree on the anchor terms,
which anchors count and ``dL/dS``, for binomial deviance, BinLifted and LiftedStruct*."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_cases import candidate_masks, dense_and_index_lists

from dmlbook.losses.binomial_closed_form import PairSumTerms, pair_sum_core
from dmlbook.similarity import cosine_similarity

TERMS = [PairSumTerms("mean", 0.0), PairSumTerms("half", 0.5), PairSumTerms("none", 1.0)]


@pytest.mark.parametrize("terms", TERMS, ids=["binomial", "binlifted", "lifted_star"])
@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 40),
    classes=st.integers(1, 12),
    seed=st.integers(0, 10_000),
    given_masks=st.booleans(),
    duplicates=st.booleans(),
)
def test_dense_and_index_list_cores_agree(terms, B, classes, seed, given_masks, duplicates):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (B,), generator=g)
    x = torch.randn(B, 6, generator=g, dtype=torch.float64)
    if duplicates:  # S = 1 off the diagonal
        x = torch.cat([x[: B - B // 2], x[: B // 2]])
    s = cosine_similarity(x)
    masks = candidate_masks(y, g) if given_masks else None
    dense, lists = dense_and_index_lists(pair_sum_core, s, y, masks, 2.0, 50.0, 0.5, terms)
    assert torch.equal(dense[1], lists[1])
    torch.testing.assert_close(dense[0], lists[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dense[2], lists[2], rtol=1e-12, atol=1e-12)

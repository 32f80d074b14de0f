"""The pair-sum core's two constructions (``dmlbook/losses/binomial_closed_form.py``): the dense
``(2, B, B)`` stack up to ``DENSE_CORE_UP_TO`` and index lists above agree on the anchor terms,
which anchors count and ``dL/dS``, for binomial deviance, BinLifted and LiftedStruct*."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.losses import ms_closed_form
from dmlbook.losses.binomial_closed_form import PairSumTerms, pair_sum_core
from dmlbook.similarity import cosine_similarity, pair_masks

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
            out[dense_up_to] = pair_sum_core(s, y, masks, 2.0, 50.0, 0.5, terms)
        finally:
            ms_closed_form.DENSE_CORE_UP_TO = original
    (per_a, valid_a, W_a), (per_b, valid_b, W_b) = out.values()
    assert torch.equal(valid_a, valid_b)
    torch.testing.assert_close(per_a, per_b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(W_a, W_b, rtol=1e-12, atol=1e-12)

"""Per-pair base losses of the DRO paper (margin and binomial) and their closed-form slopes.

Implementation: :mod:`dmlbook.losses.pair_losses`; reference: :func:`dmlbook.reference.dro.pair_loss_reference`.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import FAST, batches, grad_of, masks

from dmlbook.losses.pair_losses import base_loss_slope, pair_losses
from dmlbook.reference.dro import pair_loss_reference


@FAST
@given(batches(max_b=6), st.sampled_from(["margin", "binomial"]), st.floats(0.0, 1.0))
def test_pair_losses_equal_the_loop_and_slopes_equal_autograd(case, base, m):
    S, y = case
    pos, neg = masks(y)
    l = pair_losses(S, pos, neg, base, m, 0.5, 2.0, 50.0)
    for i in range(len(y)):
        for j in range(len(y)):
            want = 0.0
            if pos[i, j] or neg[i, j]:
                want = pair_loss_reference(float(S[i, j]), bool(pos[i, j]), base, m, 0.5, 2.0, 50.0)
            assert float(l[i, j]) == pytest.approx(want, rel=1e-12, abs=1e-12)
    g = grad_of(lambda s: pair_losses(s, pos, neg, base, m).sum(), S)
    assert torch.allclose(g, base_loss_slope(S, pos, neg, base, m), atol=1e-12)


def test_negative_pairs_need_y_minus_one():
    """Erratum: with y = 0 (the preliminaries' label) a negative pair's margin loss is constant m."""
    S = torch.tensor([[1.0, 0.9], [0.9, 1.0]], dtype=torch.float64)
    pos = torch.zeros(2, 2, dtype=torch.bool)
    neg = ~torch.eye(2, dtype=torch.bool)
    assert float(pair_losses(S, pos, neg)[0, 1]) == pytest.approx(0.2 + 0.9 - 0.5)
    assert 0.2 + 0 * (0.5 - 0.9) == 0.2  # y = 0: no dependence on S at all


def test_unknown_base_names_the_choices():
    S = torch.eye(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="base"):
        pair_losses(S, S > 2, S > 2, "hinge")

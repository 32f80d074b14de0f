"""Tests of :mod:`dmlbook.symbolic.torch_bridge`: ``to_torch`` (lambdified SymPy in float64),
the per-anchor weight functions and ``batch_weights``' ``B x B`` layout.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy
from dmlbook.core.similarity import pair_masks

from .anchor_cases import (
    ALPHA,
    LAM,
    MS_VALUES,
    batch,
    contrastive_anchor,
    ms_anchor,
    ms_closed_form,
)


def test_to_torch_vector_groups_hinge_and_constants():
    a = sy.anchor_similarities(2, 1)
    expr = [sy.hinge(a.neg[0] - LAM) + sp.sqrt(2) * a.pos[0], sp.S(3), sp.exp(1) * a.pos[1]]
    f = sy.to_torch(expr, [a.pos, a.neg], {LAM: 0.25})
    out = f(torch.tensor([[0.5, 1.0], [0.0, 0.0]]), torch.tensor([[0.75], [0.25]]))
    assert out.dtype == torch.float64 and out.shape == (2, 3)
    expected = torch.tensor(
        [[0.5 + 2**0.5 * 0.5, 3.0, torch.e * 1.0], [0.0, 3.0, 0.0]], dtype=torch.float64
    )
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-15)


def test_to_torch_indicator_is_zero_at_the_kink_like_relu():
    x = sp.Symbol("x", real=True)
    f = sy.to_torch(sy.hinge(x).diff(x), [x])
    xs = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
    torch.relu(xs).sum().backward()
    torch.testing.assert_close(f(xs.detach()), xs.grad)


def test_to_torch_matrix_argument_and_output():
    S = sy.batch_similarities(2)
    f = sy.to_torch(S.applyfunc(lambda e: 2 * e), [S])
    M = torch.tensor([[1.0, 0.3], [-0.2, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(f(M), 2 * M)


def test_to_torch_reports_missing_symbols_and_bad_shapes():
    a = sy.anchor_similarities(1, 0)
    with pytest.raises(ValueError, match="alpha"):
        sy.to_torch(ALPHA * a.pos[0], [a.pos])
    f = sy.to_torch(a.pos[0], [a.pos])
    with pytest.raises(ValueError, match="trailing"):
        f(torch.zeros(3))
    with pytest.raises(TypeError):
        f()


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.floats(-1, 1), min_size=2, max_size=2),
    st.lists(st.floats(-1, 1), min_size=3, max_size=3),
)
def test_to_torch_agrees_with_sympy_evaluation(sp_vals, sn_vals):
    """The lambdified MS weights equal SymPy's own exact evaluation at the same point."""
    a = sy.anchor_similarities(2, 3)
    w = sy.pair_weights(ms_anchor(a), a)
    f = sy.to_torch(list(w.values()), [a.pos, a.neg], MS_VALUES)
    got = f(torch.tensor(sp_vals, dtype=torch.float64), torch.tensor(sn_vals, dtype=torch.float64))
    point = {**dict(zip(a.all, sp_vals + sn_vals, strict=True)), **MS_VALUES}
    ref = torch.tensor([float(v.subs(point).evalf(30)) for v in w.values()], dtype=torch.float64)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-14)


def test_weights_from_loss_and_closed_form_agree_and_cache():
    derived = sy.weights_from_loss(ms_anchor, MS_VALUES)
    closed = sy.weights_from_closed_form(ms_closed_form, MS_VALUES)
    s_pos = torch.tensor([0.2, 0.6], dtype=torch.float64)
    s_neg = torch.tensor([0.1, 0.4, -0.3], dtype=torch.float64)
    for x, y in zip(derived(s_pos, s_neg), closed(s_pos, s_neg), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-13, atol=0)
    w_pos, w_neg = derived(s_pos, s_neg)
    assert bool((w_pos < 0).all()) and bool((w_neg > 0).all())
    derived(s_pos, s_neg)
    assert list(derived._cache) == [(2, 3)]
    empty_pos, _ = derived(torch.zeros(0), s_neg)
    assert empty_pos.shape == (0,)


def test_closed_form_with_wrong_lengths_is_rejected():
    bad = sy.weights_from_closed_form(lambda a: ([1], []))
    with pytest.raises(ValueError, match="one weight per pair"):
        bad(torch.zeros(2), torch.zeros(1))
    with pytest.raises(ValueError, match="kind"):
        sy.AnchorWeightFunction(ms_anchor, None, "other")


def test_batch_weights_layout_and_masks():
    S, labels = batch()
    fn = sy.weights_from_loss(contrastive_anchor(sp.Rational(1, 10)))
    W = sy.batch_weights(fn, S, labels)
    pos, neg = pair_masks(labels)
    assert W.shape == S.shape and W.dtype == torch.float64
    assert bool((W.diagonal() == 0).all()) and bool((W[pos] == -1).all())
    assert bool((W[neg] == (S[neg] > 0.1).double()).all())
    keep = torch.zeros_like(pos)
    W2 = sy.batch_weights(fn, S, labels, pos_mask=keep)
    assert bool((W2[pos] == 0).all())
    with pytest.raises(ValueError):
        sy.batch_weights(fn, S[:, :3], labels)

"""MS v1 / v2 on distances (dmlbook.losses.ms_distance): autograd equals Eq. 39's weights (with and
without the "+1") to 1e-10 in float64; in v2 the margin m changes no gradient, in v1 it does."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.losses import get_loss
from dmlbook.losses.ms_distance import ms_distance_loss, ms_distance_weights
from dmlbook.reference import ms_distance_loss_reference
from dmlbook.similarity import cosine_similarity


@st.composite
def pk(draw):
    P, K = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    x = torch.randn(P * K, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return cosine_similarity(x), torch.arange(P).repeat_interleave(K)


def _grad(fn, S):
    S = S.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(S), S)
    return g


@settings(max_examples=40, deadline=None)
@given(pk(), st.sampled_from(["v1", "v2"]), st.sampled_from([None, 0.1]), st.floats(0.0, 1.5))
def test_autograd_equals_eq_39_weights(batch, version, eps, m):
    S, y = batch
    kw = dict(version=version, epsilon=eps)
    g = _grad(lambda s: ms_distance_loss(s, y, m, 2.0, 10.0, **kw), S)
    w_pos, w_neg = ms_distance_weights(S, y, m, 2.0, 10.0, **kw)
    D = torch.sqrt(2.0 - 2.0 * S).fill_diagonal_(1.0)
    torch.testing.assert_close(g, (w_pos - w_neg) / len(y) * (-1.0 / D), rtol=1e-10, atol=1e-12)


def test_margin_moves_v1_gradients_but_not_v2():
    g0 = torch.Generator().manual_seed(1)
    S = cosine_similarity(torch.randn(12, 4, generator=g0, dtype=torch.float64))
    y = torch.arange(4).repeat_interleave(3)
    grads = {
        (v, m): _grad(lambda s, m=m, v=v: ms_distance_loss(s, y, m, 2.0, 50.0, version=v), S)
        for v in ("v1", "v2")
        for m in (0.5, 1.0)
    }
    torch.testing.assert_close(grads["v2", 0.5], grads["v2", 1.0], rtol=1e-12, atol=1e-14)
    assert (grads["v1", 0.5] - grads["v1", 1.0]).abs().max() > 1e-3


def test_registered_with_fig_5_settings_and_errors():
    loss = get_loss("ms_distance")
    assert (loss.margin, loss.alpha, loss.beta, loss.version, loss.epsilon) == (
        1.0,
        2.0,
        50.0,
        "v2",
        0.1,
    )
    with pytest.raises(ValueError, match="version"):
        get_loss("ms_distance", version="v3")
    with pytest.raises(ValueError, match="alpha"):
        get_loss("ms_distance", alpha=0.0)


@st.composite
def uneven(draw):
    """A batch with singleton classes (anchors without positives) and optional candidate masks."""
    B = draw(st.integers(2, 9))
    labels = torch.tensor(draw(st.lists(st.integers(0, 3), min_size=B, max_size=B)))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 3, generator=g, dtype=torch.float64)
    if draw(st.booleans()):
        x[-1] = x[0]  # a coincident pair: D = 0, gradient 0
    masks = {}
    if draw(st.booleans()):
        masks = dict(pos_mask=torch.rand(B, B, generator=g) < 0.7,
                     neg_mask=torch.rand(B, B, generator=g) < 0.7)  # fmt: skip
    return cosine_similarity(x), labels, masks


@settings(max_examples=60, deadline=None)
@given(
    uneven(),
    st.sampled_from(["v1", "v2"]),
    st.sampled_from([None, 0.0, 0.1, 0.5]),
    st.floats(0.0, 1.5),
    st.sampled_from([(2.0, 50.0), (0.5, 3.0), (40.0, 80.0)]),
    st.sampled_from(["mean", "sum", "none"]),
)
def test_closed_form_equals_autograd_and_loop(batch, version, eps, m, scales, reduction):
    """The closed form (default) against the autograd path and the reference loop, float64."""
    S, y, masks = batch
    a, b = scales
    kw = dict(version=version, epsilon=eps, **masks)
    weights = torch.linspace(0.5, 1.5, len(y), dtype=S.dtype)  # a non-uniform upstream gradient

    def run(backward):
        s = S.clone().requires_grad_(True)
        value = ms_distance_loss(s, y, m, a, b, reduction=reduction, backward=backward, **kw)
        (value * weights).sum().backward() if reduction == "none" else value.backward()
        return value.detach(), s.grad

    (v, g), (v_auto, g_auto) = run("closed_form"), run("autograd")
    torch.testing.assert_close(v, v_auto, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_auto, rtol=1e-10, atol=1e-12)
    assert torch.isfinite(g).all()
    if reduction == "mean" and not masks:
        s = S.clone().requires_grad_(True)
        ref = ms_distance_loss_reference(s, y, m, a, b, version=version, epsilon=eps)
        torch.testing.assert_close(v, ref.detach(), rtol=1e-12, atol=1e-12)
        if ref.requires_grad:  # the loop's sum over no mined pair is a constant 0
            ref.backward()
            torch.testing.assert_close(g, s.grad, rtol=1e-10, atol=1e-12)
        else:
            assert not g.any()


def test_closed_form_in_float32_matches_autograd_and_rejects_bad_backward():
    S = cosine_similarity(torch.randn(40, 16, generator=torch.Generator().manual_seed(3)))
    y = torch.arange(10).repeat_interleave(4)
    for version in ("v1", "v2"):
        s1, s2 = S.clone().requires_grad_(True), S.clone().requires_grad_(True)
        v1 = ms_distance_loss(s1, y, version=version)
        v2 = ms_distance_loss(s2, y, version=version, backward="autograd")
        v1.backward(), v2.backward()
        assert v1.dtype == torch.float32
        torch.testing.assert_close(v1, v2, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(s1.grad, s2.grad, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="backward"):
        get_loss("ms_distance", backward="numeric")

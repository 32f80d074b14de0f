"""MS v1 / v2 on distances (dmlbook.losses.ms_distance): autograd equals Eq. 39's weights (with and
without the "+1") to 1e-10 in float64; in v2 the margin m changes no gradient, in v1 it does."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.losses import get_loss
from dmlbook.losses.ms_distance import ms_distance_loss, ms_distance_weights
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

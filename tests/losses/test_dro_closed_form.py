"""The DRO fast paths (dmlbook.losses.dro_closed_form): the same values and gradients as the
autograd paths of dro_loss / dro_kl_grouped_loss (float64, to rounding) and the values of the
paper-literal loops of dmlbook.reference.dro; ties, empty groups, masks, reductions, extreme
gammas included."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from loss_cases import batches, rand_S

from dmlbook.losses import get_loss
from dmlbook.losses.dro import dro_loss
from dmlbook.losses.dro_closed_form import losses_and_slopes
from dmlbook.losses.dro_grouped import dro_kl_grouped_loss
from dmlbook.losses.pair_losses import base_loss_slope, pair_losses
from dmlbook.reference.dro import dro_grouped_loss_reference, dro_loss_reference

SETTINGS = settings(max_examples=60, deadline=None)
BASES = st.sampled_from(["margin", "binomial"])
GAMMAS = st.sampled_from([1e-3, 0.1, 1.0, 1e3])


def _value_and_grad(fn, S, weights=None):
    s = S.detach().clone().requires_grad_(True)
    v = fn(s)
    (v if weights is None else (v * weights).sum()).backward()
    return v.detach(), s.grad


def _same_as_autograd(fn, S, weights=None):
    v, g = _value_and_grad(lambda s: fn(s, "closed_form"), S, weights)
    v_auto, g_auto = _value_and_grad(lambda s: fn(s, "autograd"), S, weights)
    torch.testing.assert_close(v, v_auto, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_auto, rtol=1e-10, atol=1e-10)
    return v


@st.composite
def narrowing(draw, B: int):
    """No masks, or random candidate masks (as a miner would pass)."""
    if not draw(st.booleans()):
        return {}
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    return dict(pos_mask=torch.rand(B, B, generator=g) < 0.6,
                neg_mask=torch.rand(B, B, generator=g) < 0.6)  # fmt: skip


@SETTINGS
@given(batches(max_b=8), BASES)
def test_losses_and_slopes_are_pair_losses_and_base_loss_slope(case, base):
    S, y = case
    same = y[:, None] == y[None, :]
    pos, neg = same & ~torch.eye(len(y), dtype=torch.bool), ~same
    l, slope = losses_and_slopes(S, pos, neg, base, 0.2, 0.5, 2.0, 50.0)
    assert torch.equal(l, pair_losses(S, pos, neg, base, 0.2, 0.5, 2.0, 50.0))  # bit for bit
    torch.testing.assert_close(slope, base_loss_slope(S, pos, neg, base), rtol=1e-12, atol=0)


@SETTINGS
@given(batches(max_b=8), BASES, st.sampled_from(["topk", "topk_pn", "kl"]),
       st.sampled_from([2, 4, 10, 160]), GAMMAS, st.booleans(), st.data())  # fmt: skip
def test_dro_closed_form_equals_autograd_and_loop(case, base, u, K, gamma, drop, data):
    S, y = case
    kw = dict(uncertainty=u, base=base, K=K, gamma=gamma, drop_zero=drop)
    narrow = data.draw(narrowing(len(y)))
    v = _same_as_autograd(lambda s, bw: dro_loss(s, y, backward=bw, **kw, **narrow), S)
    if not narrow:
        ref = dro_loss_reference(S.tolist(), y.tolist(), u, base, K=K, gamma=gamma, drop_zero=drop)
        assert float(v) == pytest.approx(ref, rel=1e-10, abs=1e-10)


@SETTINGS
@given(batches(max_b=8), BASES, GAMMAS, GAMMAS, st.booleans(), st.sampled_from([-0.3, 0.0, 0.2]),
       st.booleans(), st.sampled_from(["mean", "sum", "none"]), st.data())  # fmt: skip
def test_grouped_closed_form_equals_autograd_and_loop(case, base, gp, gn, pseudo, l0, drop,
                                                      reduction, data):  # fmt: skip
    S, y = case
    kw = dict(base=base, pseudo_pairs=pseudo, pseudo_loss=l0, drop_zero=drop, reduction=reduction)
    narrow = data.draw(narrowing(len(y)))
    weights = torch.linspace(0.5, 1.5, len(y), dtype=S.dtype) if reduction == "none" else None
    v = _same_as_autograd(
        lambda s, bw: dro_kl_grouped_loss(s, y, gp, gn, backward=bw, **kw, **narrow), S, weights
    )
    if not narrow and reduction != "none":
        ref = dro_grouped_loss_reference(S.tolist(), y.tolist(), gp, gn, base, pseudo=pseudo,
                                         l0=l0, drop_zero=drop, reduction=reduction)  # fmt: skip
        assert float(v) == pytest.approx(ref, rel=1e-10, abs=1e-10)


def test_float32_paths_agree_and_backward_is_checked():
    S = rand_S(40, seed=2, dtype=torch.float32, d=16)
    y = torch.arange(10).repeat_interleave(4)
    for fn in (
        lambda s, bw: dro_loss(s, y, "kl", backward=bw),
        lambda s, bw: dro_loss(s, y, "topk", K=40, backward=bw),
        lambda s, bw: dro_loss(s, y, "topk_pn", K=40, backward=bw),
        lambda s, bw: dro_kl_grouped_loss(s, y, backward=bw),
    ):
        v, g = _value_and_grad(lambda s, fn=fn: fn(s, "closed_form"), S)
        v_auto, g_auto = _value_and_grad(lambda s, fn=fn: fn(s, "autograd"), S)
        assert v.dtype == torch.float32
        torch.testing.assert_close(v, v_auto, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(g, g_auto, rtol=1e-5, atol=1e-7)
    for name in ("dro", "dro_kl_g"):
        assert get_loss(name).backward == "closed_form"
        with pytest.raises(ValueError, match="backward"):
            get_loss(name, backward="numeric")

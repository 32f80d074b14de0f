"""Circle loss and the cosine (NCA) triplet loss: values against the loops of
dmlbook.reference.gradient_surgery and Eq. 4 written out,
finite differences, and their registration. Chapter: ``book/13_gradient_surgery.ipynb``."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import torch
from hypothesis import given, settings

from dmlbook.losses import (
    circle_closed_form,
    circle_loss,
    cosine_triplet_all,
    cosine_triplet_loss,
    describe_loss,
    get_loss,
)
from dmlbook.pairs import resolve_masks
from dmlbook.reference.gradient_surgery import circle_loss_reference, cosine_triplet_loss_reference

from .strategies import ephn_loop, unit_batches


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_circle_value_matches_the_double_sum(batch):
    f, y = batch
    S = f @ f.T
    got = float(circle_loss(S, y, gamma=4.0, margin=0.25))
    assert abs(got - circle_loss_reference(S, y, 4.0, 0.25)) < 1e-12


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_cosine_triplet_value_matches_eq4(batch):
    f, y = batch
    tau = 5.0
    S = (f @ f.T).tolist()
    want_ephn = [
        -math.log(math.exp(tau * S[a][p]) / (math.exp(tau * S[a][p]) + math.exp(tau * S[a][n])))
        for a, p, n in ephn_loop(f, y)
    ]
    got = float(cosine_triplet_loss(f @ f.T, y, tau))
    assert abs(got - sum(want_ephn) / len(want_ephn)) < 1e-12
    got_all = float(cosine_triplet_loss(f @ f.T, y, tau, mining="all"))
    assert abs(got_all - cosine_triplet_loss_reference(f @ f.T, y, tau)) < 1e-12


def test_finite_differences():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    for module in (
        get_loss("circle", gamma=4.0, margin=0.25, detach_weights=False),
        get_loss("cosine_triplet", tau=5.0, mining="all"),
    ):
        assert torch.autograd.gradcheck(lambda v, m=module: m(v, y), (x,))


def test_registered_and_described():
    name, params = describe_loss(get_loss("nca_triplet", tau=8.0))
    assert name == "cosine_triplet" and params["tau"] == 8.0
    assert describe_loss(get_loss("circle"))[0] == "circle"
    assert describe_loss(get_loss("surgery", selection="sc1"))[1]["selection"] == "sc1"


def _eq4_on_every_triplet(S, pos, neg, tau, reduction):
    """Eq. 4 on the full (B, B, B) tensor of triplets with autograd (the readable O(B^3) form)."""
    valid = pos[:, :, None] & neg[:, None, :]
    gap = tau * (S[:, None, :] - S[:, :, None])  # [a, p, n] = tau (S_an - S_ap)
    per = torch.where(valid, torch.nn.functional.softplus(gap), torch.zeros_like(gap))
    total = per.sum()
    if reduction == "sum":
        return total
    return total / valid.sum().clamp_min(1)


def _ephn_pair_masks(S, pos, neg):
    """One easy positive and one hard negative per anchor with both, by a plain loop."""
    one_pos, one_neg = torch.zeros_like(pos), torch.zeros_like(neg)
    s = S.tolist()
    for a in range(S.shape[0]):
        P = [j for j in range(S.shape[0]) if pos[a, j]]
        N = [j for j in range(S.shape[0]) if neg[a, j]]
        if P and N:
            one_pos[a, max(P, key=lambda j: (s[a][j], -j))] = True
            one_neg[a, max(N, key=lambda j: (s[a][j], -j))] = True
    return one_pos, one_neg


@settings(max_examples=40, deadline=None)
@given(
    unit_batches(max_classes=4, max_k=5),
    st.sampled_from(["ephn", "all"]),
    st.sampled_from(["mean", "sum"]),
    st.integers(0, 2**16),
    st.sampled_from([None, 1, 7]),
)
def test_cosine_triplet_matches_eq4_on_every_triplet_with_autograd(
    batch, mining, reduction, seed, block
):
    """Both paths (ephn gathers, all in blocks with the closed-form gradient) against Eq. 4 on
    the whole (B, B, B) tensor with autograd, in float64: value and dL/dS, with and without
    random pair masks (anchors without a positive or a negative), blocks of any size."""
    f, y = batch
    B = len(y)
    S = (f @ f.T).requires_grad_(True)
    g = torch.Generator().manual_seed(seed)
    masks = {}
    if seed % 2:
        masks = {
            "pos_mask": torch.rand(B, B, generator=g) < 0.6,
            "neg_mask": torch.rand(B, B, generator=g) < 0.6,
        }
    default = cosine_triplet_all.BLOCK_ELEMENTS
    cosine_triplet_all.BLOCK_ELEMENTS = block or default
    try:
        got = cosine_triplet_loss(S, y, 3.0, mining=mining, reduction=reduction, **masks)
    finally:
        cosine_triplet_all.BLOCK_ELEMENTS = default
    (g_got,) = torch.autograd.grad(got, S)
    pos, neg = resolve_masks(y, masks.get("pos_mask"), masks.get("neg_mask"), (B, B))
    if mining == "ephn":
        pos, neg = _ephn_pair_masks(S.detach(), pos, neg)
    S2 = S.detach().clone().requires_grad_(True)
    want = _eq4_on_every_triplet(S2, pos, neg, 3.0, reduction)
    (g_want,) = torch.autograd.grad(want, S2)
    assert abs(float(got.detach()) - float(want.detach())) < 1e-12
    torch.testing.assert_close(g_got, g_want, rtol=1e-10, atol=1e-13)


def test_cosine_triplet_without_a_triplet_is_zero_with_zero_gradient():
    S = torch.eye(3, dtype=torch.float64, requires_grad=True)
    for mining in ("ephn", "all"):
        for y in (torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0])):
            value = cosine_triplet_loss(S, y, mining=mining)
            (grad,) = torch.autograd.grad(value, S)
            assert float(value.detach()) == 0.0 and float(grad.abs().max()) == 0.0


def test_cosine_triplet_all_in_float32_matches_float64():
    f = torch.nn.functional.normalize(
        torch.randn(40, 8, generator=torch.Generator().manual_seed(1))
    )
    y = torch.arange(40) // 4
    S32 = (f @ f.T).requires_grad_(True)
    S64 = S32.detach().double().requires_grad_(True)
    v32 = cosine_triplet_loss(S32, y, mining="all")
    v64 = cosine_triplet_loss(S64, y, mining="all")
    (g32,) = torch.autograd.grad(v32, S32)
    (g64,) = torch.autograd.grad(v64, S64)
    assert v32.dtype == torch.float32 and g32.dtype == torch.float32
    torch.testing.assert_close(v32.double(), v64, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
    st.sampled_from(["mean", "sum"]),
    st.integers(0, 2**16),
    st.booleans(),
    st.sampled_from([(80.0, 0.4), (4.0, 0.25), (16.0, 0.0)]),
)
def test_circle_closed_form_matches_autograd(labels, reduction, seed, with_masks, setting):
    """The fused closed form (the default path) against autograd through the masked
    log-sum-exps, in float64: value and dL/dS, with singletons (anchors without a positive), random pair masks
    and both reductions."""
    gamma, margin = setting
    g = torch.Generator().manual_seed(seed)
    f = torch.nn.functional.normalize(torch.randn(len(labels), 4, generator=g).double(), dim=1)
    y = torch.tensor(labels)
    B = len(labels)
    masks = {}
    if with_masks:
        masks = {
            "pos_mask": torch.rand(B, B, generator=g) < 0.7,
            "neg_mask": torch.rand(B, B, generator=g) < 0.7,
        }
    S = (f @ f.T).requires_grad_(True)
    got = circle_loss(S, y, gamma, margin, reduction=reduction, **masks)
    assert type(got.grad_fn).__name__ == "WithGradientBackward"  # the closed form, on S
    (g_got,) = torch.autograd.grad(got, S)
    pos, neg = resolve_masks(y, masks.get("pos_mask"), masks.get("neg_mask"), (B, B))
    mean = reduction == "mean"
    core_value, W = circle_closed_form.circle_core(S.detach(), pos, neg, gamma, margin, mean)
    assert float(core_value) == float(got.detach()) and torch.equal(W, g_got)  # its core, attached
    S2 = S.detach().clone().requires_grad_(True)
    want = circle_loss(S2, y, gamma, margin, reduction=reduction, backward="autograd", **masks)
    (g_want,) = torch.autograd.grad(want, S2)
    assert abs(float(got.detach()) - float(want.detach())) <= 1e-12 * max(
        1.0, abs(float(want.detach()))
    )
    torch.testing.assert_close(g_got, g_want, rtol=1e-10, atol=1e-12)


def test_circle_closed_form_float32_and_fallbacks():
    """float32 agrees with the autograd path to rounding; detach_weights=False and "none" take
    the autograd path (same numbers as asking for it)."""
    f = torch.nn.functional.normalize(
        torch.randn(30, 8, generator=torch.Generator().manual_seed(2))
    )
    y = torch.arange(30) // 3
    S = (f @ f.T).requires_grad_(True)
    got, want = circle_loss(S, y), circle_loss(S, y, backward="autograd")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    (g_got,), (g_want,) = torch.autograd.grad(got, S), torch.autograd.grad(want, S)
    torch.testing.assert_close(g_got, g_want, rtol=1e-4, atol=1e-7)
    for kw in ({"detach_weights": False}, {"reduction": "none"}):
        torch.testing.assert_close(
            circle_loss(S, y, **kw), circle_loss(S, y, backward="autograd", **kw)
        )

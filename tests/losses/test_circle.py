"""Circle loss (Sun et al. 2020; Xuan & Pless, Table 1): values against the double sum of
dmlbook.reference.gradient_surgery and a loop with masks, the gradient against the derivative
with the weighting factors held fixed, finite differences, registration. Implementation:
:mod:`dmlbook.losses.circle`; chapter ``book/13_gradient_surgery.ipynb``."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import torch
from hypothesis import given, settings

from dmlbook.core.pairs import resolve_masks
from dmlbook.losses import circle_loss, describe_loss, get_loss
from dmlbook.reference.gradient_surgery import circle_loss_reference


def _unit_batch(labels, seed, d=4):
    g = torch.Generator().manual_seed(seed)
    f = torch.nn.functional.normalize(torch.randn(len(labels), d, generator=g).double(), dim=1)
    return f @ f.T, torch.tensor(labels), g


def _circle_loop(S, pos, neg, gamma, m):
    """Per anchor log(1 + sum_n sum_p e^{gamma (a_n (s_n - m) - a_p (s_p - 1 + m))}), a loop."""
    s, out = S.tolist(), []
    for i in range(len(s)):
        P = [j for j in range(len(s)) if pos[i, j]]
        N = [j for j in range(len(s)) if neg[i, j]]
        if P and N:
            zs = [gamma * (max(s[i][n] + m, 0) * (s[i][n] - m) - max(1 + m - s[i][p], 0)
                           * (s[i][p] - 1 + m)) for p in P for n in N]  # fmt: skip
            top = max(max(zs), 0.0)
            out.append(top + math.log(math.exp(-top) + sum(math.exp(z - top) for z in zs)))
    return out


def _detached_weight_gradient(S, pos, neg, gamma, m, mean):
    """``dL_i/dS_ij = gamma a_ij sigmoid(LSE_P z + LSE_N z) (softmax_N(z)_j - softmax_P(z)_j)``
    with the weighting factors ``a`` held fixed (Sun et al.'s code), derived by hand."""
    a_p, a_n = (1 + m - S).clamp_min(0), (S + m).clamp_min(0)
    z_p, z_n = -gamma * a_p * (S - (1 - m)), gamma * a_n * (S - m)
    inf = float("-inf")
    lse_p = torch.logsumexp(z_p.masked_fill(~pos, inf), 1)
    lse_n = torch.logsumexp(z_n.masked_fill(~neg, inf), 1)
    valid = pos.any(1) & neg.any(1)
    sig = torch.where(valid, torch.sigmoid(lse_p + lse_n), 0.0)[:, None]
    soft_p = torch.where(pos, torch.exp(z_p - lse_p[:, None]), 0.0)
    soft_n = torch.where(neg, torch.exp(z_n - lse_n[:, None]), 0.0)
    G = gamma * sig * (a_n * soft_n - a_p * soft_p)
    return G / max(int(valid.sum()), 1) if mean else G


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=10), st.integers(0, 2**16))
def test_circle_value_matches_the_double_sum(labels, seed):
    S, y, _ = _unit_batch(labels, seed)
    got = float(circle_loss(S, y, gamma=4.0, margin=0.25))
    assert abs(got - circle_loss_reference(S, y, 4.0, 0.25)) < 1e-12


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
    st.sampled_from(["mean", "sum"]),
    st.integers(0, 2**16),
    st.booleans(),
    st.sampled_from([(80.0, 0.4), (4.0, 0.25), (16.0, 0.0)]),
)
def test_circle_matches_the_loop_and_the_derived_gradient(labels, reduction, seed, masked, setting):
    """Value against a loop and dL/dS against the derivative with a_p, a_n fixed, in float64,
    with singletons (anchors without a positive), random pair masks and both reductions."""
    gamma, margin = setting
    S, y, g = _unit_batch(labels, seed)
    B = len(labels)
    masks = {}
    if masked:
        masks = {"pos_mask": torch.rand(B, B, generator=g) < 0.7,
                 "neg_mask": torch.rand(B, B, generator=g) < 0.7}  # fmt: skip
    S = S.requires_grad_(True)
    got = circle_loss(S, y, gamma, margin, reduction=reduction, **masks)
    (grad,) = torch.autograd.grad(got, S)
    pos, neg = resolve_masks(y, masks.get("pos_mask"), masks.get("neg_mask"), (B, B))
    terms = _circle_loop(S.detach(), pos, neg, gamma, margin)
    want = sum(terms) / (max(len(terms), 1) if reduction == "mean" else 1)
    assert abs(float(got.detach()) - want) <= 1e-12 * max(1.0, abs(want))
    G = _detached_weight_gradient(S.detach(), pos, neg, gamma, margin, reduction == "mean")
    torch.testing.assert_close(grad, G, rtol=1e-10, atol=1e-12)


def test_finite_differences_and_registration():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    module = get_loss("circle", gamma=4.0, margin=0.25, detach_weights=False)
    assert torch.autograd.gradcheck(lambda v: module(v, y), (x,))
    assert describe_loss(get_loss("circle"))[0] == "circle"
    assert describe_loss(get_loss("surgery", selection="sc1"))[1]["selection"] == "sc1"


def test_circle_float32_matches_float64():
    S, y, _ = _unit_batch([i // 3 for i in range(30)], 2, d=8)
    s32, s64 = S.float().requires_grad_(True), S.requires_grad_(True)
    v32, v64 = circle_loss(s32, y), circle_loss(s64, y)
    (g32,), (g64,) = torch.autograd.grad(v32, s32), torch.autograd.grad(v64, s64)
    assert v32.dtype == torch.float32
    torch.testing.assert_close(v32.double(), v64, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g32.double(), g64, rtol=1e-3, atol=1e-6)

"""Liu et al.'s Eq. 18 and 21 (dmlbook.losses.liu_weighting): autograd against the closed-form
detached weights (float64, 1e-10), the defaults of Pair-P/E and Triplet-P/E, the paper's special
cases, and clear errors. The per-anchor Algorithm 1 loop is compared in
``tests/reference/test_liu_equivalence.py``."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.losses import get_loss
from dmlbook.losses.liu_triplet import triplet_weighted_loss, triplet_weights
from dmlbook.losses.liu_weighting import pair_power_loss, pair_weighted_loss, pair_weights
from dmlbook.similarity import cosine_similarity

WEIGHTINGS = [("constant", 0.0, 0.0), ("power", 0.0, 1.0), ("power", 0.5, 2.0),
              ("power", 5.0, 5.0), ("exponential", 0.0, 2.0), ("exponential", 3.0, 10.0)]  # fmt: skip
NORMS = ["none", "anchor", "batch"]


@st.composite
def pk(draw, max_p: int = 3, max_k: int = 3, d: int = 3):
    P, K = draw(st.integers(1, max_p)), draw(st.integers(1, max_k))
    seed = draw(st.integers(0, 2**16))
    x = torch.randn(P * K, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return cosine_similarity(x), torch.arange(P).repeat_interleave(K)


def _grad(fn, S):
    S = S.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(S), S)
    return g


def _dD_dS(S):
    return -1.0 / torch.sqrt(2.0 - 2.0 * S).fill_diagonal_(1.0)


@settings(max_examples=40, deadline=None)
@given(
    pk(),
    st.sampled_from(WEIGHTINGS),
    st.sampled_from(NORMS),
    st.sampled_from([None, 0.1]),
    st.sampled_from(["autograd", "closed_form"]),
)
def test_pair_autograd_equals_closed_form_weights(batch, weighting, norm, eps, backward):
    """Autograd of Eq. 18 (``backward="autograd"``) and the fused backward both equal the
    detached weights of ``pair_weights`` through ``dD/dS = -1/D``."""
    S, y = batch
    name, a, b = weighting
    kw = dict(weighting=name, pos_exponent=a, neg_exponent=b, normalization=norm, epsilon=eps)
    kw["backward"] = backward
    m1, m2 = 0.2, 1.3
    g = _grad(lambda s: pair_weighted_loss(s, y, m1, m2, **kw), S)
    w_pos, w_neg = pair_weights(S, y, m1, m2, **{k: v for k, v in kw.items() if k != "backward"})
    D = torch.sqrt(2.0 - 2.0 * S)
    G_D = (w_pos * (D > m1) - w_neg * (D < m2)) / len(y)  # dL/dD of Eq. 18, weights detached
    torch.testing.assert_close(g, G_D * _dD_dS(S), rtol=1e-10, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(pk(), st.sampled_from(WEIGHTINGS), st.sampled_from(NORMS))
def test_triplet_autograd_equals_closed_form_weights(batch, weighting, norm):
    S, y = batch
    name, a, _ = weighting
    kw = dict(weighting=name, exponent=a, normalization=norm)
    m = 0.3
    g = _grad(lambda s: triplet_weighted_loss(s, y, m, **kw), S)
    W = triplet_weights(S, y, m, **kw)
    D = torch.sqrt(2.0 - 2.0 * S)
    active = W * ((D[:, :, None] - D[:, None, :] + m) > 0)
    G_D = (active.sum(dim=2) - active.sum(dim=1)) / len(y)  # dL/dD_ij and dL/dD_ik of Eq. 21
    torch.testing.assert_close(g, G_D * _dD_dS(S), rtol=1e-10, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(pk())
def test_p_q_zero_per_anchor_is_the_average(batch):
    """Liu et al., Sec. IV-B3: with p, q = 0, 0 the normalisation "is just the average"."""
    S, y = batch
    D = torch.sqrt((2.0 - 2.0 * S).clamp_min(0.0))
    same, eye = y[:, None] == y[None, :], torch.eye(len(y), dtype=torch.bool)
    total = 0.0
    for i in range(len(y)):
        P = D[i][same[i] & ~eye[i]]
        N = D[i][~same[i]]
        N = N[N <= 0.8]
        total += (P.mean().item() if len(P) else 0.0) + ((0.8 - N).mean().item() if len(N) else 0.0)
    got = pair_power_loss(S, y, 0.0, 0.8, p=0.0, q=0.0)
    assert got.item() == pytest.approx(total / len(y), rel=1e-12, abs=1e-15)


def test_alpha_beta_zero_is_the_constant_weight():
    """Eq. 29-30 at alpha = beta = 0 are Eq. 24 (and so are Eq. 26-27 at p = q = 0)."""
    g = torch.Generator().manual_seed(3)
    S = cosine_similarity(torch.randn(12, 4, generator=g, dtype=torch.float64))
    y = torch.arange(4).repeat_interleave(3)
    for norm in NORMS:
        e = get_loss("pair_e", alpha=0.0, beta=0.0, normalization=norm).loss_on_similarity(S, y)
        p = get_loss("pair_p", p=0.0, q=0.0, normalization=norm).loss_on_similarity(S, y)
        c = pair_weighted_loss(S, y, weighting="constant", normalization=norm)
        assert e.item() == pytest.approx(c.item(), rel=1e-14) == pytest.approx(p.item())


def test_liu_defaults_are_registered():
    """Sec. IV-B4 and IV-C: m1 = 0, m2 = 0.8, m = 0.1; (p, q) = (0, 1); (alpha, beta) = (0, 2);
    Triplet-P p = 5; Triplet-E alpha = 40; per-anchor normalisation (v1/v2)."""
    pp, pe = get_loss("Pair-P"), get_loss("Pair-E")
    tp, te = get_loss("Triplet-P"), get_loss("Triplet-E")
    assert (pp.pos_margin, pp.neg_margin, pp.p, pp.q) == (0.0, 0.8, 0.0, 1.0)
    assert (pe.pos_margin, pe.neg_margin, pe.alpha, pe.beta) == (0.0, 0.8, 0.0, 2.0)
    assert (tp.margin, tp.p, te.margin, te.alpha) == (0.1, 5.0, 0.1, 40.0)
    assert {m.normalization for m in (pp, pe, tp, te)} == {"anchor"}


@pytest.mark.parametrize("name", ["pair_p", "pair_e", "triplet_p", "triplet_e", "ms_distance"])
@pytest.mark.parametrize("fill", [1.0, -1.0, 0.0])
def test_float32_extremes_stay_finite_and_signs_follow_gpw(name, fill):
    for labels in ([0, 0, 1, 1, 2], [0, 0, 0], [0, 1, 2], [4]):
        y = torch.tensor(labels)
        S = torch.full((len(y), len(y)), fill, requires_grad=True)
        loss = get_loss(name).loss_on_similarity(S, y)
        loss.backward()
        assert torch.isfinite(loss) and bool(torch.isfinite(S.grad).all())
    g = torch.Generator().manual_seed(0)
    S = cosine_similarity(torch.randn(9, 3, generator=g, dtype=torch.float64)).requires_grad_()
    y = torch.arange(3).repeat_interleave(3)
    get_loss(name).loss_on_similarity(S, y).backward()
    same = y[:, None] == y[None, :]
    assert bool((S.grad[same] <= 0).all()) and bool((S.grad[~same] >= 0).all())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_closed_form_backward_equals_autograd_for_every_reduction(reduction):
    g = torch.Generator().manual_seed(5)
    S = cosine_similarity(torch.randn(10, 3, generator=g, dtype=torch.float64))
    S[0, 1] = S[1, 0] = 1.0  # a duplicate pair (D = 0): gradient 0 on both paths
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    weights = torch.rand(10, generator=g, dtype=torch.float64) if reduction == "none" else 1.0
    grads = []
    for backward in ("closed_form", "autograd"):
        s = S.clone().requires_grad_(True)
        out = pair_weighted_loss(s, y, 0.0, 1.1, weighting="exponential", pos_exponent=1.0,
                                 neg_exponent=3.0, reduction=reduction, backward=backward)  # fmt: skip
        (out * weights).sum().backward()
        grads.append((out.detach(), s.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-14, atol=0.0)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-12, atol=1e-15)
    assert grads[0][1][0, 1] == 0


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="normalization"):
        get_loss("pair_p", normalization="per_batch")
    with pytest.raises(ValueError, match="pos_margin <= neg_margin"):
        get_loss("pair_e", pos_margin=1.0, neg_margin=0.5)
    with pytest.raises(ValueError, match="p must be"):
        get_loss("triplet_p", p=-1)
    with pytest.raises(ValueError, match="weighting"):
        pair_weights(torch.eye(2), torch.tensor([0, 1]), weighting="cubic")

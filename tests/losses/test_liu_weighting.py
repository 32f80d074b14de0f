"""Liu et al.'s Eq. 18 and MS v1/v2 on distances (dmlbook.losses.liu_weighting): autograd against
the printed, detached weights (Eq. 24-33, Eq. 39; float64, 1e-10), the defaults of Pair-P/E and
Triplet-P/E, the paper's special cases, and clear errors. The per-anchor Algorithm 1 loops are
compared in ``tests/reference/test_liu_equivalence.py`` and below (MS v1/v2)."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import get_loss
from dmlbook.losses.liu_weighting import (
    ms_distance_loss,
    ms_distance_weights,
    pair_power_loss,
    pair_weighted_loss,
    pair_weights,
)
from dmlbook.reference import ms_distance_loss_reference

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
)
def test_pair_autograd_equals_printed_weights(batch, weighting, norm, eps):
    """Autograd of Eq. 18 equals the detached weights of ``pair_weights`` (Eq. 24-33) through
    ``dD/dS = -1/D``."""
    S, y = batch
    name, a, b = weighting
    kw = dict(weighting=name, pos_exponent=a, neg_exponent=b, normalization=norm, epsilon=eps)
    m1, m2 = 0.2, 1.3
    g = _grad(lambda s: pair_weighted_loss(s, y, m1, m2, **kw), S)
    w_pos, w_neg = pair_weights(S, y, m1, m2, **kw)
    D = torch.sqrt(2.0 - 2.0 * S)
    G_D = (w_pos * (D > m1) - w_neg * (D < m2)) / len(y)  # dL/dD of Eq. 18, weights detached
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


def test_reductions_and_a_coincident_pair():
    """ "sum" is B times "mean", "none" the anchor terms; a duplicate pair (D = 0) gets gradient 0."""
    g = torch.Generator().manual_seed(5)
    S = cosine_similarity(torch.randn(10, 3, generator=g, dtype=torch.float64))
    S[0, 1] = S[1, 0] = 1.0
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    kw = dict(weighting="exponential", pos_exponent=1.0, neg_exponent=3.0)
    per = pair_weighted_loss(S, y, 0.0, 1.1, reduction="none", **kw)
    total = pair_weighted_loss(S, y, 0.0, 1.1, reduction="sum", **kw)
    assert per.shape == (10,) and float(total) == pytest.approx(float(per.sum()), rel=1e-14)
    assert float(pair_weighted_loss(S, y, 0.0, 1.1, **kw)) == pytest.approx(float(total) / 10)
    grad = _grad(lambda s: pair_weighted_loss(s, y, 0.0, 1.1, **kw), S)
    assert grad[0, 1] == 0 and torch.isfinite(grad).all()


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="normalization"):
        get_loss("pair_p", normalization="per_batch")
    with pytest.raises(ValueError, match="pos_margin <= neg_margin"):
        get_loss("pair_e", pos_margin=1.0, neg_margin=0.5)
    with pytest.raises(ValueError, match="p must be"):
        get_loss("triplet_p", p=-1)
    with pytest.raises(ValueError, match="weighting"):
        pair_weights(torch.eye(2), torch.tensor([0, 1]), weighting="cubic")


# ----------------------------------------------------------------------------- MS on distances


@settings(max_examples=40, deadline=None)
@given(
    pk(max_k=4), st.sampled_from(["v1", "v2"]), st.sampled_from([None, 0.1]), st.floats(0.0, 1.5)
)
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
def test_ms_distance_equals_the_loop(batch, version, eps, m, scales, reduction):
    """Value and gradient against the per-anchor loop of Algorithm 1 (float64), singletons,
    coincident pairs and candidate masks included; the reductions agree with each other."""
    S, y, masks = batch
    a, b = scales
    kw = dict(version=version, epsilon=eps, **masks)
    s = S.clone().requires_grad_(True)
    value = ms_distance_loss(s, y, m, a, b, reduction=reduction, **kw)
    value.sum().backward()
    assert torch.isfinite(s.grad).all()
    mean = ms_distance_loss(S, y, m, a, b, **kw)
    scale = {"mean": 1.0, "sum": len(y), "none": len(y)}[reduction]
    torch.testing.assert_close(value.detach().sum(), mean * scale, rtol=1e-12, atol=1e-12)
    if reduction == "mean" and not masks:
        r = S.clone().requires_grad_(True)
        ref = ms_distance_loss_reference(r, y, m, a, b, version=version, epsilon=eps)
        torch.testing.assert_close(value.detach(), ref.detach(), rtol=1e-12, atol=1e-12)
        if ref.requires_grad:  # the loop's sum over no mined pair is a constant 0
            ref.backward()
            torch.testing.assert_close(s.grad, r.grad, rtol=1e-10, atol=1e-12)
        else:
            assert not s.grad.any()


def test_ms_distance_float32_matches_float64():
    S = cosine_similarity(torch.randn(40, 16, generator=torch.Generator().manual_seed(3)))
    y = torch.arange(10).repeat_interleave(4)
    for version in ("v1", "v2"):
        s32, s64 = S.clone().requires_grad_(True), S.double().requires_grad_(True)
        v32, v64 = (
            ms_distance_loss(s32, y, version=version),
            ms_distance_loss(s64, y, version=version),
        )
        v32.backward(), v64.backward()
        assert v32.dtype == torch.float32
        torch.testing.assert_close(v32.double(), v64, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(s32.grad.double(), s64.grad, rtol=1e-3, atol=1e-5)


def _pk(seed, classes=4, per=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(classes * per, 6, generator=g, dtype=torch.float64)
    return cosine_similarity(x), torch.arange(classes).repeat_interleave(per)


@pytest.mark.parametrize("normalization", ["none", "anchor", "batch"])
@pytest.mark.parametrize("epsilon", [None, 0.2])
def test_power_and_exponential_losses_forward_every_setting(normalization, epsilon):
    """Liu et al.'s power (Eq. 24, 29, 32) and exponential (Eq. 27, 30, 33) losses with no
    default anywhere: the paper-literal loop with the same weighting, exponents, margins,
    normalization and mining; "sum" is B times the loop's mean."""
    from dmlbook.losses.liu_weighting import pair_exponential_loss
    from dmlbook.reference.liu_weighting import pair_weighted_loss_reference

    S, y = _pk(21)
    B, m1, m2 = len(y), 0.4, 1.3
    cases = ((pair_power_loss, "power", "p", "q", 1.5, 2.5),
             (pair_exponential_loss, "exponential", "alpha", "beta", 0.7, 3.0))  # fmt: skip
    for fn, weighting, name_a, name_b, a, b in cases:
        want = pair_weighted_loss_reference(
            S, y, m1, m2, weighting=weighting, pos_exponent=a, neg_exponent=b,
            normalization=normalization, epsilon=epsilon,
        )  # fmt: skip
        assert float(want) > 0
        for reduction, scale in (("mean", 1), ("sum", B)):
            got = fn(S, y, m1, m2, normalization=normalization, epsilon=epsilon,
                     reduction=reduction, **{name_a: a, name_b: b})  # fmt: skip
            assert float(got) == pytest.approx(scale * float(want), rel=1e-10), fn.__name__


def _masks_and_moved(S, y, seed):
    same = y[:, None] == y[None, :]
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(len(y), len(y), generator=g) < 0.7
    keep = keep & keep.T
    moved = S.clone()
    moved[same & ~keep] = 1.0
    moved[~same & ~keep] = -1.0
    moved.fill_diagonal_(1.0)
    return keep, keep, moved


@pytest.mark.parametrize("epsilon", [None, 0.2])
def test_masks_act_as_pairs_moved_out_of_the_margins(epsilon):
    """A miner's masks: a dropped positive pair is one at distance 0 (below m1), a dropped
    negative one at distance 2 (beyond m2); neither is ever an anchor's hardest pair, so
    Eq. 18's loss (the paper-literal loop on the moved similarities) and the weights are those
    of the masked call."""
    from dmlbook.reference.liu_weighting import pair_weighted_loss_reference

    S, y = _pk(22)
    pos_mask, neg_mask, moved = _masks_and_moved(S, y, 5)
    kw = dict(weighting="power", pos_exponent=1.0, neg_exponent=2.0, epsilon=epsilon)
    want = pair_weighted_loss_reference(moved, y, 0.3, 1.3, **kw)
    got = pair_weighted_loss(S, y, 0.3, 1.3, **kw, pos_mask=pos_mask, neg_mask=neg_mask)
    assert float(got) == pytest.approx(float(want), rel=1e-10)
    masked = pair_weights(S, y, 0.3, 1.3, **kw, pos_mask=pos_mask, neg_mask=neg_mask)
    for a, b in zip(masked, pair_weights(moved, y, 0.3, 1.3, **kw), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_ms_distance_masks_act_as_pairs_the_mining_drops(version):
    """MS on distances (Eq. 22-23 mining, epsilon 0.1): a dropped positive at distance 0 and a
    dropped negative at distance 2 fail the mining, so the loop on the moved similarities is the
    masked loss; the weights agree too."""
    S, y = _pk(23)
    pos_mask, neg_mask, moved = _masks_and_moved(S, y, 6)
    D = (2 - 2 * S).clamp_min(0).sqrt()
    same = y[:, None] == y[None, :]
    assert (
        float(D[~same].min()) > 0.1
        and float(D[same & ~torch.eye(12, dtype=torch.bool)].max()) < 1.9
    )
    want = ms_distance_loss_reference(moved, y, 1.0, 2.0, 10.0, version=version, epsilon=0.1)
    got = ms_distance_loss(S, y, 1.0, 2.0, 10.0, version=version, epsilon=0.1,
                           pos_mask=pos_mask, neg_mask=neg_mask)  # fmt: skip
    assert float(got) == pytest.approx(float(want), rel=1e-10)
    masked = ms_distance_weights(S, y, 1.0, 2.0, 10.0, version=version, epsilon=0.1,
                                 pos_mask=pos_mask, neg_mask=neg_mask)  # fmt: skip
    for a, b in zip(masked, ms_distance_weights(moved, y, 1.0, 2.0, 10.0, version=version,
                                                epsilon=0.1), strict=True):  # fmt: skip
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)


def test_half_precision_in_gives_half_precision_out():
    """float16 similarities are computed in float32 (distances included) and the loss is
    returned in float16: here the paper-literal loop's float64 value on the same float16
    inputs, rounded to float16 (distances taken in float16 land one float16 step off)."""
    from dmlbook.reference.liu_weighting import pair_weighted_loss_reference

    S, y = _pk(24, classes=8, per=4)
    half = S.half()
    value = pair_weighted_loss(half, y)
    assert value.dtype == torch.float16
    assert float(value) == float(pair_weighted_loss_reference(half.double(), y).half())
    value = ms_distance_loss(half, y)
    assert value.dtype == torch.float16
    assert float(value) == float(ms_distance_loss_reference(half.double(), y).half())


def test_a_row_whose_every_weight_is_zero_gets_weight_zero_not_nan():
    """Power weights of bases 0 (``0^p = 0``, log weight ``-inf``) stay out of the sum: a row with
    only such entries has weight 0 everywhere, the other row is Eq. 24's normalised powers."""
    from dmlbook.losses.liu_weighting import liu_weights

    x = torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(2, 3, dtype=torch.bool)
    w = liu_weights(x, mask, "power", 2.0, "anchor")
    want = torch.tensor([[0.0, 0.0, 0.0], [0.25 / 1.25, 0.0, 1.0 / 1.25]], dtype=torch.float64)
    torch.testing.assert_close(w, want, rtol=1e-12, atol=0)


def test_power_and_exponential_losses_pass_the_masks_on():
    """Pair-P and Pair-E with a miner's masks: the loop on the similarities with the dropped
    pairs moved out of the margins (as for Eq. 18's loss above)."""
    from dmlbook.losses.liu_weighting import pair_exponential_loss
    from dmlbook.reference.liu_weighting import pair_weighted_loss_reference

    S, y = _pk(25)
    pos_mask, neg_mask, moved = _masks_and_moved(S, y, 8)
    for fn, weighting, kw in ((pair_power_loss, "power", {"p": 1.0, "q": 2.0}),
                              (pair_exponential_loss, "exponential", {"alpha": 1.0, "beta": 2.0})):  # fmt: skip
        want = pair_weighted_loss_reference(moved, y, 0.3, 1.3, weighting=weighting,
                                            pos_exponent=1.0, neg_exponent=2.0)  # fmt: skip
        got = fn(S, y, 0.3, 1.3, **kw, pos_mask=pos_mask, neg_mask=neg_mask)
        assert float(got) == pytest.approx(float(want), rel=1e-10), fn.__name__

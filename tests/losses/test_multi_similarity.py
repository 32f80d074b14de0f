"""The MS loss of dmlbook: mining (Wang et al. Eq. 11-12), weighting (Eq. 13-14), loss (Eq. 15),
the Table 2 ablation family, and their behaviour at the edges (nothing mined, one class, one
sample, extreme similarities in float32, bfloat16 autocast).

The comparisons with independent implementations (the per-anchor loop, pytorch-metric-learning,
Liu et al.'s forms) are in ``tests/reference/test_ms_equivalence.py``.

Implementation: :mod:`dmlbook.losses.multi_similarity` (its mining, :mod:`dmlbook.mining.multi_similarity`,
is tested in ``tests/mining/test_multi_similarity.py``);
chapter ``book/10_multi_similarity.ipynb``. The Table 2 losses are in ``test_ablation.py``, the
study in ``tests/studies/test_ms_ablation.py``.
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from loss_cases import cosine_batches, grad_of, rand_S

from dmlbook import symbolic as sy
from dmlbook.core.similarity import cosine_similarity, pair_masks
from dmlbook.losses import (
    MSMiningLoss,
    MultiSimilarityLoss,
    loss_parameters,
    ms_anchor_weights,
    ms_case_weights,
    ms_mining_loss,
    ms_weights,
    multi_similarity_loss,
)
from dmlbook.mining import ms_mining_masks
from dmlbook.reference.multi_similarity import multi_similarity_loss_reference
from dmlbook.studies.three_similarities import (
    ProbeSpec,
    compare_with_paper,
    default_probes,
    three_similarities_table,
)

FAST = settings(max_examples=40, deadline=None)


@pytest.mark.parametrize("mining", [True, False])
@pytest.mark.parametrize("margin", [0.5, 1.0])
def test_weights_are_the_gradient_of_the_sum(mining, margin):
    """Eq. 13-14 are dL/dS of Eq. 15: +w on negatives, -w on positives."""
    S = rand_S(12, 1)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4])
    masks = ms_mining_masks(S, y) if mining else pair_masks(y)
    w_pos, w_neg = ms_weights(S, y, 2.0, 50.0, margin, pos_mask=masks[0], neg_mask=masks[1])
    g = grad_of(
        lambda s: multi_similarity_loss(s, y, 2, 50, margin, mining=mining, reduction="sum"), S
    )
    torch.testing.assert_close(g, w_neg - w_pos, rtol=0, atol=1e-13)
    assert (w_pos >= 0).all() and (w_neg >= 0).all()
    assert (w_neg.sum(1) < 1).all() and (w_pos.sum(1) < 1).all()  # the "1 +" of Eq. 13-14


def test_weights_equal_the_printed_eq_13_14():
    S = rand_S(9, 4)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    a, b, lam = 2.0, 50.0, 0.5
    pos, neg = ms_mining_masks(S, y)
    w_pos, w_neg = ms_weights(S, y, a, b, lam, pos_mask=pos, neg_mask=neg)
    for i in range(9):
        P, N = pos[i].nonzero().flatten(), neg[i].nonzero().flatten()
        for j in N:
            eq13 = 1 / (math.exp(b * (lam - S[i, j])) + torch.exp(b * (S[i, N] - S[i, j])).sum())
            assert float(w_neg[i, j]) == pytest.approx(float(eq13), rel=1e-12)
        for j in P:
            eq14 = 1 / (math.exp(-a * (lam - S[i, j])) + torch.exp(-a * (S[i, P] - S[i, j])).sum())
            assert float(w_pos[i, j]) == pytest.approx(float(eq14), rel=1e-12)


def test_anchor_weights_match_the_matrix_form():
    S = rand_S(7, 5)
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    w_pos, w_neg = ms_weights(S, y)
    lp, ln = pair_masks(y)
    for i in range(7):
        wp, wn = ms_anchor_weights(S[i, lp[i]], S[i, ln[i]])
        torch.testing.assert_close(wp, w_pos[i, lp[i]], rtol=1e-12, atol=0)
        torch.testing.assert_close(wn, w_neg[i, ln[i]], rtol=1e-12, atol=0)
    wp, wn = ms_anchor_weights(torch.zeros(4, 0), torch.rand(4, 3))  # empty P, batched
    assert wp.shape == (4, 0) and wn.shape == (4, 3)


def test_blog_cases_order_the_weights():
    """Seed 001: a pair's weight falls as the anchor's other pairs get harder (Case 1 > 2 > 3)."""
    s = 0.4
    others = torch.tensor([[s - 0.2] * 5, [s] * 5, [s + 0.2] * 5], dtype=torch.float64)
    pair = torch.full((3, 1), s, dtype=torch.float64)
    _, w_neg = ms_anchor_weights(
        torch.zeros(3, 0, dtype=torch.float64), torch.cat([pair, others], 1)
    )
    assert w_neg[0, 0] > w_neg[1, 0] > w_neg[2, 0]
    # positives: the other positives more similar (easier) -> the pair gets the larger weight
    w_pos, _ = ms_anchor_weights(torch.cat([pair, others.flip(0)], 1), torch.zeros(3, 0))
    assert w_pos[0, 0] > w_pos[1, 0] > w_pos[2, 0]


def test_case_weights_helper():
    s = torch.linspace(-0.5, 1.0, 31, dtype=torch.float64)
    for positive in (False, True):
        w1, w2, w3 = (ms_case_weights(s, h, positive=positive) for h in (-0.2, 0.0, 0.2))
        assert w1.shape == s.shape and (w1 >= w2).all() and (w2 >= w3).all()
    # alone, a negative gets binomial deviance's sigmoid; a positive the mirrored one
    torch.testing.assert_close(ms_case_weights(s, 0.0, 0), torch.sigmoid(50 * (s - 0.5)))
    torch.testing.assert_close(
        ms_case_weights(s, 0.0, 0, positive=True), torch.sigmoid(-2 * (s - 0.5))
    )
    # the helper is the anchor weight of the pair with its others
    row = torch.tensor([0.3, 0.5, 0.5, 0.5], dtype=torch.float64)
    _, wn = ms_anchor_weights(row[:0], row)
    assert float(ms_case_weights(torch.tensor(0.3, dtype=torch.float64), 0.2, 3)) == pytest.approx(
        float(wn[0]), rel=1e-12
    )
    assert float(ms_case_weights(0.9, 0.5)) > 0  # others clipped at S = 1
    with pytest.raises(ValueError, match="n_others"):
        ms_case_weights(0.5, 0.0, -1)


def test_symbolic_eq_13_14_for_a_small_anchor():
    alpha, beta = sy.hyperparameters("alpha beta")
    lam = sp.Symbol("lambda", real=True)
    a = sy.anchor_similarities(2, 2)
    L = sy.define(
        lambda: (
            sy.log1p_sum_exp([-alpha * (s - lam) for s in a.pos]) / alpha
            + sy.log1p_sum_exp([beta * (s - lam) for s in a.neg]) / beta
        )
    )
    w = sy.derived(sy.pair_weights, L, a)
    eq13 = lambda: (
        1
        / (  # noqa: E731
            sp.exp(beta * (lam - a.neg[0])) + sum(sp.exp(beta * (s - a.neg[0])) for s in a.neg)
        )
    )
    eq14 = lambda: (
        1
        / (  # noqa: E731
            sp.exp(-alpha * (lam - a.pos[0])) + sum(sp.exp(-alpha * (s - a.pos[0])) for s in a.pos)
        )
    )
    negated = sy.derived(lambda v: -v, w[a.pos[0]], differentiates=False)
    assert sy.prove_equal(w[a.neg[0]], eq13)
    assert sy.prove_equal(negated, eq14)  # Eq. 14 is a magnitude: dL/dS = -w+
    assert not sy.prove_equal(w[a.pos[0]], eq14, verbose=False)
    # and dmlbook's implementation against these symbolic weights, on a mined real batch
    S = rand_S(10, 7)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    pos, neg = ms_mining_masks(S, y)
    vals = {alpha: 2.0, beta: 50.0, lam: 0.5}
    check = sy.check_against_autograd(
        lambda s, lab: multi_similarity_loss(s, lab, 2.0, 50.0, 0.5),
        sy.weights_from_loss(
            lambda b: (
                sy.log1p_sum_exp([-alpha * (s - lam) for s in b.pos]) / alpha
                + sy.log1p_sum_exp([beta * (s - lam) for s in b.neg]) / beta
            ),
            vals,
        ),
        S,
        y,
        scale=1 / 10,
        pos_mask=pos,
        neg_mask=neg,
    )
    assert check.passed and check.max_abs_err <= 1e-10


def test_finite_differences_agree():
    S = rand_S(8, 11)
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    for mining in (True, False):
        fn = lambda s, lab, m=mining: multi_similarity_loss(s, lab, 2.0, 10.0, 0.5, mining=m)
        assert sy.gradcheck_witness(fn, S, y)


def test_double_backward_works():
    """The loss is plain autograd, so a second derivative (a gradient penalty) is available."""
    x = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x.requires_grad_(True)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    (g,) = torch.autograd.grad(MultiSimilarityLoss(mining=False)(x, y), x, create_graph=True)
    (h,) = torch.autograd.grad(g.pow(2).sum(), x)
    assert torch.isfinite(h).all() and h.abs().sum() > 0


@FAST
@given(cosine_batches())
def test_never_nan_and_empty_anchors_contribute_zero(batch):
    S, y = batch
    per = multi_similarity_loss(S, y, reduction="none")
    pos, neg = ms_mining_masks(S, y)
    empty = ~(pos.any(1) | neg.any(1))
    assert torch.isfinite(per).all() and (per[empty] == 0).all() and (per[~empty] > 0).all()
    g = grad_of(lambda s: multi_similarity_loss(s, y), S)
    assert torch.isfinite(g).all()
    assert (g[~(pos | neg)] == 0).all()  # unmined pairs (and the diagonal) get no weight
    assert float(multi_similarity_loss(S, y)) == pytest.approx(float(per.sum() / len(y)), rel=1e-12)


def test_batches_without_pairs():
    for S, y in (
        (torch.ones(1, 1), torch.tensor([0])),
        (rand_S(4), torch.zeros(4, dtype=torch.long)),
    ):
        S = S.clone().requires_grad_(True)
        loss = multi_similarity_loss(S, y)
        (g,) = torch.autograd.grad(loss, S)
        assert float(loss.detach()) == 0.0 and (g == 0).all()
    # without mining a one-class batch still has its positive halves
    assert (
        float(multi_similarity_loss(rand_S(4), torch.zeros(4, dtype=torch.long), mining=False)) > 0
    )


@pytest.mark.parametrize("margin", [0.5, 1.0])
@pytest.mark.parametrize("mining", [True, False])
def test_float32_safe_at_extreme_similarities(margin, mining):
    """alpha = 2, beta = 50 in float32 for any S in [-1, 1]: finite and equal to float64."""
    g = torch.Generator().manual_seed(0)
    B = 40
    vals = torch.rand(B, B, generator=g, dtype=torch.float64) * 2 - 1
    vals[torch.rand(B, B, generator=g) < 0.3] = 1.0
    vals[torch.rand(B, B, generator=g) < 0.2] = -1.0
    S64 = ((vals + vals.T) / 2).fill_diagonal_(1.0)
    y = torch.arange(B) % 7
    S32 = S64.float()
    for S in (S32, S64):
        assert torch.isfinite(
            grad_of(lambda s: multi_similarity_loss(s, y, 2, 50, margin, mining=mining), S)
        ).all()
    v32 = multi_similarity_loss(S32, y, 2, 50, margin, mining=mining)
    v64 = multi_similarity_loss(S32.double(), y, 2, 50, margin, mining=mining)
    assert v32.dtype == torch.float32 and float(v32) == pytest.approx(float(v64), rel=1e-5)
    g32 = grad_of(lambda s: multi_similarity_loss(s, y, 2, 50, margin, mining=mining), S32)
    g64 = grad_of(lambda s: multi_similarity_loss(s, y, 2, 50, margin, mining=mining), S32.double())
    torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-7)


def test_huge_scales_do_not_overflow():
    S = rand_S(10, 3).float()
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3])
    for margin in (-1.0, 0.0, 2.0):
        loss = multi_similarity_loss(S, y, 200.0, 500.0, margin, mining=False)
        g = grad_of(
            lambda s, m=margin: multi_similarity_loss(s, y, 200.0, 500.0, m, mining=False), S
        )
        assert torch.isfinite(loss) and torch.isfinite(g).all()


def test_bfloat16_autocast_on_cpu():
    """S from a matmul under bf16 autocast: the loss runs in float32 on the bf16 similarities."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 16, generator=g)
    y = torch.arange(24) % 6
    x1 = x.clone().requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = torch.nn.functional.normalize(x1, dim=1)
        S = z @ z.T
        assert S.dtype == torch.bfloat16
        loss = multi_similarity_loss(S, y)
    loss.backward()
    assert loss.dtype == torch.float32 and torch.isfinite(loss) and torch.isfinite(x1.grad).all()
    # the same numbers as float32 arithmetic on the bf16-rounded similarities
    S_rounded = S.detach().float().requires_grad_(True)
    ref = multi_similarity_loss(S_rounded, y)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-6)
    # and close to the all-float32 loss
    ref32 = MultiSimilarityLoss()(x, y)
    assert float(loss.detach()) == pytest.approx(float(ref32.detach()), rel=5e-2)
    # the gradient with respect to bf16 S comes back as bf16
    Sb = S.detach().clone().requires_grad_(True)
    (gb,) = torch.autograd.grad(multi_similarity_loss(Sb, y), Sb)
    assert gb.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.isfinite(MultiSimilarityLoss()(x, y))


def test_reductions_and_module():
    S = rand_S(9, 2)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    per = multi_similarity_loss(S, y, reduction="none")
    assert per.shape == (9,)
    assert float(multi_similarity_loss(S, y, reduction="sum")) == pytest.approx(float(per.sum()))
    x = torch.randn(9, 4, dtype=torch.float64)
    m = MultiSimilarityLoss(2.0, 40.0, 0.5, 0.1)
    assert float(m(x, y)) == pytest.approx(
        float(multi_similarity_loss(cosine_similarity(x), y, 2.0, 40.0, 0.5)), rel=1e-12
    )
    assert "beta=40.0" in repr(m) and "mining=True" in repr(m)
    hp = {"alpha": 3.0, "beta": 30.0, "margin": 0.4, "epsilon": 0.2, "mining": False,
          "reduction": "sum"}  # fmt: skip
    assert set(hp) == set(loss_parameters("multi_similarity"))
    S = cosine_similarity(x)
    m = MultiSimilarityLoss(**hp)
    assert torch.equal(m.loss_on_similarity(S, y), multi_similarity_loss(S, y, **hp))
    assert all(f"{k}={v!r}" in repr(m) for k, v in hp.items())


def test_bad_arguments_fail_with_a_message():
    S, y = rand_S(4), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="alpha"):
        multi_similarity_loss(S, y, alpha=0.0)
    with pytest.raises(ValueError, match="beta"):
        multi_similarity_loss(S, y, beta=-1.0)
    with pytest.raises(ValueError, match="epsilon"):
        multi_similarity_loss(S, y, epsilon=-0.1)
    with pytest.raises(ValueError, match="reduction"):
        multi_similarity_loss(S, y, reduction="max")
    with pytest.raises(ValueError, match="square"):
        multi_similarity_loss(S[:3], y)
    with pytest.raises(ValueError, match="labels"):
        multi_similarity_loss(S, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="NaN"):
        multi_similarity_loss(S * float("nan"), y)
    with pytest.raises(TypeError):
        multi_similarity_loss(S.long(), y)
    with pytest.raises(ValueError, match="pos_mask"):
        ms_mining_masks(S, y, pos_mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="epsilon"):
        MultiSimilarityLoss(epsilon=float("inf"))


def test_ms_mining_loss_weights_every_mined_pair_equally():
    S = rand_S(10, 8)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    pos, neg = ms_mining_masks(S, y)
    g = grad_of(lambda s: ms_mining_loss(s, y, reduction="sum"), S)
    assert torch.equal(g, neg.double() - pos.double())
    g_all = grad_of(lambda s: ms_mining_loss(s, y, mining=False, reduction="sum"), S)
    lp, ln = pair_masks(y)
    assert torch.equal(g_all, ln.double() - lp.double())
    x = torch.randn(10, 3, dtype=torch.float64)
    module = MSMiningLoss(0.2)
    assert float(module(x, y)) == pytest.approx(
        float(ms_mining_loss(cosine_similarity(x), y, 0.2)), rel=1e-12
    )
    assert "epsilon=0.2" in repr(module)


def test_three_similarities_table_sees_all_three_for_ms():
    spec = [s for s in default_probes() if s.loss == "multi_similarity"]
    assert len(spec) == 1
    table = three_similarities_table(spec, n_configs=4)
    cmp = compare_with_paper(table, spec)
    row = cmp.loc["MS (Wang Eq. 15)"]
    assert row["S (dmlbook)"] and row["P (dmlbook)"] and row["N (dmlbook)"] and row["agrees"]
    # without mining, Similarity-P is gone (the "MS weighting" row of Table 2 is S, N)
    t2 = three_similarities_table([ProbeSpec("w", "ms", {"mining": False}, "MS")], n_configs=4)
    assert t2.loc["w", "S"] and t2.loc["w", "N"] and not t2.loc["w", "P"]


@pytest.mark.parametrize("mining", [True, False])
def test_candidate_masks_narrow_before_mining_and_weigh_by_eq_13_14(mining):
    """Given masks narrow the label masks before mining; the gradient is still Eq. 13-14 on the
    sets mined from the candidates, and the label masks themselves change nothing."""
    S = rand_S(14, 12)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4])
    lp, ln = pair_masks(y)
    g = torch.Generator().manual_seed(3)
    keep = torch.rand(14, 14, generator=g) < 0.7
    for pm, nm in ((lp, ln), (lp & keep, ln & keep), (None, keep)):
        fn = lambda s, pm=pm, nm=nm: multi_similarity_loss(
            s, y, mining=mining, reduction="sum", pos_mask=pm, neg_mask=nm
        )
        pos, neg = ms_mining_masks(S, y, pos_mask=pm, neg_mask=nm) if mining else (pm, nm)
        w_pos, w_neg = ms_weights(S, y, pos_mask=pos, neg_mask=neg)
        torch.testing.assert_close(grad_of(fn, S), w_neg - w_pos, rtol=1e-12, atol=1e-15)
    plain = float(multi_similarity_loss(S, y, mining=mining))
    labelled = float(multi_similarity_loss(S, y, mining=mining, pos_mask=lp, neg_mask=ln))
    assert plain == pytest.approx(labelled, rel=1e-13)


def _case_weight(s, h, n, positive, alpha=2.0, beta=50.0, margin=0.5):
    """Eq. 13 (negative) or Eq. 14 (positive) for one pair of similarity ``s`` beside ``n``
    other pairs of its set, each ``h`` harder (clamped to [-1, 1]), by hand."""
    if positive:
        o = max(min(s - h, 1.0), -1.0)
        e = lambda v: math.exp(-alpha * (v - margin))  # noqa: E731
    else:
        o = max(min(s + h, 1.0), -1.0)
        e = lambda v: math.exp(beta * (v - margin))  # noqa: E731
    return e(s) / (1 + e(s) + n * e(o))


@pytest.mark.parametrize("positive", [False, True])
def test_case_weights_by_hand_with_the_clamp_binding_and_not(positive):
    """``ms_case_weights``: the others sit ``h`` harder, clamped to a cosine's range; the
    defaults are five others and a negative pair."""
    for s, h in ((0.45, 0.1), (0.9, 0.3), (-0.9, 0.3), (0.2, -0.05)):
        got = ms_case_weights(torch.tensor(s, dtype=torch.float64), h, 3, positive=positive,
                              alpha=3.0, beta=20.0, margin=0.4)  # fmt: skip
        want = _case_weight(s, h, 3, positive, alpha=3.0, beta=20.0, margin=0.4)
        assert float(got) == pytest.approx(want, rel=1e-12), (s, h)
    s = torch.tensor(0.45, dtype=torch.float64)
    assert float(ms_case_weights(s, 0.1)) == pytest.approx(_case_weight(0.45, 0.1, 5, False))


def test_anchor_weights_keep_the_input_dtype():
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        wp, wn = ms_anchor_weights(torch.rand(2, 3).to(dtype), torch.rand(2, 4).to(dtype))
        assert wp.dtype == wn.dtype == dtype


def _ms_mining_loss_loop(S, y, epsilon, pos_mask, neg_mask):
    """Eq. 11-12 within the given masks, then ``sum kept S_neg - sum kept S_pos`` per anchor,
    averaged over all B anchors (Python floats)."""
    B, total = len(y), 0.0
    for i in range(B):
        P = [k for k in range(B) if k != i and y[k] == y[i] and pos_mask[i][k]]
        N = [k for k in range(B) if y[k] != y[i] and neg_mask[i][k]]
        if not (P and N):
            continue
        hardest_p, hardest_n = min(S[i][k] for k in P), max(S[i][k] for k in N)
        total += sum(S[i][k] for k in N if S[i][k] > hardest_p - epsilon)
        total -= sum(S[i][k] for k in P if S[i][k] < hardest_n + epsilon)
    return total / B


@pytest.mark.parametrize("epsilon", [0.05, 0.3])
def test_ms_mining_loss_within_masks_matches_the_loop(epsilon):
    S = rand_S(12, seed=9)
    y = torch.arange(4).repeat_interleave(3)
    g = torch.Generator().manual_seed(10)
    pos_mask, neg_mask = (
        torch.rand(12, 12, generator=g) < 0.7,
        torch.rand(12, 12, generator=g) < 0.7,
    )
    for kw in ({}, {"pos_mask": pos_mask, "neg_mask": neg_mask}):
        pm = kw.get("pos_mask", torch.ones(12, 12, dtype=torch.bool)).tolist()
        nm = kw.get("neg_mask", torch.ones(12, 12, dtype=torch.bool)).tolist()
        want = _ms_mining_loss_loop(S.tolist(), y.tolist(), epsilon, pm, nm)
        assert float(ms_mining_loss(S, y, epsilon, **kw)) == pytest.approx(want, rel=1e-12)


def test_ms_loss_epsilon_reaches_the_mining():
    """Eq. 15 on the pairs Eq. 11-12 keep for a non-default epsilon (the reference loop)."""
    S, y = rand_S(12, seed=11), torch.arange(4).repeat_interleave(3)
    for epsilon in (0.02, 0.4):
        want = multi_similarity_loss_reference(S, y, 2.0, 10.0, 0.5, epsilon)
        got = multi_similarity_loss(S, y, 2.0, 10.0, 0.5, epsilon)
        assert float(got) == pytest.approx(float(want), rel=1e-10)


def test_the_ms_losss_epsilon_accepts_what_its_miner_accepts_with_its_default():
    """The MS loss declares ``epsilon`` (it also takes the weights' declarations with ``like=``,
    so it cannot take the miner's): it must allow the same range, with the same default, as
    :func:`dmlbook.mining.ms_mining_masks`, which it calls trusted."""
    import dataclasses
    import inspect
    import typing

    from dmlbook.mining import ms_mining_masks

    def declared_range(function):
        p = inspect.signature(function, eval_str=True).parameters["epsilon"]
        (number,) = typing.get_args(p.annotation)[1:]
        return dataclasses.replace(number, meaning=""), p.default

    assert declared_range(multi_similarity_loss) == declared_range(ms_mining_masks)

"""Tests of dmlbook.symbolic: building blocks, proofs, lambdify to torch, checks against autograd.

Every finite proof states its P (positives) and N (negatives) per anchor; each runs in well under
5 s on 2 CPU cores.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook import symbolic as sy
from dmlbook.losses import contrastive_loss
from dmlbook.similarity import cosine_similarity, l2_normalize, pair_masks

ALPHA, BETA, LAM = sy.hyperparameters("alpha beta lambda")
MS_VALUES = {ALPHA: 2.0, BETA: 10.0, LAM: 0.5}


def ms_anchor(a: sy.AnchorSimilarities) -> sp.Expr:
    """One anchor's MS loss, Wang et al. 2019, Eq. 15 (without the 1/m of the batch mean)."""
    pos = sy.log1p_sum_exp([-ALPHA * (s - LAM) for s in a.pos]) / ALPHA
    return pos + sy.log1p_sum_exp([BETA * (s - LAM) for s in a.neg]) / BETA


def ms_closed_form(a: sy.AnchorSimilarities) -> tuple[list[sp.Expr], list[sp.Expr]]:
    """Wang et al. 2019, Eq. 14 (positives) and Eq. 13 first line (negatives)."""
    w_pos = [
        1 / (sp.exp(-ALPHA * (LAM - s)) + sum(sp.exp(-ALPHA * (t - s)) for t in a.pos))
        for s in a.pos
    ]
    w_neg = [
        1 / (sp.exp(BETA * (LAM - s)) + sum(sp.exp(BETA * (t - s)) for t in a.neg)) for s in a.neg
    ]
    return w_pos, w_neg


def contrastive_anchor(margin: sp.Expr):
    """One anchor's share of Wang et al. 2019, Eq. 4."""

    def build(a: sy.AnchorSimilarities) -> sp.Expr:
        return sum((-s for s in a.pos), sp.S.Zero) + sum(
            (sy.hinge(s - margin) for s in a.neg), sp.S.Zero
        )

    return build


def ms_loss_torch(S: torch.Tensor, labels: torch.Tensor, alpha=2.0, beta=10.0, lam=0.5):
    """A reference MS loss on S (mean over anchors), written independently of the symbolic side."""
    pos, neg = pair_masks(labels)
    e_pos = torch.where(pos, torch.exp(-alpha * (S - lam)), torch.zeros_like(S)).sum(1)
    e_neg = torch.where(neg, torch.exp(beta * (S - lam)), torch.zeros_like(S)).sum(1)
    return (torch.log1p(e_pos) / alpha + torch.log1p(e_neg) / beta).mean()


def batch(seed: int = 0, B: int = 8, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, d, generator=g, dtype=torch.float64)
    labels = torch.arange(B) % 3
    return cosine_similarity(x), labels


def n_pairs(labels: torch.Tensor) -> int:
    pos, neg = pair_masks(labels)
    return int((pos | neg).sum())


# ---------------------------------------------------------------------------- building blocks


def test_anchor_similarities_counts_names_and_assumptions():
    a = sy.anchor_similarities(2, 3)
    assert (a.P, a.N) == (2, 3)
    assert a.all == a.pos + a.neg
    assert [str(s) for s in a.pos] == ["s^+_1", "s^+_2"]
    assert all(s.is_real for s in a.all)
    empty = sy.anchor_similarities(0, 1)
    assert empty.pos == () and empty.N == 1


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_anchor_similarities_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="non-negative int"):
        sy.anchor_similarities(bad, 2)


def test_hyperparameters_assumptions():
    (a,) = sy.hyperparameters("a", positive=True)
    assert a.is_positive and a.is_real
    m, n = sy.hyperparameters(["m", "n"], positive=False)
    assert m.is_real and m.is_positive is None
    with pytest.raises(ValueError, match="empty"):
        sy.hyperparameters("")
    with pytest.raises(ValueError, match="no declared domain for the hyper-parameter 'a'"):
        sy.hyperparameters("a")


def test_hyperparameter_domains_hold_every_value_the_book_uses():
    """lambda is used at -2.5 (Chapter 5), margins at 0 (Liu et al.'s m_1): neither is positive,
    so sqrt(lambda^2) == lambda must not be provable, while sqrt(alpha^2) == alpha is."""
    alpha, beta, lam, m, m1, eps = sy.hyperparameters("alpha beta lambda m m_1 epsilon")
    assert alpha.is_positive and beta.is_positive
    assert lam.is_real and lam.is_positive is None and lam.is_nonnegative is None
    assert m.is_nonnegative and m.is_positive is None and m1.is_positive is None
    assert eps.is_nonnegative and eps.is_positive is None
    assert not sy.prove_equal(sp.sqrt(lam**2), lam, verbose=False)
    assert sy.counterexample(sp.sqrt(lam**2), lam) is not None
    assert sy.prove_equal(sp.sqrt(alpha**2), alpha)
    used = {"lambda": [-2.5, 0.5, 1.0], "m": [0.0, 0.1, 3.0], "m_1": [0.0], "epsilon": [0.0, 0.1]}
    for name, values in used.items():
        (x,) = sy.hyperparameters(name)
        for v in values:
            assert v > 0 if x.is_positive else (v >= 0 if x.is_nonnegative else True), (name, v)


def test_a_proof_that_divides_by_a_vanishing_factor_needs_its_condition():
    """Issue 27: SymPy cancels Hinge(s)/Hinge(s) and (e^s - 1)/(e^s - 1) while building the
    expression; as written (a callable, or inside as_written) the division is refused unless
    the condition is stated, and proved with it."""
    s, x = sp.symbols("s x", real=True)
    hinge = sy.Hinge(s)
    assert not sy.prove_equal(lambda: hinge * x / hinge, x, verbose=False)
    assert not sy.prove_equal(lambda: (sp.exp(s) - 1) / (sp.exp(s) - 1), 1, verbose=False)
    with sy.as_written():
        ratio = (sp.exp(s) - 1) / (sp.exp(s) - 1)
    assert sy.divisors(ratio) == [sp.exp(s) - 1]
    assert not sy.prove_equal(ratio, 1, verbose=False)
    assert sy.prove_equal(lambda: hinge * x / hinge, x, where=[s > 0])
    assert sy.prove_equal(ratio, 1, where=[sp.Ne(sp.exp(s) - 1, 0)])
    # a denominator the assumptions keep away from 0 needs nothing
    assert sy.prove_equal(lambda: (sp.exp(s) + 1) / (sp.exp(s) + 1), 1)
    # the refusal says what to state
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        sy.prove_equal(lambda: hinge * x / hinge, x)
    assert (
        "divides by Hinge(s)" in shown.getvalue()
        and "where=[sp.Ne(Hinge(s), 0)]" in shown.getvalue()
    )
    # a distance: D = sqrt(2 - 2 s) vanishes at s = 1
    D = sy.unit_sphere_distance(s)
    assert not sy.prove_equal(D / D**2, 1 / D, verbose=False)
    assert sy.prove_equal(D / D**2, 1 / D, where=sy.distinct_points(s))


def test_batch_similarities_has_unit_diagonal_and_distinct_entries():
    S = sy.batch_similarities(3)
    assert S[0, 0] == 1 and S[0, 1] != S[1, 0]
    assert len(S.free_symbols) == 6
    with pytest.raises(ValueError):
        sy.batch_similarities(0)


def test_hinge_evaluates_derivative_and_rewrites():
    x = sp.Symbol("x", real=True)
    p = sp.Symbol("p", positive=True)
    assert sy.hinge(p) == p and sy.hinge(-p) == 0
    h = sy.hinge(x - LAM)
    assert h.diff(x) == sy.HingeActive(x - LAM)
    assert sy.HingeActive(p) == 1 and sy.HingeActive(-p) == 0
    assert h.rewrite(sp.Piecewise) == sp.Piecewise((x - LAM, x - LAM > 0), (0, True))
    assert sp.latex(h) == r"\left[- \lambda + x\right]_{+}"
    assert r"\mathbb{1}" in sp.latex(h.diff(x))


def test_hinge_branch_and_conditions():
    x, y = sp.symbols("x y", real=True)
    e = 2 * sy.hinge(x) + sy.hinge(y - 1)
    assert sy.hinge_branch(e, True) == 2 * x + y - 1
    assert sy.hinge_branch(e, False) == 0
    assert sy.hinge_branch(e, {x: True, sy.hinge(y - 1): False}) == 2 * x
    assert sy.hinge_branch(e, {x: False}) == sy.hinge(y - 1)
    assert sy.hinge_branch(e.diff(x), True) == 2
    assert set(sy.hinge_conditions(e)) == {x > 0, y - 1 > 0}


def test_log_sum_exp_forms():
    a = sy.anchor_similarities(2, 0)
    assert sy.log1p_sum_exp([]) == 0
    assert sy.log_sum_exp(a.pos) == sp.log(sp.exp(a.pos[0]) + sp.exp(a.pos[1]))
    with pytest.raises(ValueError):
        sy.log_sum_exp([])


def test_unit_sphere_conversions_are_inverse():
    s = sp.Symbol("s", real=True)
    D = sp.Symbol("D", positive=True)
    assert sy.prove_equal(sy.unit_sphere_similarity(sy.unit_sphere_distance(s)), s)
    assert sy.prove_equal(sy.unit_sphere_distance(sy.unit_sphere_similarity(D)), sp.Abs(D))
    d = sy.distance_symbols(sy.anchor_similarities(2, 1))
    assert (d.P, d.N) == (2, 1) and all(v.is_positive for v in d.all)


# ---------------------------------------------------------------------------- pair_weights


def test_pair_weights_orders_positives_first_and_matches_diff():
    a = sy.anchor_similarities(2, 2)
    L = ms_anchor(a)
    w = sy.pair_weights(L, a)
    assert list(w) == list(a.all)
    assert all(w[s] == sp.diff(L, s) for s in a.all)
    single = sy.pair_weights(L, a.pos[0])
    assert list(single) == [a.pos[0]]


def test_pair_weights_on_a_batch_matrix():
    S = sy.batch_similarities(3)
    L = sum(S[i, j] ** 2 for i in range(3) for j in range(3))
    W = sy.pair_weights(L, S)
    assert W.shape == (3, 3) and W[0, 0] == 0 and W[0, 1] == 2 * S[0, 1]


def test_pair_weights_rejects_non_symbols():
    x = sp.Symbol("x")
    with pytest.raises(TypeError, match="pair symbols"):
        sy.pair_weights(x**2, [x + 1])


def test_general_n_ms_weights_are_proved_for_every_batch_size():
    """MS Eq. 13 and Eq. 14 for any P, N (indexed sums, guard 1 <= j <= P discharged)."""
    g = sy.indexed_anchor()
    L = (
        sp.log(1 + g.sum_pos(lambda s: sp.exp(-ALPHA * (s - LAM)))) / ALPHA
        + sp.log(1 + g.sum_neg(lambda s: sp.exp(BETA * (s - LAM)))) / BETA
    )
    w = sy.pair_weights(L, [g.pos[g.j], g.neg[g.j]])
    assert not w[g.pos[g.j]].has(sp.Piecewise)
    eq14 = 1 / (
        sp.exp(-ALPHA * (LAM - g.pos[g.j])) + g.sum_pos(lambda s: sp.exp(-ALPHA * (s - g.pos[g.j])))
    )
    eq13 = 1 / (
        sp.exp(BETA * (LAM - g.neg[g.j])) + g.sum_neg(lambda s: sp.exp(BETA * (s - g.neg[g.j])))
    )
    assert sy.prove_equal(-w[g.pos[g.j]], eq14) is True
    assert sy.prove_equal(w[g.neg[g.j]], eq13) is True


# ---------------------------------------------------------------------------- prove_equal


def test_prove_equal_ms_closed_forms_P2_N3():
    """Wang et al. 2019, Eq. 13 (both lines) and Eq. 14 from Eq. 15, P=2, N=3."""
    a = sy.anchor_similarities(2, 3)
    w = sy.pair_weights(ms_anchor(a), a)
    w_pos, w_neg = ms_closed_form(a)
    assert sy.prove_equal([-w[s] for s in a.pos], w_pos) is True
    assert sy.prove_equal([w[s] for s in a.neg], w_neg) is True
    second_line = [
        sp.exp(BETA * (s - LAM)) / (1 + sum(sp.exp(BETA * (t - LAM)) for t in a.neg)) for s in a.neg
    ]
    assert sy.prove_equal(w_neg, second_line) is True


def test_prove_equal_lifted_and_binomial_P2_N2():
    """Lifted structure Eq. 7-8 (active hinge) and binomial Eq. 10, P=2, N=2."""
    a = sy.anchor_similarities(2, 2)
    lifted = sy.hinge(sy.log_sum_exp([LAM - s for s in a.pos]) + sy.log_sum_exp(a.neg))
    w = sy.pair_weights(lifted, a)
    active = {s: sy.hinge_branch(v, True) for s, v in w.items()}
    eq7 = [1 / sum(sp.exp(s - t) for t in a.pos) for s in a.pos]
    eq8 = [1 / sum(sp.exp(t - s) for t in a.neg) for s in a.neg]
    assert sy.prove_equal([-active[s] for s in a.pos], eq7) is True
    assert sy.prove_equal([active[s] for s in a.neg], eq8) is True
    assert all(sy.hinge_branch(v, False) == 0 for v in w.values())

    binomial = (
        sum(sp.log(1 + sp.exp(ALPHA * (LAM - s))) for s in a.pos) / a.P
        + sum(sp.log(1 + sp.exp(BETA * (s - LAM))) for s in a.neg) / a.N
    )
    wb = sy.pair_weights(binomial, a)
    eq10 = {
        **{
            s: -ALPHA * sp.exp(ALPHA * (LAM - s)) / (1 + sp.exp(ALPHA * (LAM - s))) / a.P
            for s in a.pos
        },
        **{
            s: BETA * sp.exp(BETA * (s - LAM)) / (1 + sp.exp(BETA * (s - LAM))) / a.N for s in a.neg
        },
    }
    assert sy.prove_equal(wb, eq10) is True


def test_prove_equal_rejects_a_wrong_closed_form_and_reports_residual(capsys):
    """Eq. 14 with the pair's own term dropped from the sum: wrong, and must not be proved."""
    a = sy.anchor_similarities(2, 1)
    w = sy.pair_weights(ms_anchor(a), a)
    s = a.pos[0]
    wrong = 1 / (sp.exp(-ALPHA * (LAM - s)) + sp.exp(-ALPHA * (a.pos[1] - s)))
    assert sy.prove_equal(-w[s], wrong) is False
    assert "residual" in capsys.readouterr().out
    assert sy.residual(-w[s], wrong) != 0
    assert not sy.spot_check_equal(-w[s], wrong)


def test_prove_equal_rejects_a_sign_error_quietly(capsys):
    x = sp.Symbol("x", real=True)
    assert sy.prove_equal(sp.exp(x), -sp.exp(x), verbose=False) is False
    assert capsys.readouterr().out == ""


def test_prove_equal_handles_piecewise_hinge_and_containers():
    a = sy.anchor_similarities(1, 2)
    w = sy.pair_weights(contrastive_anchor(LAM)(a), a)
    as_piecewise = sp.Piecewise((1, a.neg[0] > LAM), (0, True))
    assert sy.prove_equal(w[a.neg[0]], as_piecewise) is True
    assert sy.prove_equal(sp.Matrix([[w[a.pos[0]]]]), sp.Matrix([[-1]])) is True
    assert sy.residual(w[a.pos[0]], -1) == 0
    with pytest.raises(ValueError):
        sy.prove_equal(sp.Matrix([1, 2]), sp.Matrix([1, 2, 3]))
    with pytest.raises(ValueError):
        sy.prove_equal({a.pos[0]: 1}, {a.neg[0]: 1})


def test_prove_equal_never_forces_invalid_log_rules():
    """log(x y) = log x + log y is false for negative reals; no rewrite may 'prove' it."""
    x, y = sp.symbols("x y", real=True)
    assert sy.prove_equal(sp.log(x * y), sp.log(x) + sp.log(y), verbose=False) is False
    p, q = sp.symbols("p q", positive=True)
    assert sy.prove_equal(sp.log(p * q), sp.log(p) + sp.log(q)) is True


def test_spot_check_is_evidence_only():
    x = sp.Symbol("x", real=True)
    ok = sy.spot_check_equal(sp.sin(x) ** 2 + sp.cos(x) ** 2, 1)
    assert ok and ok.samples == 64 and ok.max_abs_diff < 1e-12
    k = sp.Symbol("k", integer=True)
    with pytest.raises(ValueError, match="range"):
        sy.spot_check_equal(k, k)
    assert sy.spot_check_equal(k, k, ranges={k: (0, 3)}).agrees
    g = sy.indexed_anchor()
    with pytest.raises(ValueError, match="plain symbols"):
        sy.spot_check_equal(g.pos[g.j], 0)


def test_gpw_identity_smooth_and_hinge_losses():
    """Eq. 1-2: dL/dtheta == dF/dtheta for MS (P=1, N=2) and contrastive (P=1, N=2)."""
    a = sy.anchor_similarities(1, 2)
    assert sy.prove_equal(*sy.gpw_identity(ms_anchor(a), a)) is True
    assert sy.prove_equal(*sy.gpw_identity(contrastive_anchor(LAM)(a), a.all)) is True


# ---------------------------------------------------------------------------- to_torch


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


# ---------------------------------------------------------------------------- anchor functions


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


# ---------------------------------------------------------------------------- against autograd


def test_contrastive_matches_autograd_with_mean_reduction():
    S, labels = batch(1)
    margin = 0.1
    fn = sy.weights_from_loss(contrastive_anchor(LAM), {LAM: margin})
    loss = lambda S_, y: contrastive_loss(S_, y, margin)
    check = sy.check_against_autograd(loss, fn, S, labels, scale=1 / n_pairs(labels))
    assert check.passed and check.max_abs_err <= 1e-10 and check.max_rel_err <= 1e-10
    check.assert_passed()
    wrong_scale = sy.check_against_autograd(loss, fn, S, labels)
    assert not wrong_scale.passed


def test_check_catches_a_wrong_margin_and_a_wrong_sign():
    S, labels = batch(0)
    _, neg = pair_masks(labels)
    assert bool(((S[neg] > 0.1) & (S[neg] < 0.3)).any())  # the two margins disagree on some pair
    fn = sy.weights_from_loss(contrastive_anchor(LAM), {LAM: 0.1})
    scale = 1 / n_pairs(labels)
    wrong_margin = lambda S_, y: contrastive_loss(S_, y, 0.3)
    check = sy.check_against_autograd(wrong_margin, fn, S, labels, scale=scale)
    assert not check.passed
    with pytest.raises(AssertionError, match="gradients differ"):
        check.assert_passed()

    def wrong_sign(S_, y):  # pushes positives instead of pulling them
        pos, neg = pair_masks(y)
        per_pair = torch.where(pos, S_, torch.zeros_like(S_)) + torch.where(
            neg, torch.relu(S_ - 0.1), torch.zeros_like(S_)
        )
        return per_pair.sum() / (pos | neg).sum()

    assert not sy.check_against_autograd(wrong_sign, fn, S, labels, scale=scale).passed


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.integers(4, 9))
def test_ms_per_anchor_weights_match_autograd(seed, B):
    """MS (P, N vary with the batch) against an independent torch implementation, mean over anchors."""
    S, labels = batch(seed, B=B)
    fn = sy.weights_from_closed_form(ms_closed_form, MS_VALUES)
    check = sy.check_against_autograd(ms_loss_torch, fn, S, labels, scale=1 / B)
    assert check.passed, check


def test_whole_batch_symbolic_loss_as_a_matrix():
    """Contrastive written on a symbolic 4 x 4 batch, batch mean included; no scale needed."""
    labels = torch.tensor([0, 0, 1, 1])
    Ssym = sy.batch_similarities(4)
    pos, neg = pair_masks(labels)
    terms = [
        -Ssym[i, j] if pos[i, j] else sy.hinge(Ssym[i, j] - LAM)
        for i in range(4)
        for j in range(4)
        if pos[i, j] or neg[i, j]
    ]
    L = sp.Add(*terms) / len(terms)
    W = sy.to_torch(sy.pair_weights(L, Ssym), [Ssym], {LAM: 0.2})
    S, _ = batch(3, B=4)
    check = sy.check_against_autograd(lambda S_, y: contrastive_loss(S_, y, 0.2), W(S), S, labels)
    assert check.passed
    with pytest.raises(ValueError, match="shape"):
        sy.check_against_autograd(contrastive_loss, W(S)[:3], S, labels)


def test_gradcheck_witness_passes_and_can_fail():
    S, labels = batch(4)
    assert sy.gradcheck_witness(ms_loss_torch, S, labels)
    assert sy.gradcheck_witness(lambda S_, y: contrastive_loss(S_, y, 0.1), S, labels)

    class WrongBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, s):
            ctx.save_for_backward(s)
            return (s**2).sum()

        @staticmethod
        def backward(ctx, grad):
            (s,) = ctx.saved_tensors
            return grad * 3 * s  # should be 2 s

    assert not sy.gradcheck_witness(lambda S_, y: WrongBackward.apply(S_), S, labels)


# ---------------------------------------------------------------------------- normalisation chain


def test_normalization_jacobian_closed_form_d3():
    x = sy.embedding_symbols(1, 3).row(0)
    J, closed = sy.normalization_jacobian(x), sy.normalization_jacobian_closed_form(x)
    assert not sy.prove_equal(J, closed, verbose=False)  # x = 0 has no direction
    assert sy.prove_equal(J, closed, where=sy.nonzero_rows(x))


def test_embedding_gradient_chain_B3_d2():
    """d/dx of sum_ij g_ij S_ij(x) == (I - z z^T)/|x| sum_j (g_ij + g_ji) z_j, B=3, d=2."""
    X, G = sy.embedding_symbols(3, 2), sy.weight_symbols(3)
    S = sy.similarity_from_embeddings(X)
    F = sum(G[i, j] * S[i, j] for i in range(3) for j in range(3))
    direct = sp.Matrix(3, 2, lambda i, k: F.diff(X[i, k]))
    closed = sy.embedding_gradient_closed_form(G, X)
    assert sy.prove_equal(direct, closed, where=sy.nonzero_rows(X)) is True


def test_symbolic_jacobian_matches_autograd_of_l2_normalize():
    x = sy.embedding_symbols(1, 3).row(0)
    J = sy.to_torch(sy.normalization_jacobian(x), [list(x)])
    v = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    auto = torch.autograd.functional.jacobian(lambda t: l2_normalize(t[None])[0], v)
    torch.testing.assert_close(J(v), auto, rtol=1e-13, atol=1e-15)


def test_batch_similarities_names_are_unique_beyond_nine():
    from dmlbook.symbolic import batch_similarities

    for B in (3, 9, 12):
        S = batch_similarities(B)
        names = [S[i, j].name for i in range(B) for j in range(B) if i != j]
        assert len(set(names)) == B * (B - 1)

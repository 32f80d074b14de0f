"""DRO loss of Eq. 1 (max, top-K, TopK-PN, KL, chi-square) and its per-pair base losses.

Implementation: :mod:`dmlbook.losses.dro`; chapter: ``book/12_dro.ipynb``. Expected values come
from the Python loops of :mod:`dmlbook.reference.dro` (bisection for chi-square) and from the
closed-form slopes of the base losses, never from the code under test.
"""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import FAST, batches, grad_of, masks, rand_S

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import DROLoss, describe_loss, dro_loss, dro_weights, get_loss
from dmlbook.losses.dro import base_loss_slope, chi2_weights, pair_losses
from dmlbook.reference.dro import chi2_value_reference, dro_loss_reference, pair_loss_reference

SETS = ("uniform", "simplex", "topk", "topk_pn", "kl", "chi2")


def _ref(S, y, u, base, K, drop):
    return dro_loss_reference(S.tolist(), y.tolist(), u, base, K=K, gamma=0.3, rho=0.7,
                              drop_zero=drop)  # fmt: skip


@FAST
@given(batches(max_b=7), st.sampled_from(SETS), st.sampled_from(["margin", "binomial"]),
       st.sampled_from([2, 4, 10]), st.booleans())  # fmt: skip
def test_value_equals_paper_literal_loop(case, u, base, K, drop):
    S, y = case
    got = dro_loss(S, y, u, base, K, gamma=0.3, rho=0.7, drop_zero=drop)
    assert float(got) == pytest.approx(_ref(S, y, u, base, K, drop), rel=1e-10, abs=1e-10)


@FAST
@given(batches(max_b=8), st.sampled_from(["topk", "topk_pn", "kl"]),
       st.sampled_from(["margin", "binomial"]), st.sampled_from([2, 4, 10, 160]),
       st.sampled_from([1e-3, 0.1, 1.0, 1e3]), st.booleans())  # fmt: skip
def test_value_equals_the_loop_at_any_temperature(case, u, base, K, gamma, drop):
    S, y = case
    got = dro_loss(S, y, u, base, K, gamma=gamma, drop_zero=drop)
    ref = dro_loss_reference(S.tolist(), y.tolist(), u, base, K=K, gamma=gamma, drop_zero=drop)
    assert float(got) == pytest.approx(ref, rel=1e-10, abs=1e-10)


def _random_batch(B, classes, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 6, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    y = torch.randint(0, classes, (B,), generator=g)
    return x @ x.T, y


@FAST
@given(st.integers(1, 9), st.integers(1, 4), st.integers(0, 10**6), st.sampled_from(SETS),
       st.sampled_from(["margin", "binomial"]), st.booleans())  # fmt: skip
def test_autograd_equals_closed_form_weights(B, classes, seed, u, base, drop):
    """Lemma 1: dF/dS_ij = p*_ij dl_ij/dS_ij, with p* from the closed forms, to 1e-10."""
    S, y = _random_batch(B, classes, seed)
    g = grad_of(lambda s: dro_loss(s, y, u, base, 4, gamma=0.3, rho=0.7, drop_zero=drop), S)
    p = dro_weights(S, y, u, base, 4, gamma=0.3, rho=0.7, drop_zero=drop)
    pos, neg = masks(y)
    expected = p * base_loss_slope(S, pos, neg, base)
    assert torch.allclose(g, expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("u", SETS)
def test_weights_are_a_distribution_on_the_candidates(u):
    S, y = _random_batch(30, 3, 1)
    p = dro_weights(S, y, u, K=40)
    pos, neg = masks(y)
    l = pair_losses(S, pos, neg)
    assert bool((p >= 0).all()) and bool((p[l == 0] == 0).all())
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)


def test_degenerate_batches_give_zero_with_zero_gradient():
    for y in (
        torch.tensor([0]),
        torch.tensor([0, 0]),
        torch.tensor([0, 1]),
        torch.tensor([4, 4, 4]),
    ):
        S = rand_S(len(y), seed=2)
        for u in SETS:
            g = grad_of(lambda s, y=y, u=u: dro_loss(s, y, u, K=2, drop_zero=False), S)
            assert torch.isfinite(g).all()
    S = torch.eye(3, dtype=torch.float64)  # B = 3 singletons, all orthogonal: no violation of m=0.2
    assert float(dro_loss(S, torch.tensor([0, 1, 2]), "kl", margin=0.2, threshold=0.5)) == 0.0


def test_kl_limits_are_max_and_mean():
    S, y = _random_batch(12, 3, 5)
    top = float(dro_loss(S, y, "simplex"))
    mean = (
        float(dro_loss(S, y, "topk", K=10**6))
        * 10**6
        / int((dro_weights(S, y, "topk", K=10**6) > 0).sum())
    )
    assert float(dro_loss(S, y, "kl", gamma=1e-4)) == pytest.approx(top, abs=1e-3)
    assert float(dro_loss(S, y, "kl", gamma=1e4)) == pytest.approx(mean, abs=1e-4)


@FAST
@given(st.lists(st.floats(0.01, 3.0), min_size=2, max_size=12), st.floats(0.01, 20.0))
def test_chi2_solver_matches_bisection_and_the_papers_formula_where_it_holds(ls, rho):
    l = torch.tensor(ls, dtype=torch.float64)
    p = chi2_weights(l, rho)
    n = len(ls)
    assert float((p * l).sum()) == pytest.approx(chi2_value_reference(ls, rho), rel=1e-9, abs=1e-9)
    assert float(n * (p * p).sum()) <= 1 + 2 * rho / n + 1e-9
    mean, var = float(l.mean()), float(l.var(unbiased=False))
    if min(ls) >= mean - math.sqrt(n * var / (2 * rho)):  # the condition of Sec. 3.1's formula
        assert float((p * l).sum()) == pytest.approx(mean + math.sqrt(2 * rho * var / n), rel=1e-10)


def test_chi2_formula_fails_without_its_condition():
    ls = [1.0, 1.0, 1.0, 0.0]  # the ball is wider than the simplex around the small loss
    rho, n = 5.0, 4
    l = torch.tensor(ls, dtype=torch.float64)
    mean, var = float(l.mean()), float(l.var(unbiased=False))
    assert min(ls) < mean - math.sqrt(n * var / (2 * rho))
    formula = mean + math.sqrt(2 * rho * var / n)
    assert formula > max(ls)  # the printed value exceeds every loss: impossible for p in Delta
    assert chi2_value_reference(ls, rho) <= max(ls)


def test_bad_hyper_parameters_say_what_to_pass():
    S, y = _random_batch(4, 2, 0)
    with pytest.raises(ValueError, match="K must be even"):
        dro_loss(S, y, "topk_pn", K=3)
    with pytest.raises(ValueError, match="uncertainty"):
        dro_loss(S, y, "wasserstein")
    with pytest.raises(ValueError, match="base"):
        dro_loss(S, y, "kl", "hinge")
    with pytest.raises(ValueError, match="gamma"):
        dro_loss(S, y, "kl", gamma=0.0)


def test_registered_modules_round_trip_through_describe_loss():
    for name, kw in [("dro", {"uncertainty": "topk_pn", "K": 20}), ("dro_kl_sampled", {"seed": 3}),
                     ("dro_kl_g", {"pseudo_pairs": True}), ("hap2s_e", {"gamma": 0.5})]:  # fmt: skip
        module = get_loss(name, **kw)
        again = get_loss(*describe_loss(module)[:1], **describe_loss(module)[1])
        x = torch.randn(12, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        y = torch.arange(3).repeat_interleave(4)
        assert float(module(x, y)) == pytest.approx(float(again(x, y)), abs=1e-12)
    assert isinstance(get_loss("dro"), DROLoss)


# ----------------------------------------------------------------------------- base losses


@FAST
@given(batches(max_b=6), st.sampled_from(["margin", "binomial"]), st.floats(0.0, 1.0))
def test_pair_losses_equal_the_loop_and_slopes_equal_autograd(case, base, m):
    S, y = case
    pos, neg = masks(y)
    l = pair_losses(S, pos, neg, base, m, 0.5, 2.0, 50.0)
    for i in range(len(y)):
        for j in range(len(y)):
            want = 0.0
            if pos[i, j] or neg[i, j]:
                want = pair_loss_reference(float(S[i, j]), bool(pos[i, j]), base, m, 0.5, 2.0, 50.0)
            assert float(l[i, j]) == pytest.approx(want, rel=1e-12, abs=1e-12)
    g = grad_of(lambda s: pair_losses(s, pos, neg, base, m).sum(), S)
    assert torch.allclose(g, base_loss_slope(S, pos, neg, base, m), atol=1e-12)


def test_negative_pairs_need_y_minus_one():
    """Erratum: with y = 0 (the preliminaries' label) a negative pair's margin loss is constant m."""
    S = torch.tensor([[1.0, 0.9], [0.9, 1.0]], dtype=torch.float64)
    pos = torch.zeros(2, 2, dtype=torch.bool)
    neg = ~torch.eye(2, dtype=torch.bool)
    assert float(pair_losses(S, pos, neg)[0, 1]) == pytest.approx(0.2 + 0.9 - 0.5)
    assert 0.2 + 0 * (0.5 - 0.9) == 0.2  # y = 0: no dependence on S at all


def test_unknown_base_names_the_choices():
    S = torch.eye(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="base"):
        pair_losses(S, S > 2, S > 2, "hinge")


def _dro_batch(seed=41):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64)
    return cosine_similarity(x), torch.arange(4).repeat_interleave(3)


SETTINGS = dict(margin=0.3, threshold=0.4, alpha=3.0, beta=20.0)


@pytest.mark.parametrize("base", ["margin", "binomial"])
@pytest.mark.parametrize("uncertainty", ["uniform", "simplex", "topk", "kl", "chi2"])
def test_base_loss_settings_reach_every_uncertainty_set(uncertainty, base):
    """Eq. 1 with no base-loss setting at its default (m, lambda, alpha, beta): the loop."""
    S, y = _dro_batch()
    got = dro_loss(S, y, uncertainty, base, K=7, gamma=0.3, rho=2.0, **SETTINGS)
    want = dro_loss_reference(S.tolist(), y.tolist(), uncertainty, base, K=7, gamma=0.3, rho=2.0,
                              m=0.3, lam=0.4, a=3.0, b=20.0)  # fmt: skip
    assert float(got) == pytest.approx(want, rel=1e-9)


def _pair_losses_by_loop(S, y, base):
    B = len(y)
    return [[pair_loss_reference(S[i][j], y[i] == y[j], base, 0.3, 0.4, 3.0, 20.0) if i != j else 0.0
             for j in range(B)] for i in range(B)]  # fmt: skip


@pytest.mark.parametrize("base", ["margin", "binomial"])
def test_kl_and_chi2_weights_from_the_loop_losses(base):
    """KL: ``p ~ e^{l / gamma}`` over the pairs of positive loss (Eq. 1's closed form); chi-square:
    a point of the simplex within the ball whose ``p.l`` is the loop's bisection maximum."""
    S, y = _dro_batch(42)
    l = torch.tensor(_pair_losses_by_loop(S.tolist(), y.tolist(), base), dtype=torch.float64)
    cand = (l > 0) & ~torch.eye(12, dtype=torch.bool)
    p = dro_weights(S, y, "kl", base, gamma=0.3, **SETTINGS)
    e = torch.where(cand, (l / 0.3).exp(), 0.0)
    torch.testing.assert_close(p, e / e.sum(), rtol=1e-10, atol=1e-15)
    p = dro_weights(S, y, "chi2", base, rho=2.0, **SETTINGS)
    n = int(cand.sum())
    assert (
        float(p.sum()) == pytest.approx(1.0)
        and bool((p >= 0).all())
        and bool((p[~cand] == 0).all())
    )
    assert float(((n * p[cand] - 1) ** 2).sum() / n / 2) <= 2.0 / n + 1e-9
    assert float((p * l).sum()) == pytest.approx(
        chi2_value_reference(l[cand].tolist(), 2.0), rel=1e-6
    )


@pytest.mark.parametrize("uncertainty", ["uniform", "kl", "chi2"])
def test_masks_act_as_pairs_of_zero_loss(uncertainty):
    """A miner's masks: a dropped pair is one moved to zero loss (a positive at S = 1, a negative
    at S = -1), which ``drop_zero`` leaves out: the loop on the moved similarities, and the
    weights of the moved batch."""
    S, y = _dro_batch(43)
    same = y[:, None] == y[None, :]
    keep = torch.rand(12, 12, generator=torch.Generator().manual_seed(9)) < 0.7
    keep = keep & keep.T
    moved = S.clone()
    moved[same & ~keep] = 1.0
    moved[~same & ~keep] = -1.0
    moved.fill_diagonal_(1.0)
    kw = dict(gamma=0.3, rho=2.0, margin=0.2, threshold=0.5)
    got = dro_loss(S, y, uncertainty, **kw, pos_mask=keep, neg_mask=keep)
    want = dro_loss_reference(moved.tolist(), y.tolist(), uncertainty, gamma=0.3, rho=2.0)
    assert float(got) == pytest.approx(want, rel=1e-9)
    torch.testing.assert_close(
        dro_weights(S, y, uncertainty, **kw, pos_mask=keep, neg_mask=keep),
        dro_weights(moved, y, uncertainty, **kw),
        rtol=1e-12, atol=1e-15,
    )  # fmt: skip


def test_tied_weights_keep_the_losses_dtype():
    """All losses tied (the top of the simplex, chi-square's ball holding them all): the weights
    are uniform on the ties, in the losses' own dtype."""
    for dtype in (torch.float32, torch.float64):
        w = chi2_weights(torch.full((5,), 0.7, dtype=dtype), 1.0)
        assert w.dtype == dtype and torch.equal(w, torch.full((5,), 0.2, dtype=dtype))
    S, y = _dro_batch(44)
    p = dro_weights(S, y, "simplex")
    assert p.dtype == torch.float64 and float(p.sum()) == 1.0


@pytest.mark.parametrize(
    ("losses", "rho", "share"),
    [([1.0, 1.0, 1.0, 0.5], 1.0, 1 / 3), ([1.0, 1.0, 1.0, 0.16, 0.07], 5 / 3, 1 / 3),
     ([1.0, 1.0, 1.0, 0.73, 0.58, 0.33, 0.13], 14 / 3, 1 / 3)],
)  # fmt: skip
def test_chi2_ball_that_holds_the_uniform_weights_on_the_ties(losses, rho, share):
    """``c T >= n`` (``c = 1 + 2 rho / n``, ``T`` tied largest losses): the uniform weights on the
    ties lie in the ball (on its boundary when ``c T = n``, the last two cases) and reach the
    largest loss, the loop's bisection maximum."""
    n, T = len(losses), losses.count(1.0)
    assert (1 + 2 * rho / n) * T >= n
    l = torch.tensor(losses, dtype=torch.float64)
    want = torch.tensor([share if v == 1.0 else 0.0 for v in losses], dtype=torch.float64)
    torch.testing.assert_close(chi2_weights(l, rho), want, rtol=1e-12, atol=0)
    assert chi2_value_reference(losses, rho) == pytest.approx(1.0, abs=1e-9)


def test_margin_slope_is_zero_where_the_hinge_is_exactly_closed():
    """``l = [m + y (lambda - S)]_+`` at its kink (``m = 0.25``, ``lambda = 0.5``: a positive at
    ``S = 0.75``, a negative at ``S = 0.25``, exact in binary) has ``l = 0``: slope 0, as
    documented (the hinge is open only for ``l > 0``); just inside, the slope is ``-y``."""
    S = torch.tensor([[1.0, 0.75, 0.25], [0.75, 1.0, 0.3], [0.25, 0.3, 1.0]], dtype=torch.float64)
    pos = torch.tensor([[False, True, False], [True, False, False], [False, False, False]])
    neg = torch.tensor([[False, False, True], [False, False, True], [True, True, False]])
    slope = base_loss_slope(S, pos, neg, "margin", 0.25, 0.5)
    want = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(slope, want, rtol=0, atol=0)


def test_dro_loss_restates_pair_losses_declarations_without_drift():
    """``dro_loss`` cannot take :func:`pair_losses`' declarations with ``like=`` (its
    ``uncertainty`` comes first, with a default, so the shared names cannot be written bare):
    each of the five base-loss settings must keep ``pair_losses``' annotation and default."""
    import inspect

    source = inspect.signature(pair_losses, eval_str=True).parameters
    own = inspect.signature(dro_loss, eval_str=True).parameters
    shared = [
        name for name in own if name in source and source[name].default is not own[name].empty
    ]
    assert shared == ["base", "margin", "threshold", "alpha", "beta"]
    for name in shared:
        assert (own[name].annotation, own[name].default) == (
            source[name].annotation, source[name].default), name  # fmt: skip

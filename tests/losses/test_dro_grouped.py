"""DRO-KL with sampling (Sec. 3.2), DRO-KL-G (Eq. 7), its pseudo pairs (supplement Eq. 23-25)
and HAP2S_E (Eq. 30-32).

Implementation: :mod:`dmlbook.losses.dro_grouped`; chapter: ``book/12_dro.ipynb``. References:
the loops of :mod:`dmlbook.reference.dro`, and the book's lifted-structure, LiftedStruct* and MS
losses (independent modules) for the recovery claims.
"""

from __future__ import annotations

import math
import warnings

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import FAST, batches, grad_of, masks

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import (
    dro_kl_grouped_loss,
    dro_kl_grouped_weights,
    dro_kl_sampled_loss,
    dro_loss,
    dro_weights,
    hap2s_e_loss,
    lifted_loss,
    lifted_star_loss,
    multi_similarity_loss,
)
from dmlbook.losses.dro import base_loss_slope
from dmlbook.reference.dro import (
    dro_grouped_loss_reference,
    hap2s_e_loss_reference,
    pair_loss_reference,
)


@FAST
@given(batches(max_b=8), st.sampled_from([1e-3, 0.01, 0.1, 1.0, 1e3]),
       st.sampled_from([1e-3, 0.1, 1e3]), st.sampled_from(["margin", "binomial"]), st.booleans(),
       st.sampled_from([-0.3, 0.0, 0.1, 0.2]), st.booleans(), st.sampled_from(["mean", "sum"]))  # fmt: skip
def test_value_equals_paper_literal_loop(case, gp, gn, base, pseudo, l0, drop, reduction):
    S, y = case
    got = dro_kl_grouped_loss(S, y, gp, gn, base, pseudo_pairs=pseudo, pseudo_loss=l0,
                              drop_zero=drop, reduction=reduction)  # fmt: skip
    ref = dro_grouped_loss_reference(S.tolist(), y.tolist(), gp, gn, base, pseudo=pseudo,
                                     l0=l0, drop_zero=drop, reduction=reduction)  # fmt: skip
    assert float(got) == pytest.approx(ref, rel=1e-10, abs=1e-10)


@FAST
@given(batches(max_b=7), st.sampled_from(["margin", "binomial"]), st.booleans(), st.booleans())
def test_autograd_equals_closed_form_weights(case, base, pseudo, drop):
    S, y = case
    kw = dict(base=base, pseudo_pairs=pseudo, pseudo_loss=0.05, drop_zero=drop)
    g = grad_of(lambda s: dro_kl_grouped_loss(s, y, 0.3, 0.2, reduction="sum", **kw), S)
    pos, neg = masks(y)
    expected = dro_kl_grouped_weights(S, y, 0.3, 0.2, **kw) * base_loss_slope(S, pos, neg, base)
    assert torch.allclose(g, expected, atol=1e-10, rtol=0)


@FAST
@given(batches(max_b=7, n_classes=2))
def test_gamma_one_recovers_liftedstruct_star_gradient_when_every_hinge_is_open(case):
    """Sec. 3.3: with m large enough (every l_ij > 0) and gamma = 1, grad F = grad LS (Eq. 22)."""
    S, y = case
    m, lam = 3.0, 0.5  # m > 1 + |lambda|: every margin hinge open
    dro = grad_of(lambda s: dro_kl_grouped_loss(s, y, 1.0, 1.0, margin=m, threshold=lam,
                                                reduction="sum"), S)  # fmt: skip
    star = grad_of(lambda s: lifted_star_loss(s, y, 1.0, 1.0, reduction="sum"), S)
    assert torch.allclose(dro, star, atol=1e-10, rtol=0)


def test_ls_hinge_makes_the_recovery_fail_where_it_is_closed():
    """Eq. 3's [.]_+ is ignored by the recovery: an anchor whose LS term is <= 0 differs."""
    S = torch.tensor([[1.0, 0.99, -0.9], [0.99, 1.0, -0.9], [-0.9, -0.9, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    dro = grad_of(lambda s: dro_kl_grouped_loss(s, y, 1.0, 1.0, margin=3.0, reduction="sum"), S)
    ls = grad_of(lambda s: lifted_loss(s, y, 0.5, reduction="sum"), S)
    assert float(ls[0].abs().sum()) == 0.0 and float(dro[0].abs().sum()) > 0.1


@FAST
@given(batches(max_b=7, n_classes=2), st.sampled_from([(2.0, 50.0), (2.0, 10.0), (1.0, 4.0)]))
def test_pseudo_pair_with_loss_m_recovers_ms_weights(case, ab):
    """Supplement Eq. 25 vs MS (Wang et al. Eq. 15, no mining), corrected pseudo loss l_0 = m."""
    S, y = case
    a, b = ab
    m, lam = 3.0, 0.5
    dro = grad_of(lambda s: dro_kl_grouped_loss(s, y, 1 / a, 1 / b, margin=m, threshold=lam,
                  pseudo_pairs=True, pseudo_loss=m, reduction="sum"), S)  # fmt: skip
    ms = grad_of(lambda s: multi_similarity_loss(s, y, a, b, lam, mining=False, reduction="sum"), S)
    assert torch.allclose(dro, ms, atol=1e-10, rtol=0)


def test_papers_pseudo_loss_zero_shifts_the_ms_thresholds():
    """With l_0 = 0 (as printed) the weights are MS's with lambda + m (pos) and lambda - m (neg)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(8, 4, generator=g, dtype=torch.float64)
    S = torch.nn.functional.normalize(x, dim=1) @ torch.nn.functional.normalize(x, dim=1).T
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    a, b, m, lam = 2.0, 10.0, 3.0, 0.5
    dro = grad_of(lambda s: dro_kl_grouped_loss(s, y, 1 / a, 1 / b, margin=m, threshold=lam,
                  pseudo_pairs=True, pseudo_loss=0.0, reduction="sum"), S)  # fmt: skip
    pos, neg = masks(y)
    ms_p = grad_of(
        lambda s: multi_similarity_loss(s, y, a, b, lam + m, mining=False, reduction="sum"), S
    )
    ms_n = grad_of(
        lambda s: multi_similarity_loss(s, y, a, b, lam - m, mining=False, reduction="sum"), S
    )
    assert torch.allclose(dro[pos], ms_p[pos], atol=1e-10)
    assert torch.allclose(dro[neg], ms_n[neg], atol=1e-10)
    ms = grad_of(lambda s: multi_similarity_loss(s, y, a, b, lam, mining=False, reduction="sum"), S)
    assert not torch.allclose(dro, ms, atol=1e-3)


@FAST
@given(batches(max_b=7), st.sampled_from([0.05, 0.5, 2.0]))
def test_hap2s_equals_loop(case, gamma):
    S, y = case
    got = hap2s_e_loss(S, y, 0.2, gamma)
    assert float(got) == pytest.approx(hap2s_e_loss_reference(S.tolist(), y.tolist(), 0.2, gamma),
                                       rel=1e-10, abs=1e-10)  # fmt: skip


def test_hap2s_gradient_is_grouped_kl_weights_where_the_hinge_is_open():
    """Eq. 34: HAP2S_E's gradient is DRO-KL-G's (gamma, linear margin loss) over the anchors."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(9, 3, generator=g, dtype=torch.float64)
    S = torch.nn.functional.normalize(x, dim=1) @ torch.nn.functional.normalize(x, dim=1).T
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    gamma, big = 0.3, 10.0  # big margin: every HAP2S hinge and every margin hinge open
    hap = grad_of(lambda s: hap2s_e_loss(s, y, big, gamma, reduction="sum"), S)
    dro = grad_of(lambda s: dro_kl_grouped_loss(s, y, gamma, gamma, margin=big, reduction="sum"), S)
    assert torch.allclose(hap, dro, atol=1e-10)


def _random_batch(B, classes, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 6, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    return x @ x.T, torch.randint(0, classes, (B,), generator=g)


def test_sampled_estimator_mean_converges_to_the_exact_gradient():
    S, y = _random_batch(16, 3, 7)
    exact = grad_of(lambda s: dro_loss(s, y, "kl", gamma=0.2), S)
    n = 200_000
    gen = torch.Generator().manual_seed(0)
    est = grad_of(lambda s: dro_kl_sampled_loss(s, y, n, gen, gamma=0.2), S)
    p = dro_weights(S, y, "kl", gamma=0.2)
    se = torch.sqrt(p * (1 - p) / n)  # per pair: |slope| = 1 for the margin loss
    assert bool(((est - exact).abs() <= 5 * se + 1e-12).all())
    # the same check rejects uniform sampling (what the test would see if p* were ignored)
    cand = p > 0
    uniform = torch.where(cand, exact / p.clamp_min(1e-300), 0) / cand.sum()
    assert not bool(((uniform - exact).abs() <= 5 * se + 1e-12).all())


def test_sampled_loss_is_reproducible_and_checks_its_inputs():
    S, y = _random_batch(10, 2, 3)
    a = dro_kl_sampled_loss(S, y, 50, torch.Generator().manual_seed(1))
    b = dro_kl_sampled_loss(S, y, 50, torch.Generator().manual_seed(1))
    assert float(a) == float(b)
    with pytest.raises(TypeError, match="torch.Generator"):
        dro_kl_sampled_loss(S, y, 50, 1)
    with pytest.raises(ValueError, match="num_samples"):
        dro_kl_sampled_loss(S, y, 0, torch.Generator())


def _grouped_batch(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64)
    return cosine_similarity(x), torch.arange(4).repeat_interleave(3)


def _moved(S, y, seed):
    """Masks (symmetric, anchor 0 keeping no pair) and ``S`` with every dropped pair moved to
    zero margin loss (a positive at S = 1, a negative at S = -1)."""
    same = y[:, None] == y[None, :]
    keep = torch.rand(12, 12, generator=torch.Generator().manual_seed(seed)) < 0.7
    keep = keep & keep.T
    keep[0], keep[:, 0] = False, False
    moved = S.clone()
    moved[same & ~keep] = 1.0
    moved[~same & ~keep] = -1.0
    moved.fill_diagonal_(1.0)
    return keep, moved


@pytest.mark.parametrize("base", ["margin", "binomial"])
def test_grouped_kl_settings_reach_the_pairs(base):
    """Eq. 7 with every base-loss setting off its default, "mean" and "sum": the loop."""
    S, y = _grouped_batch(51)
    kw = dict(base=base, margin=0.3, threshold=0.4, alpha=3.0, beta=20.0)
    for reduction in ("mean", "sum"):
        got = dro_kl_grouped_loss(S, y, 0.3, 0.2, **kw, reduction=reduction)
        want = dro_grouped_loss_reference(S.tolist(), y.tolist(), 0.3, 0.2, base, 0.3, 0.4, 3.0,
                                          20.0, reduction=reduction)  # fmt: skip
        assert float(got) == pytest.approx(want, rel=1e-10)
    w = dro_kl_grouped_weights(S, y, 0.3, 0.2, **kw)
    same = y[:, None] == y[None, :]
    for i in range(12):
        for group, g in ((same, 0.3), (~same, 0.2)):
            js = [j for j in range(12) if group[i, j] and j != i]
            ls = [pair_loss_reference(float(S[i, j]), bool(same[i, j]), base, 0.3, 0.4, 3.0, 20.0)
                  for j in js]  # fmt: skip
            kept = [(j, v) for j, v in zip(js, ls, strict=True) if v > 0]
            z = sum(math.exp(v / g) for _, v in kept)
            for j, v in kept:
                assert float(w[i, j]) == pytest.approx(math.exp(v / g) / z, rel=1e-10)


def test_grouped_kl_masks_act_as_pairs_of_zero_loss():
    """A miner's masks (anchor 0 keeps none): the loop on the moved similarities, and the same
    weights as the moved batch."""
    S, y = _grouped_batch(52)
    keep, moved = _moved(S, y, 3)
    got = dro_kl_grouped_loss(S, y, 0.3, 0.2, pos_mask=keep, neg_mask=keep)
    want = dro_grouped_loss_reference(moved.tolist(), y.tolist(), 0.3, 0.2)
    assert float(got) == pytest.approx(want, rel=1e-10)
    torch.testing.assert_close(
        dro_kl_grouped_weights(S, y, 0.3, 0.2, pos_mask=keep, neg_mask=keep),
        dro_kl_grouped_weights(moved, y, 0.3, 0.2),
        rtol=1e-12,
        atol=1e-15,
    )


def test_hap2s_e_within_masks_is_the_loop_on_the_kept_pairs():
    """Supplement Eq. 30-32 with a miner's masks: the loop on a batch holding only the kept
    pairs of each anchor (anchors 0, keeping none, and 1, keeping no negative, drop out of the
    mean)."""
    S, y = _grouped_batch(53)
    keep, _ = _moved(S, y, 4)
    same = y[:, None] == y[None, :]
    keep[1, ~same[1]] = False  # anchor 1 keeps positives only: no term either
    keep[~same[1], 1] = False
    terms = []
    for i in range(12):
        P = [j for j in range(12) if same[i, j] and j != i and keep[i, j]]
        N = [j for j in range(12) if not same[i, j] and keep[i, j]]
        if not (P and N):
            continue
        sp = sum(math.exp(-S[i, j].item() / 0.1) * S[i, j].item() for j in P) / sum(
            math.exp(-S[i, j].item() / 0.1) for j in P
        )
        sn = sum(math.exp(S[i, j].item() / 0.1) * S[i, j].item() for j in N) / sum(
            math.exp(S[i, j].item() / 0.1) for j in N
        )
        terms.append(max(0.0, sn - sp + 0.2))
    got = hap2s_e_loss(S, y, 0.2, 0.1, pos_mask=keep, neg_mask=keep)
    assert float(got) == pytest.approx(sum(terms) / len(terms), rel=1e-10)


def test_sampled_kl_with_one_candidate_is_its_loss_and_names_a_bad_generator():
    """One pair of positive loss (the others closed by margin 0.05, threshold 0.6): every draw
    is that pair, so the sampled loss is its loss, for the settings and masks given."""
    S = torch.tensor([[1.0, 0.5, -0.5], [0.5, 1.0, -0.6], [-0.5, -0.6, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    g = torch.Generator().manual_seed(0)
    got = dro_kl_sampled_loss(S, y, 50, g, margin=0.05, threshold=0.6)
    assert float(got) == pytest.approx(0.05 + 0.6 - 0.5, rel=1e-12)
    keep = torch.ones(3, 3, dtype=torch.bool)
    keep[0, 1] = keep[1, 0] = keep[1, 2] = keep[2, 1] = False
    S2 = S.clone()
    S2[0, 2] = S2[2, 0] = 0.8  # negatives above the threshold: losses 0.25 and (dropped) 0.2
    S2[1, 2] = S2[2, 1] = 0.75
    got = dro_kl_sampled_loss(
        S2, y, 50, g, margin=0.05, threshold=0.6, pos_mask=keep, neg_mask=keep
    )
    assert float(got) == pytest.approx(0.05 + 0.8 - 0.6, rel=1e-12)
    # the binomial base with its slopes: one pair (both orders), so every draw is its loss
    for labels, s, want in (([0, 0], 0.3, math.log1p(math.exp(3.0 * (0.4 - 0.3)))),
                            ([0, 1], 0.6, math.log1p(math.exp(20.0 * (0.6 - 0.4))))):  # fmt: skip
        pair = torch.tensor([[1.0, s], [s, 1.0]], dtype=torch.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a batch without positives (or negatives) warns
            got = dro_kl_sampled_loss(pair, torch.tensor(labels), 50, g, base="binomial",
                                      threshold=0.4, alpha=3.0, beta=20.0)  # fmt: skip
        assert float(got) == pytest.approx(want, rel=1e-12)
    closed = torch.tensor([[1.0, 0.9], [0.9, 1.0]], dtype=torch.float64)  # no pair of positive loss
    assert float(dro_kl_sampled_loss(closed, torch.tensor([0, 0]), 50, g)) == 0.0
    message = (r"^generator must be a torch\.Generator \(e\.g\. torch\.Generator\(\)\.manual_seed\(0\)\), "
               r"so the draws are reproducible; got int\.$")  # fmt: skip
    with pytest.raises(TypeError, match=message):
        dro_kl_sampled_loss(S, y, 50, 0)


def test_the_grouped_losses_restate_dro_losss_declarations_without_drift():
    """DRO-KL-G cannot take ``dro_loss``'s declarations with ``like=`` (its own ``gamma_pos`` and
    ``gamma_neg`` come first, with defaults, so the shared names cannot be written bare): the
    module comment says its defaults are ``dro_loss``'s. Each shared name, and each ``gamma``,
    must keep ``dro_loss``'s annotation and default."""
    import inspect

    from dmlbook.losses import dro_loss

    dro = inspect.signature(dro_loss, eval_str=True).parameters
    renamed = {"gamma_pos": "gamma", "gamma_neg": "gamma"}
    compared = []
    for function in (dro_kl_grouped_loss, hap2s_e_loss):
        for name, p in inspect.signature(function, eval_str=True).parameters.items():
            source = dro.get(renamed.get(name, name))
            if source is not None and source.default is not source.empty:
                assert (p.annotation, p.default) == (source.annotation, source.default), name
                compared.append(name)
    assert len(compared) == 14, compared  # 10 of DRO-KL-G, 4 of HAP2S_E (masks included)

"""DRO-KL with sampling (Sec. 3.2), DRO-KL-G (Eq. 7), its pseudo pairs (supplement Eq. 23-25)
and HAP2S_E (Eq. 30-32).

Implementation: :mod:`dmlbook.losses.dro_grouped`; chapter: ``book/12_dro.ipynb``. References:
the loops of :mod:`dmlbook.reference.dro`, and the book's lifted-structure, LiftedStruct* and MS
losses (independent modules) for the recovery claims.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import FAST, batches, grad_of, masks

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
from dmlbook.reference.dro import dro_grouped_loss_reference, hap2s_e_loss_reference


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

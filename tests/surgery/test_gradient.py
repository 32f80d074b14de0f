"""Tests of dmlbook.surgery.gradient: the designed gradient against the paper-literal loop and
against autograd of the losses it equals.

Every (direction, pair weight, triplet weight, selection) of Xuan & Pless, Eq. 5-19, is checked
against the triplet-by-triplet loop of dmlbook.reference.gradient_surgery on hypothesis batches in
float64. Each combination of their Table 1 that is the gradient of a loss is checked, in float64
on hypothesis batches, against autograd of that loss written here from its formula (one
easy-positive / hard-negative triplet per anchor, found by a plain loop), to 1e-10. The
constants (``scale``) are those the symbolic module proves. Chapter:
``book/13_gradient_surgery.ipynb``.
"""

from __future__ import annotations

import itertools
import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import assume, given, settings

from dmlbook.losses import CircleLoss, get_loss
from dmlbook.reference.gradient_surgery import designed_gradient_reference
from dmlbook.surgery import SurgerySpec, designed_gradient
from dmlbook.surgery.directions import DIRECTIONS
from dmlbook.surgery.weights import PAIR_WEIGHTS, SELECTIONS, TRIPLET_WEIGHTS

from .strategies import ephn_loop, unit_batches

TOL = 1e-10


def _autograd(loss_of_triplet, f, labels):
    """Gradient of mean over the loop's triplets of ``loss_of_triplet(f_a, f_p, f_n)``."""
    f = f.clone().requires_grad_(True)
    trips = ephn_loop(f.detach(), labels)
    total = sum(loss_of_triplet(f[a], f[p], f[n]) for a, p, n in trips) / len(trips)
    (g,) = torch.autograd.grad(total, f)
    return g


def _designed(f, labels, **parts):
    return designed_gradient(f, labels, SurgerySpec(**parts))[0]


def _softplus(x):
    return torch.nn.functional.softplus(x, threshold=40.0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_euclidean_triplet_is_euc_peuc_tcon_times_4(batch):
    """Eq. 3 (hinge active: margin 4 >= any D^2 gap) = e^euc x P^euc x T^con with scale 4."""
    f, y = batch

    def loss(a, p, n):
        return ((a - p) ** 2).sum() - ((a - n) ** 2).sum() + 4.0

    want = _autograd(loss, f, y)
    got = _designed(f, y, direction="euc", pair_weight="euc", triplet_weight="con", scale=4.0)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_cosine_triplet_is_cos_pcon_tcos_times_tau(batch):
    """Eq. 4 = e^cos x P^con x T^cos with scale tau (Eq. 6)."""
    f, y = batch
    tau = 3.0
    want = _autograd(lambda a, p, n: _softplus(tau * (a @ n - a @ p)), f, y)
    got = _designed(f, y, pair_weight="con", triplet_weight="cos", tau=tau, scale=tau)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_binomial_is_cos_psig_tcon_times_2(batch):
    """Binomial deviance on the triplet's two pairs = e^cos x P^sig x T^con with scale 2."""
    f, y = batch
    al, be, lam = 2.0, 10.0, 0.5

    def loss(a, p, n):
        return _softplus(-al * (a @ p - lam)) / al + _softplus(be * (a @ n - lam)) / be

    want = _autograd(loss, f, y)
    got = _designed(f, y, pair_weight="sig", alpha=al, beta=be, lam=lam, scale=2.0)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_linear_pair_weight_is_a_quadratic_loss(batch):
    """e^cos x P^lin x T^con (scale 2) is the gradient of (1 - S_ap)^2 / 2 + S_an^2 / 2."""
    f, y = batch
    want = _autograd(lambda a, p, n: (1 - a @ p) ** 2 / 2 + (a @ n) ** 2 / 2, f, y)
    got = _designed(f, y, pair_weight="lin", scale=2.0)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_circle_undetached_printed_margin_is_cos_plin_tcir(batch):
    """Circle loss, weights differentiated, m = 1/sqrt(2), where S_an > -m: e^cos x P^lin x
    T^cir (Eq. 17 as printed), scale 2 gamma; the package's CircleLoss on the same triplets too."""
    f, y = batch
    gamma, m = 2.5, 1 / math.sqrt(2)
    trips = ephn_loop(f, y)
    assume(all(float(f[a] @ f[n]) > -m + 1e-6 for a, _, n in trips))

    def loss(a, p, n):
        sp, sn = a @ p, a @ n
        return _softplus(gamma * ((sn + m) * (sn - m) - (1 + m - sp) * (sp - 1 + m)))

    want = _autograd(loss, f, y)
    got = _designed(
        f, y, pair_weight="lin", triplet_weight="cir", tau=gamma, circle_margin=m, scale=2 * gamma
    )
    assert torch.allclose(got, want, atol=TOL, rtol=0)
    module = CircleLoss(gamma, m, detach_weights=False)
    assert torch.allclose(_with_ephn_masks(module, f, y), want, atol=TOL, rtol=0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_circle_detached_zero_margin_is_cos_plin_tcir_m0(batch):
    """Sun et al.'s Circle loss (weights not differentiated), m = 0, where S_an > 0:
    e^cos x P^lin x T^cir(m = 0), scale gamma."""
    f, y = batch
    gamma = 2.5
    trips = ephn_loop(f, y)
    assume(all(float(f[a] @ f[n]) > 1e-6 for a, _, n in trips))
    want = _with_ephn_masks(CircleLoss(gamma, 0.0), f, y)
    got = _designed(
        f, y, pair_weight="lin", triplet_weight="cir", tau=gamma, circle_margin=0.0, scale=gamma
    )
    assert torch.allclose(got, want, atol=TOL, rtol=0)


def _with_ephn_masks(module, f, y):
    """Autograd of a package loss on the loop's triplets (one positive, one negative per anchor)."""
    B = len(y)
    pos = torch.zeros(B, B, dtype=torch.bool)
    neg = torch.zeros(B, B, dtype=torch.bool)
    for a, p, n in ephn_loop(f, y):
        pos[a, p] = neg[a, n] = True
    x = f.clone().requires_grad_(True)  # S = f f^T: no normalisation layer in between
    (g,) = torch.autograd.grad(module.loss_on_similarity(x @ x.T, y, pos_mask=pos, neg_mask=neg), x)
    return g


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_selective_contrastive_is_cos_with_sc1(batch):
    """T^cos & T^sc1: Eq. 4 on easy triplets; on hard ones (S_an > S_ap) S_ap is held fixed."""
    f, y = batch
    tau = 3.0

    def loss(a, p, n):
        sp, sn = a @ p, a @ n
        return _softplus(tau * (sn - (sp.detach() if sn > sp else sp)))

    want = _autograd(loss, f, y)
    got = _designed(f, y, triplet_weight="cos", selection="sc1", tau=tau, scale=tau)
    assert torch.allclose(got, want, atol=TOL, rtol=0)


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_ms_weight_without_relative_pairs_is_binomial(batch):
    """With epsilon so low that the sets of Eq. 12 are empty, P^sig-ms falls back to P^sig."""
    f, y = batch
    a = _designed(f, y, pair_weight="sig_ms", epsilon=-10.0)
    b = _designed(f, y, pair_weight="sig")
    assert torch.equal(a, b)


def test_value_is_the_mean_similarity_gap():
    f = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    _, value = designed_gradient(f, y, SurgerySpec())
    gaps = [float(f[a] @ f[n] - f[a] @ f[p]) for a, p, n in ephn_loop(f, y)]
    assert float(value) == pytest.approx(sum(gaps) / len(gaps), abs=1e-15)


def test_no_triplet_gives_zero():
    f = torch.eye(3, dtype=torch.float64)
    grad, value = designed_gradient(f, torch.tensor([0, 1, 2]), SurgerySpec())
    assert float(value) == 0.0 and bool((grad == 0).all())


def test_errors_name_the_valid_choices():
    with pytest.raises(ValueError, match="direction must be one of 'euc', 'cos'"):
        get_loss("gradient_surgery", direction="cosine")
    with pytest.raises(ValueError, match="pair_weight must be one of"):
        SurgerySpec(pair_weight="ms")
    with pytest.raises(ValueError, match=r"tau must be a finite number in \[1e-06, 1e\+06\]"):
        SurgerySpec(tau=0)
    with pytest.raises(ValueError, match="without pos_mask"):
        get_loss("surgery")(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]), pos_mask=None,
                            neg_mask=torch.ones(4, 4, dtype=torch.bool))  # fmt: skip
    assert SurgerySpec(direction="cos-orth").direction == "cos_orth"


COMBOS = list(itertools.product(DIRECTIONS, PAIR_WEIGHTS, TRIPLET_WEIGHTS, SELECTIONS))


@settings(max_examples=60, deadline=None)
@given(unit_batches(max_classes=4, max_k=5), st.sampled_from(COMBOS), st.sampled_from([0.1, 0.3]))
def test_every_combination_matches_the_triplet_loop(batch, combo, epsilon):
    f, y = batch
    direction, pair, trip, sel = combo
    spec = SurgerySpec(direction=direction, pair_weight=pair, triplet_weight=trip, selection=sel,
                       epsilon=epsilon, tau=3.0)  # fmt: skip
    got, _ = designed_gradient(f, y, spec)
    want = designed_gradient_reference(f, y, spec)
    assert torch.allclose(got, want, atol=1e-12, rtol=0), combo


def test_a_weight_beyond_the_dtype_is_refused_with_the_bound_to_respect():
    """Either weight infinite is refused; the message computes exp(beta (1 - lam)) and float32's
    largest exponent, log(3.4028235e38) = 88.72 (by hand)."""
    from dmlbook.surgery.gradient import _check_weights

    spec = SurgerySpec(pair_weight="sig_ms", beta=1000.0, lam=0.5)
    one, inf = torch.ones(2), torch.tensor([1.0, math.inf])
    _check_weights(one, one, spec)  # finite: nothing to say
    for p_plus, p_minus in ((inf, one), (one, inf)):
        with pytest.raises(ValueError) as refused:
            _check_weights(p_plus, p_minus, spec)
        assert str(refused.value) == (
            "pair_weight='sig_ms' gives weights beyond torch.float32 for this batch (with "
            "beta=1000 and lam=0.5 they reach exp(beta * (1 - lam)) = exp(500); torch.float32 "
            "ends at exp(88.7)). Lower beta (or alpha) so that beta * (1 - lam) < 89, or "
            "compute in float64."
        )


def test_a_batch_without_triplets_gives_zero_in_its_own_dtype():
    f = torch.nn.functional.normalize(torch.randn(4, 3, dtype=torch.float64), dim=1)
    grad, gap = designed_gradient(f, torch.zeros(4, dtype=torch.long), SurgerySpec())
    assert gap.dtype == torch.float64 and float(gap) == 0.0 and not grad.any()


def test_spec_normalises_its_choices_and_names_the_bad_one():
    spec = SurgerySpec(direction="Cos-Orth", pair_weight=" Sig-MS", triplet_weight="COS",
                       selection="SC1")  # fmt: skip
    assert (spec.direction, spec.pair_weight, spec.triplet_weight, spec.selection) == (
        "cos_orth", "sig_ms", "cos", "sc1")  # fmt: skip

    class Named:  # not a string, though its str() is a valid choice: refused
        def __str__(self) -> str:
            return "con"

    bad = [({"triplet_weight": "x"}, "triplet_weight must be one of 'con', 'cos', 'cir'; got 'x'."),
           ({"selection": "x"}, "selection must be one of 'none', 'sc1', 'sc2'; got 'x'."),
           ({"epsilon": math.nan}, "epsilon must be a finite number in [-1e+06, 1e+06] (a margin "
            "or threshold), got nan.")]  # fmt: skip
    for kwargs, message in bad:
        with pytest.raises(ValueError) as refused:
            SurgerySpec(**kwargs)
        assert str(refused.value) == message
    with pytest.raises(ValueError, match="pair_weight must be one of"):
        SurgerySpec(pair_weight=Named())


def test_sig_ms_weights_beyond_float32_are_refused_by_the_designed_gradient():
    """Anchor 0: positives at 0.9 and 0.2, negatives at 0.7 (the hardest) and 0.4, which is in
    Eq. 12's N (0.4 > 0.2 - 0.1); at beta = 1000, lam = 0.5 both terms of P_- underflow in
    float32 (e^-300, e^-200), so the weight (e^200 / ...) is beyond float32 and refused."""
    S = torch.tensor([[1.0, 0.9, 0.2, 0.7, 0.4],
                      [0.9, 1.0, 0.1, 0.6, 0.35],
                      [0.2, 0.1, 1.0, 0.1, 0.1],
                      [0.7, 0.6, 0.1, 1.0, 0.3],
                      [0.4, 0.35, 0.1, 0.3, 1.0]], dtype=torch.float64)  # fmt: skip
    f = torch.linalg.cholesky(S).float()  # rows with these inner products
    spec = SurgerySpec(pair_weight="sig_ms", beta=1000.0, lam=0.5, epsilon=0.1)
    with pytest.raises(ValueError, match="gives weights beyond torch.float32"):
        designed_gradient(f, torch.tensor([0, 0, 0, 1, 1]), spec)
    designed_gradient(f.double(), torch.tensor([0, 0, 0, 1, 1]), spec)  # float64 holds it

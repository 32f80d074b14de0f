"""The fused closed forms of the classic losses against their autograd path and the loops.

Each ``backward="closed_form"`` path (the default) must give the value of the paper-literal loop
of :mod:`dmlbook.reference.classic` and the value and gradient of its ``backward="autograd"``
path, in float64, on every batch: singletons, one-class batches, B = 1, duplicates (``S = 1``
off the diagonal), masks passed in, every reduction. Implementations:
:mod:`dmlbook.losses.lifted_closed_form`, :mod:`dmlbook.losses.binomial_closed_form`.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import FAST, FORMS, batches

from dmlbook.losses import (
    TripletLoss,
    binlifted_loss,
    binomial_deviance_loss,
    contrastive_distance_loss,
    contrastive_loss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
    triplet_loss,
)
from dmlbook.losses.binomial_closed_form import PairSumTerms, pair_sum_core
from dmlbook.losses.contrastive_closed_form import contrastive_core
from dmlbook.losses.lifted_closed_form import lifted_core
from dmlbook.losses.triplet_batch_hard import batch_hard_triplets
from dmlbook.mining import batch_hard_masks
from dmlbook.reference.classic import binlifted_loss_reference as ref_binlifted
from dmlbook.reference.classic import binomial_deviance_loss_reference as ref_binomial
from dmlbook.reference.classic import contrastive_distance_loss_reference as ref_contrastive_d
from dmlbook.reference.classic import dist, sets
from dmlbook.reference.classic import lifted_loss_reference as ref_lifted
from dmlbook.reference.classic import lifted_star_loss_reference as ref_lifted_star
from dmlbook.reference.classic import lifted_structure_loss_reference as ref_lifted_structure
from dmlbook.reference.classic import triplet_loss_reference as ref_triplet


@st.composite
def batches_and_masks(draw, reductions=("mean", "sum", "none")):
    """A batch, optional miner masks (each given or not), a reduction, an upstream gradient."""
    S, y = draw(batches())
    B = S.shape[0]
    masks = {}
    for name in ("pos_mask", "neg_mask"):
        if draw(st.booleans()):
            bits = draw(st.lists(st.booleans(), min_size=B * B, max_size=B * B))
            masks[name] = torch.tensor(bits).reshape(B, B)
    reduction = draw(st.sampled_from(reductions))
    return S, y, masks, reduction


def both_paths(fn, S, y, **kw):
    """``(value, gradient)`` of the closed form and of autograd; "none" with a random upstream."""
    out = []
    for backward in ("closed_form", "autograd"):
        X = S.detach().clone().requires_grad_(True)
        v = fn(X, y, backward=backward, **kw)
        up = torch.linspace(-1.0, 2.0, v.numel(), dtype=v.dtype).reshape(v.shape)
        (g,) = torch.autograd.grad((v * up).sum(), X, allow_unused=True)
        out.append((v.detach(), torch.zeros_like(S) if g is None else g))
    return out


def assert_paths_agree(fn, S, y, **kw):
    (v1, g1), (v2, g2) = both_paths(fn, S, y, **kw)
    torch.testing.assert_close(v1, v2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-12)
    assert bool(torch.isfinite(g1).all())


# ----------------------------------------------------------------------------- lifted


@FAST
@given(batches_and_masks(), st.sampled_from(FORMS), st.floats(-0.5, 1.5))
def test_lifted_closed_form_matches_autograd(case, form, margin):
    S, y, masks, reduction = case
    assert_paths_agree(lifted_loss, S, y, margin=margin, form=form, reduction=reduction, **masks)


@FAST
@given(batches(), st.sampled_from(FORMS), st.floats(-0.5, 1.5))
def test_lifted_closed_form_matches_loops(batch, form, margin):
    S, y = batch
    got = lifted_loss(S, y, margin, form=form, backward="closed_form")
    want = ref_lifted(S.tolist(), y.tolist(), margin, form)
    assert float(got) == pytest.approx(want, abs=1e-7)  # D = 0 below eps (safe_distance)


@FAST
@given(
    batches_and_masks(("mean", "sum")),
    st.sampled_from(FORMS),
    st.booleans(),
    st.booleans(),
    st.floats(-1.0, 1.5),
)
def test_lifted_structure_closed_form_matches_autograd(case, form, squared, joint, margin):
    S, y, masks, reduction = case
    kw = {"squared_hinge": squared, "joint_negatives": joint, "reduction": reduction}
    assert_paths_agree(lifted_structure_loss, S, y, margin=margin, form=form, **kw, **masks)


@FAST
@given(batches(symmetric=False), st.sampled_from(FORMS), st.booleans(), st.booleans())
def test_lifted_structure_closed_form_matches_loops(batch, form, squared, joint):
    S, y = batch
    S = S.clamp(-1.0, 1.0)
    got = lifted_structure_loss(
        S, y, 0.8, form=form, squared_hinge=squared, joint_negatives=joint, backward="closed_form"
    )
    want = ref_lifted_structure(S.tolist(), y.tolist(), 0.8, form, squared, joint)
    assert float(got) == pytest.approx(want, abs=1e-7)  # D = 0 below eps (safe_distance)


# ----------------------------------------------------------------------------- binomial family

PAIR_SUMS = {  # loss -> (its loop, whether it has a margin)
    binomial_deviance_loss: (ref_binomial, True),
    binlifted_loss: (ref_binlifted, True),
    lifted_star_loss: (ref_lifted_star, False),
}


@FAST
@given(
    batches_and_masks(),
    st.sampled_from(list(PAIR_SUMS)),
    st.sampled_from([0.5, 2.0]),
    st.sampled_from([1.0, 50.0]),
    st.floats(-1.0, 1.0),
)
def test_pair_sum_closed_forms_match_autograd(case, fn, alpha, beta, margin):
    S, y, masks, reduction = case
    kw = {"margin": margin} if PAIR_SUMS[fn][1] else {}
    assert_paths_agree(fn, S, y, alpha=alpha, beta=beta, reduction=reduction, **kw, **masks)


@FAST
@given(batches(), st.sampled_from(list(PAIR_SUMS)), st.floats(-1.0, 1.0))
def test_pair_sum_closed_forms_match_loops(batch, fn, margin):
    S, y = batch
    ref, has_margin = PAIR_SUMS[fn]
    if has_margin:
        got = fn(S, y, 2.0, 50.0, margin, backward="closed_form")
        want = ref(S.tolist(), y.tolist(), 2.0, 50.0, margin)
    else:
        got = fn(S, y, 2.0, 50.0, backward="closed_form")
        want = ref(S.tolist(), y.tolist(), 2.0, 50.0)
    assert float(got) == pytest.approx(want, rel=1e-12, abs=1e-12)


# ----------------------------------------------------------------------------- contrastive


def contrastive_reference(S, y, margin):
    """Wang et al. Eq. 4 over the ordered pairs ``i != j``, mean."""
    terms = [
        -S[i][j] if y[i] == y[j] else max(S[i][j] - margin, 0.0)
        for i in range(len(y))
        for j in range(len(y))
        if i != j
    ]
    return sum(terms) / len(terms) if terms else 0.0


@FAST
@given(batches_and_masks(("mean",)), st.floats(-1.0, 1.0))
def test_contrastive_closed_form_matches_autograd_and_loop(case, margin):
    S, y, masks, _ = case
    assert_paths_agree(contrastive_loss, S, y, margin=margin, **masks)
    got = contrastive_loss(S, y, margin, backward="closed_form")
    assert float(got) == pytest.approx(contrastive_reference(S.tolist(), y.tolist(), margin))


@FAST
@given(
    batches_and_masks(),
    st.sampled_from(["hinge", "squared_hinge", "squared_distance"]),
    st.floats(0.0, 0.8),
    st.floats(0.9, 2.5),
)
def test_contrastive_distance_closed_form_matches_autograd_and_loop(case, variant, m1, m2):
    S, y, masks, reduction = case
    kw = {"variant": variant, "reduction": reduction}
    assert_paths_agree(contrastive_distance_loss, S, y, pos_margin=m1, neg_margin=m2, **kw, **masks)
    got = contrastive_distance_loss(S, y, m1, m2, variant=variant, backward="closed_form")
    want = ref_contrastive_d(S.tolist(), y.tolist(), m1, m2, variant)
    assert float(got) == pytest.approx(want, abs=1e-7)  # D = 0 below eps (safe_distance)


# ----------------------------------------------------------------------------- batch-hard triplets


def batch_hard_reference(S, y, margin, form, reduction):
    """Per anchor: least similar positive, most similar negative (first on ties), the hinge."""
    terms = []
    for a in range(len(y)):
        P, N = sets(y, a)
        if P and N:
            p = min(P, key=lambda k: (S[a][k], k))
            n = min(N, key=lambda k: (-S[a][k], k))
            terms.append(max(dist(S[a][p], form) - dist(S[a][n], form) + margin, 0.0))
    if reduction == "sum":
        return sum(terms)
    if reduction == "mean_nonzero":
        terms = [t for t in terms if t > 0]
    return sum(terms) / len(terms) if terms else 0.0


@FAST
@given(
    batches_and_masks(("mean", "mean_nonzero", "sum")),
    st.sampled_from(FORMS),
    st.sampled_from([0.0, 0.2, 1.0]),
)
def test_batch_hard_index_path_matches_the_masks_path(case, form, margin):
    S, y, masks, reduction = case
    S = torch.round(S * 4) / 4  # ties in the hardest positive or negative
    module = TripletLoss(margin, form=form, mining="batch_hard", reduction=reduction)
    X = S.clone().requires_grad_(True)
    got = module.loss_on_similarity(X, y, **masks)
    (g_got,) = torch.autograd.grad(got, X)
    Z = S.clone().requires_grad_(True)
    pos, neg = batch_hard_masks(Z, y, **masks)
    want = triplet_loss(Z, y, margin, form=form, reduction=reduction, pos_mask=pos, neg_mask=neg)
    (g_want,) = torch.autograd.grad(want, Z)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-12)
    if not masks:
        loop = batch_hard_reference(S.tolist(), y.tolist(), margin, form, reduction)
        assert float(got.detach()) == pytest.approx(loop, abs=1e-7)  # D = 0 below eps


@FAST
@given(
    batches(),
    st.sampled_from(FORMS),
    st.sampled_from(["mean", "mean_nonzero", "sum"]),
    st.sampled_from([0.0, 0.2, 1.0]),
)
def test_all_triplets_closed_form_matches_the_masks_path_and_loop(batch, form, reduction, margin):
    """Without masks every valid triplet goes through all_triplets_label_core (on S); an all-True
    mask takes the autograd-through-dissimilarity path of AllTriplets on the same triplets."""
    S, y = batch
    B = S.shape[0]
    X = S.clone().requires_grad_(True)
    got = triplet_loss(X, y, margin, form=form, reduction=reduction)
    (g_got,) = torch.autograd.grad(got, X, allow_unused=True)
    Z = S.clone().requires_grad_(True)
    every = torch.ones(B, B, dtype=torch.bool)
    want = triplet_loss(Z, y, margin, form=form, reduction=reduction, pos_mask=every)
    (g_want,) = torch.autograd.grad(want, Z, allow_unused=True)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    zero = torch.zeros_like(S)
    g_got, g_want = (zero if g is None else g for g in (g_got, g_want))
    torch.testing.assert_close(g_got, g_want, rtol=1e-10, atol=1e-12)
    loop = ref_triplet(S.tolist(), y.tolist(), margin, form, reduction)
    assert float(got.detach()) == pytest.approx(loop, abs=1e-7)  # D = 0 below eps


def test_closed_forms_keep_the_input_dtype_and_refuse_double_backward():
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(12, 4, generator=g), dim=1)
    y = torch.arange(4).repeat_interleave(3)
    closed_forms = (lifted_loss, lifted_structure_loss, contrastive_loss, contrastive_distance_loss)
    for fn in (*closed_forms, *PAIR_SUMS):
        S = (x @ x.T).to(torch.bfloat16).requires_grad_(True)
        (grad,) = torch.autograd.grad(fn(S, y), S, create_graph=True)
        assert grad.dtype == torch.bfloat16
        with pytest.raises(RuntimeError):
            torch.autograd.grad(grad.float().sum(), S)


def test_the_cores_are_the_closed_forms_of_their_losses():
    """The cores and the batch-hard selection, called directly (label masks)."""
    g = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(12, 4, generator=g, dtype=torch.float64), dim=1)
    S, y = x @ x.T, torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4])
    per, valid, _ = lifted_core(S, y, None, 0.5, "distance")
    want = lifted_loss(S, y, 0.5, form="distance", reduction="none", backward="autograd")
    torch.testing.assert_close(per, want)
    assert valid.tolist() == [bool(y[i] != 3) for i in range(12)]  # the singleton has no positive
    per, valid, _ = pair_sum_core(S, y, None, 2.0, 50.0, 0.5, PairSumTerms("mean", 0.0))
    want = binomial_deviance_loss(S, y, reduction="none", backward="autograd")
    torch.testing.assert_close(per, want)
    value, _ = contrastive_core(S, y, None, 0.3)
    torch.testing.assert_close(value, contrastive_loss(S, y, 0.3, backward="autograd"))
    a, p, n = batch_hard_triplets(S, y, None)
    pos, neg = batch_hard_masks(S, y)
    assert a.tolist() == [i for i in range(12) if y[i] != 3]  # the singleton has no positive
    assert bool(pos[a, p].all() and neg[a, n].all()) and int(pos.sum()) == len(a)

"""The vectorised Liu et al. losses against Algorithm 1 written one anchor at a time
(:mod:`dmlbook.reference.liu_weighting`): values and gradients, float64, random P x K batches
(singletons, one class and B = 1 included)."""

from __future__ import annotations

import hypothesis.strategies as st
import torch
from hypothesis import given, settings
from loss_cases import unit_sphere_batches

from dmlbook.losses.liu_triplet import triplet_weighted_loss
from dmlbook.losses.liu_weighting import ms_distance_loss, pair_weighted_loss
from dmlbook.reference.liu_weighting import (
    ms_distance_loss_reference,
    pair_weighted_loss_reference,
    triplet_weighted_loss_reference,
)


def _both(fn, ref, S):
    a = S.clone().requires_grad_(True)
    b = S.clone().requires_grad_(True)
    va, vb = fn(a), ref(b)
    (ga,) = torch.autograd.grad(va, a, allow_unused=True)
    if vb.requires_grad:
        (gb,) = torch.autograd.grad(vb, b, allow_unused=True)
    else:
        gb = None
    gb = torch.zeros_like(S) if gb is None else gb
    torch.testing.assert_close(va.detach(), vb.detach(), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(ga, gb, rtol=1e-10, atol=1e-12)


WEIGHTING = st.sampled_from(
    [("constant", 0.0, 0.0), ("power", 0.0, 1.0), ("power", 2.0, 0.5), ("exponential", 0.0, 2.0),
     ("exponential", 4.0, 40.0)]
)  # fmt: skip
NORM = st.sampled_from(["none", "anchor", "batch"])


@settings(max_examples=40, deadline=None)
@given(
    unit_sphere_batches(7),
    WEIGHTING,
    NORM,
    st.sampled_from([None, 0.1]),
    st.sampled_from([(0.0, 0.8), (0.3, 1.2)]),
)
def test_pair_loss_is_algorithm_1(batch, weighting, norm, eps, margins):
    S, y = batch
    name, a, b = weighting
    kw = dict(weighting=name, pos_exponent=a, neg_exponent=b, normalization=norm, epsilon=eps)
    _both(
        lambda s: pair_weighted_loss(s, y, *margins, **kw),
        lambda s: pair_weighted_loss_reference(s, y, *margins, **kw),
        S,
    )


@settings(max_examples=30, deadline=None)
@given(unit_sphere_batches(7), WEIGHTING, NORM, st.sampled_from([0.1, 0.5]))
def test_triplet_loss_is_algorithm_1(batch, weighting, norm, m):
    S, y = batch
    name, a, _ = weighting
    kw = dict(weighting=name, exponent=a, normalization=norm)
    _both(
        lambda s: triplet_weighted_loss(s, y, m, **kw),
        lambda s: triplet_weighted_loss_reference(s, y, m, **kw),
        S,
    )


@settings(max_examples=30, deadline=None)
@given(unit_sphere_batches(7), st.sampled_from(["v1", "v2"]), st.sampled_from([None, 0.1]))
def test_ms_v1_v2_are_the_per_anchor_loops(batch, version, eps):
    S, y = batch
    kw = dict(version=version, epsilon=eps)
    _both(
        lambda s: ms_distance_loss(s, y, 1.0, 2.0, 50.0, **kw),
        lambda s: ms_distance_loss_reference(s, y, 1.0, 2.0, 50.0, **kw),
        S,
    )

"""The parts of dmlbook.surgery against the paper-literal loop (dmlbook.reference.gradient_surgery)
and against their equations: every (direction, pair weight, triplet weight, selection) of
Xuan & Pless, Eq. 5-19, on hypothesis batches in float64. Chapter: book/13_gradient_surgery.ipynb.
"""

from __future__ import annotations

import itertools
import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.reference.gradient_surgery import designed_gradient_reference
from dmlbook.surgery.directions import DIRECTIONS
from dmlbook.surgery.gradient import SurgerySpec, designed_gradient
from dmlbook.surgery.loss import GradientSurgeryLoss
from dmlbook.surgery.triplets import ephn_triplets, relative_sets
from dmlbook.surgery.weights import (
    PAIR_WEIGHTS,
    SELECTIONS,
    TRIPLET_WEIGHTS,
    pair_weights,
    select,
    triplet_weight,
)

from .strategies import ephn_loop, unit_batches

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


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_ephn_triplets_match_the_loop(batch):
    f, y = batch
    t = ephn_triplets(f @ f.T, y)
    assert list(zip(t.a.tolist(), t.p.tolist(), t.n.tolist(), strict=True)) == ephn_loop(f, y)


def test_relative_sets_follow_eq12():
    S = torch.tensor(
        [[1.0, 0.9, 0.2, 0.5, 0.35, 0.1],
         [0.9, 1.0, 0.3, 0.1, 0.1, 0.1],
         [0.2, 0.3, 1.0, 0.1, 0.1, 0.1],
         [0.5, 0.1, 0.1, 1.0, 0.2, 0.2],
         [0.35, 0.1, 0.1, 0.2, 1.0, 0.2],
         [0.1, 0.1, 0.1, 0.2, 0.2, 1.0]], dtype=torch.float64)  # fmt: skip
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    t = ephn_triplets(S, y)
    in_P, in_N = relative_sets(S, y, t, 0.1)
    # anchor 0: p = 1 (0.9), n = 3 (0.5); other positive 2 (0.2 < 0.5 + 0.1): in P;
    # other negatives 4 (0.35 > min(0.9, 0.2) - 0.1 = 0.1): in N; 5 (0.1, not > 0.1): not
    assert in_P[0].nonzero().flatten().tolist() == [2]
    assert in_N[0].nonzero().flatten().tolist() == [4]


def test_pair_weights_are_eq8_to_14():
    sp, sn = torch.tensor([0.7], dtype=torch.float64), torch.tensor([0.4], dtype=torch.float64)
    hp = {"alpha": 2.0, "beta": 10.0, "lam": 0.5}
    assert [float(w) for w in pair_weights("con", sp, sn, **hp)] == [1.0, 1.0]
    euc = pair_weights("euc", sp, sn, **hp)
    assert float(euc[0]) == pytest.approx(math.sqrt(0.6)) and float(euc[1]) == pytest.approx(
        math.sqrt(1.2)
    )
    assert [float(w) for w in pair_weights("lin", sp, sn, **hp)] == pytest.approx([0.3, 0.4])
    sig = pair_weights("sig", sp, sn, **hp)
    assert float(sig[0]) == pytest.approx(1 / (1 + math.exp(0.4)))
    assert float(sig[1]) == pytest.approx(1 / (1 + math.exp(1.0)))
    m = torch.tensor([1.5], dtype=torch.float64), torch.tensor([0.5], dtype=torch.float64)
    ms = pair_weights("sig_ms", sp, sn, **hp, m_plus=m[0], m_minus=m[1])
    assert float(ms[0]) == pytest.approx(1 / (1.5 + math.exp(0.4)))
    lin_ms = pair_weights("lin_ms", sp, sn, **hp, m_plus=m[0], m_minus=m[1])
    assert [float(w) for w in lin_ms] == pytest.approx([(1 - 1.5) * 0.3, 1.5 * 0.4])
    with pytest.raises(ValueError, match="needs m_plus"):
        pair_weights("lin_ms", sp, sn, **hp)


def test_triplet_weights_and_selections():
    sp = torch.tensor([0.9, 0.3], dtype=torch.float64)
    sn = torch.tensor([0.1, 0.6], dtype=torch.float64)
    assert triplet_weight("con", sp, sn, tau=2.0).tolist() == [0.5, 0.5]
    cos = triplet_weight("cos", sp, sn, tau=2.0)
    assert float(cos[0]) == pytest.approx(1 / (1 + math.exp(2.0 * 0.8)))
    cir = triplet_weight("cir", sp, sn, tau=2.0)  # Eq. 17 as printed
    assert float(cir[1]) == pytest.approx(1 / (1 + math.exp(2.0 * (0.3 * 1.7 - 0.36))))
    one = torch.ones(2, dtype=torch.float64)
    assert select("sc1", one, sp, sn).tolist() == [1.0, 0.0]  # the hard triplet loses its pull
    assert select("sc2", one, sp, sn).tolist() == [1.0, 0.0]  # inside the circle: kept
    assert select("none", one, sp, sn).tolist() == [1.0, 1.0]


def test_module_spec_round_trips():
    loss = GradientSurgeryLoss(direction="euc", selection="sc2")
    assert loss.spec == SurgerySpec(direction="euc", selection="sc2")
    with pytest.raises(TypeError, match="acts on embeddings"):
        loss.loss_on_similarity(torch.eye(2), torch.tensor([0, 1]))

"""Tests of dmlbook.surgery.triplets: the easy-positive / hard-negative triplets against a plain
loop, and the relative sets of Xuan & Pless, Eq. 12, on a hand-written batch."""

from __future__ import annotations

import torch
from hypothesis import given, settings

from dmlbook.surgery.triplets import ephn_triplets, relative_sets

from .strategies import ephn_loop, unit_batches


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


def test_relative_sets_are_strict_at_eq12s_bounds():
    """Eq. 12's inequalities are strict: a positive exactly at max{S_an, R_an} + eps and a
    negative exactly at min{S_ap, R_ap} - eps are in neither set (binary fractions: exact)."""
    S = torch.tensor(
        [[1.0, 0.875, 0.75, 0.5, 0.25, 0.125],
         [0.875, 1.0, 0.125, 0.125, 0.125, 0.125],
         [0.75, 0.125, 1.0, 0.125, 0.125, 0.125],
         [0.5, 0.125, 0.125, 1.0, 0.125, 0.125],
         [0.25, 0.125, 0.125, 0.125, 1.0, 0.125],
         [0.125, 0.125, 0.125, 0.125, 0.125, 1.0]], dtype=torch.float64)  # fmt: skip
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    t = ephn_triplets(S, y)
    assert (int(t.a[0]), int(t.p[0]), int(t.n[0])) == (
        0,
        1,
        3,
    )  # easiest positive, hardest negative
    # P: positive 2 at 0.75 = 0.5 + 0.25 (not <); N: negative 4 at 0.25 = 0.75 - 0.5 (not >)
    in_P, _ = relative_sets(S, y, t, 0.25)
    assert not bool(in_P[0].any())
    _, in_N = relative_sets(S, y, t, 0.5)
    assert not bool(in_N[0].any())
    in_P, _ = relative_sets(S, y, t, 0.5)  # inside P: 0.75 < 0.5 + 0.5; N at 0.625: 0.25 > 0.125
    assert in_P[0].nonzero().flatten().tolist() == [2]
    assert relative_sets(S, y, t, 0.625)[1][0].nonzero().flatten().tolist() == [4]

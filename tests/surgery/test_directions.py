"""Tests of dmlbook.surgery.directions: the unit directions of Xuan & Pless, Eq. 5-7."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from dmlbook.surgery import unit_directions

from .strategies import ephn_loop, unit_batches


@settings(max_examples=30, deadline=None)
@given(unit_batches(max_d=6))
def test_orthogonal_directions_are_orthogonal_and_unit(batch):
    f, y = batch
    trips = torch.tensor(ephn_loop(f, y))
    fa, fp, fn = f[trips[:, 0]], f[trips[:, 1]], f[trips[:, 2]]
    for kind in ("euc_orth", "cos_orth"):
        e = unit_directions(fa, fp, fn, kind)
        for v in (e.e_n, e.e_an):
            assert float(((v * (fa - fp)).sum(dim=1)).abs().max()) < 1e-12
            norms = v.norm(dim=1)
            assert bool(((norms - 1).abs() < 1e-12).all())


def _rows(*vectors):
    return [torch.tensor([v], dtype=torch.float64) for v in vectors]


def test_eq5_to_7_on_a_hand_computed_triplet():
    # f_a = (1, 0), f_p = (0, 1), f_n = (-1, 0); r = 1 / sqrt(2).
    fa, fp, fn = _rows((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0))
    r = 2**-0.5
    want = {
        # Eq. 5: e_p = (f_p - f_a) / |f_p - f_a| = (-r, r), e_n = (f_a - f_n) / 2 = (1, 0)
        "euc": ((-r, r), (1.0, 0.0), (r, -r), (-1.0, 0.0)),
        # Eq. 6: e_p = -f_a, e_n = f_a, e_ap = -f_p, e_an = f_n
        "cos": ((-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (-1.0, 0.0)),
        # Eq. 7: minus the component along u = (f_a - f_p) / |f_a - f_p| = (r, -r), rescaled:
        # (1, 0) - (1/2, -1/2) = (1/2, 1/2) -> (r, r); (-1, 0) + (1/2, -1/2) -> (-r, -r)
        "euc_orth": ((-r, r), (r, r), (r, -r), (-r, -r)),
        "cos_orth": ((-1.0, 0.0), (r, r), (0.0, -1.0), (-r, -r)),
    }
    for kind, vectors in want.items():
        got = unit_directions(fa, fp, fn, kind)
        for name, vector, expected in zip(got._fields, got, vectors, strict=True):
            assert torch.allclose(vector, torch.tensor([expected], dtype=torch.float64)), (
                kind,
                name,
            )


def test_a_duplicate_feature_gives_a_zero_direction_not_nan():
    fa, fn = _rows((0.6, 0.8), (1.0, 0.0))
    for kind in ("euc", "euc_orth", "cos_orth"):
        got = unit_directions(fa, fa.clone(), fn, kind)  # f_p = f_a: |f_p - f_a| = 0
        assert all(bool(torch.isfinite(v).all()) for v in got), kind
    euc = unit_directions(fa, fa.clone(), fn, "euc")
    assert torch.equal(euc.e_p, torch.zeros(1, 2, dtype=torch.float64))
    assert torch.allclose(euc.e_n, torch.tensor([[-0.4, 0.8]], dtype=torch.float64) / 0.8**0.5)


def test_unknown_kind_names_the_valid_ones():
    fa, fp, fn = _rows((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0))
    with pytest.raises(ValueError, match="direction must be one of euc, cos, euc_orth, cos_orth"):
        unit_directions(fa, fp, fn, "cosine")


def test_a_difference_of_norm_eps_is_no_direction():
    """A difference no longer than the dtype's epsilon gives a zero direction (strictly longer
    ones are scaled to unit length): f_p - f_a = 2**-52 exactly in float64."""
    fa, fn = _rows((1.0, 0.0), (0.0, 1.0))
    eps = torch.finfo(torch.float64).eps
    assert unit_directions(fa, fa + torch.tensor([[eps, 0.0]], dtype=torch.float64), fn,
                           "euc").e_p.tolist() == [[0.0, 0.0]]  # fmt: skip
    longer = unit_directions(
        fa, fa + torch.tensor([[2 * eps, 0.0]], dtype=torch.float64), fn, "euc"
    )
    assert longer.e_p.tolist() == [[1.0, 0.0]]

"""Tests of :mod:`dmlbook.symbolic.spot_check`: numeric evidence that agrees on a true identity,
rejects a wrong closed form, and refuses what it cannot sample."""

from __future__ import annotations

import pytest
import sympy as sp

from dmlbook import symbolic as sy
from dmlbook.symbolic.spot_check import spot_check_equal


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


def test_spot_check_rejects_a_wrong_closed_form():
    x = sp.Symbol("x", real=True)
    wrong = spot_check_equal(sp.sin(x) ** 2, 1 - sp.cos(x))  # agrees only where cos x is 0 or 1
    assert not wrong and wrong.max_abs_diff > 0.1

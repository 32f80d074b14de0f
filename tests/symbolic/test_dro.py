"""Each SymPy proof of :mod:`dmlbook.symbolic.dro` (DRO paper) runs as a test.

A proof entry is ``True`` only when ``prove_equal`` reduced a difference to exactly 0, so a
wrong closed form fails here. Chapter: ``book/12_dro.ipynb``.
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch

from dmlbook.losses import dro_loss
from dmlbook.symbolic import dro, prove_equal


@pytest.mark.parametrize(
    "proof",
    [
        dro.kl_inner_max,
        dro.topk_lp_value,
        dro.chi2_inner_max,
    ],
)
def test_every_step_is_proved(proof):
    results = proof()
    assert results and all(v is True for v in results.values()), results


def test_lemma_1_symbolic_weights_match_autograd_of_the_loss():
    """p* from the symbolic KKT solve, times the slope, equals autograd of DRO-KL (B = 3)."""
    gamma = sp.Symbol("gamma", positive=True)
    ls = sp.symbols("l_1:7", real=True)
    p_star = dro._kl_stationary_point(lambda: list(ls), gamma, len(ls))["p*"]
    f = sp.lambdify([*ls, gamma], p_star.value)
    S = torch.tensor(
        [[1.0, 0.55, 0.45], [0.55, 1.0, 0.1], [0.45, 0.1, 1.0]],
        dtype=torch.float64,
        requires_grad=True,
    )
    y = torch.tensor([0, 0, 1])
    (g,) = torch.autograd.grad(dro_loss(S, y, "kl", gamma=0.3, drop_zero=False), S)
    pairs = [(i, j) for i in range(3) for j in range(3) if i != j]
    pos = [bool(y[i] == y[j]) for i, j in pairs]
    vals = [
        max(0.0, 0.2 + (0.5 - float(S.detach()[i, j])))
        if p
        else max(0.0, 0.2 - (0.5 - float(S.detach()[i, j])))
        for (i, j), p in zip(pairs, pos, strict=True)
    ]
    weights = f(*vals, 0.3)
    for (i, j), p, w, v in zip(pairs, pos, weights, vals, strict=True):
        slope = (-1.0 if p else 1.0) if v > 0 else 0.0
        assert float(g[i, j]) == pytest.approx(slope * float(w), abs=1e-10)


def test_eq27_as_printed_lacks_the_one_over_n_of_eq9():
    """Erratum (supplement Eq. 27): at n = 3 anchors the printed weight is 3x the gradient."""
    a, lam = 2.0, 0.5
    s = [0.3, 0.7]  # one anchor's two positives
    n = 3

    def loss(s1: float) -> float:
        return math.log(1 + math.exp(-a * (s1 - lam)) + math.exp(-a * (s[1] - lam))) / a / n

    h = 1e-6
    grad = (loss(s[0] + h) - loss(s[0] - h)) / (2 * h)
    printed = -1 / (math.exp(a * (s[0] - lam)) + sum(math.exp(a * (s[0] - sk)) for sk in s))
    assert grad == pytest.approx(printed / n, rel=1e-6) and abs(printed - grad) > 0.1


def test_verbose_proofs_print_their_intermediate_results_beside_the_verdicts(capsys):
    """Chapter 12 prints each step's result (stationary point, value, limit) next to its verdict."""
    results = dro.kl_inner_max(n=2, verbose=True)  # n = 2: the cheapest instance
    lines = capsys.readouterr().out.splitlines()
    assert "n = 2 losses" in lines[0] and "one instance" in lines[0]
    row = {line.split("  ")[1].strip(): line for line in lines[1:]}
    assert "exp(-1 + l_1/gamma - v/gamma)/2" in row["stationary point p_1(v)"]
    assert "p*_1 = exp(l_1/gamma)/(exp(l_1/gamma) + " in row["p* = softmax(l/gamma)"]
    assert "proved" in row["gamma -> inf: mean l"] and "l_1/2 + l_2/2" in lines[-2]
    assert len(lines) == 1 + 2 + len(results) and all(results.values())


def test_chi_square_p_star_is_proved_only_where_the_losses_are_not_all_equal():
    """p* divides by ||l - mean|| (0/0 when all losses are equal): refused without the condition
    that ``chi2_inner_max`` states, proved with it (issue 38)."""
    rho = sp.Symbol("rho", positive=True)
    ls = dro._losses(3)
    total = lambda: sum(dro._chi2_p(ls, rho))
    assert prove_equal(total, 1, verbose=False) is False
    assert prove_equal(total, 1, where=[sp.Ne(dro._norm2(ls), 0)]) is True


def test_the_stationary_point_is_derived_from_the_lagrangian_with_its_conditions():
    """p* is solved from J as defined (log(n p) needs p != 0, which p > 0 meets), and a wrong
    closed form is not proved (the sides are not vacuous)."""
    gamma = sp.Symbol("gamma", positive=True)
    ls = dro._losses(2)
    kkt = dro._kl_stationary_point(lambda: ls, gamma, 2)
    assert [r.text() for r in kkt.requirements] == ["2*p_1 != 0", "2*p_2 != 0"]
    assert kkt.where() == "everywhere"  # p > 0 by assumption: nothing left to state
    assert prove_equal(kkt["p*"], lambda: dro._softmax(ls, gamma)) is True
    assert prove_equal(kkt["p*"], lambda: dro._softmax(ls, 2 * gamma), verbose=False) is False


@pytest.mark.parametrize(
    "proof",
    [dro.kl_inner_max, dro.topk_lp_value],
)
def test_the_proofs_operations_pass_the_checks_of_a_callers_operation(proof):
    """``derived`` checks an operation written in a proof module as a caller's (only SymPy's
    and the differentiations are trusted): each proof's own substitutions read no expression
    built earlier and bring the conditions of their own divisions, and the proof still holds."""
    assert all(proof().values())


def test_an_operation_in_a_proof_module_may_not_read_an_expression_built_earlier():
    gamma = sp.Symbol("gamma", positive=True)
    two = 2 * gamma  # built before the call
    planted = lambda v: v.subs(gamma, two)  # noqa: E731
    planted.__module__ = dro.__name__  # as if written in dmlbook/symbolic/dro.py
    with pytest.raises(TypeError, match="derived's operation reads two"):
        dro.derived(planted, lambda: gamma + 1, differentiates=False)

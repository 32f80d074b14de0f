"""SymPy proofs of the DRO paper's misprinted forms, as they should read (Chapter 12.8).

* :func:`eq3_lambda`: Eq. 3 (and supplement Eq. 8) put ``lambda`` in both log-sums, where it
  cancels: the printed LS loss is Wang et al.'s Eq. 6 at ``lambda = 0`` (erratum).
* :func:`supplement_scales`: supplement Eq. 14 (the KL's derivative has ``log(|P_i| p)``, not
  ``log(n p)``) and Eq. 27 (the gradient of Eq. 9 keeps its ``1/n``).

Each returns ``{name: bool}`` as the proofs of :mod:`dmlbook.symbolic.dro` do, and with
``verbose=True`` prints each step's intermediate result beside its verdict. As there, each
side is built from its definition (a loss or divergence typed from symbols; its derivatives
:func:`derived` from it). Chapter:
``book/12_dro.ipynb`` (12.8). Tests: ``tests/symbolic/test_dro_printed.py``.
"""

from __future__ import annotations

import sympy as sp

from .differentiate import pair_weights
from .dro import _eq27, _losses, _ls_bracket, _print_steps
from .proofs import define, derived, prove_equal
from .symbols import hyperparameters

__all__ = ["eq3_lambda", "supplement_scales"]


def eq3_lambda(P: int = 2, N: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Eq. 3 (supplement Eq. 8): ``[log sum_P e^{lambda - S} + log sum_N e^{S - lambda}]_+``.

    Proves, for one anchor, that the bracket does not depend on ``lambda`` (the two ``lambda``
    cancel: ``log sum e^{lambda - S} = lambda + log sum e^{-S}``) and equals Wang et al.'s Eq. 6
    bracket ``log sum_P e^{lambda - S} + log sum_N e^{S}`` at ``lambda = 0``, whose ``lambda`` is a
    margin (its derivative is 1). With ``verbose`` it prints each log-sum's derivative in
    ``lambda`` and the bracket without ``lambda`` beside the verdicts.
    """
    (lam,) = hyperparameters("lambda")
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    eq3 = define(lambda: _ls_bracket(sp_, sn, lam))  # log sum_P e^{lam - S} + log sum_N e^{S - lam}

    def wang6(lam: sp.Expr) -> sp.Expr:  # Wang et al.'s Eq. 6 bracket: lambda in the positives
        return sp.log(sum(sp.exp(lam - x) for x in sp_)) + sp.log(sum(sp.exp(x) for x in sn))

    d_eq3, wang6_0 = derived(sp.diff, eq3, lam), define(lambda: wang6(0))
    d_wang6 = derived(sp.diff, lambda: wang6(lam), lam)
    d_pos = derived(sp.diff, lambda: sp.log(sum(sp.exp(lam - x) for x in sp_)), lam)
    d_neg = derived(sp.diff, lambda: sp.log(sum(sp.exp(x - lam) for x in sn)), lam)
    out = {
        "d Eq. 3 / d lambda = 0": prove_equal(d_eq3, 0),
        "Eq. 3 = Wang Eq. 6 at lambda = 0": prove_equal(eq3, wang6_0),
        "d Wang Eq. 6 / d lambda = 1": prove_equal(d_wang6, 1),
    }
    if verbose:
        shown = {
            "d/dlambda log sum_P e^{lambda - s}": sp.simplify(d_pos.value),
            "d/dlambda log sum_N e^{s - lambda}": sp.simplify(d_neg.value),
            "d Eq. 3 / d lambda = 0": sp.simplify(d_eq3.value),
            "Eq. 3 = Wang Eq. 6 at lambda = 0": sp.Eq(sp.Symbol("bracket"), wang6_0.value),
            "d Wang Eq. 6 / d lambda = 1": sp.simplify(d_wang6.value),
        }
        _print_steps(f"Eq. 3, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def supplement_scales(P: int = 2, N: int = 2, verbose: bool = False) -> dict[str, bool]:
    """Two factors of the supplement, proved as they should read.

    * Eq. 14: ``d/dp_j [p . log(|P_i| p)] = log(|P_i| p_j) + 1`` (the uniform distribution of
      the group is ``1/|P_i|``; the printed ``log(n p)`` has ``n``), which gives Eq. 15's
      ``1/|P_i|``.
    * Eq. 27: the gradient of Eq. 9 (one anchor, ``n`` anchors) is ``1/n`` times the weights
      Eq. 27 prints: ``-1/(n (e^{alpha (S_j - lambda)} + sum_k e^{alpha (S_j - S_k)}))``.

    With ``verbose`` it prints the derivative and the gradient found beside the verdicts.
    """
    ps = sp.symbols(f"p_1:{P + 1}", positive=True)
    a, b, lam = hyperparameters("alpha beta lambda")
    n = sp.Symbol("n", positive=True, integer=True)
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    # the gradient in p of the group's KL penalty sum_j p_j log(|P_i| p_j)
    dkl = derived(pair_weights, lambda: sum(p * sp.log(P * p) for p in ps), sp.Matrix(ps))
    eq9 = lambda: (
        (  # MS as Eq. 9 prints it, one anchor, with its factor 1/n
            sp.log(1 + sum(sp.exp(-a * (x - lam)) for x in sp_)) / a
            + sp.log(1 + sum(sp.exp(b * (x - lam)) for x in sn)) / b
        )
        / n
    )
    grad = derived(pair_weights, eq9, sp.Matrix([*sp_, *sn]))
    eq27_n = define(lambda: sp.Matrix([w / n for w in _eq27(sp_, sn, a, b, lam)]))
    out = {
        "Eq. 14: dKL/dp = log(|P_i| p) + 1": prove_equal(
            dkl, lambda: sp.Matrix([sp.log(P * p) + 1 for p in ps])
        ),
        "Eq. 27: grad of Eq. 9 = Eq. 27 / n": prove_equal(grad, eq27_n),
    }
    if verbose:
        shown = {
            "Eq. 14: dKL/dp = log(|P_i| p) + 1": sp.Eq(sp.Symbol("dKL/dp_1"), dkl.value[0]),
            "d Eq. 9 / ds^+_1": sp.simplify(grad.value[0]),
            "Eq. 27: grad of Eq. 9 = Eq. 27 / n": sp.Eq(
                sp.Symbol("Eq. 27 weight / n"), eq27_n.value[0]
            ),
        }
        _print_steps(
            f"Supplement Eq. 14 and 27, |P_i| = {P}, |N_i| = {N} (one instance)", out, shown
        )
    return out

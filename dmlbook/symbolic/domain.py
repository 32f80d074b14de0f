"""Where an expression is defined: every point of the symbols' domain at which it may not be.

:func:`~dmlbook.symbolic.proofs.prove_equal` claims ``a == b`` for *every* value the symbols'
assumptions allow, so each place where a side may be undefined must be excluded by a stated
condition (``where=``) or the proof refused. :func:`requirements` walks an expression (built as
written, :func:`~dmlbook.symbolic.conditions.as_written`, so that nothing was cancelled) and
returns what must hold for it to be defined:

* ``d != 0`` for a power ``d**e`` whose exponent may be negative (``1/d``, ``d**-2``, but also
  ``d**x`` for a real or integer ``x`` not known to be ``>= 0``: ``0**-1`` is undefined);
* ``z != 0`` for ``log(z)`` (``log 0`` is undefined; a negative ``z`` has the principal complex
  logarithm, as in SymPy, which is defined);
* ``cos(z) != 0`` for ``tan``, ``sec``; ``sin(z) != 0`` for ``cot``, ``csc``; ``sinh(z) != 0``
  for ``coth``, ``csch``; ``cosh(z) != 0`` for ``tanh``, ``sech`` (their poles);
* ``b - a + 1 >= 0`` for ``Sum(f, (k, a, b))`` and ``Product``: the statement means the sum over
  the integers ``a..b``, empty when ``b = a - 1``; SymPy's convention for ``b < a - 1``
  (``Sum(f, (k, a, b)) = -Sum(f, (k, b + 1, a - 1))``) is no empty sum, so such a range is a
  point the statement does not cover. A term undefined somewhere in ``a..b`` (``1/k`` from
  ``k = 0``) is a requirement too;
* a real argument for ``Hinge``, ``HingeActive``, ``Max``, ``Min``, ``Heaviside``, ``floor``,
  ``ceiling`` (``Hinge(s**x)`` at ``s < 0`` has a complex argument, no value).

Some constructions have no condition that ``where=`` could state; they are refused
(:func:`refusals`): a ``Limit`` whose expression or point has parameters (SymPy's limit is
computed for generic parameter values: ``Limit(x**s, s, 0, '+')`` is 1, but 0 at ``x = 0``), a
sum or product to infinity (convergence is not checked), a ``Piecewise`` without a default
branch (undefined where no condition holds), ``nan``/``zoo``, integrals, and any function this
module does not know (it cannot tell where it is defined). Unspecified functions
(``sp.Function('f')(x)``) are taken as defined and differentiable everywhere: that is what the
book's ``s(theta)`` means. Tests: ``tests/symbolic/test_domain.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy as sp

from .hinge import Hinge, HingeActive

__all__ = ["Requirement", "refusals", "requirements"]

#: Functions defined at every complex (hence every real) argument.
TOTAL = (
    sp.exp, sp.sin, sp.cos, sp.sinh, sp.cosh, sp.atan, sp.asinh, sp.asin, sp.acos, sp.erf,
    sp.Abs, sp.sign, sp.Max, sp.Min, sp.Heaviside, sp.floor, sp.ceiling, sp.re, sp.im,
    sp.conjugate, sp.KroneckerDelta, Hinge, HingeActive,
)  # fmt: skip

#: Functions of a real argument only (an order: max, a step): a complex one is no point of theirs.
REAL_ONLY = (Hinge, HingeActive, sp.Max, sp.Min, sp.Heaviside, sp.floor, sp.ceiling)

#: A function's poles: it is defined where the given function of its argument is nonzero.
POLES = {sp.tan: sp.cos, sp.sec: sp.cos, sp.cot: sp.sin, sp.csc: sp.sin,
         sp.coth: sp.sinh, sp.csch: sp.sinh, sp.tanh: sp.cosh, sp.sech: sp.cosh}  # fmt: skip


@dataclass(frozen=True)
class Requirement:
    """One condition for an expression to be defined.

    Attributes
    ----------
    quantity : Expr
        ``d`` of ``d != 0`` (kind ``"nonzero"``), ``n`` of ``n >= 0`` (``"nonnegative"``) or
        ``x`` of ``x`` real (``"real"``).
    kind : str
        ``"nonzero"``, ``"nonnegative"`` or ``"real"``.
    reason : str
        Where it comes from, for a message (``"divides by s"``, ``"log(s)"``).
    bound : tuple
        ``(k, low, high)`` for each summation index ``quantity`` may depend on.
    source : str
        ``"power"``, ``"log"``, ``"pole"``, ``"range"`` or ``"real"``.
    """

    quantity: sp.Expr
    kind: str
    reason: str
    bound: tuple[tuple[sp.Symbol, sp.Expr, sp.Expr], ...] = ()
    source: str = "power"

    def text(self) -> str:
        """``'s != 0'`` or ``'m >= 0'``, with the summation range where there is one."""
        rel = {"nonzero": " != 0", "nonnegative": " >= 0", "real": " real"}[self.kind]
        out = f"{_text(self.quantity)}{rel}"
        ranges = [f"{_text(k)} = {_text(lo)}..{_text(hi)}" for k, lo, hi in self.bound]
        return out + (f" for {', '.join(ranges)}" if ranges else "")


def _visit(e: sp.Basic, bound: tuple, reqs: list[Requirement], refused: list[str]) -> None:
    if isinstance(e, sp.Limit):
        expr, z, z0 = e.args[0], e.args[1], e.args[2]
        params = (expr.free_symbols - {z}) | sp.sympify(z0).free_symbols
        if params:
            names = ", ".join(sorted(map(str, params)))
            refused.append(
                f"{_text(e)} has the parameter(s) {names}: SymPy takes a limit for generic "
                "parameter values (Limit(x**s, s, 0, '+') is 1, but 0 at x = 0); substitute the "
                "parameter's cases and take each limit, or compare the limits' values."
            )
        return  # a limit is defined where its expression is not: that is its use
    if isinstance(e, sp.Sum | sp.Product):
        _visit_sum(e, bound, reqs, refused)
        return
    if isinstance(e, sp.Integral):
        refused.append(f"{_text(e)}: prove_equal does not check where an integral exists.")
        return
    if e in (sp.nan, sp.zoo) or isinstance(e, sp.AccumBounds):
        refused.append(f"a side contains {_text(e)}: it is undefined as built.")
        return
    if isinstance(e, sp.Pow):
        _visit_pow(e, bound, reqs, refused)
    elif isinstance(e, sp.log):
        reqs.append(Requirement(e.args[0], "nonzero", f"{_text(e)} (log 0)", bound, "log"))
    elif isinstance(e, sp.Function) and type(e) in POLES:
        pole = POLES[type(e)](e.args[0], evaluate=False)  # as written: SymPy may fail on 0 + 0
        reqs.append(Requirement(pole, "nonzero", f"{_text(e)} (a pole)", bound, "pole"))
    elif isinstance(e, REAL_ONLY):
        for a in e.args:
            if isinstance(a, sp.Expr) and _fact(a, "is_real") is not True:
                why = f"{_text(e)} (defined for a real argument only)"
                reqs.append(Requirement(a, "real", why, bound, "real"))
    elif isinstance(e, sp.Piecewise):
        if e.args[-1].cond != sp.true:
            refused.append(
                f"{_text(e)} has no default branch (undefined where no condition holds); "
                "end it with (value, True)."
            )
    elif isinstance(e, sp.Function) and not isinstance(e, (*TOTAL, sp.core.function.AppliedUndef)):
        refused.append(
            f"prove_equal does not know where {type(e).__name__} is defined; rewrite it with "
            "exp, log, powers, trigonometric functions, Hinge or Piecewise."
        )
    for a in e.args:
        if isinstance(a, sp.Basic):
            _visit(a, bound, reqs, refused)


def _text(e: sp.Basic) -> str:
    """``sp.sstr(e)``, with the terms as built where ordering them fails (the printer orders an
    unevaluated sum's terms numerically: ``cot(0)`` in one raised ``ZeroDivisionError``)."""
    try:
        return sp.sstr(e)
    except (ArithmeticError, KeyError, TypeError, ValueError, RecursionError):
        return sp.sstr(e, order="none")


def _fact(e: sp.Expr, name: str) -> bool | None:
    """``e.is_zero`` and the like, ``None`` (unknown) where SymPy raises deciding it (``cot(0)``
    evaluated numerically at its pole)."""
    try:
        return getattr(e, name)
    except (ArithmeticError, TypeError, ValueError, RecursionError):
        return None


def _visit_pow(e: sp.Pow, bound: tuple, reqs: list, refused: list) -> None:
    base, ex = e.args
    if _fact(ex, "is_nonnegative"):
        return
    if base.is_number:
        if _fact(base, "is_zero"):
            refused.append(f"{_text(e)}: 0 to a power that may be negative.")
        elif _fact(base, "is_zero") is None:
            reqs.append(Requirement(base, "nonzero", f"divides by {_text(base)}", bound))
        return
    what = "divides by" if ex.is_negative else f"{_text(e)}, an exponent that may be < 0:"
    reqs.append(Requirement(base, "nonzero", f"{what} {_text(base)}", bound))


def _visit_sum(e: sp.Expr, bound: tuple, reqs: list, refused: list) -> None:
    inner = bound
    for limit in e.limits:
        if len(limit) != 3:
            refused.append(f"{_text(e)}: give each index its range, (k, low, high).")
            return
        k, lo, hi = limit
        if sp.oo in (hi, -lo) or lo.has(sp.oo, -sp.oo) or hi.has(sp.oo, -sp.oo):
            refused.append(f"{_text(e)} runs to infinity; prove_equal does not check convergence.")
            return
        for end in (lo, hi):
            _visit(end, inner, reqs, refused)
        count = hi - lo + 1
        if _fact(count, "is_nonnegative") is not True:
            reqs.append(
                Requirement(
                    count,
                    "nonnegative",
                    f"{_text(e)}: the range {_text(lo)}..{_text(hi)} (an empty sum at "
                    "most; SymPy reverses a shorter one)",
                    inner,
                    "range",
                )
            )
        inner = (*inner, (k, lo, hi))
    _visit(e.function, inner, reqs, refused)


def requirements(expr: sp.Basic) -> list[Requirement]:
    """What must hold for ``expr`` (built as written) to be defined, one :class:`Requirement`
    per place it may not be. Quantities known from the assumptions are kept: see
    :func:`~dmlbook.symbolic.conditions.unguarded` for those that remain after ``where``."""
    reqs: list[Requirement] = []
    _visit(sp.sympify(expr), (), reqs, [])
    return _unique(reqs)


def refusals(expr: sp.Basic) -> list[str]:
    """Why ``expr`` cannot be part of a proof whatever the conditions (empty when it can)."""
    refused: list[str] = []
    _visit(sp.sympify(expr), (), [], refused)
    return list(dict.fromkeys(refused))


def _unique(reqs: Sequence[Requirement]) -> list[Requirement]:
    seen: dict[tuple, Requirement] = {}
    for r in reqs:
        seen.setdefault((r.quantity, r.kind, r.bound), r)
    return list(seen.values())

"""Named traps for ``prove_equal``: statements that are false (or undefined) somewhere the symbols'
assumptions allow. A growing file: every false statement a reviewer finds is added here, with the
point where it fails and, where one exists, the condition under which it is true.

Each :class:`Trap` is checked by ``tests/symbolic/test_domain.py``: ``prove_equal`` must refuse
it without ``where``; with ``where`` (when given) it must be proved; and at ``bad`` one side is
undefined or the two differ (so the refusal is right, computed by substitution, not by the code
under test).

Pre-built sides: SymPy cancels while it builds (``s*x/s`` *is* ``x``), so a pre-built
``s*x/s == x`` would reach ``prove_equal`` as ``x == x``. ``prove_equal`` therefore refuses every
pre-built SymPy side (``TypeError``, saying to pass ``lambda: ...``); the traps of
:data:`PREBUILT` check that refusal, and the statement as typed is the callable trap of the
same name in :data:`TRAPS` (its pre-built sides, a bare symbol or a ``Sum`` SymPy keeps as
typed, are passed as callables returning them by the test).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import sympy as sp

from dmlbook.symbolic import Hinge, unit_sphere_distance

s, x, y = sp.symbols("s x y", real=True)
n, m = sp.symbols("n m", integer=True)
k = sp.Symbol("k", integer=True)


@dataclass(frozen=True)
class Trap:
    """A statement ``a == b`` false or undefined at ``bad``; true under ``where`` if given."""

    name: str
    a: Callable[[], sp.Basic] | sp.Basic
    b: Callable[[], sp.Basic] | sp.Basic
    bad: dict
    where: list | None = None
    origin: str = "issue 38"
    extra: dict = field(default_factory=dict)


TRAPS = [
    # issue 38: a power whose exponent may be negative divides by its base
    Trap("s**x * s**-x == 1", lambda: s**x * s ** (-x), 1, {s: 0, x: 1}, [sp.Ne(s, 0)]),
    Trap("s**n * s**-n == 1 (integer n)", lambda: s**n * s ** (-n), 1, {s: 0, n: 1}, [sp.Ne(s, 0)]),
    Trap("s**x * s**-x == 1, unevaluated", sp.Mul(s**x, sp.Pow(s, -x, evaluate=False),
                                                   evaluate=False), 1, {s: 0, x: 1}, [s > 0]),
    # issue 38: singularities that are not negative powers
    Trap("exp(log(s)) == s", lambda: sp.exp(sp.log(s)), s, {s: 0}, [sp.Ne(s, 0)]),
    Trap("log(s) - log(s) == 0", lambda: sp.log(s) - sp.log(s), 0, {s: 0}, [s > 0]),
    Trap("cot(s)*tan(s) == 1", lambda: sp.cot(s) * sp.tan(s), 1, {s: 0},
         [sp.Ne(sp.sin(s), 0), sp.Ne(sp.cos(s), 0)]),
    Trap("cot(s)*tan(s) == 1, pre-built", sp.cot(s) * sp.tan(s), 1, {s: sp.pi / 2},
         [sp.Ne(sp.sin(s), 0), sp.Ne(sp.cos(s), 0)]),
    # issue 38: sums whose range may be reversed (SymPy's convention, not the empty sum)
    Trap("Sum(1, (k, 1, m)) == m", sp.Sum(1, (k, 1, m)), m, {m: -2}, [m >= 0]),
    Trap("Sum(2**k, (k, 0, m)) == 2**(m+1) - 1", sp.Sum(2**k, (k, 0, m)), 2 ** (m + 1) - 1,
         {m: -3}, [m >= -1]),
    Trap("Sum(1/k, (k, 0, m)) == harmonic(m) (a term undefined at k = 0)",
         lambda: sp.Sum(1 / k, (k, 0, m)), lambda: sp.Sum(1 / k, (k, 0, m)), {m: 1}, None),
    # issue 38: a limit with a parameter is taken for generic values of it
    Trap("Limit(x**s, s, 0, '+') == 1", sp.Limit(x**s, s, 0, "+"), 1, {x: 0}, None),
    # issue 27 and 38: a cancelled factor that vanishes, as typed
    Trap("s*x/s == x", lambda: s * x / s, x, {s: 0}, [sp.Ne(s, 0)], "issue 38"),
    Trap("(exp(s)-1)/(exp(s)-1) == 1", lambda: (sp.exp(s) - 1) / (sp.exp(s) - 1), 1, {s: 0},
         [sp.Ne(sp.exp(s) - 1, 0)], "issue 27"),
    Trap("Hinge(s)*x/Hinge(s) == x", lambda: Hinge(s) * x / Hinge(s), x, {s: -1}, [s > 0],
         "issue 27"),
    Trap("D/D**2 == 1/D (D the unit-sphere distance)",
         unit_sphere_distance(s) / unit_sphere_distance(s) ** 2, 1 / unit_sphere_distance(s),
         {s: 1}, [s < 1], "issue 27"),
    # a pole inside a cancelled ratio; log rules that hold only for s > 0
    Trap("tan(s)/tan(s) == 1", lambda: sp.tan(s) / sp.tan(s), 1, {s: 0},
         [sp.Ne(sp.tan(s), 0), sp.Ne(sp.cos(s), 0)], "issue 38 (h3)"),
    Trap("log(s**2) - 2*log(s) == 0 at s > 0 only", lambda: sp.log(s**2) - 2 * sp.log(s), 0,
         {s: -1}, None, "issue 17 (log rules)"),
]  # fmt: skip

#: Issue 38's pre-built traps: what the statement as typed becomes before ``prove_equal`` is
#: called; passed so, it must be refused (a ``TypeError`` that says how to pass the side).
PREBUILT = {
    "s*x/s == x": (s * x / s, x),
    "(exp(s)-1)/(exp(s)-1) == 1": ((sp.exp(s) - 1) / (sp.exp(s) - 1), sp.S.One),
    "Hinge(s)*x/Hinge(s) == x": (Hinge(s) * x / Hinge(s), x),
    "s**x * s**-x == 1": (s**x * s ** (-x), sp.S.One),
    "exp(log(s)) == s": (sp.exp(sp.log(s)), s),
    "log(s) - log(s) == 0": (sp.log(s) - sp.log(s), sp.S.Zero),
}

# --------------------------------------------------------------------------------------------
# Issue 38, the hole left by callables: a side that *reads* an expression built earlier. SymPy
# cancelled the factor when the variable was assigned, so the callable returns the statement
# without it; each was proved True before prove_equal refused such reads (TypeError). The
# variables are module globals, as in a notebook cell.

y_plus_1 = s * x * (y + 1) / s  # is x*(y + 1): s cancelled, undefined at s = 0
ratio = (sp.exp(s) - 1) * x * y / (sp.exp(s) - 1)  # is x*y, undefined at s = 0
one = (sp.exp(s) - 1) / (sp.exp(s) - 1)  # is the number 1
weights = {s: Hinge(s) * (x + 1) / Hinge(s)}  # is {s: x + 1}, undefined at s <= 0
slope_of = sp.diff(s * x**2 / s, x)  # 2*x: the derivative of a definition that divides by s


def _helper():
    """A helper of the same module that returns what was built earlier."""
    return y_plus_1


class _Holder:
    """An object whose attribute holds what was built earlier."""

    def __init__(self):
        self.w = ratio


holder = _Holder()

#: name -> (side a as a callable that reads a pre-built value, side b as typed, bad point);
#: each was proved before (a false proof); now each must be refused with a TypeError.
PREBUILT_READS = {
    "lambda: e, e = s*x*(y+1)/s": (lambda: y_plus_1, lambda: x * (y + 1), {s: 0, x: 1, y: 1}),
    "lambda: e + 0 (an operation on it)": (lambda: y_plus_1 + 0, lambda: x * (y + 1),
                                            {s: 0, x: 1, y: 1}),
    "lambda: e.subs(y, 1) (rebuilt by subs)": (lambda: y_plus_1.subs(y, 1), lambda: 2 * x,
                                                {s: 0, x: 1}),
    "lambda: w[s], w = {s: Hinge(s)*(x+1)/Hinge(s)}": (lambda: weights[s], lambda: x + 1,
                                                        {s: -1, x: 1}),
    "lambda: [w[t] for t in (s,)]": (lambda: [weights[t] for t in (s,)], lambda: [x + 1],
                                      {s: -1, x: 1}),
    "lambda: (exp(s)-1)*x*y/(exp(s)-1) read": (lambda: ratio, lambda: x * y, {s: 0, x: 1, y: 1}),
    "lambda: one, one = (exp(s)-1)/(exp(s)-1)": (lambda: one, 1, {s: 0}),
    "lambda: helper() (a same-module function)": (lambda: _helper(), lambda: x * (y + 1),
                                                   {s: 0, x: 1, y: 1}),
    "lambda: holder.w (an object's attribute)": (lambda: holder.w, lambda: x * y,
                                                  {s: 0, x: 1, y: 1}),
    "lambda: d, d = diff(s*x**2/s, x)": (lambda: slope_of, lambda: 2 * x, {s: 0, x: 1}),
}  # fmt: skip

#: A variable bound to an expression that SymPy reduced to a *bare symbol* is that very symbol
#: (``s*x/s`` is ``x``): no check of objects can tell ``lambda: e`` from ``lambda: x``.
bare = s * x / s
KNOWN_HOLE = (lambda: bare, lambda: x, {s: 0, x: 1})

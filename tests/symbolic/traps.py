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

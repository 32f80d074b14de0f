"""The value of an expression at a point, computed the way a reader would: substitute, then
evaluate from the leaves up, so that ``s*x/s`` at ``s = 0`` is ``0 * x / 0``, undefined.

An independent reference for the soundness tests of ``prove_equal`` (``test_domain.py``,
``test_proofs_soundness.py``): it shares no code with :mod:`dmlbook.symbolic.domain`. A sum
``Sum(f, (k, a, b))`` is the sum over the integers ``a..b`` (empty when ``b < a``: the
statement's meaning, not SymPy's reversed-range convention); a limit is taken after its
parameters are substituted.
"""

from __future__ import annotations

import sympy as sp

from dmlbook.symbolic import Hinge, HingeActive

#: Functions of a real argument only (written here, not imported from the module under test).
REAL_ONLY = (Hinge, HingeActive, sp.Max, sp.Min, sp.Heaviside, sp.floor, sp.ceiling)

#: Equal within this (absolute, after 40-digit evaluation) counts as equal.
TOLERANCE = sp.Float(1e-25)


def value_at(expr: sp.Basic, point: dict) -> sp.Expr | None:
    """``expr`` at ``point`` ({symbol: exact number}); ``None`` where it is undefined."""
    try:
        v = _value(sp.sympify(expr), {key: sp.sympify(val) for key, val in point.items()})
    except (ValueError, TypeError, ZeroDivisionError, NotImplementedError, RecursionError):
        return None
    if v is None or not isinstance(v, sp.Expr) or v.free_symbols:
        return None
    if v.has(sp.nan, sp.zoo, sp.oo, -sp.oo, sp.AccumBounds):
        return None
    return v


def _value(e: sp.Basic, point: dict) -> sp.Basic | None:
    if e in point:
        return point[e]
    if not e.args:
        return e
    if isinstance(e, sp.Sum | sp.Product):
        return _series(e, point)
    if isinstance(e, sp.Limit):
        body, z, z0, direction = e.args
        body = body.xreplace({v: point[v] for v in body.free_symbols - {z} if v in point})
        return sp.limit(body, z, _value(z0, point), str(direction))
    args = [_value(a, point) for a in e.args]
    if any(a is None for a in args):
        return None
    if any(isinstance(a, sp.Expr) and a.has(sp.nan, sp.zoo) for a in args):
        return None  # undefined below: 0 * (1/0) must not become 0
    v = e.func(*args)
    if isinstance(e, REAL_ONLY) and any(a.is_real is not True for a in args):
        return None  # max(z, 0) of a complex z has no value
    return v


def _series(e: sp.Expr, point: dict) -> sp.Basic | None:
    (k, lo, hi), *rest = e.limits
    if rest:
        raise NotImplementedError("one index per sum in these tests")
    lo, hi = _value(lo, point), _value(hi, point)
    if not (lo.is_integer and hi.is_integer):
        return None
    terms = [_value(e.function, {**point, k: sp.Integer(i)}) for i in range(int(lo), int(hi) + 1)]
    if any(t is None or t.has(sp.nan, sp.zoo) for t in terms):
        return None
    return sp.Add(*terms) if isinstance(e, sp.Sum) else sp.Mul(*terms)


def differ(a: sp.Expr, b: sp.Expr) -> bool:
    """Whether two defined values differ (exactly where SymPy can tell, else to 40 digits)."""
    d = sp.simplify(a - b)
    if d == 0:
        return False
    return bool(abs(sp.N(d, 40)) > TOLERANCE)

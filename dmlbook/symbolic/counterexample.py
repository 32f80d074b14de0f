"""Evidence that two expressions differ: a point where they do, with both values.

:func:`~dmlbook.symbolic.proofs.prove_equal` returning ``False`` only says that no proof was
found. When the book states that two forms *differ* (a misprint, a wrong reading of a paper),
the evidence is a point: :func:`counterexample` draws points with Rational coordinates,
evaluates both sides there exactly (SymPy numbers such as ``exp(1/2)``) and returns the first
point where they differ, with ``exact=True`` when the difference is a nonzero Rational and
otherwise after checking it numerically at ``digits`` significant digits.

Used in Chapters 2, 3, 5 and 10 next to every "differs" claim; tested in
``tests/symbolic/test_counterexample.py``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .hinge import Hinge, HingeActive
from .proofs import _entrywise, _exact_pairs
from .sides import Derived, Prebuilt
from .symbols import default_range

__all__ = ["Counterexample", "counterexample"]

Bound = int | float | str | sp.Expr


@dataclass(frozen=True)
class Counterexample:
    """A point where two expressions differ: the evidence behind "these forms are not equal".

    Attributes
    ----------
    point : dict of Symbol to Rational
        The coordinates, all exact.
    lhs, rhs : Expr
        The exact values of the two sides at ``point`` (SymPy numbers, e.g. ``exp(1/2)/2``).
    exact : bool
        ``True`` when ``lhs - rhs`` simplifies to a nonzero Rational (an exact certificate);
        ``False`` when it was found nonzero numerically (see :attr:`numeric_difference`).
    numeric_difference : Float
        ``lhs - rhs`` evaluated to the requested number of significant digits.
    entry : hashable or None
        Which entry differs when matrices, sequences (index) or dicts (key) were compared.
    """

    point: dict[sp.Symbol, sp.Expr]
    lhs: sp.Expr
    rhs: sp.Expr
    exact: bool
    numeric_difference: sp.Float
    entry: Hashable | None = None

    @property
    def difference(self) -> sp.Expr:
        """The exact difference ``lhs - rhs`` at :attr:`point`."""
        return self.lhs - self.rhs

    def __str__(self) -> str:
        """One line: the point, and each value exact if Rational, else to 6 digits."""

        def show(v: sp.Expr) -> str:
            return f"= {sp.sstr(v)}" if v.is_Rational else f"~ {sp.sstr(sp.N(v, 6))}"

        at = ", ".join(f"{s} = {v}" for s, v in self.point.items())
        where = f"entry {self.entry}: " if self.entry is not None else ""
        how = "exactly" if self.exact else "numerically"
        return (
            f"{where}at {at}: a {show(self.lhs)}, b {show(self.rhs)}, "
            f"a - b {show(self.difference) if self.exact else show(self.numeric_difference)} "
            f"(nonzero {how})"
        )


def _rational(x: Bound) -> sp.Expr:
    """A bound as an exact number: ``0.1`` means the decimal 1/10, not its binary rounding."""
    if isinstance(x, float):
        return sp.Rational(repr(x))
    return sp.nsimplify(sp.sympify(x), rational=True)


def _draw(
    symbol: sp.Symbol,
    ranges: Mapping[sp.Symbol, tuple[Bound, Bound]],
    rng: np.random.Generator,
    denominator: int,
) -> sp.Expr:
    if symbol in ranges:
        lo, hi = (_rational(x) for x in ranges[symbol])
    elif symbol.is_integer:
        raise ValueError(
            f"give a range for the integer symbol {symbol} in ranges=, e.g. ranges={{{symbol}: (1, 4)}}."
        )
    else:
        lo, hi = default_range(symbol)
    if symbol.is_integer:
        return sp.Integer(int(rng.integers(int(lo), int(hi) + 1)))
    # an interior point of [lo, hi] with a small denominator: lo + (hi - lo) m / d, 0 < m < d
    return lo + (hi - lo) * sp.Rational(int(rng.integers(1, denominator)), denominator)


def _value(e: sp.Expr, point: Mapping[sp.Symbol, sp.Expr]) -> sp.Expr:
    """``e`` at ``point``, exactly, with hinges and their indicators decided."""
    v = e.subs(point).doit()
    v = v.replace(lambda x: isinstance(x, Hinge | HingeActive), lambda x: x.rewrite(sp.Piecewise))
    return sp.piecewise_fold(v)


def _plain_symbols(a: sp.Expr, b: sp.Expr) -> list[sp.Symbol]:
    if a.has(sp.Indexed) or b.has(sp.Indexed):
        raise ValueError(
            "counterexample needs plain symbols; substitute the pair counts of a general-n form "
            "(e.g. expr.subs({P: 3}).doit()) so that no indexed symbol s[k] is left."
        )
    return sorted(a.free_symbols | b.free_symbols, key=sp.default_sort_key)


def _differs(va: sp.Expr, vb: sp.Expr, digits: int) -> tuple[bool, bool, sp.Float] | None:
    """``(differs, exact, numeric a - b)``, or ``None`` where a side is undefined or not real."""
    for v in (va, vb):
        if not v.is_number:
            raise ValueError(
                f"a side did not evaluate to a number at the point ({sp.sstr(v)}); "
                "counterexample handles expressions of plain symbols (no unknown functions)."
            )
    na, nb = sp.N(va, digits), sp.N(vb, digits)
    if not all(n.is_real and n.is_finite for n in (na, nb)):
        return None
    diff = va - vb
    if diff.is_Rational:  # decided exactly, however small
        return diff != 0, True, sp.N(diff, digits)
    d = sp.N(diff, digits)
    if not d.is_real:
        return None
    scale = max(1, abs(float(na)), abs(float(nb)))
    if abs(d) <= sp.Float(10) ** (-(digits // 2)) * scale:
        return False, False, d
    return True, sp.simplify(diff).is_Rational, d


def counterexample(
    a: sp.Basic,
    b: sp.Basic,
    *,
    ranges: Mapping[sp.Symbol, tuple[Bound, Bound]] | None = None,
    tries: int = 64,
    seed: int = 0,
    denominator: int = 8,
    digits: int = 30,
) -> Counterexample | None:
    """A point where ``a`` and ``b`` differ, with both exact values, or ``None`` if none found.

    This is the evidence for "two forms differ" that ``prove_equal(a, b) is False`` is not.
    Points have Rational coordinates ``lo + (hi - lo) m / denominator``, strictly inside each
    symbol's range: inside its assumptions (:func:`~dmlbook.symbolic.symbols.default_range`: positive symbols in
    ``[1/10, 3]``, non-negative ones in ``[0, 3]``, other real symbols in ``[-1, 1]``, a cosine
    similarity), integer symbols only from ``ranges``. Both sides are evaluated exactly
    there; points where a side is undefined or not real are skipped.

    Parameters
    ----------
    a, b : Expr, Matrix, sequence or dict
        The two sides as values (no ``Float``: write decimals as ``sympy.Rational('0.1')``),
        compared entry by entry. A point is evaluated, so no cancellation hides anything here:
        pass ``w.value`` of a side :func:`~dmlbook.symbolic.sides.derived` or defined for
        :func:`~dmlbook.symbolic.proofs.prove_equal`, ``f()`` of a callable.
    ranges : mapping, optional
        ``{symbol: (low, high)}``: where to look, e.g. a region where a hinge is active.
        ``low == high`` holds a symbol fixed. Float bounds are read as decimals (``0.1`` is
        1/10).
    tries : int
        Number of random points per entry.
    seed : int
        Seed of the NumPy generator that draws the points.
    denominator : int
        Denominator of the Rational grid (larger: finer points, longer exact values).
    digits : int
        Significant digits of the numeric check when the difference is not a Rational; a
        difference counts when it exceeds ``10**-(digits // 2)`` times ``max(1, |a|, |b|)``.

    Returns
    -------
    Counterexample or None
        The first point found (in entry order). ``None`` means no differing point was found,
        which is not a proof of equality.
    """
    for name, side in (("a", a), ("b", b)):
        if isinstance(side, Derived | Prebuilt) or (
            callable(side) and not isinstance(side, sp.Basic)
        ):
            raise TypeError(
                f"counterexample: side {name} is a {type(side).__name__}, not a value; it "
                "evaluates both sides at points, so pass the values: w.value for a side made "
                "with sy.derived or sy.define, f() for a callable."
            )
    if tries < 1 or denominator < 2:
        raise ValueError(f"tries must be >= 1 and denominator >= 2, got {tries}, {denominator}.")
    pairs = _exact_pairs(a, b, "counterexample")
    keys: list[Hashable | None]
    if isinstance(a, Mapping):
        keys = list(a)
    elif len(pairs) > 1 or isinstance(a, sp.MatrixBase | list | tuple):
        keys = list(range(len(_entrywise(a, b))))
    else:
        keys = [None]
    ranges = dict(ranges or {})
    rng = np.random.default_rng(seed)
    for key, (x, y) in zip(keys, pairs, strict=True):
        symbols = _plain_symbols(x, y)
        for _ in range(tries):
            point = {s: _draw(s, ranges, rng, denominator) for s in symbols}
            va, vb = _value(x, point), _value(y, point)
            verdict = _differs(va, vb, digits)
            if verdict is not None and verdict[0]:
                return Counterexample(point, va, vb, verdict[1], verdict[2], key)
    return None

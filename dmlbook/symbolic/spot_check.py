"""``spot_check_equal``: both sides of an identity at random points. Evidence, never a proof.

Two different expressions can agree at every sampled point, so nothing here may be quoted as a
proof (that is :func:`~dmlbook.symbolic.proofs.prove_equal`). It shows that an unproved identity
is at least numerically plausible, or that a wrong closed form fails.
Tests: ``tests/symbolic/test_spot_check.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .symbols import default_range

__all__ = ["SpotCheck", "spot_check_equal"]


@dataclass(frozen=True)
class SpotCheck:
    """The outcome of :func:`spot_check_equal`: numeric evidence, not a proof.

    Attributes
    ----------
    agrees : bool
        Both sides agree within tolerance at every sampled point.
    max_abs_diff : float
        Largest ``|a - b|`` over the samples.
    samples : int
        Number of random points evaluated.
    """

    agrees: bool
    max_abs_diff: float
    samples: int

    def __bool__(self) -> bool:
        return self.agrees


def numpy_function(args: list[sp.Symbol], expr: sp.Expr) -> Callable[..., np.ndarray]:
    """``expr`` as a NumPy function of ``args`` (``Hinge`` as ``max(x, 0)``)."""
    names = {"Hinge": lambda x: np.maximum(x, 0.0)}
    return sp.lambdify(args, expr, modules=[names, "numpy"])


def spot_check_equal(
    a: sp.Expr,
    b: sp.Expr,
    *,
    n: int = 64,
    seed: int = 0,
    ranges: Mapping[sp.Symbol, tuple[float, float]] | None = None,
    rtol: float = 1e-9,
) -> SpotCheck:
    """Compare ``a`` and ``b`` at ``n`` random points. A spot check, **not a proof**.

    Use it to see whether an unproved identity is even numerically plausible, or to show a
    wrong closed form failing. Free symbols are drawn uniformly: positive symbols from
    ``[0.1, 3]``, other real symbols from ``[-1, 1]`` (the range of a cosine similarity),
    unless ``ranges`` says otherwise.

    Parameters
    ----------
    a, b : Expr
        Scalar expressions whose free symbols are plain ``Symbol``s (substitute ``P``, ``N``
        and call ``doit()`` first for a general-``n`` form).
    n : int
        Number of sample points.
    seed : int
        Seed of the NumPy generator that draws them.
    ranges : mapping, optional
        ``{symbol: (low, high)}`` overriding the default range of a symbol.
    rtol : float
        Tolerance relative to ``max(1, |a|)`` at each point. A point where either side is not
        finite counts as a disagreement.
    """
    d_free = sp.sympify(a).free_symbols | sp.sympify(b).free_symbols
    bad = [s for s in d_free if not isinstance(s, sp.Symbol)]
    if bad or sp.sympify(a).has(sp.Indexed) or sp.sympify(b).has(sp.Indexed):
        raise ValueError(
            "spot_check_equal needs plain symbols; substitute the pair counts of a general-n "
            "form (e.g. expr.subs({P: 3}).doit()) and replace indexed symbols first."
        )
    ranges = dict(ranges or {})
    symbols = sorted(d_free, key=sp.default_sort_key)
    rng = np.random.default_rng(seed)
    cols = []
    for s in symbols:
        if s in ranges:
            lo, hi = ranges[s]
        elif s.is_integer:
            raise ValueError(f"give a range for the integer symbol {s} in ranges=.")
        else:
            lo, hi = (float(x) for x in default_range(s))
        cols.append(rng.uniform(lo, hi, size=n))
    with np.errstate(all="ignore"):
        fa = numpy_function(symbols, a)(*cols)
        fb = numpy_function(symbols, b)(*cols)
    fa = np.broadcast_to(np.asarray(fa, dtype=float), (n,))
    fb = np.broadcast_to(np.asarray(fb, dtype=float), (n,))
    diff = np.abs(fa - fb)
    ok = bool(np.all(diff <= rtol * np.maximum(1.0, np.abs(fa))))
    return SpotCheck(agrees=ok, max_abs_diff=float(diff.max()), samples=n)

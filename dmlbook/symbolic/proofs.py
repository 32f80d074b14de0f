"""Exact equality: ``prove_equal`` and friends (``pair_weights`` is in :mod:`.differentiate`).

``prove_equal`` is the only function here that may be quoted as a proof. It returns ``True`` only
when a chain of SymPy rewrites reduces ``a - b`` to the exact number ``0``; every rewrite it uses
is an identity for the declared assumptions (nothing is forced). When it fails it prints the
simplest residual it reached and returns ``False``: SymPy could not decide, which is not the
same as ``a != b``. It refuses ``Float`` numbers, which are rounded when they are made, and a
statement with a point in the symbols' domain where a side may be undefined (a division, a
power whose exponent may be negative, ``log``, a pole of ``tan``..., a sum whose range may be
reversed; :mod:`.domain`) unless the condition that excludes it is stated (``where=``,
:mod:`.conditions`); a limit with parameters, an infinite sum and an unknown function it
refuses whatever the condition.

The statement is the one typed, so ``prove_equal`` takes each side as written
(:mod:`.sides`): a zero-argument callable (``lambda: s*x/s``), which it builds without SymPy's
automatic simplification, so that every division in it is checked, or a Python integer. SymPy
simplifies while an expression is being built (``s*x/s`` *is* ``x``, ``log(s) - log(s)`` is
``0``, ``exp(log(s))`` is ``s``), so an expression built before the call carries no trace of a
factor it cancelled: a side built before the call is refused (``TypeError``), and so is a
callable that *reads* one (``lambda: w4`` for a ``w4`` computed earlier) or returns one. A
value SymPy derives is passed with its definition, ``derived(sp.diff, lambda: L, s)``: the
definition is built as typed and the conditions where it is undefined are carried to the proof.
``prebuilt(lambda: w4)`` is the explicit, unchecked form (a statement about the value as SymPy
built it); ``derived(value)``, the earlier unchecked form, is refused.

:func:`~dmlbook.symbolic.counterexample.counterexample` is the evidence for ``a != b``: a point where the two sides differ, with
both values (exact with Rationals where SymPy can evaluate them so).

:func:`~dmlbook.symbolic.spot_check.spot_check_equal` (its own module) evaluates both sides at
random points: numeric evidence, never a proof.
Tests: ``tests/symbolic/test_proofs.py``; soundness: ``tests/symbolic/test_proofs_soundness.py``
(a property test), ``tests/symbolic/test_domain.py`` and ``tests/symbolic/test_sides.py`` (the
named traps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction

import numpy as np
import sympy as sp

from .conditions import evaluated, unmet, unmet_requirements
from .differentiate import pair_weights
from .domain import _text, refusals
from .sides import Derived, Prebuilt, define, derived, prebuilt, take_side
from .spot_check import numpy_function
from .symbols import AnchorSimilarities, default_range

__all__ = [
    "define",
    "derived",
    "gpw_identity",
    "pair_weights",
    "prebuilt",
    "prove_equal",
    "residual",
]

# --------------------------------------------------------------------------------------------
# prove_equal


def _expand_exp_args(e: sp.Expr) -> sp.Expr:
    """Expand every exponent and merge products of exponentials: ``e^a e^b -> e^(a+b)``."""
    e = e.replace(lambda x: isinstance(x, sp.exp), lambda x: sp.exp(sp.expand(x.args[0])))
    return sp.powsimp(e)


def _rewrites() -> list[tuple[str, Callable[[sp.Expr], sp.Expr]]]:
    """Targeted rewrites tried after ``simplify``; each is an identity under the assumptions."""
    return [
        ("piecewise_fold", lambda e: sp.simplify(sp.piecewise_fold(e))),
        ("hinge as Piecewise", lambda e: sp.simplify(sp.piecewise_fold(e.rewrite(sp.Piecewise)))),
        ("doit", lambda e: sp.simplify(e.doit())),
        ("together/cancel", lambda e: sp.cancel(sp.together(sp.expand(e)))),
        ("exponents expanded", lambda e: sp.cancel(sp.together(_expand_exp_args(sp.expand(e))))),
        ("expand_log", lambda e: sp.simplify(sp.expand_log(e))),
        ("logcombine", lambda e: sp.simplify(sp.logcombine(e))),
        ("powsimp", lambda e: sp.simplify(sp.powsimp(sp.expand_power_exp(sp.expand(e))))),
        ("rewrite(exp)", lambda e: sp.simplify(e.rewrite(sp.exp))),
        ("factor_terms(expand)", lambda e: sp.simplify(sp.factor_terms(sp.expand(e)))),
        ("radsimp", lambda e: sp.simplify(sp.radsimp(sp.together(e)))),
    ]


def _candidates(d: sp.Expr) -> Iterator[sp.Expr]:
    yield d
    s = sp.simplify(d)
    yield s
    for _, rewrite in _rewrites():
        for start in (s, d) if s != d else (s,):
            try:
                yield rewrite(start)
            except (
                ArithmeticError,
                TypeError,
                ValueError,
                NotImplementedError,
                RecursionError,
                sp.PolynomialError,
            ):
                continue


def _is_exact_zero(e: sp.Basic) -> bool:
    return e == sp.S.Zero or (isinstance(e, sp.MatrixBase) and all(x == sp.S.Zero for x in e))


def _entrywise(a: sp.Basic, b: sp.Basic) -> list[tuple[sp.Expr, sp.Expr]]:
    if isinstance(a, sp.MatrixBase) or isinstance(b, sp.MatrixBase):
        A, B = sp.Matrix(a), sp.Matrix(b)
        if A.shape != B.shape:
            raise ValueError(f"cannot compare matrices of shapes {A.shape} and {B.shape}.")
        return list(zip(A, B, strict=True))
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            raise ValueError(
                "compare two dicts with the same keys (e.g. two pair_weights results)."
            )
        return [(a[k], b[k]) for k in a]
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        if len(a) != len(b):
            raise ValueError(f"cannot compare sequences of lengths {len(a)} and {len(b)}.")
        return list(zip(a, b, strict=True))
    return [(a, b)]


def _exact_pairs(a: sp.Basic, b: sp.Basic, caller: str) -> list[tuple[sp.Expr, sp.Expr]]:
    """The entry pairs of ``a`` and ``b``, refusing an empty comparison and any ``Float``.

    A ``Float`` is rounded when it is made (``1 + Float(1e-30)`` is exactly ``1.0``, and
    ``Float('1.0000001', 3)`` is ``1.00``), so an exact comparison of it could prove a
    statement about numbers the user never wrote.
    """
    pairs = [(sp.sympify(x), sp.sympify(y)) for x, y in _entrywise(a, b)]
    if not pairs:
        raise ValueError(
            f"{caller} got nothing to compare (both sides are empty); pass the expressions, "
            "or the non-empty matrices, sequences or dicts, whose equality you want."
        )
    for n, (x, y) in enumerate(pairs):
        for side, e in (("a", x), ("b", y)):
            floats = sorted(e.atoms(sp.Float), key=sp.default_sort_key)
            if floats:
                where = f" entry {n} of" if len(pairs) > 1 else ""
                raise ValueError(
                    f"{caller} compares exactly and refuses floating-point numbers, but"
                    f"{where} side {side} contains the Float {floats[0]}. A Float is rounded "
                    "when it is made (1 + Float(1e-30) is already exactly 1.0), so an exact "
                    "proof about it could be false for the number you meant. Write numbers as "
                    "Rationals: sympy.Rational('1.0000001'), sympy.Rational(1, 10**30), or "
                    "sympy.nsimplify(expr, rational=True) for an expression built from "
                    "decimals (it cannot restore digits a Float has already lost)."
                )
    return pairs


def _clearly_different(x: sp.Expr, y: sp.Expr) -> bool:
    """Whether ``x`` and ``y`` differ far beyond rounding at some random point.

    Then no exact rewrite of ``x - y`` can reach 0, and the search may stop. This is used only
    to give up early; it never contributes to a proof.
    """
    try:
        d = x - y
        if d.has(sp.Indexed, sp.Sum, sp.Subs, sp.Derivative, sp.core.function.AppliedUndef):
            return False
        symbols = sorted(d.free_symbols, key=sp.default_sort_key)
        if any(not isinstance(v, sp.Symbol) or v.is_integer for v in symbols):
            return False
        rng = np.random.default_rng(12345)
        cols = [rng.uniform(*(float(x) for x in default_range(v)), 8) for v in symbols]
        with np.errstate(all="ignore"):
            fx, fy = (
                np.broadcast_to(np.asarray(numpy_function(symbols, e)(*cols), dtype=float), (8,))
                for e in (x, y)
            )
        finite = np.isfinite(fx) & np.isfinite(fy)
        scale = np.maximum(1.0, np.maximum(np.abs(fx), np.abs(fy)))
        return bool(np.any(finite & (np.abs(fx - fy) > 1e-6 * scale)))
    except Exception:  # any failure to evaluate only means: no shortcut
        return False


def residual(a: sp.Basic, b: sp.Basic) -> sp.Expr | list[sp.Expr]:
    """The simplest form of ``a - b`` that :func:`prove_equal`'s rewrites reach.

    ``0`` (or a list of zeros, entrywise for matrices, sequences and dicts) means proved.
    """
    out = []
    for x, y in _exact_pairs(a, b, "residual"):
        best = None
        for n, c in enumerate(_candidates(x - y)):
            if _is_exact_zero(c):
                best = sp.S.Zero
                break
            if best is None or sp.count_ops(c) < sp.count_ops(best):
                best = c
            if n == 1 and _clearly_different(x, y):
                break  # every rewrite keeps the value, so none of them can reach 0
        out.append(best)
    return out[0] if len(out) == 1 else out


def _why_refused(
    pairs: list[tuple[sp.Expr, sp.Expr]], where: Sequence, carried: Sequence = ()
) -> str:
    """Why the statement ``pairs`` cannot be proved as given ('' when it may be); ``carried``
    are the conditions :func:`derived` sides bring from their definitions."""
    refused = [why for x, y in pairs for side in (x, y) for why in refusals(side)]
    refused += [why for why in carried if isinstance(why, str)]  # a definition's refusals
    carried = [r for r in carried if not isinstance(r, str)]
    if refused:
        return " ".join(dict.fromkeys(refused))
    missing = {r.text(): r for x, y in pairs for side in (x, y) for r in unmet(side, where)}
    missing |= {r.text(): r for r in unmet_requirements(carried, where)}
    if not missing:
        return ""
    reasons = "; ".join(r.reason for r in missing.values())
    first = next(iter(missing.values()))
    hint = {
        "nonzero": f"where=[sp.Ne({_text(first.quantity)}, 0)]",
        "nonnegative": f"where=[sp.Ge({_text(first.quantity)}, 0)] (or a bound on the sum's limit)",
        "real": "a relation that makes it real (s > 0 for s**x)",
    }[first.kind]
    return (
        f"the statement may be undefined (or, for a sum whose range may be reversed, mean "
        f"something else) unless "
        f"{', '.join(missing)} ({reasons}). If it is claimed only there, say so: {hint}, or a "
        "relation on one symbol that implies it (e.g. s < 1 for 2 - 2*s)."
    )


def _plain_number(side: object) -> bool:
    """A Python or numpy integer (or ``Fraction``), or a list, tuple or dict of them: exact as
    typed."""
    if isinstance(side, bool | np.bool_):
        return False
    if isinstance(side, int | np.integer | Fraction):
        return True
    if isinstance(side, Mapping):
        return all(_plain_number(v) for v in side.values())
    return isinstance(side, list | tuple) and all(_plain_number(v) for v in side)


def _as_typed(side: object, name: str) -> tuple[object, list]:
    """One side of :func:`prove_equal` as the user typed it, with the conditions it carries.

    A zero-argument callable is built without evaluation (every division kept), and may not use
    an expression built before the call (:mod:`.sides`); a :func:`derived` side brings its
    definition's conditions; a :func:`prebuilt` side is taken as SymPy built it (unchecked); a
    Python integer cannot hide a division (``1/0`` raises, ``6 // 3`` is exact).
    """
    if isinstance(side, Derived | Prebuilt) or (callable(side) and not isinstance(side, sp.Basic)):
        return take_side(side, name)
    if _plain_number(side):
        return side, []
    shown = sp.sstr(side) if isinstance(side, sp.Basic) else type(side).__name__
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise TypeError(
        f"prove_equal: side {name} ({shown}) was built before the call. SymPy simplifies an "
        "expression while it builds it (s*x/s is already x, (exp(s) - 1)/(exp(s) - 1) is "
        "already 1), so a division it cancelled leaves no trace, and the proof would be about "
        f"a statement you did not type. Pass side {name} as written, as a zero-argument "
        f"callable: prove_equal(lambda: <{name} as you typed it>, ...). It is then built "
        "without simplification and every division in it is checked. Python integers (and "
        "lists or dicts of them) may be passed as they are; a value SymPy derives from a "
        "definition: sy.derived(sp.diff, lambda: <definition as typed>, s)."
    )


def prove_equal(
    a: Callable[[], sp.Basic] | int,
    b: Callable[[], sp.Basic] | int,
    *,
    where: Sequence[sp.Basic] = (),
    verbose: bool = True,
) -> bool:
    """Try to prove ``a == b`` exactly, for every value of the symbols their assumptions allow.

    The difference is simplified, then passed through targeted rewrites (``piecewise_fold``,
    hinge as ``Piecewise``, ``doit`` for sums, ``together``/``cancel``, exponent expansion,
    ``expand_log``, ``logcombine``, ``powsimp``, ``rewrite(exp)``, ``factor_terms``,
    ``radsimp``). None of them is forced, so each is valid under the symbols' assumptions, and
    only the exact number ``0`` counts: no numeric test decides the answer. Inputs are exact
    by construction: a ``Float`` anywhere is refused (it was rounded when it was made).

    Where a side may be undefined for values the assumptions allow (it divides by a quantity
    not known to be nonzero, raises one to an exponent that may be negative, takes its ``log``,
    meets a pole of ``tan``, ``cot``, ``sec``, ``csc``, ``tanh``, ``coth``, ``sech``, ``csch``,
    or sums over a range ``a..b`` that may be reversed, ``b < a - 1``), the statement holds at
    most where it is defined: it is proved only when ``where`` states that condition, and
    refused otherwise (``False``, with the condition named). A limit with parameters, a sum to
    infinity, a ``Piecewise`` without a default and a function whose domain is not known are
    refused whatever ``where`` says (:func:`~dmlbook.symbolic.domain.refusals`).

    Each side is passed as written, as a zero-argument callable (``lambda: Hinge(s) * x /
    Hinge(s)``), built here without SymPy's automatic simplification, so that a factor typed
    in it is never cancelled before it is checked. A side built before the call (a SymPy
    expression, matrix, sequence or dict), or a callable that reads or returns one, is refused
    with a ``TypeError``: SymPy cancels while it builds (``Hinge(s) * x / Hinge(s)`` is already
    ``x``), so it cannot show what was typed. Python integers (and lists or dicts of them) may
    be passed as they are. A value SymPy derives: ``derived(sp.diff, lambda: <definition>, s)``,
    whose definition's conditions the proof must state too. ``prebuilt(...)`` takes a value as
    SymPy built it, unchecked for cancellations (:mod:`.sides`); a variable bound to an
    expression SymPy reduced to a bare symbol cannot be told from that symbol.

    Parameters
    ----------
    a, b : callable returning an Expr, Matrix, sequence or dict; derived, prebuilt; or an int
        The two sides as written: ``lambda: expr``, called without SymPy's automatic
        simplification, with Integers and Rationals as numbers (no ``Float``). Matrices,
        sequences and dicts (e.g. two :func:`pair_weights` results) are compared entry by
        entry; all entries must be proved, and there must be at least one.
    where : sequence of relations
        The conditions the statement is claimed under, each ``sp.Ne(d, 0)`` for a quantity it
        divides by (or takes the ``log`` of, ``sp.Ne(sp.cos(s), 0)`` for ``tan(s)``), or a
        relation of one symbol with a number (``s > 0``, ``s < 1``, ``sp.Ne(s, 0)``,
        ``m >= 0`` for ``Sum(f, (k, 1, m))``); see
        :func:`~dmlbook.symbolic.conditions.unguarded`.
    verbose : bool
        When the proof fails or is refused, print why (the residual reached, or the
        denominators whose condition is missing).

    Returns
    -------
    bool
        ``True``: a proof. ``a - b`` was rewritten to exactly ``0`` by identities, so the two
        sides are equal at every point allowed by the assumptions (a hinge's indicator is read
        as ``1[x > 0]`` at the kink, see :class:`HingeActive`).

        ``False``: *no proof found*, not a disproof. Either the sides differ, or SymPy's
        rewrites did not reach 0. To show that they differ, give a point where they do:
        :func:`counterexample` finds one (exactly, with Rationals, where it can);
        :func:`spot_check_equal` says whether they even agree numerically.

    Raises
    ------
    ValueError
        Both sides empty; shapes, lengths or keys that do not match; a ``Float`` in either side.
    TypeError
        A side built before the call, or a callable that reads or returns an expression built
        before it (pass it as ``lambda: ...`` built from symbols, or :func:`derived`).

    Examples
    --------
    >>> import sympy as sp
    >>> from dmlbook.symbolic import Hinge
    >>> s, x = sp.symbols("s x", real=True)
    >>> prove_equal(lambda: Hinge(s) * x / Hinge(s), lambda: x, verbose=False)  # s <= 0: 0/0
    False
    >>> prove_equal(lambda: Hinge(s) * x / Hinge(s), lambda: x, where=[s > 0])
    True
    >>> prove_equal(lambda: sp.exp(sp.log(s)), lambda: s, where=[sp.Ne(s, 0)])
    True
    """
    (a, carried_a), (b, carried_b) = _as_typed(a, "a"), _as_typed(b, "b")
    pairs = _exact_pairs(a, b, "prove_equal")
    why = _why_refused(pairs, where, carried_a + carried_b)
    if why:
        if verbose:
            print(f"prove_equal: refused: {why}")
        return False
    pairs = [(evaluated(x), evaluated(y)) for x, y in pairs]
    for n, (x, y) in enumerate(pairs):
        r = residual(x, y)
        if r != sp.S.Zero:
            if verbose:
                where = f" (entry {n})" if len(pairs) > 1 else ""
                print(f"prove_equal: not proved{where}; residual a - b = {sp.sstr(r)}")
            return False
    return True


# --------------------------------------------------------------------------------------------
# GPW, symbolically


def gpw_identity(
    L: sp.Expr,
    pairs: AnchorSimilarities | Sequence[sp.Symbol],
    theta: sp.Symbol | None = None,
) -> tuple[sp.Expr, sp.Expr]:
    """Both sides of Wang et al. 2019, Eq. 1-2 for a loss written on pair symbols.

    Every pair symbol ``s`` is made an unspecified function ``s(theta)`` of one model parameter
    (any network, any normalisation). The first value returned is ``dL/dtheta`` of the composed
    loss; the second is ``dF/dtheta`` of the GPW surrogate ``F = sum_s w_s s(theta)``, with the
    weights ``w_s = dL/ds`` held constant while differentiating and evaluated at ``s(theta)``
    afterwards. Eq. 1 says the two are
    equal; :func:`prove_equal` proves it for the given loss.

    Parameters
    ----------
    L : Expr
    pairs : AnchorSimilarities or sequence of Symbol
    theta : Symbol, optional
        The parameter (default: a real symbol ``theta``).

    Returns
    -------
    (dL_dtheta, dF_dtheta) : tuple of Expr
    """
    theta = sp.Symbol("theta", real=True) if theta is None else theta
    symbols = list(pairs.all if isinstance(pairs, AnchorSimilarities) else pairs)
    curves = {s: sp.Function(str(s), real=True)(theta) for s in symbols}
    loss_gradient = sp.diff(sp.sympify(L).subs(curves), theta)
    weights = pair_weights(L, symbols)
    frozen = {s: sp.Dummy(f"w_{s}") for s in symbols}
    F = sp.Add(*[frozen[s] * curves[s] for s in symbols])
    surrogate_gradient = sp.diff(F, theta).subs(
        {frozen[s]: weights[s].subs(curves) for s in symbols}
    )
    return loss_gradient, surrogate_gradient

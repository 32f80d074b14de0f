"""Pair weights as exact derivatives: ``pair_weights`` (Wang et al. 2019, Eq. 1-2).

A loss written on pair symbols (:func:`~dmlbook.symbolic.symbols.anchor_similarities`,
:func:`~dmlbook.symbolic.symbols.indexed_anchor` or a
:func:`~dmlbook.symbolic.symbols.batch_similarities` matrix) is differentiated by each pair
symbol. For indexed symbols the ``Piecewise`` guards that SymPy leaves on a sum's index range
are decided exactly, under one stated range for the index (never by picking a branch when the
loss sums over one base on several ranges). Tests: ``tests/symbolic/test_differentiate.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy as sp

from .symbols import AnchorSimilarities

__all__ = ["IndexRange", "PairTarget", "pair_weights"]

PairTarget = sp.Symbol | sp.Indexed


IndexRange = tuple[sp.Expr | int, sp.Expr | int]


def _sum_ranges(loss: sp.Expr, base: sp.IndexedBase) -> list[tuple[sp.Expr, sp.Expr]]:
    """The distinct ``(lower, upper)`` limits of the sums of ``loss`` over entries of ``base``."""
    ranges: list[tuple[sp.Expr, sp.Expr]] = []
    for s in loss.atoms(sp.Sum):
        if any(ix.base == base for ix in s.function.atoms(sp.Indexed)):
            for _, lower, upper in s.limits:
                if (lower, upper) not in ranges:
                    ranges.append((lower, upper))
    return sorted(ranges, key=sp.default_sort_key)


def _index_range_resolved(
    expr: sp.Expr, target: sp.Indexed, loss: sp.Expr, index_range: IndexRange | None
) -> sp.Expr:
    """Drop the ``Piecewise`` guards ``lower <= j <= upper`` that differentiating a sum leaves.

    Differentiating ``sum_{k=1}^{P} f(s_k)`` by ``s_j`` gives ``f'(s_j)`` guarded by ``j <= P``
    (SymPy cannot know that ``j`` indexes an existing pair). The guards are decided under the
    assumption ``lower <= j <= upper`` for *one* range: ``index_range`` when given, else the
    only range of the sums of ``loss`` over the base of ``target``. Writing ``j = lower + u`` and
    ``upper = j + v`` (solved for a symbol of ``upper``) with integers ``u, v >= 0`` decides
    each guard by assumptions alone; a guard it cannot decide is kept.

    Raises
    ------
    ValueError
        When the sums over the base have several ranges (e.g. positives ``k = 1..P`` and
        negatives ``k = P+1..P+N`` on one ``IndexedBase``) and no ``index_range`` says which
        one ``j`` lies in: deciding the guards would then pick a branch at random.
    """
    (j,) = target.indices
    ranges = _sum_ranges(loss, target.base)
    if index_range is None:
        if not ranges:
            return expr
        if len(ranges) > 1:
            shown = ", ".join(f"{j} = {sp.sstr(lo)}..{sp.sstr(hi)}" for lo, hi in ranges)
            raise ValueError(
                f"the loss sums over {target.base} on {len(ranges)} different index ranges "
                f"({shown}), so the weight of {target} depends on which range {j} lies in. "
                f"Pass index_range=(lower, upper) for {j} (e.g. index_range=({sp.sstr(ranges[-1][0])}, "
                f"{sp.sstr(ranges[-1][1])})), or write positives and negatives on separate "
                "IndexedBases (indexed_anchor() gives pos and neg)."
            )
        index_range = ranges[0]
    lower, upper = (sp.sympify(x) for x in index_range)
    u, v = (
        sp.Dummy("u", integer=True, nonnegative=True),
        sp.Dummy("v", integer=True, nonnegative=True),
    )
    put = {j: lower + u}
    free = sorted(upper.free_symbols - lower.free_symbols - {j}, key=sp.default_sort_key)
    if free:
        solved = sp.solve(sp.Eq(upper, lower + u + v), free[0], dict=True)
        if len(solved) == 1:
            put[free[0]] = solved[0][free[0]]

    def resolve(pw: sp.Piecewise) -> sp.Expr:
        kept = []
        for value, cond in pw.args:
            c = cond.subs(put)
            c = c if c in (sp.true, sp.false) else cond
            if c == sp.false:
                continue
            kept.append((value, c))
            if c == sp.true:
                break
        return sp.Piecewise(*kept) if kept else sp.S.Zero

    return expr.replace(lambda e: isinstance(e, sp.Piecewise), resolve)


def _derivative(L: sp.Expr, target: sp.Basic, index_range: IndexRange | None = None) -> sp.Expr:
    if isinstance(target, sp.Indexed):
        d = sp.diff(L, target).doit()
        return _index_range_resolved(d, target, L, index_range)
    if index_range is not None:
        raise ValueError(
            f"index_range applies to an indexed pair symbol such as s[j]; {target!r} is not one."
        )
    if isinstance(target, sp.Symbol):
        return sp.diff(L, target)
    if target.is_number:
        return sp.S.Zero  # a fixed entry such as the unit diagonal of S
    raise TypeError(
        f"pair_weights differentiates by pair symbols (Symbol or Indexed), got {target!r} "
        f"of type {type(target).__name__}."
    )


def pair_weights(
    L: sp.Expr,
    wrt: AnchorSimilarities | sp.MatrixBase | PairTarget | Sequence[PairTarget],
    *,
    index_range: IndexRange | None = None,
) -> dict[sp.Basic, sp.Expr] | sp.Matrix:
    """The pair weights ``w_ij = dL / dS_ij`` of a symbolic loss (Wang et al. 2019, Eq. 1-2).

    These are the *signed* partial derivatives. In the GPW convention (Eq. 3) a positive pair
    has ``dL/dS_ij <= 0`` and a negative pair ``dL/dS_ij >= 0``; the weight of Eq. 3 is the
    absolute value.

    Parameters
    ----------
    L : Expr
        The loss, written on pair symbols.
    wrt : AnchorSimilarities, Matrix, Symbol, Indexed or sequence of them
        The pair symbols to differentiate by. For an indexed symbol ``s[j]`` of the general-``n``
        form the guard ``1 <= j <= P`` left by differentiating a sum is discharged. For a
        :func:`batch_similarities` matrix a matrix of the same shape is returned (fixed entries
        such as the unit diagonal get weight 0).
    index_range : (lower, upper), optional
        For an indexed ``s[j]``: the summation range that ``j`` lies in, e.g. ``(P + 1, P + N)``
        when negatives follow positives on one ``IndexedBase``. Needed exactly when the loss
        sums over that base on more than one range; without it such a loss is refused, since
        the weight of ``s[j]`` depends on the range (a positive's and a negative's differ).

    Returns
    -------
    dict or Matrix
        ``{symbol: dL/dsymbol}`` in the order of ``wrt`` (positives first for an anchor), or a
        Matrix for a Matrix.

    Raises
    ------
    ValueError
        For an indexed target whose base is summed on several ranges and no ``index_range``.
    """
    L = sp.sympify(L)
    if isinstance(wrt, sp.MatrixBase):
        return wrt.applyfunc(lambda s: _derivative(L, s, index_range))
    if isinstance(wrt, AnchorSimilarities):
        targets: Sequence[sp.Basic] = wrt.all
    elif isinstance(wrt, sp.Symbol | sp.Indexed):
        targets = (wrt,)
    else:
        targets = tuple(wrt)
    return {t: _derivative(L, t, index_range) for t in targets}

"""SymPy building blocks for pair-based losses written on one anchor's similarities.

A pair-based loss (Wang et al. 2019, Sec. 3.1) is a function ``L(S, y)`` of the similarity matrix.
For one anchor ``i`` only the row ``S_i.`` matters, split by label into ``P`` positive and ``N``
negative similarities. This module names those similarities as SymPy symbols, in two forms:

* finite: :func:`anchor_similarities` gives ``P + N`` real symbols, so a loss is an ordinary
  expression and every derivative is exact;
* general ``n``: :func:`indexed_anchor` gives indexed similarities ``s^+_k, k = 1..P`` with a
  symbolic ``P``, so that a closed form can be proved for every batch size at once where SymPy
  can carry the sums.

The hinge ``[x]_+ = max(x, 0)`` is the :class:`Hinge` function, whose derivative is the
indicator ``1[x > 0]`` of its *active region* (:class:`HingeActive`). At the kink ``x = 0``
the hinge has no derivative; the indicator then reads 0, the same choice as ``torch.relu``'s
backward pass. The kink is a set of measure zero in ``S``, so the choice never matters for a
proof on an open region, but it does decide what autograd reports *at* the kink.
Tests: ``tests/symbolic/test_symbols.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import sympy as sp

__all__ = [
    "AnchorSimilarities",
    "IndexedAnchor",
    "Hinge",
    "HingeActive",
    "anchor_similarities",
    "batch_similarities",
    "distance_symbols",
    "default_range",
    "distinct_points",
    "hinge",
    "hinge_branch",
    "hinge_conditions",
    "HYPERPARAMETER_DOMAINS",
    "hyperparameters",
    "indexed_anchor",
    "log1p_sum_exp",
    "log_sum_exp",
    "unit_sphere_distance",
    "unit_sphere_similarity",
]


@dataclass(frozen=True)
class AnchorSimilarities:
    """The similarities of one anchor to its ``P`` positives and ``N`` negatives.

    Attributes
    ----------
    pos : tuple of Symbol
        ``s^+_1 .. s^+_P``, the anchor's similarities to the samples sharing its label, in the
        order of their column index in ``S``.
    neg : tuple of Symbol
        ``s^-_1 .. s^-_N``, its similarities to the samples with another label.
    """

    pos: tuple[sp.Symbol, ...]
    neg: tuple[sp.Symbol, ...]

    @property
    def P(self) -> int:
        """Number of positive pairs."""
        return len(self.pos)

    @property
    def N(self) -> int:
        """Number of negative pairs."""
        return len(self.neg)

    @property
    def all(self) -> tuple[sp.Symbol, ...]:
        """All pair symbols, positives first."""
        return self.pos + self.neg


def anchor_similarities(P: int, N: int, pos: str = "s^+", neg: str = "s^-") -> AnchorSimilarities:
    """Real symbols for one anchor with ``P`` positive and ``N`` negative pairs.

    Parameters
    ----------
    P, N : int
        Numbers of positive and negative pairs (zero is allowed: an empty sum is 0).
    pos, neg : str
        Stems of the symbol names; the pair index is appended as a subscript.

    Returns
    -------
    AnchorSimilarities

    Examples
    --------
    >>> a = anchor_similarities(2, 3)
    >>> a.pos
    (s^+_1, s^+_2)
    """
    for name, n in (("P", P), ("N", N)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"{name} must be a non-negative int (a number of pairs), got {n!r}.")
    return AnchorSimilarities(
        pos=tuple(sp.Symbol(f"{pos}_{k}", real=True) for k in range(1, P + 1)),
        neg=tuple(sp.Symbol(f"{neg}_{k}", real=True) for k in range(1, N + 1)),
    )


def batch_similarities(B: int, name: str = "S") -> sp.Matrix:
    """A ``B x B`` similarity matrix of real symbols ``S_ij`` with the unit diagonal ``S_ii = 1``.

    Every off-diagonal entry is its own symbol (``S_ij`` and ``S_ji`` are distinct), matching how
    autograd treats a loss's input ``S``: one partial derivative per entry. Use it to write a loss
    on a whole tiny batch, batch reduction included, when it does not split into anchors.
    Symbols are named ``S_ij`` for ``B <= 9`` and ``S_i,j`` beyond, so that no two entries share
    a name (``S_112`` would be both (1, 12) and (11, 2)).
    """
    if not isinstance(B, int) or B < 1:
        raise ValueError(f"B must be a positive int (the batch size), got {B!r}.")
    sep = "" if B <= 9 else ","
    return sp.Matrix(
        B,
        B,
        lambda i, j: sp.S.One if i == j else sp.Symbol(f"{name}_{i + 1}{sep}{j + 1}", real=True),
    )


#: The domain of each hyper-parameter symbol, declared once: the assumptions that *every* value
#: the book gives it satisfies (a symbol that carries more would "prove" statements that fail at
#: a value the book uses, such as ``sqrt(lambda**2) == lambda`` at Chapter 5's lambda = -2.5).
HYPERPARAMETER_DOMAINS: dict[str, tuple[dict[str, bool], str]] = {
    "alpha": (
        {"positive": True},
        "MS / binomial / LiftedStruct* slopes (Wang et al., Eq. 9, 15, 16): 1/alpha in the loss; 2, 10, 40",
    ),
    "beta": (
        {"positive": True},
        "MS / binomial / LiftedStruct* slopes (Wang et al., Eq. 9, 15, 16): 1/beta in the loss; 2, 10, 50",
    ),
    "gamma": ({"positive": True}, "DRO temperature (Sec. 3.2) and Circle scale: 0.001 to 256"),
    "tau": ({"positive": True}, "scale of the cosine triplet loss (Xuan & Pless, Eq. 4)"),
    "rho": ({"positive": True}, "radius of the DRO chi-square ball (Sec. 3.1)"),
    "lambda": ({"real": True}, "threshold on a similarity: 1, 0.5, and -2.5 in Chapter 5"),
    "m": (
        {"real": True, "nonnegative": True},
        "margins: 0 (Liu's m_1, Sun et al.'s form at m = 0) to 3",
    ),
    "m_1": ({"real": True, "nonnegative": True}, "Liu et al.'s positive distance threshold: 0"),
    "m_2": (
        {"real": True, "nonnegative": True},
        "Liu et al.'s negative distance threshold: 0.8, 1",
    ),
    "epsilon": (
        {"real": True, "nonnegative": True},
        "MS mining margin (Wang et al., Eq. 11-12): 0, 0.1",
    ),
}


def default_range(symbol: sp.Symbol) -> tuple[sp.Rational, sp.Rational]:
    """Where a symbol is drawn when no range is given, inside its assumptions: positive in
    ``[1/10, 3]``, non-negative in ``[0, 3]``, negative and non-positive mirrored, any other
    real in ``[-1, 1]`` (a cosine similarity)."""
    if symbol.is_positive:
        return sp.Rational(1, 10), sp.Integer(3)
    if symbol.is_nonnegative:
        return sp.Integer(0), sp.Integer(3)
    if symbol.is_negative:
        return sp.Integer(-3), -sp.Rational(1, 10)
    if symbol.is_nonpositive:
        return sp.Integer(-3), sp.Integer(0)
    return sp.Integer(-1), sp.Integer(1)


def hyperparameters(
    names: str | Sequence[str], positive: bool | None = None
) -> tuple[sp.Symbol, ...]:
    """Hyper-parameter symbols, each with the domain of :data:`HYPERPARAMETER_DOMAINS`.

    A symbol carries only what every value the book uses satisfies: ``lambda`` is real (Chapter
    5 uses ``lambda = -2.5``), margins are non-negative (Liu et al. use ``m_1 = 0``), the slopes
    and temperatures that a loss divides by are positive.

    Parameters
    ----------
    names : str or sequence of str
        Space- or comma-separated names, as for :func:`sympy.symbols`.
    positive : bool, optional
        Override the table: ``True`` declares the symbols positive, ``False`` only real. A name
        the table does not know needs it.

    Returns
    -------
    tuple of Symbol
        Always a tuple, even for a single name.

    Raises
    ------
    ValueError
        For an empty list of names, or a name without a declared domain and no ``positive``.
    """
    if not isinstance(names, str):
        names = " ".join(names)
    parsed = [n for n in names.replace(",", " ").split() if n]
    if not parsed:
        raise ValueError("names is empty; pass at least one hyper-parameter name.")
    made = []
    for name in parsed:
        if positive is not None:
            assumptions = {"real": True, "positive": True} if positive else {"real": True}
        elif name in HYPERPARAMETER_DOMAINS:
            assumptions = HYPERPARAMETER_DOMAINS[name][0]
        else:
            raise ValueError(
                f"no declared domain for the hyper-parameter {name!r} (known: "
                f"{', '.join(HYPERPARAMETER_DOMAINS)}); pass positive=True if every value the "
                "book gives it is > 0, or positive=False for any real value."
            )
        made.append(sp.Symbol(name, **assumptions))
    return tuple(made)


class Hinge(sp.Function):
    """The hinge ``[x]_+ = max(x, 0)`` with its active region explicit.

    Its derivative is :class:`HingeActive`, the indicator ``1[x > 0]`` of the active region.
    At ``x = 0`` (the kink, measure zero) it reads 0, as ``torch.relu``'s backward pass does.
    When the sign of ``x`` is known from assumptions the hinge evaluates itself away.
    """

    nargs = 1
    is_real = True

    @classmethod
    def eval(cls, x: sp.Expr) -> sp.Expr | None:
        if x.is_nonnegative:
            return x
        if x.is_nonpositive:
            return sp.S.Zero
        return None

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return HingeActive(self.args[0])

    def _eval_rewrite_as_Piecewise(self, x: sp.Expr, **kwargs: object) -> sp.Expr:
        return sp.Piecewise((x, x > 0), (sp.S.Zero, True))

    def _eval_rewrite_as_Max(self, x: sp.Expr, **kwargs: object) -> sp.Expr:
        return sp.Max(x, 0)

    def _eval_is_nonnegative(self) -> bool:
        return True

    def _latex(self, printer: object, exp: object = None) -> str:
        inner = printer._print(self.args[0])  # type: ignore[attr-defined]
        text = rf"\left[{inner}\right]_{{+}}"
        if exp is not None:
            text = rf"{text}^{{{exp}}}"
        return text

    def _torchcode(self, printer: object) -> str:
        return f"torch.relu({printer._print(self.args[0])})"  # type: ignore[attr-defined]


class HingeActive(sp.Function):
    """The indicator ``1[x > 0]`` of a hinge's active region: the derivative of ``[x]_+``.

    It is 0 at the kink ``x = 0``, matching ``torch.relu``. Its own derivative is taken as 0:
    true everywhere except at the kink, where the hinge has no second derivative at all.
    """

    nargs = 1
    is_real = True

    @classmethod
    def eval(cls, x: sp.Expr) -> sp.Expr | None:
        if x.is_positive:
            return sp.S.One
        if x.is_nonpositive:
            return sp.S.Zero
        return None

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return sp.S.Zero

    def _eval_rewrite_as_Piecewise(self, x: sp.Expr, **kwargs: object) -> sp.Expr:
        return sp.Piecewise((sp.S.One, x > 0), (sp.S.Zero, True))

    def _eval_rewrite_as_Heaviside(self, x: sp.Expr, **kwargs: object) -> sp.Expr:
        return sp.Heaviside(x, 0)

    def _eval_is_nonnegative(self) -> bool:
        return True

    def _latex(self, printer: object, exp: object = None) -> str:
        inner = printer._print(self.args[0])  # type: ignore[attr-defined]
        text = rf"\mathbb{{1}}\left[{inner} > 0\right]"
        if exp is not None:
            text = rf"{text}^{{{exp}}}"
        return text

    def _torchcode(self, printer: object) -> str:
        arg = printer._print(self.args[0])  # type: ignore[attr-defined]
        return f"torch.gt({arg}, 0).double()"


def hinge(x: sp.Expr) -> sp.Expr:
    """``[x]_+``, the hinge of Wang et al. 2019, Eq. 4-6 and Liu et al., Eq. 11-12.

    See :class:`Hinge` for the derivative and the convention at the kink.
    """
    return Hinge(sp.sympify(x))


def hinge_conditions(expr: sp.Expr) -> list[sp.Basic]:
    """The active-region conditions ``x > 0`` of every hinge ``[x]_+`` (or ``1[x > 0]``) in ``expr``.

    The list is ordered as SymPy orders the hinges; use it to state a region explicitly.
    """
    arguments = {h.args[0] for h in expr.atoms(Hinge) | expr.atoms(HingeActive)}
    return [x > 0 for x in sorted(arguments, key=sp.default_sort_key)]


def hinge_branch(expr: sp.Expr, active: bool | Mapping[sp.Expr, bool] = True) -> sp.Expr:
    """Restrict ``expr`` to one branch of its hinges.

    Every hinge ``[x]_+`` becomes ``x`` (active) or ``0`` (inactive), and every active-region
    indicator ``1[x > 0]`` (:class:`HingeActive`) that differentiation left behind becomes
    ``1`` or ``0`` accordingly. The result is exact on the open region where each hinge
    argument has the stated sign.

    Parameters
    ----------
    expr : Expr
        An expression with hinges, or a derivative of one.
    active : bool or mapping
        ``True`` (all hinges active) / ``False`` (all inactive), or a mapping from a hinge
        argument ``x`` (or the hinge ``[x]_+`` itself) to its state. Arguments missing from a
        mapping are left untouched.

    Returns
    -------
    Expr
    """
    if isinstance(active, bool):
        state: Callable[[sp.Expr], bool | None] = lambda x: active
    else:
        table = {
            (k.args[0] if isinstance(k, Hinge) else sp.sympify(k)): bool(v)
            for k, v in active.items()
        }
        state = table.get

    def swap_hinge(h: Hinge) -> sp.Expr:
        on = state(h.args[0])
        if on is None:
            return h
        return h.args[0] if on else sp.S.Zero

    def swap_indicator(e: HingeActive) -> sp.Expr:
        on = state(e.args[0])
        if on is None:
            return e
        return sp.S.One if on else sp.S.Zero

    out = expr.replace(lambda e: isinstance(e, Hinge), swap_hinge)
    return out.replace(lambda e: isinstance(e, HingeActive), swap_indicator)


def log_sum_exp(terms: Iterable[sp.Expr]) -> sp.Expr:
    """``log sum_k exp(t_k)``: the smooth maximum of lifted structure (Wang et al. 2019, Eq. 6)."""
    terms = list(terms)
    if not terms:
        raise ValueError("log_sum_exp of no terms is log(0); pass at least one term.")
    return sp.log(sp.Add(*[sp.exp(t) for t in terms]))


def log1p_sum_exp(terms: Iterable[sp.Expr]) -> sp.Expr:
    """``log(1 + sum_k exp(t_k))``: the soft hinge of binomial and MS (Wang et al. 2019, Eq. 9, 15).

    With no terms it is ``log 1 = 0``, so an anchor without positives (or negatives) adds nothing.
    """
    return sp.log(1 + sp.Add(*[sp.exp(t) for t in terms]))


@dataclass(frozen=True)
class IndexedAnchor:
    """One anchor in general-``n`` form: indexed similarities and symbolic pair counts.

    Attributes
    ----------
    pos, neg : IndexedBase
        ``pos[k]`` is ``s^+_k``, ``neg[k]`` is ``s^-_k`` (real).
    P, N : Symbol
        Numbers of positive and negative pairs (positive integers).
    j : Symbol
        The index of the pair whose weight is taken (``1 <= j <= P`` or ``N``).
    k : Symbol
        The summation index.
    """

    pos: sp.IndexedBase
    neg: sp.IndexedBase
    P: sp.Symbol
    N: sp.Symbol
    j: sp.Symbol
    k: sp.Symbol

    def sum_pos(self, f: Callable[[sp.Expr], sp.Expr]) -> sp.Sum:
        """``sum_{k=1}^{P} f(s^+_k)``."""
        return sp.Sum(f(self.pos[self.k]), (self.k, 1, self.P))

    def sum_neg(self, f: Callable[[sp.Expr], sp.Expr]) -> sp.Sum:
        """``sum_{k=1}^{N} f(s^-_k)``."""
        return sp.Sum(f(self.neg[self.k]), (self.k, 1, self.N))


def indexed_anchor(pos: str = "s^+", neg: str = "s^-") -> IndexedAnchor:
    """Symbols for the general-``n`` form of a one-anchor loss (sums over ``k = 1..P`` or ``N``)."""
    ints = {"integer": True, "positive": True}
    return IndexedAnchor(
        pos=sp.IndexedBase(pos, real=True),
        neg=sp.IndexedBase(neg, real=True),
        P=sp.Symbol("P", **ints),
        N=sp.Symbol("N", **ints),
        j=sp.Symbol("j", **ints),
        k=sp.Symbol("k", **ints),
    )


def unit_sphere_distance(s: sp.Expr) -> sp.Expr:
    """Euclidean distance between unit vectors with similarity ``s``: ``D = sqrt(2 - 2 s)``.

    From ``D^2 = |z_i|^2 + |z_j|^2 - 2 <z_i, z_j> = 2 - 2 S_ij`` (Liu et al., footnote 5).
    """
    return sp.sqrt(2 - 2 * sp.sympify(s))


def distinct_points(*similarities: sp.Expr | AnchorSimilarities) -> list[sp.Rel]:
    """``s < 1`` for each similarity symbol: the two points of the pair are distinct.

    The condition under which ``D = sqrt(2 - 2 s)`` is not 0, so that a proof dividing by a
    distance holds (for :func:`~dmlbook.symbolic.proofs.prove_equal`'s ``where``). Accepts
    symbols and :class:`AnchorSimilarities` (all of its pairs).
    """
    out: list[sp.Rel] = []
    for s in similarities:
        out += [x < 1 for x in (s.all if isinstance(s, AnchorSimilarities) else (s,))]
    return out


def unit_sphere_similarity(D: sp.Expr) -> sp.Expr:
    """Cosine similarity of unit vectors at distance ``D``: ``S = 1 - D^2 / 2``."""
    return 1 - sp.sympify(D) ** 2 / 2


def distance_symbols(
    a: AnchorSimilarities, pos: str = "D^+", neg: str = "D^-"
) -> AnchorSimilarities:
    """Positive distance symbols ``D^+_k, D^-_k`` matching the similarity symbols of ``a``.

    They are declared positive: distinct unit vectors have ``0 < D <= 2``.
    """
    return AnchorSimilarities(
        pos=tuple(sp.Symbol(f"{pos}_{k}", positive=True) for k in range(1, a.P + 1)),
        neg=tuple(sp.Symbol(f"{neg}_{k}", positive=True) for k in range(1, a.N + 1)),
    )

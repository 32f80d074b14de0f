"""SymPy building blocks for pair-based losses written on one anchor's similarities.

A pair-based loss (Wang et al. 2019, Sec. 3.1) is a function ``L(S, y)`` of the similarity matrix.
For one anchor ``i`` only the row ``S_i.`` matters, split by label into ``P`` positive and ``N``
negative similarities. This module names those similarities as SymPy symbols, in two forms:

* finite: :func:`anchor_similarities` gives ``P + N`` real symbols, so a loss is an ordinary
  expression and every derivative is exact;
* general ``n``: :func:`indexed_anchor` gives indexed similarities ``s^+_k, k = 1..P`` with a
  symbolic ``P``, so that a closed form can be proved for every batch size at once where SymPy
  can carry the sums.

The hinge ``[x]_+`` with its active region is in :mod:`dmlbook.symbolic.hinge`.
Tests: ``tests/symbolic/test_symbols.py``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import sympy as sp

__all__ = [
    "AnchorSimilarities",
    "IndexedAnchor",
    "anchor_similarities",
    "batch_similarities",
    "distance_symbols",
    "default_range",
    "distinct_points",
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
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
            raise ValueError(f"{name} must be a non-negative int (a number of pairs), got {n!r}.")
    P, N = int(P), int(N)  # a numpy integer too
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
    if not isinstance(B, numbers.Integral) or isinstance(B, bool) or B < 1:
        raise ValueError(f"B must be a positive int (the batch size), got {B!r}.")
    B = int(B)  # a numpy integer too
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

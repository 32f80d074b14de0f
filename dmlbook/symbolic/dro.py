"""SymPy proofs of the DRO paper's closed forms and Lemma 1 (its recovery claims:
:mod:`dmlbook.symbolic.dro_recovery`).

Each function derives one statement and returns ``{name: bool}``: ``True`` only where
:func:`prove_equal` reduced the difference to exactly 0; with ``verbose=True`` it prints each
step's intermediate result beside its verdict. Each side is built from the definition the
docstring states (:mod:`.sides`): :func:`define`-d from symbols by the helpers below, or
:func:`derived` from such a definition (a stationary point, gradient, limit, substitution), or
typed in the call. Proofs use a fixed small size (``n`` losses, ``P`` positives and ``N``
negatives of one anchor); nothing in them depends on the size except the number of terms.

* :func:`kl_inner_max`: DRO-KL's ``p* = softmax(l / gamma)`` and value
  ``gamma log((1/n) sum e^{l/gamma})`` (Sec. 3.2, Namkoong and Duchi 2016), its limits
  (max at ``gamma -> 0``, mean at ``gamma -> inf``) and Lemma 1 in the smooth case.
* :func:`topk_lp_value`: the top-K linear programme's value (Sec. 3.1), by an exact identity.
* :func:`chi2_inner_max`: the chi-square ball's formula (Sec. 3.1) and the condition it needs.
The paper's misprinted forms (Eq. 3's ``lambda``, supplement Eq. 14 and 27) are proved as they
should read in :mod:`dmlbook.symbolic.dro_printed`.

Chapter: ``book/12_dro.ipynb`` (12.3). Tests: ``tests/symbolic/test_dro.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp

from .proofs import define, derived, prove_equal
from .sides import Derived

__all__ = [
    "chi2_inner_max",
    "kl_inner_max",
    "topk_lp_value",
]


def _losses(n: int, name: str = "l") -> list[sp.Symbol]:
    return [sp.Symbol(f"{name}_{k}", real=True) for k in range(1, n + 1)]


def _group_value(ls: list, gamma: sp.Expr, pseudo: sp.Expr | None = None) -> sp.Expr:
    """``gamma log((1/n) sum_j e^{l_j/gamma})``, the KL value (with a pseudo pair of loss ``pseudo``)."""
    terms = [sp.exp(l / gamma) for l in (ls if pseudo is None else [*ls, pseudo])]
    return gamma * sp.log(sum(terms) / len(terms))


def _softmax(ls: list, gamma: sp.Expr) -> list[sp.Expr]:
    return [sp.exp(l / gamma) / sum(sp.exp(k / gamma) for k in ls) for l in ls]


def _lagrangian(ls: list, gamma: sp.Expr, ps: tuple, v: sp.Expr) -> sp.Expr:
    """``J = sum p l - gamma sum p log(n p) - v (sum p - 1)``; at ``v = 0`` the objective."""
    kl = sum(p * sp.log(len(ls) * p) for p in ps)
    return sum(p * l for p, l in zip(ps, ls, strict=True)) - gamma * kl - v * (sum(ps) - 1)


def _stationary(lag: sp.Expr, ps: tuple, v: sp.Symbol) -> dict[str, object]:
    """Solve ``dJ/dp_j = 0`` (Eq. 15), then ``sum p = 1`` (Eq. 18); the objective at ``p*``."""
    p_of_v = [sp.solve(sp.diff(lag, p), p)[0] for p in ps]
    v_star = sp.solve(sp.Eq(sum(p_of_v), 1), v)[0]
    p_star = [sp.simplify(p.subs(v, v_star)) for p in p_of_v]
    value = lag.subs(v, 0).subs(dict(zip(ps, p_star, strict=True)))
    return {"p(v)": p_of_v, "v*": v_star, "p*": p_star, "value": sp.expand_log(value)}


def _kl_stationary_point(losses: Callable[[], list], gamma: sp.Expr, n: int) -> Derived:
    """:func:`_stationary`, derived from the Lagrangian of the losses ``losses()`` as defined."""
    v, ps = sp.Symbol("v", real=True), sp.symbols(f"p_1:{n + 1}", positive=True)
    lagrangian = lambda: _lagrangian(losses(), gamma, ps, v)
    return derived(_stationary, lagrangian, ps, v, differentiates=True)


def _centred(ls: list) -> list[sp.Expr]:
    return [l - sum(ls) / len(ls) for l in ls]


def _norm2(ls: list) -> sp.Expr:  # ||l - mean||^2 = n Var_n(l)
    return sum(x**2 for x in _centred(ls))


def _chi2_p(ls: list, rho: sp.Expr) -> list[sp.Expr]:
    """``p*_i = 1/n + sqrt(2 rho) (l_i - mean) / (n ||l - mean||)``."""
    n, c = len(ls), _centred(ls)
    return [sp.Rational(1, n) + sp.sqrt(2 * rho) * x / (n * sp.sqrt(_norm2(ls))) for x in c]


def _ls_bracket(sp_: list, sn: list, lam: sp.Expr, gamma: sp.Expr = 1) -> sp.Expr:
    """``gamma log sum_P e^{(lambda - S)/gamma} + gamma log sum_N e^{(S - lambda)/gamma}``:
    Eq. 3's bracket at ``gamma = 1``, LiftedStruct* (``alpha = beta = 1/gamma``) at ``lambda = 0``."""
    pos = gamma * sp.log(sum(sp.exp((lam - x) / gamma) for x in sp_))
    return pos + gamma * sp.log(sum(sp.exp((x - lam) / gamma) for x in sn))


def _eq27(sp_: list, sn: list, a: sp.Expr, b: sp.Expr, lam: sp.Expr) -> list[sp.Expr]:
    """Supplement Eq. 27's weights of one anchor."""
    w = [-1 / (sp.exp(a * (sj - lam)) + sum(sp.exp(a * (sj - sk)) for sk in sp_)) for sj in sp_]
    return w + [1 / (sp.exp(b * (lam - sj)) + sum(sp.exp(b * (sk - sj)) for sk in sn)) for sj in sn]


def _print_steps(title: str, out: dict[str, bool], shown: dict[str, object]) -> None:
    """Print each step's verdict beside the intermediate result it rests on (``verbose=True``)."""

    def text(value: object) -> str:
        if isinstance(value, sp.Equality):
            return f"{sp.sstr(value.lhs)} = {sp.sstr(value.rhs)}"
        return sp.sstr(value)

    print(title)
    width = max(map(len, [*out, *shown]))
    for name, value in shown.items():
        if name not in out:  # an intermediate result with no verdict of its own
            print(f"  {name:{width}s}  {'':10s}  {text(value)}")
    for name, ok in out.items():
        extra = f"  {text(shown[name])}" if name in shown else ""
        print(f"  {name:{width}s}  {'proved' if ok else 'NOT PROVED':10s}{extra}".rstrip())


def kl_inner_max(n: int = 3, verbose: bool = False) -> dict[str, bool]:
    """DRO-KL (Sec. 3.2): closed form of ``max_{p in Delta} p.l - gamma KL(p || 1/n)``.

    Derives from the objective and its Lagrangian ``J``, as defined: ``p*`` (``J``'s stationary
    point) is the softmax of ``l/gamma``; the objective is strictly concave (Hessian ``-gamma /
    p_j`` on the diagonal: ``p*`` is the unique maximiser); the value is ``gamma log((1/n) sum
    e^{l/gamma})``, with limits ``max l`` (``gamma -> 0+``, ``l_1`` the strict maximum) and
    ``mean l`` (``gamma -> inf``); and Lemma 1 (smooth): ``dF/dtheta = sum p*_j dl_j/dtheta``
    for losses ``l_j(theta)``. No condition is needed: the softmax divides by a sum of
    exponentials, which is positive, and ``p, gamma > 0``. With ``verbose`` it prints the
    stationary point, the multiplier, ``p*_1``, the value and the limits beside the verdicts.
    """
    gamma = sp.Symbol("gamma", positive=True)
    ls = _losses(n)
    ps = sp.symbols(f"p_1:{n + 1}", positive=True)
    kkt = _kl_stationary_point(lambda: ls, gamma, n)
    closed = define(lambda: _group_value(ls, gamma))
    objective = define(lambda: _lagrangian(ls, gamma, ps, 0))
    out = {
        "p* = softmax(l/gamma)": prove_equal(kkt["p*"], lambda: _softmax(ls, gamma)),
        "Hessian = diag(-gamma/p)": prove_equal(
            derived(sp.hessian, objective, ps, differentiates=True),
            lambda: sp.diag(*[-gamma / p for p in ps]),
        ),
        "value = gamma log mean e^{l/gamma}": prove_equal(kkt["value"], closed),
    }
    top = sp.Symbol("top", real=True)  # l_1 = top, l_k = top - delta_k with delta_k > 0
    deltas = sp.symbols(f"delta_2:{n + 1}", positive=True)
    ordered = lambda c: c.subs({l: top - d for l, d in zip(ls, [0, *deltas], strict=True)})
    at_top = derived(ordered, closed, differentiates=False)
    rest = define(lambda: _group_value([0, *(-d for d in deltas)], gamma))
    out["value = max l + remainder"] = prove_equal(
        at_top, lambda: top + _group_value([0, *(-d for d in deltas)], gamma)
    )
    # a limit keeps its function's conditions, as a derivative does
    lim_0 = derived(sp.limit, rest, gamma, 0, "+", differentiates=True)
    out["gamma -> 0: max l"] = prove_equal(lim_0, 0)
    t = sp.Symbol("t", positive=True)  # gamma = 1/t
    at_t = derived(lambda c: c.subs(gamma, 1 / t), closed, differentiates=False)
    lim_inf = derived(sp.limit, at_t, t, 0, "+", differentiates=True)
    out["gamma -> inf: mean l"] = prove_equal(lim_inf, lambda: sum(ls) / n)
    theta = sp.Symbol("theta", real=True)
    curves = [sp.Function(f"l{k}", real=True) for k in range(1, n + 1)]  # real losses l_k(theta)
    lf = lambda: [c(theta) for c in curves]
    out["Lemma 1: dF = sum p* dl"] = prove_equal(
        derived(sp.diff, lambda: _group_value(lf(), gamma), theta),
        lambda: sum(
            p * sp.diff(l, theta) for p, l in zip(_softmax(lf(), gamma), lf(), strict=True)
        ),
    )
    if verbose:
        shown = {
            "stationary point p_1(v)": sp.powsimp(sp.expand(kkt.value["p(v)"][0])),
            "multiplier v* (sum p = 1)": sp.simplify(kkt.value["v*"]),
            "p* = softmax(l/gamma)": sp.Eq(sp.Symbol("p*_1"), kkt.value["p*"][0]),
            "value = gamma log mean e^{l/gamma}": closed.value,
            "value = max l + remainder": sp.Eq(sp.Symbol("remainder"), rest.value),
            "gamma -> 0: max l": sp.Eq(sp.Symbol("lim remainder"), lim_0.value),
            "gamma -> inf: mean l": sp.Eq(sp.Symbol("lim value"), lim_inf.value),
        }
        _print_steps(
            f"DRO-KL, n = {n} losses (one instance of the argument for every n)", out, shown
        )
    return out


def topk_lp_value(n: int = 5, K: int = 2, verbose: bool = False) -> dict[str, bool]:
    """Top-K (Sec. 3.1): ``max {p.l : sum p = 1, 0 <= p <= 1/K} = (1/K) sum_{i <= K} l_[i]``.

    With ``l_1 >= ... >= l_n`` and ``p_n = 1 - sum_{j<n} p_j``, proves the identity
    ``p.l - (1/K) sum_{i<=K} l_i = sum_{i<=K} (p_i - 1/K)(l_i - l_K) + sum_{i>K} p_i (l_i - l_K)``,
    whose terms are ``<= 0`` on the feasible set, and that ``p_i = 1/K`` on the top ``K`` attains 0.
    """
    ls = _losses(n)
    free = sp.symbols(f"p_1:{n}", real=True)
    ps = lambda: [*free, 1 - sum(free)]  # p_n = 1 - p_1 - ... - p_{n-1}
    gap = define(lambda: sum(p * l for p, l in zip(ps(), ls, strict=True)) - sum(ls[:K]) / K)
    parts = define(
        lambda: (
            sum((ps()[i] - sp.Rational(1, K)) * (ls[i] - ls[K - 1]) for i in range(K))
            + sum(ps()[i] * (ls[i] - ls[K - 1]) for i in range(K, n))
        )
    )
    attained = derived(
        lambda g: g.subs({p: sp.Rational(1, K) for p in free[:K]} | {p: 0 for p in free[K:]}),
        gap,
        differentiates=False,
    )
    out = {
        "gap identity": prove_equal(gap, parts),
        "attained at 1/k on top k": prove_equal(attained, 0),
    }
    if verbose:
        shown = {
            "gap identity": sp.Eq(sp.Symbol("gap"), parts.value),
            "attained at 1/k on top k": attained.value,
        }
        _print_steps(f"top-k, n = {n} losses, k = {K} (one instance; every n, k alike)", out, shown)
    return out


def chi2_inner_max(n: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Chi-square ball (Sec. 3.1): ``p* = 1/n + sqrt(2 rho) (l - mean) / (n ||l - mean||)``.

    Proves: ``sum p* = 1``; the ball ``(1/n) sum (n p_i - 1)^2 / 2 <= rho / n`` is tight at
    ``p*``; ``p*.l = mean + sqrt(2 rho Var_n / n)`` (the printed formula); and ``p*_i >= 0`` is
    equivalent to ``l_i - mean >= -sqrt(n Var_n / (2 rho))`` (the *condition*, which the paper
    leaves unstated). ``p*`` maximises over the ball by Cauchy-Schwarz: ``q = n p - 1`` has
    ``sum q = 0``, ``||q||^2 <= 2 rho`` and ``p.l = mean + (1/n) q.(l - mean)``. Each is proved
    where ``||l - mean|| != 0`` (the losses are not all equal), since ``p*`` divides by it.
    """
    rho = sp.Symbol("rho", positive=True)
    ls = _losses(n)
    spread = [sp.Ne(_norm2(ls), 0)]  # p* divides by ||l - mean||
    out = {
        "sum p* = 1": prove_equal(lambda: sum(_chi2_p(ls, rho)), 1, where=spread),
        "ball tight": prove_equal(
            lambda: sum((n * p - 1) ** 2 for p in _chi2_p(ls, rho)) / (2 * n),
            lambda: rho / n,
            where=spread,
        ),
        "value = mean + sqrt(2 rho Var/n)": prove_equal(
            lambda: sum(p * l for p, l in zip(_chi2_p(ls, rho), ls, strict=True)),
            lambda: sum(ls) / n + sp.sqrt(2 * rho * (_norm2(ls) / n) / n),
            where=spread,
        ),
        "p*_i >= 0 iff condition": prove_equal(  # p*_1 >= 0, times a positive number
            lambda: _chi2_p(ls, rho)[0] * n * sp.sqrt(_norm2(ls)) / sp.sqrt(2 * rho),
            lambda: _centred(ls)[0] + sp.sqrt(n * (_norm2(ls) / n) / (2 * rho)),
            where=spread,
        ),
    }
    if verbose:
        mean_, norm_, var_ = sp.symbols("mean ||l-mean|| Var_n")
        shown = {
            "maximiser p*_1": sp.Eq(
                sp.Symbol("p*_1"),
                sp.Rational(1, n) + sp.sqrt(2 * rho) * (ls[0] - mean_) / (n * norm_),
            ),
            "Var_n": sp.Eq(var_, sp.factor(_norm2(ls) / n)),
            "value = mean + sqrt(2 rho Var/n)": mean_ + sp.sqrt(2 * rho * var_ / n),
            "p*_i >= 0 iff condition": sp.Ge(ls[0] - mean_ + sp.sqrt(n * var_ / (2 * rho)), 0),
        }
        _print_steps(f"chi-square ball, n = {n} losses (one instance; every n alike)", out, shown)
    return out

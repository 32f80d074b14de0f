"""SymPy proofs of the DRO paper's closed forms, Lemma 1 and its recovery claims.

Each function derives one statement and returns ``{name: bool}``: ``True`` only where
:func:`prove_equal` reduced the difference to exactly 0 (or SymPy's ``limit`` returned the exact
value); with ``verbose=True`` it prints each step's intermediate result beside its verdict.
Proofs use a fixed small size (``n`` losses, ``P`` positives and ``N`` negatives of one anchor);
nothing in them depends on the size except the number of terms.

* :func:`kl_inner_max`: DRO-KL's ``p* = softmax(l / gamma)`` and value
  ``gamma log((1/n) sum e^{l/gamma})`` (Sec. 3.2, Namkoong and Duchi 2016), its limits
  (max at ``gamma -> 0``, mean at ``gamma -> inf``) and Lemma 1 in the smooth case.
* :func:`topk_lp_value`: the top-K linear programme's value (Sec. 3.1), by an exact identity.
* :func:`chi2_inner_max`: the chi-square ball's formula (Sec. 3.1) and the condition it needs.
* :func:`grouped_kkt`: supplement Eq. 14-19, the KKT steps of Eq. 7.
* :func:`ls_recovery`: Sec. 3.3 / Eq. 22: DRO-KL-G is LiftedStruct* (Wang et al. Eq. 16) with
  ``alpha = 1/gamma^+``, ``beta = 1/gamma^-``; at ``gamma = 1`` the LS weights (Eq. 6).
* :func:`ms_recovery`: supplement Eq. 23-27: pseudo pairs give MS's weights with thresholds
  ``lambda + m - l_0`` and ``lambda - m + l_0`` (erratum: ``l_0 = m``, not 0, is exact).
* :func:`hap2s_recovery`: supplement Eq. 30-34: HAP2S_E's gradient is DRO-KL-G's with the same
  ``gamma`` (so LS's only at ``gamma = 1``), where its hinge is open.

The paper's misprinted forms (Eq. 3's ``lambda``, supplement Eq. 14 and 27) are proved as they
should read in :mod:`dmlbook.symbolic.dro_printed`.

Chapter: ``book/12_dro.ipynb`` (12.3, 12.5, 12.6). Tests: ``tests/symbolic/test_dro.py``.
"""

from __future__ import annotations

import sympy as sp

from .proofs import derived, prove_equal
from .symbols import hyperparameters

__all__ = [
    "chi2_inner_max",
    "grouped_kkt",
    "hap2s_recovery",
    "kl_inner_max",
    "ls_recovery",
    "ms_recovery",
    "topk_lp_value",
]


def _losses(n: int, name: str = "l") -> list[sp.Symbol]:
    return [sp.Symbol(f"{name}_{k}", real=True) for k in range(1, n + 1)]


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


def _kl_stationary_point(ls: list[sp.Expr], gamma: sp.Symbol) -> tuple[list[sp.Expr], sp.Expr]:
    """Solve ``d/dp_j [sum p l - gamma sum p log(n p) - v (sum p - 1)] = 0`` and ``sum p = 1``."""
    n = len(ls)
    v = sp.Symbol("v", real=True)
    ps = sp.symbols(f"p_1:{n + 1}", positive=True)
    lag = sum(p * l for p, l in zip(ps, ls, strict=True))
    lag -= gamma * sum(p * sp.log(n * p) for p in ps) + v * (sum(ps) - 1)
    p_of_v = [sp.solve(sp.diff(lag, p), p)[0] for p in ps]  # Eq. 15: (1/n) e^{(l - v)/gamma - 1}
    v_star = sp.solve(sp.Eq(sum(p_of_v), 1), v)[0]  # Eq. 18
    return [sp.simplify(p.subs(v, v_star)) for p in p_of_v], v_star


def kl_inner_max(n: int = 3, verbose: bool = False) -> dict[str, bool]:
    """DRO-KL (Sec. 3.2): closed form of ``max_{p in Delta} p.l - gamma KL(p || 1/n)``.

    Returns proofs of: ``p*`` is the softmax of ``l/gamma``; the objective is strictly concave
    (Hessian ``-gamma / p_j`` on the diagonal, so ``p*`` is the unique maximiser); the optimal
    value is ``gamma log((1/n) sum e^{l/gamma})``; its limits are ``max l`` (``gamma -> 0+``,
    with ``l_1`` the strict maximum) and ``mean l`` (``gamma -> inf``); and Lemma 1 (smooth):
    ``dF/dtheta = sum p*_j dl_j/dtheta`` for losses ``l_j(theta)``. With ``verbose`` it prints
    the stationary point, the multiplier, ``p*_1``, the value and the limits beside the verdicts.
    """
    gamma = sp.Symbol("gamma", positive=True)
    ls = _losses(n)
    p_star, v_star = _kl_stationary_point(ls, gamma)
    total = sum(sp.exp(l / gamma) for l in ls)
    out = {
        "p* = softmax(l/gamma)": prove_equal(
            lambda: p_star, lambda: [sp.exp(l / gamma) / total for l in ls]
        )
    }
    ps = sp.symbols(f"p_1:{n + 1}", positive=True)
    obj = sum(p * l for p, l in zip(ps, ls, strict=True)) - gamma * sum(
        p * sp.log(n * p) for p in ps
    )
    hess = sp.hessian(obj, ps)
    out["Hessian = diag(-gamma/p)"] = prove_equal(
        lambda: hess, lambda: sp.diag(*[-gamma / p for p in ps])
    )
    value = obj.subs(dict(zip(ps, p_star, strict=True)))
    closed = gamma * sp.log(total / n)
    out["value = gamma log mean e^{l/gamma}"] = prove_equal(
        lambda: sp.expand_log(value, force=False), lambda: closed
    )
    top = sp.Symbol("top", real=True)  # l_1 = top, l_k = top - delta_k with delta_k > 0
    deltas = sp.symbols(f"delta_2:{n + 1}", positive=True)
    strict = dict(zip(ls, [top, *(top - dk for dk in deltas)], strict=True))
    rest = gamma * sp.log((1 + sum(sp.exp(-dk / gamma) for dk in deltas)) / n)
    out["value = max l + remainder"] = prove_equal(
        lambda: sp.expand_log(closed.subs(strict) - top, force=True),
        lambda: sp.expand_log(rest, force=True),
    )
    lim_0 = sp.limit(rest, gamma, 0, "+")
    out["gamma -> 0: max l"] = lim_0 == 0
    t = sp.Symbol("t", positive=True)
    lim_inf = sp.limit(closed.subs(gamma, 1 / t), t, 0, "+")
    out["gamma -> inf: mean l"] = prove_equal(lambda: lim_inf, lambda: sum(ls) / n)
    theta = sp.Symbol("theta", real=True)
    lf = [sp.Function(f"l{k}", real=True)(theta) for k in range(1, n + 1)]  # real losses
    F = gamma * sp.log(sum(sp.exp(l / gamma) for l in lf) / n)
    pw = [sp.exp(l / gamma) / sum(sp.exp(m / gamma) for m in lf) for l in lf]
    grad = sum(p * sp.diff(l, theta) for p, l in zip(pw, lf, strict=True))
    out["Lemma 1: dF = sum p* dl"] = prove_equal(derived(sp.diff(F, theta)), lambda: grad)
    if verbose:
        v = sp.Symbol("v", real=True)
        shown = {
            "stationary point p_1(v)": sp.exp((ls[0] - v) / gamma - 1) / n,
            "multiplier v* (sum p = 1)": sp.simplify(v_star),
            "p* = softmax(l/gamma)": sp.Eq(sp.Symbol("p*_1"), p_star[0]),
            "value = gamma log mean e^{l/gamma}": closed,
            "value = max l + remainder": sp.Eq(sp.Symbol("remainder"), rest),
            "gamma -> 0: max l": sp.Eq(sp.Symbol("lim remainder"), lim_0),
            "gamma -> inf: mean l": sp.Eq(sp.Symbol("lim value"), lim_inf),
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
    ps = list(sp.symbols(f"p_1:{n}", real=True))
    ps.append(1 - sum(ps))
    gap = sum(p * l for p, l in zip(ps, ls, strict=True)) - sum(ls[:K]) / K
    parts = sum((ps[i] - sp.Rational(1, K)) * (ls[i] - ls[K - 1]) for i in range(K))
    parts += sum(ps[i] * (ls[i] - ls[K - 1]) for i in range(K, n))
    attained = gap.subs({p: sp.Rational(1, K) for p in ps[:K]} | {p: 0 for p in ps[K:-1]})
    out = {
        "gap identity": prove_equal(lambda: gap, lambda: parts),
        "attained at 1/k on top k": attained == 0,
    }
    if verbose:
        shown = {
            "gap identity": sp.Eq(sp.Symbol("gap"), parts),
            "attained at 1/k on top k": attained,
        }
        _print_steps(f"top-k, n = {n} losses, k = {K} (one instance; every n, k alike)", out, shown)
    return out


def chi2_inner_max(n: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Chi-square ball (Sec. 3.1): ``p* = 1/n + sqrt(2 rho) (l - mean) / (n ||l - mean||)``.

    Proves: ``sum p* = 1``; the ball ``(1/n) sum (n p_i - 1)^2 / 2 <= rho / n`` is tight at
    ``p*``; ``p*.l = mean + sqrt(2 rho Var_n / n)`` (the printed formula); and ``p*_i >= 0`` is
    equivalent to ``l_i - mean >= -sqrt(n Var_n / (2 rho))`` (the *condition*, which the paper
    leaves unstated). ``p*`` maximises over the ball by Cauchy-Schwarz: ``q = n p - 1`` has
    ``sum q = 0``, ``||q||^2 <= 2 rho`` and ``p.l = mean + (1/n) q.(l - mean)``.
    """
    rho = sp.Symbol("rho", positive=True)
    ls = _losses(n)
    mean = sum(ls) / n
    c = [l - mean for l in ls]
    norm = sp.sqrt(sum(x**2 for x in c))
    var = sum(x**2 for x in c) / n
    p = [sp.Rational(1, n) + sp.sqrt(2 * rho) * x / (n * norm) for x in c]
    ball = sum((n * pi - 1) ** 2 for pi in p) / (2 * n)
    value = sum(pi * l for pi, l in zip(p, ls, strict=True))
    nonneg_lhs = p[0] * n * norm / sp.sqrt(2 * rho)  # p_1 >= 0, times a positive number
    cond = c[0] + sp.sqrt(n * var / (2 * rho))
    spread = [sp.Ne(sum(x**2 for x in c), 0)]  # p* divides by ||l - mean||: not all equal
    out = {
        "sum p* = 1": prove_equal(lambda: sum(p), 1, where=spread),
        "ball tight": prove_equal(lambda: ball, lambda: rho / n, where=spread),
        "value = mean + sqrt(2 rho Var/n)": prove_equal(
            lambda: value, lambda: mean + sp.sqrt(2 * rho * var / n), where=spread
        ),
        "p*_i >= 0 iff condition": prove_equal(lambda: nonneg_lhs, lambda: cond, where=spread),
    }
    if verbose:
        mean_, norm_, var_ = sp.symbols("mean ||l-mean|| Var_n")
        shown = {
            "maximiser p*_1": sp.Eq(
                sp.Symbol("p*_1"),
                sp.Rational(1, n) + sp.sqrt(2 * rho) * (ls[0] - mean_) / (n * norm_),
            ),
            "Var_n": sp.Eq(var_, sp.factor(var)),
            "value = mean + sqrt(2 rho Var/n)": mean_ + sp.sqrt(2 * rho * var_ / n),
            "p*_i >= 0 iff condition": sp.Ge(ls[0] - mean_ + sp.sqrt(n * var_ / (2 * rho)), 0),
        }
        _print_steps(f"chi-square ball, n = {n} losses (one instance; every n alike)", out, shown)
    return out


def grouped_kkt(P: int = 2, N: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Supplement Eq. 14-19: KKT of Eq. 7 for one anchor, each group on its own.

    Proves Eq. 15 (stationarity, ``p_j = (1/n) e^{(l_j - v)/gamma - 1}``), Eq. 18 (the
    multiplier from the equality constraint) and Eq. 19 (``p*_j = 1/sum_k e^{(l_k - l_j)/gamma}``
    and, for the margin loss with open hinges, ``1/sum_k e^{(S_j - S_k)/gamma}`` on positives,
    ``1/sum_k e^{(S_k - S_j)/gamma}`` on negatives). Eq. 13's product of multipliers and
    constraints is vacuous (equality constraints); the constraint itself fixes ``v``.
    """
    gamma, m, lam = hyperparameters("gamma m lambda")
    out, shown = {}, {}
    for name, size, sign in (("positive", P, 1), ("negative", N, -1)):
        s = _losses(size, "S")
        ls = [m + sign * (lam - x) for x in s]
        p_star, v_star = _kl_stationary_point(ls, gamma)
        eq18 = gamma * sp.log(sum(sp.exp(l / gamma - 1) for l in ls) / size)
        out[f"Eq. 18 ({name})"] = prove_equal(derived(v_star), derived(eq18))
        shown[f"Eq. 18 ({name})"] = sp.Eq(sp.Symbol("v*"), eq18)
        eq19 = [1 / sum(sp.exp(sign * (sj - sk) / gamma) for sk in s) for sj in s]
        out[f"Eq. 19 ({name})"] = prove_equal(derived(p_star), derived(eq19))
        shown[f"Eq. 19 ({name})"] = sp.Eq(sp.Symbol("p*_1"), eq19[0])
    if verbose:
        _print_steps(f"Eq. 7 per group, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def _group_value(ls: list[sp.Expr], gamma: sp.Expr, pseudo: sp.Expr | None = None) -> sp.Expr:
    terms = [sp.exp(l / gamma) for l in ls] + (
        [sp.exp(pseudo / gamma)] if pseudo is not None else []
    )
    return gamma * sp.log(sum(terms) / len(terms))


def ls_recovery(P: int = 2, N: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Sec. 3.3: DRO-KL-G with the margin loss (open hinges) and the lifted-structure loss.

    Proves, for one anchor: ``F_i(gamma = 1) = LS_i + 2 m - log(P N)`` where ``LS_i`` is Eq. 3's
    term *before its hinge*, so the weights are equal (Eq. 6 = Eq. 19 at ``gamma = 1``); and for
    any ``gamma``, ``F_i = LiftedStruct*_i(alpha = 1/gamma, beta = 1/gamma) + const`` (Wang et al.
    Eq. 16). The recovery is exact only where every margin hinge is open (``m`` large, no pair
    dropped) *and* Eq. 3's ``[.]_+`` is open: where the LS term is negative its gradient is 0
    and DRO-KL-G's is not (erratum; ``tests/losses/test_dro_grouped.py`` shows one).
    """
    gamma, m, lam = hyperparameters("gamma m lambda")
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    F = _group_value([m + lam - x for x in sp_], gamma) + _group_value(
        [m + x - lam for x in sn], gamma
    )
    ls_inner = sp.log(sum(sp.exp(lam - x) for x in sp_)) + sp.log(sum(sp.exp(x - lam) for x in sn))
    star = gamma * sp.log(sum(sp.exp(-x / gamma) for x in sp_))
    star += gamma * sp.log(sum(sp.exp(x / gamma) for x in sn))
    const = 2 * m - sp.log(P * N) * gamma
    wrt = [*sp_, *sn]
    eq6 = [-1 / sum(sp.exp(sj - sk) for sk in sp_) for sj in sp_]
    eq6 += [1 / sum(sp.exp(sk - sj) for sk in sn) for sj in sn]
    f1 = F.subs(gamma, 1)
    out = {
        "F(gamma=1) - LS = 2m - log(PN)": prove_equal(
            lambda: sp.expand_log(f1 - ls_inner), lambda: 2 * m - sp.log(P * N)
        ),
        "weights(gamma=1) = Eq. 6": prove_equal(
            derived([sp.diff(f1, x) for x in wrt]), lambda: eq6
        ),
        "F - LiftedStruct*(1/gamma) constant": prove_equal(
            lambda: sp.expand_log(F - star), lambda: const
        ),
    }
    if verbose:
        shown = {
            "F(gamma=1) - LS = 2m - log(PN)": 2 * m - sp.log(P * N),
            "weights(gamma=1) = Eq. 6": sp.Eq(sp.Symbol("dF/ds^+_1"), eq6[0]),
            "F - LiftedStruct*(1/gamma) constant": const,
        }
        _print_steps(f"LS recovery, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def ms_recovery(P: int = 2, N: int = 2, verbose: bool = False) -> dict[str, bool]:
    """Supplement Eq. 23-27: pseudo pairs of loss ``l_0``, ``gamma^+ = 1/alpha``, ``gamma^- = 1/beta``.

    Proves: the weights are MS's (Wang et al. 2019, gradient of Eq. 15 without mining) with the
    positive threshold ``lambda + m - l_0`` and the negative one ``lambda - m + l_0``; hence the
    corrected pseudo loss ``l_0 = m`` gives MS with ``lambda`` for every ``m``; the printed
    ``l_0 = 0`` gives Eq. 25's two thresholds ``lambda +- m``, one ``lambda`` only at ``m = 0``.
    """
    a, b, m, lam = hyperparameters("alpha beta m lambda")
    l0 = sp.Symbol("l_0", real=True, nonnegative=True)  # the pseudo pair's loss: 0 or m
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    F = _group_value([m + lam - x for x in sp_], 1 / a, l0)
    F += _group_value([m + x - lam for x in sn], 1 / b, l0)

    def ms(lp: sp.Expr, ln: sp.Expr) -> sp.Expr:
        pos = sp.log(1 + sum(sp.exp(-a * (x - lp)) for x in sp_)) / a
        return pos + sp.log(1 + sum(sp.exp(b * (x - ln)) for x in sn)) / b

    wrt = [*sp_, *sn]
    grad = [sp.diff(F, x) for x in wrt]
    shifted = [sp.diff(ms(lam + m - l0, lam - m + l0), x) for x in wrt]
    corrected = [g.subs(l0, m) for g in grad]
    single = [sp.diff(ms(lam, lam), x) for x in wrt]
    eq27 = [-1 / (sp.exp(a * (sj - lam)) + sum(sp.exp(a * (sj - sk)) for sk in sp_)) for sj in sp_]
    eq27 += [1 / (sp.exp(b * (lam - sj)) + sum(sp.exp(b * (sk - sj)) for sk in sn)) for sj in sn]
    out = {
        "weights = MS(lambda + m - l0, lambda - m + l0)": prove_equal(
            lambda: grad, lambda: shifted
        ),
        "l0 = m: weights = MS(lambda)": prove_equal(lambda: corrected, lambda: single),
        "MS(lambda) weights = Eq. 27": prove_equal(lambda: single, lambda: eq27),
        "printed l0 = 0, m = 0: weights = MS(lambda)": prove_equal(
            lambda: [g.subs({l0: 0}).subs(m, 0) for g in grad], lambda: single
        ),
    }
    if verbose:
        cp, cn = lam + m - l0, lam - m + l0  # the thresholds the division of 12.6 finds
        at0 = f"l0 = 0: c^+ = {cp.subs(l0, 0)}, c^- = {cn.subs(l0, 0)}"
        shown = {
            "weights = MS(lambda + m - l0, lambda - m + l0)": f"c^+ = {cp}, c^- = {cn}",
            "l0 = m: weights = MS(lambda)": f"c^+ = {cp.subs(l0, m)}, c^- = {cn.subs(l0, m)}",
            "MS(lambda) weights = Eq. 27": sp.Eq(sp.Symbol("w^+_1"), eq27[0]),
            "printed l0 = 0, m = 0: weights = MS(lambda)": at0
            + f", equal iff m = {sp.solve(sp.Eq(cp, cn).subs(l0, 0), m)[0]}",
        }
        _print_steps(f"MS recovery, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def hap2s_recovery(P: int = 2, N: int = 2, verbose: bool = False) -> dict[str, bool]:
    """Supplement Eq. 30-34: HAP2S_E vs DRO-KL-G, for one anchor with an open hinge.

    The weights ``q`` are constants for the gradient, so ``d/dS_j`` of the weighted mean is
    ``q_j / sum q``: proves that these equal DRO-KL-G's ``p*`` at the same ``gamma`` (Eq. 34 =
    Eq. 21), and that they equal Eq. 22's lifted-structure weights at ``gamma = 1``. With
    ``verbose`` it prints the first positive's weight of each side beside the verdicts.
    """
    gamma, m, lam = hyperparameters("gamma m lambda")
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    qp = [sp.exp(-x / gamma) for x in sp_]
    qn = [sp.exp(x / gamma) for x in sn]
    hap = [-q / sum(qp) for q in qp] + [q / sum(qn) for q in qn]
    F = _group_value([m + lam - x for x in sp_], gamma) + _group_value(
        [m + x - lam for x in sn], gamma
    )
    dro = [sp.diff(F, x) for x in [*sp_, *sn]]
    eq22 = [-1 / sum(sp.exp(sj - sk) for sk in sp_) for sj in sp_]
    eq22 += [1 / sum(sp.exp(sk - sj) for sk in sn) for sj in sn]
    out = {
        "HAP2S_E weights = DRO-KL-G(gamma)": prove_equal(lambda: hap, lambda: dro),
        "HAP2S_E(gamma=1) = LS (Eq. 22)": prove_equal(
            lambda: [h.subs(gamma, 1) for h in hap], lambda: eq22
        ),
    }
    if verbose:
        shown = {
            "HAP2S_E weight, dL/ds^+_1": hap[0],
            "DRO-KL-G weight, dF/ds^+_1": sp.together(dro[0]),
            "HAP2S_E weights = DRO-KL-G(gamma)": sp.Eq(sp.Symbol("dF/ds^+_1"), sp.cancel(dro[0])),
            "HAP2S_E(gamma=1) = LS (Eq. 22)": sp.Eq(sp.Symbol("w^+_1"), eq22[0]),
        }
        _print_steps(f"HAP2S_E, {P} positives, {N} negatives (one instance)", out, shown)
    return out

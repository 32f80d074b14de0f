"""SymPy proofs of the DRO paper's recovery claims: DRO-KL-G (Eq. 7) gives back LiftedStruct*,
MS and HAP2S_E, through the KKT steps of the supplement.

Each function returns ``{name: bool}`` and prints its steps with ``verbose=True``, as the proofs
of :mod:`dmlbook.symbolic.dro` do, with sides built the same way (:mod:`.sides`); the
definitions it shares with them (the per-group value, the KKT point, LiftedStruct*'s bracket,
supplement Eq. 27) live there.

* :func:`grouped_kkt`: supplement Eq. 14-19, the KKT steps of Eq. 7.
* :func:`ls_recovery`: Sec. 3.3 / Eq. 22: DRO-KL-G is LiftedStruct* (Wang et al. Eq. 16) with
  ``alpha = 1/gamma^+``, ``beta = 1/gamma^-``; at ``gamma = 1`` the LS weights (Eq. 6).
* :func:`ms_recovery`: supplement Eq. 23-27: pseudo pairs give MS's weights with thresholds
  ``lambda + m - l_0`` and ``lambda - m + l_0`` (erratum: ``l_0 = m``, not 0, is exact).
* :func:`hap2s_recovery`: supplement Eq. 30-34: HAP2S_E's gradient is DRO-KL-G's with the same
  ``gamma`` (so LS's only at ``gamma = 1``), where its hinge is open.

Chapter: ``book/12_dro.ipynb`` (12.5, 12.6). Tests: ``tests/symbolic/test_dro_recovery.py``.
"""

from __future__ import annotations

import sympy as sp

from .differentiate import pair_weights
from .dro import _eq27, _group_value, _kl_stationary_point, _losses, _ls_bracket, _print_steps
from .proofs import define, derived, prove_equal
from .symbols import hyperparameters

__all__ = ["grouped_kkt", "hap2s_recovery", "ls_recovery", "ms_recovery"]


def _margin_losses(s: list, sign: int, m: sp.Expr, lam: sp.Expr) -> list[sp.Expr]:
    """The margin loss with its hinge open: ``m + lambda - S`` (positives), ``m + S - lambda``."""
    return [m + sign * (lam - x) for x in s]


def _dro_kl_g(sp_: list, sn: list, gamma: sp.Expr, m: sp.Expr, lam: sp.Expr, l0=None) -> sp.Expr:
    """DRO-KL-G's ``F_i`` for one anchor (Eq. 7's value per group; ``gamma^+ = gamma^-``)."""
    gp, gn = gamma if isinstance(gamma, tuple) else (gamma, gamma)
    pos = _group_value(_margin_losses(sp_, 1, m, lam), gp, l0)
    return pos + _group_value(_margin_losses(sn, -1, m, lam), gn, l0)


def _ls_weights(sp_: list, sn: list) -> list[sp.Expr]:
    """Eq. 6 (= Eq. 22): ``-1/sum_k e^{S_j - S_k}`` on positives, ``1/sum_k e^{S_k - S_j}``."""
    w = [-1 / sum(sp.exp(sj - sk) for sk in sp_) for sj in sp_]
    return w + [1 / sum(sp.exp(sk - sj) for sk in sn) for sj in sn]


def _ms(sp_: list, sn: list, a: sp.Expr, b: sp.Expr, cp: sp.Expr, cn: sp.Expr) -> sp.Expr:
    """MS for one anchor without mining (Wang et al. Eq. 15), thresholds ``cp``, ``cn``."""
    pos = sp.log(1 + sum(sp.exp(-a * (x - cp)) for x in sp_)) / a
    return pos + sp.log(1 + sum(sp.exp(b * (x - cn)) for x in sn)) / b


def _group_kkt(name: str, s: list, sign: int, symbols: tuple, out: dict, shown: dict) -> None:
    """Eq. 18 and 19 for one group (``sign`` 1: positives, -1: negatives), into ``out``."""
    (gamma, m, lam), size = symbols, len(s)
    losses = lambda: _margin_losses(s, sign, m, lam)
    kkt = _kl_stationary_point(losses, gamma, size)
    eq18 = define(lambda: gamma * sp.log(sum(sp.exp(l / gamma - 1) for l in losses()) / size))
    eq19 = define(lambda: [1 / sum(sp.exp(sign * (sj - sk) / gamma) for sk in s) for sj in s])
    out[f"Eq. 18 ({name})"] = prove_equal(kkt["v*"], eq18)
    out[f"Eq. 19 ({name})"] = prove_equal(kkt["p*"], eq19)
    shown[f"Eq. 18 ({name})"] = sp.Eq(sp.Symbol("v*"), eq18.value)
    shown[f"Eq. 19 ({name})"] = sp.Eq(sp.Symbol("p*_1"), eq19.value[0])


def grouped_kkt(P: int = 2, N: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Supplement Eq. 14-19: KKT of Eq. 7 for one anchor, each group on its own.

    Derives from each group's Lagrangian, as defined: Eq. 15 (stationarity,
    ``p_j = (1/n) e^{(l_j - v)/gamma - 1}``), Eq. 18 (the multiplier from the equality
    constraint) and Eq. 19 (``p*_j = 1/sum_k e^{(l_k - l_j)/gamma}`` and, for the margin loss
    with open hinges, ``1/sum_k e^{(S_j - S_k)/gamma}`` on positives, ``1/sum_k e^{(S_k -
    S_j)/gamma}`` on negatives: sums of exponentials, positive, so no condition is needed).
    Eq. 13's product of multipliers and constraints is vacuous (equality constraints); the
    constraint itself fixes ``v``.
    """
    gamma, m, lam = hyperparameters("gamma m lambda")
    out, shown = {}, {}
    for name, size, sign in (("positive", P, 1), ("negative", N, -1)):
        _group_kkt(name, _losses(size, "S"), sign, (gamma, m, lam), out, shown)
    if verbose:
        _print_steps(f"Eq. 7 per group, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def ls_recovery(P: int = 2, N: int = 3, verbose: bool = False) -> dict[str, bool]:
    """Sec. 3.3: DRO-KL-G with the margin loss (open hinges) and the lifted-structure loss.

    Proves, for one anchor: ``F_i(gamma = 1) = LS_i + 2 m - log(P N)`` where ``LS_i`` is Eq. 3's
    term *before its hinge*, so the weights (derived from ``F_i`` as defined) are equal (Eq. 6 =
    Eq. 19 at ``gamma = 1``); and for any ``gamma``, ``F_i = LiftedStruct*_i(alpha = 1/gamma,
    beta = 1/gamma) + const`` (Wang et al. Eq. 16). The recovery is exact only where every
    margin hinge is open (``m`` large, no pair dropped) *and* Eq. 3's ``[.]_+`` is open: where
    the LS term is negative its gradient is 0 and DRO-KL-G's is not (erratum;
    ``tests/losses/test_dro_grouped.py`` shows one).
    """
    gamma, m, lam = hyperparameters("gamma m lambda")
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    weights = derived(pair_weights, lambda: _dro_kl_g(sp_, sn, 1, m, lam), sp.Matrix([*sp_, *sn]))
    eq6 = define(lambda: sp.Matrix(_ls_weights(sp_, sn)))
    out = {
        "F(gamma=1) - LS = 2m - log(PN)": prove_equal(
            lambda: _dro_kl_g(sp_, sn, 1, m, lam) - _ls_bracket(sp_, sn, lam),
            lambda: 2 * m - sp.log(P * N),
        ),
        "weights(gamma=1) = Eq. 6": prove_equal(weights, eq6),
        "F - LiftedStruct*(1/gamma) constant": prove_equal(
            lambda: _dro_kl_g(sp_, sn, gamma, m, lam) - _ls_bracket(sp_, sn, 0, gamma),
            lambda: 2 * m - sp.log(P * N) * gamma,
        ),
    }
    if verbose:
        shown = {
            "F(gamma=1) - LS = 2m - log(PN)": 2 * m - sp.log(P * N),
            "weights(gamma=1) = Eq. 6": sp.Eq(sp.Symbol("dF/ds^+_1"), eq6.value[0]),
            "F - LiftedStruct*(1/gamma) constant": 2 * m - sp.log(P * N) * gamma,
        }
        _print_steps(f"LS recovery, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def ms_recovery(P: int = 2, N: int = 2, verbose: bool = False) -> dict[str, bool]:
    """Supplement Eq. 23-27: pseudo pairs of loss ``l_0``, ``gamma^+ = 1/alpha``, ``gamma^- = 1/beta``.

    Proves: the weights (derived from DRO-KL-G with pseudo pairs, as defined) are MS's (Wang et
    al. 2019, gradient of Eq. 15 without mining) with the positive threshold ``lambda + m - l_0``
    and the negative one ``lambda - m + l_0``; hence the corrected pseudo loss ``l_0 = m`` gives
    MS with ``lambda`` for every ``m``; the printed ``l_0 = 0`` gives Eq. 25's two thresholds
    ``lambda +- m``, one ``lambda`` only at ``m = 0``.
    """
    a, b, m, lam = hyperparameters("alpha beta m lambda")
    l0 = sp.Symbol("l_0", real=True, nonnegative=True)  # the pseudo pair's loss: 0 or m
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    wrt = sp.Matrix([*sp_, *sn])
    grad = derived(pair_weights, lambda: _dro_kl_g(sp_, sn, (1 / a, 1 / b), m, lam, l0), wrt)
    shifted = derived(pair_weights, lambda: _ms(sp_, sn, a, b, lam + m - l0, lam - m + l0), wrt)
    single = derived(pair_weights, lambda: _ms(sp_, sn, a, b, lam, lam), wrt)
    corrected = derived(lambda g: g.subs(l0, m), grad, differentiates=False)
    printed = derived(lambda g: g.subs(l0, 0).subs(m, 0), grad, differentiates=False)
    eq27 = define(lambda: sp.Matrix(_eq27(sp_, sn, a, b, lam)))
    out = {
        "weights = MS(lambda + m - l0, lambda - m + l0)": prove_equal(grad, shifted),
        "l0 = m: weights = MS(lambda)": prove_equal(corrected, single),
        "MS(lambda) weights = Eq. 27": prove_equal(single, eq27),
        "printed l0 = 0, m = 0: weights = MS(lambda)": prove_equal(printed, single),
    }
    if verbose:
        cp, cn = lam + m - l0, lam - m + l0  # the thresholds the division of 12.6 finds
        at0 = f"l0 = 0: c^+ = {cp.subs(l0, 0)}, c^- = {cn.subs(l0, 0)}"
        shown = {
            "weights = MS(lambda + m - l0, lambda - m + l0)": f"c^+ = {cp}, c^- = {cn}",
            "l0 = m: weights = MS(lambda)": f"c^+ = {cp.subs(l0, m)}, c^- = {cn.subs(l0, m)}",
            "MS(lambda) weights = Eq. 27": sp.Eq(sp.Symbol("w^+_1"), eq27.value[0]),
            "printed l0 = 0, m = 0: weights = MS(lambda)": at0
            + f", equal iff m = {sp.solve(sp.Eq(cp, cn).subs(l0, 0), m)[0]}",
        }
        _print_steps(f"MS recovery, {P} positives, {N} negatives (one instance)", out, shown)
    return out


def hap2s_recovery(P: int = 2, N: int = 2, verbose: bool = False) -> dict[str, bool]:
    """Supplement Eq. 30-34: HAP2S_E vs DRO-KL-G, for one anchor with an open hinge.

    HAP2S_E (corrected Eq. 30-31) is ``Sbar^- - Sbar^+ + m`` with the weighted means
    ``Sbar = sum_j q_j S_j / sum_j q_j``, ``q^+_j = e^{-S_j/gamma}``, ``q^-_j = e^{S_j/gamma}``,
    whose weights ``q`` are constants for the gradient (Eq. 33): the gradient is derived with
    ``q`` held as symbols, then ``q`` is substituted. Proves that it equals DRO-KL-G's ``p*``
    at the same ``gamma`` (Eq. 34 = Eq. 21), and Eq. 22's lifted-structure weights at
    ``gamma = 1``. With ``verbose`` it prints the first positive's weight of each side.
    """
    gamma, m, lam = hyperparameters("gamma m lambda")
    sp_, sn = _losses(P, "s^+"), _losses(N, "s^-")
    qp = sp.symbols(f"q^+_1:{P + 1}", positive=True)  # the weights q as constants (Eq. 33)
    qn = sp.symbols(f"q^-_1:{N + 1}", positive=True)
    wrt = sp.Matrix([*sp_, *sn])

    def hap2s_e() -> sp.Expr:
        pos = sum(q * x for q, x in zip(qp, sp_, strict=True)) / sum(qp)
        return sum(q * x for q, x in zip(qn, sn, strict=True)) / sum(qn) - pos + m

    hap = derived(
        lambda w: w.subs(
            {q: sp.exp(-x / gamma) for q, x in zip(qp, sp_, strict=True)}
            | {q: sp.exp(x / gamma) for q, x in zip(qn, sn, strict=True)}
        ),
        derived(pair_weights, hap2s_e, wrt),
        differentiates=False,
    )
    dro = derived(pair_weights, lambda: _dro_kl_g(sp_, sn, gamma, m, lam), wrt)
    at_1 = derived(lambda w: w.subs(gamma, 1), hap, differentiates=False)
    eq22 = define(lambda: sp.Matrix(_ls_weights(sp_, sn)))
    out = {
        "HAP2S_E weights = DRO-KL-G(gamma)": prove_equal(hap, dro),
        "HAP2S_E(gamma=1) = LS (Eq. 22)": prove_equal(at_1, eq22),
    }
    if verbose:
        shown = {
            "HAP2S_E weight, dL/ds^+_1": hap.value[0],
            "DRO-KL-G weight, dF/ds^+_1": sp.together(dro.value[0]),
            "HAP2S_E weights = DRO-KL-G(gamma)": sp.Eq(
                sp.Symbol("dF/ds^+_1"), sp.cancel(dro.value[0])
            ),
            "HAP2S_E(gamma=1) = LS (Eq. 22)": sp.Eq(sp.Symbol("w^+_1"), eq22.value[0]),
        }
        _print_steps(f"HAP2S_E, {P} positives, {N} negatives (one instance)", out, shown)
    return out

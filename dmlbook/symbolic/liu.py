"""Liu et al.'s weighting by design, proved: which weightings are gradients, limits, MS v1 vs v2.

Chapter: ``book/11_liu_weighting.ipynb`` (11.2-11.4 call these functions in their proof cells).
Tests: ``tests/symbolic/test_liu.py`` runs every proof. Each function returns exact SymPy results
(``prove_equal`` is True only for a proof; a difference is shown by an exact counterexample).

Notation: for one anchor, ``u_j = D_ij - m1 > 0`` on its mined positives (``m2 - D_ik > 0`` on
its mined negatives, the same algebra), where the hinges of Eq. 18 are active and linear, and
``t_jk = D_ij - D_ik + m > 0`` on its active triplets (Eq. 21). The book writes ``u`` rather than
``x``, which is a network output there.

* :func:`eq18_detached_gradient`: Eq. 18 with detached weights has ``dL/dD = w`` (and, on the
  unit sphere, ``dL/dS = -w / D``); without the detach the gradient gains ``w'(D) [D - m1]``.
* :func:`closed_forms`: the losses whose gradients are the power and exponential weights (v0),
  the per-anchor normalised exponential weights (a log-sum-exp; Pair-E v1 = Eq. 38) and the
  normalised constant weights (a mean); each proved.
* :func:`normalised_power_is_not_a_gradient`: the normalised power weights (Pair-P/Triplet-P v1,
  ``p > 0``) have a non-symmetric Jacobian and a non-zero circulation around a closed loop, so
  no loss has them as gradient: they are a designed gradient only.
* :func:`paper_limit_steps`: ``p, q -> 0`` gives the average (only for ``D > m1``), large
  ``alpha`` concentrates Triplet-E on the hardest triplet, ``alpha -> 0`` in MS; each limit with
  the expression it is taken of (:func:`paper_limits`: the values only).
* :func:`ms_v2_is_lifted_star`: MS v2 on distances *is* LiftedStruct* on distances (the margin
  cancels); the "+1" of v1 is a virtual pair at distance ``m`` on each side.
* :func:`ms_margin_derivatives`: the intermediate result behind it, ``d/dm`` of each version's
  anchor term: 0 for v2, not 0 for v1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy as sp

from .proofs import define, derived, prove_equal
from .symbols import HYPERPARAMETER_DOMAINS, hyperparameters, unit_sphere_distance

__all__ = [
    "ClosedForm",
    "LimitStep",
    "closed_forms",
    "eq18_detached_gradient",
    "ms_margin_derivatives",
    "ms_v2_is_lifted_star",
    "normalised_power_is_not_a_gradient",
    "paper_limit_steps",
    "paper_limits",
]


def _positive(name: str, n: int) -> list[sp.Symbol]:
    return list(sp.symbols(f"{name}1:{n + 1}", positive=True))


# Each proof below takes its sides as typed or derived from a definition built as typed
# (:mod:`dmlbook.symbolic.sides`): the loss is written once (``define``), SymPy differentiates
# it (``derived``), and the closed form is typed inside the call, so that no division is
# cancelled before the proof sees it. The builders take symbols only.


def _gradient(F: sp.Expr, *v: sp.Symbol) -> list[sp.Expr]:
    """``[dF/dv_1, ...]``: the operation ``derived`` applies to a loss (it differentiates)."""
    return [sp.diff(F, x) for x in v]


def _eq18_active(cp, cn, Dp, Dn, m1, m2) -> sp.Expr:  # noqa: ANN001 (symbols)
    """Eq. 18 on the mined set with its hinges active (``[D - m1]_+ = D - m1``, ``[m2 - D]_+ =
    m2 - D``), the weights as the numbers ``c_j``, ``e_k`` that ``D.detach()`` leaves."""
    return sum(c * (d - m1) for c, d in zip(cp, Dp, strict=True)) + sum(
        e * (m2 - d) for e, d in zip(cn, Dn, strict=True)
    )


def _held(numbers, D, w) -> dict:  # noqa: ANN001 (symbols, a SymPy function)
    """``{c_j: w(D_j)}``: each detached number is the weight function at its distance."""
    return {c: w(d) for c, d in zip(numbers, D, strict=True)}


def eq18_detached_gradient(n_pos: int = 2, n_neg: int = 2) -> dict[str, object]:
    """Eq. 18 with weights held constant (``D.detach()``) has the GPW gradient ``dL/dD = w``.

    Returns ``{"detached": bool, "on_S": bool, "not_detached_extra": Expr, "gradient": list,
    "dL_dS": Expr}``: the proofs that ``dL/dD+_j = w+_j``, ``dL/dD-_k = -w-_k`` for every weight
    function ``w`` (an undefined SymPy function), that on unit vectors ``dL/dS_ij = -w_ij /
    D_ij``, the extra term an un-detached weight would add to ``dL/dD+_1``, and the intermediate
    results the proofs compare: the gradient ``[dL/dD+_1, ..., dL/dD-_n]`` as differentiated
    (weights detached), and ``d/dS [c (D(S) - m1)]`` for a constant ``c``.
    """
    m1, m2 = (
        sp.Symbol(n, **HYPERPARAMETER_DOMAINS[d][0]) for n, d in (("m1", "m_1"), ("m2", "m_2"))
    )
    Dp, Dn = _positive("D^+_", n_pos), _positive("D^-_", n_neg)
    wp, wn = sp.Function("w^+"), sp.Function("w^-")
    cp, cn = sp.symbols(f"c1:{n_pos + 1}"), sp.symbols(f"e1:{n_neg + 1}")  # the detached numbers
    L = define(lambda: _eq18_active(cp, cn, Dp, Dn, m1, m2))

    def detach(F: sp.Expr, *v: sp.Symbol) -> list[sp.Expr]:  # differentiate, then c_j = w(D_j)
        return [g.subs(_held(cp, Dp, wp) | _held(cn, Dn, wn)) for g in _gradient(F, *v)]

    grad = derived(detach, L, *Dp, *Dn, differentiates=True)
    detached = prove_equal(grad, lambda: [wp(d) for d in Dp] + [-wn(d) for d in Dn], verbose=False)
    s = sp.Symbol("s", real=True)
    c = sp.Symbol("c", real=True)
    on_S = prove_equal(
        derived(sp.diff, lambda: c * (unit_sphere_distance(s) - m1), s),
        lambda: -c / unit_sphere_distance(s),
        where=[s < 1],  # distinct points: D > 0
        verbose=False,
    )
    live = L.value.subs(_held(cp, Dp, wp) | _held(cn, Dn, wn))
    extra = sp.simplify(sp.diff(live, Dp[0]) - wp(Dp[0]))
    dL_dS = sp.simplify(sp.diff(c * (unit_sphere_distance(s) - m1), s))
    return {
        "detached": detached,
        "on_S": on_S,
        "not_detached_extra": extra,
        "gradient": grad.value,
        "dL_dS": dL_dS,
    }


@dataclass(frozen=True)
class ClosedForm:
    """A weighting, the loss ``F`` whose gradient it is, and whether that was proved.

    ``gradient`` is the intermediate result the proof compares with the weight: ``dF/du_1``
    (``dF/dD+_1`` for the triplet row) as SymPy differentiates it.
    """

    weighting: str
    loss: sp.Expr
    proved: bool
    gradient: sp.Expr | None = None


#: Liu et al.'s exponent of the exponential weights (Eq. 29-31): the book uses alpha = 0 (Pair-E's
#: positives), so it is only non-negative; a closed form that divides by it states alpha > 0.
_ALPHA = sp.Symbol("alpha", real=True, nonnegative=True)


def _pair_rows(n: int) -> list[ClosedForm]:
    x = _positive("u", n)
    p = sp.Symbol("p", positive=True)
    a = _ALPHA
    rows = []
    cases = [  # (name, the loss F as typed, the weights w_j as typed)
        (
            "power, v0: w = u^p",
            lambda: sum(xi ** (p + 1) for xi in x) / (p + 1),
            lambda: [xi**p for xi in x],
        ),
        (
            "exponential, v0: w = e^{alpha u}",
            lambda: sum((sp.exp(a * xi) - 1) / a for xi in x),
            lambda: [sp.exp(a * xi) for xi in x],
        ),
        (
            "exponential, per anchor: w = e^{alpha u} / sum e^{alpha u}",
            lambda: sp.log(sum(sp.exp(a * xi) for xi in x)) / a,
            lambda: [sp.exp(a * xi) / sum(sp.exp(a * xk) for xk in x) for xi in x],
        ),
        (
            "constant, per anchor (p = 0): w = 1/n",
            lambda: sum(x) / n,
            lambda: [sp.Integer(1) / n] * n,
        ),
    ]
    for name, typed_F, typed_w in cases:
        F = define(typed_F)
        grad = derived(_gradient, F, *x, differentiates=True)
        rows.append(
            ClosedForm(name, F.value, prove_equal(grad, typed_w, where=[a > 0], verbose=False))
        )
    return rows


def _triplets(Dp, Dn, m) -> dict[tuple[int, int], sp.Expr]:  # noqa: ANN001 (symbols)
    """``t_jk = D+_j - D-_k + m`` for every active triplet of one anchor (Eq. 21)."""
    return {(j, k): dp - dn + m for j, dp in enumerate(Dp) for k, dn in enumerate(Dn)}


def _triplet_e_weights(Dp, Dn, m, a) -> list[sp.Expr]:  # noqa: ANN001 (symbols)
    """Triplet-E v1's weight on each ``D+_j`` (``sum_k w_jk``) and ``D-_k`` (``-sum_j w_jk``),
    ``w_jk = e^{alpha t_jk} / sum e^{alpha t}`` (Eq. 31 normalised per anchor), as typed."""
    t = _triplets(Dp, Dn, m)
    Z = sum(sp.exp(a * v) for v in t.values())
    w = {jk: sp.exp(a * v) / Z for jk, v in t.items()}
    return [sum(w[j, k] for k in range(len(Dn))) for j in range(len(Dp))] + [
        -sum(w[j, k] for j in range(len(Dp))) for k in range(len(Dn))
    ]


def _triplet_row(n_pos: int, n_neg: int) -> ClosedForm:
    (m,), a = hyperparameters("m"), _ALPHA
    Dp, Dn = _positive("D^+_", n_pos), _positive("D^-_", n_neg)
    F = define(lambda: sp.log(sum(sp.exp(a * v) for v in _triplets(Dp, Dn, m).values())) / a)
    grad = derived(_gradient, F, *Dp, *Dn, differentiates=True)
    name = "triplet exponential, per anchor (Triplet-E v1)"
    proved = prove_equal(
        grad, lambda: _triplet_e_weights(Dp, Dn, m, a), where=[a > 0], verbose=False
    )
    return ClosedForm(name, F.value, proved)


def closed_forms(n: int = 3) -> list[ClosedForm]:
    """The weightings that *are* gradients, each with its loss ``F`` and the proof ``dF = w``.

    With the hinges active (``u > 0``), Eq. 18 with weights ``w(u)`` trains like ``F(u)``:

    * power v0: ``F = sum u^{p+1} / (p + 1)`` (``p = 1``: half of Eq. 35's squared hinge);
    * exponential v0: ``F = sum (e^{alpha u} - 1) / alpha``;
    * exponential per anchor: ``F = (1/alpha) log sum e^{alpha u}``, so Pair-E v1 (Eq. 38) is
      ``(1/alpha) log sum_P e^{alpha (D - m1)} + (1/beta) log sum_N e^{beta (m2 - D)}``: the
      margins cancel from the weights and act only through the mining;
    * constant per anchor: the mean;
    * Triplet-E per anchor: ``F = (1/alpha) log sum_{j,k} e^{alpha t_jk}``.

    Each row carries ``dF/du_1`` (``dF/dD+_1``), the derivative the proof compares with ``w_1``.
    """
    rows = [*_pair_rows(n), _triplet_row(2, 2)]
    first = [sp.Symbol("u1", positive=True)] * (len(rows) - 1) + [sp.Symbol("D^+_1", positive=True)]
    return [
        dataclasses.replace(r, gradient=sp.simplify(sp.diff(r.loss, v)))
        for r, v in zip(rows, first, strict=True)
    ]


def normalised_power_is_not_a_gradient() -> dict[str, object]:
    """Normalised power weights ``w_j = u_j^p / sum_k u_k^p`` (``p > 0``) are no gradient.

    Returns ``{"asymmetry": Expr, "exp_symmetric": bool, "circulation": Expr}``:
    ``dw_1/du_2 - dw_2/du_1`` for two pairs (non-zero unless ``u_1 = u_2``; a C^1 gradient field
    has a symmetric Jacobian), the proof that the normalised *exponential* weights' Jacobian is
    symmetric, and the exact circulation of ``w`` (``p = 1``) around the boundary of
    ``[1, 2] x [2, 3]``, which is non-zero: a loss ``F`` with ``grad F = w`` would make it 0.
    """
    x1, x2, p, a = sp.symbols("u1 u2 p alpha", positive=True)
    den = x1**p + x2**p
    w1, w2 = x1**p / den, x2**p / den
    asym = sp.factor(sp.simplify(sp.diff(w1, x2) - sp.diff(w2, x1)))
    exp_symmetric = prove_equal(
        derived(sp.diff, lambda: sp.exp(a * x1) / (sp.exp(a * x1) + sp.exp(a * x2)), x2),
        derived(sp.diff, lambda: sp.exp(a * x2) / (sp.exp(a * x1) + sp.exp(a * x2)), x1),
        verbose=False,
    )
    q1, q2 = (w.subs(p, 1) for w in (w1, w2))
    # Green: the circulation is the integral of dw2/dx1 - dw1/dx2 over the rectangle
    curl = sp.diff(q2, x1) - sp.diff(q1, x2)
    circulation = sp.simplify(sp.integrate(curl, (x1, 1, 2), (x2, 2, 3)))
    return {"asymmetry": asym, "exp_symmetric": exp_symmetric, "circulation": circulation}


def _two_triplet_weight(a: sp.Symbol, t: sp.Symbol, d: sp.Symbol) -> sp.Expr:
    """Eq. 31 + 34 for the larger of two triplets (``t`` and ``t - delta``), divided through by
    ``e^{alpha t}`` (proved equal first, since ``sympy.limit`` cannot take the sign of ``t -
    delta`` on the printed form)."""
    printed = lambda: sp.exp(a * t) / (sp.exp(a * t) + sp.exp(a * (t - d)))
    if not prove_equal(printed, lambda: 1 / (1 + sp.exp(-a * d)), verbose=False):
        raise AssertionError("Eq. 34 for two triplets: the divided form was not proved.")
    return 1 / (1 + sp.exp(-a * d))


@dataclass(frozen=True)
class LimitStep:
    """One limit behind Liu et al.'s remarks: ``lim_{variable -> point} expression = value``.

    ``direction`` is ``"+"`` where only the limit from above exists or is meant (``p -> 0+``), ``""``
    where the expression is continuous at the point (``alpha -> 0``) or the point is ``oo``; every
    limit is evaluated from above (SymPy's default).
    """

    name: str
    expression: sp.Expr
    variable: sp.Symbol
    point: sp.Expr
    direction: str
    value: sp.Expr

    def __str__(self) -> str:
        return f"lim_{{{self.variable} -> {self.point}{self.direction}}} {self.expression} = {self.value}"


def paper_limit_steps() -> list[LimitStep]:
    """The limits behind Liu et al.'s remarks, each with its expression, evaluated by ``sympy.limit``.

    * ``average``: ``lim_{p->0+} u1^p / (u1^p + u2^p) = 1/2`` for ``u1, u2 > 0`` ("just the
      average");
    * ``average_at_threshold``: the same with ``u1 = 0`` (a positive exactly at ``D = m1``):
      ``0``, not 1/2: the limit and Eq. 24's ``0^0 = 1`` disagree there;
    * ``triplet_e_hardest``: ``lim_{alpha->oo}`` of the normalised weight of a triplet whose
      ``t`` exceeds another's by ``delta > 0``: 1 (all weight on the largest ``t``, i.e. the
      farthest positive with the nearest negative, Eq. 20 with ``min``);
    * ``triplet_e_v0``: the un-normalised weight ``e^{alpha t}`` for ``t > 0``: ``oo``;
    * ``ms_v1_alpha0`` / ``ms_v2_alpha0``: the MS weights of Eq. 39 as ``alpha -> 0`` for ``n``
      equal pairs: ``1/(n + 1)`` and ``1/n``: the weights exist at ``alpha = 0``, only the
      printed loss ``(1/alpha) log[...]`` does not.
    """
    u1, u2, t, d, a, p = sp.symbols("u1 u2 t delta alpha p", positive=True)
    n = sp.Symbol("n", positive=True, integer=True)
    z = sp.Symbol("z", real=True)
    zero = sp.Integer(0)
    zero_p = sp.Pow(zero, p, evaluate=False)  # shown as 0**p: SymPy would write 0 for p > 0

    def ratio(top: sp.Expr, bottom: sp.Expr) -> sp.Expr:  # as written, not simplified
        return sp.Mul(top, sp.Pow(bottom, -1, evaluate=False), evaluate=False)

    cases = [
        ("average", u1**p / (u1**p + u2**p), p, zero, "+"),
        (
            "average_at_threshold",
            ratio(zero_p, sp.Add(zero_p, u2**p, evaluate=False)),
            p,
            zero,
            "+",
        ),
        ("triplet_e_hardest", _two_triplet_weight(a, t, d), a, sp.oo, ""),
        ("triplet_e_v0", sp.exp(a * t), a, sp.oo, ""),
        ("ms_v1_alpha0", sp.exp(a * z) / (1 + n * sp.exp(a * z)), a, zero, ""),
        ("ms_v2_alpha0", ratio(sp.exp(a * z), n * sp.exp(a * z)), a, zero, ""),
    ]
    return [
        LimitStep(name, f, v, at, side, sp.limit(f.doit(), v, at, "+"))
        for name, f, v, at, side in cases
    ]


def paper_limits() -> dict[str, sp.Expr]:
    """The values of :func:`paper_limit_steps`, by name (``{"average": 1/2, ...}``)."""
    return {step.name: step.value for step in paper_limit_steps()}


def _z_pos(Dp, m, a) -> sp.Expr:  # noqa: ANN001 (symbols)
    """``Z_P = sum_P e^{alpha (D - m)}``: an anchor's positive sum in MS on distances."""
    return sum(sp.exp(a * (d - m)) for d in Dp)


def _z_neg(Dn, m, b) -> sp.Expr:  # noqa: ANN001 (symbols)
    """``Z_N = sum_N e^{beta (m - D)}``: its negative sum."""
    return sum(sp.exp(b * (m - d)) for d in Dn)


def _ms_v2(Dp, Dn, m, a, b) -> sp.Expr:  # noqa: ANN001 (symbols)
    """MS v2's anchor term on distances, ``(1/alpha) log Z_P + (1/beta) log Z_N``."""
    return sp.log(_z_pos(Dp, m, a)) / a + sp.log(_z_neg(Dn, m, b)) / b


def _ms_v1(Dp, Dn, m, a, b) -> sp.Expr:  # noqa: ANN001 (symbols)
    """MS v1's (Eq. 39), ``(1/alpha) log(1 + Z_P) + (1/beta) log(1 + Z_N)``."""
    return sp.log(1 + _z_pos(Dp, m, a)) / a + sp.log(1 + _z_neg(Dn, m, b)) / b


def _lifted_star(Dp, Dn, a, b) -> sp.Expr:  # noqa: ANN001 (symbols)
    """LiftedStruct* on distances: ``(1/alpha) log sum_P e^{alpha D} + (1/beta) log sum_N
    e^{-beta D}``."""
    return sp.log(sum(sp.exp(a * d) for d in Dp)) / a + sp.log(sum(sp.exp(-b * d) for d in Dn)) / b


def ms_v2_is_lifted_star(n_pos: int = 2, n_neg: int = 2) -> dict[str, object]:
    """MS v2 on distances equals LiftedStruct* on distances; what the "+1" of v1 adds.

    LiftedStruct* (Wang et al. 2019, Eq. 16) written on ``D`` (``-S`` replaced by ``D``):
    ``(1/alpha) log sum_P e^{alpha D} + (1/beta) log sum_N e^{-beta D}``. Returns

    * ``v2_equals_lifted_star``: the proof that MS v2 (margin ``m``) is exactly that: ``m``
      cancels, so in v2 the margin changes neither value nor gradient;
    * ``v1_is_v2_plus_virtual_pair``: the proof that v1's weights are v2's weights over the
      pairs plus one virtual positive and one virtual negative at ``D = m`` (``1 = e^{alpha
      (m - m)}``, Liu et al.'s own reading);
    * ``v2_weight_sum`` / ``v1_weight_sum``: the total weight of an anchor's positives, ``1``
      for v2 and ``Z / (1 + Z)`` for v1 (``Z = sum e^{alpha (D - m)}``): v1 fades an anchor
      whose pairs are all easy (``Z -> 0``), v2 never does;
    * the intermediate results the chapter prints: ``v2_positive_factored``, v2's positive half
      with ``e^{-alpha m}`` factored out of its sum (``-m + (1/alpha) log sum e^{alpha D}``),
      ``v2_minus_lifted_star`` (``0`` once simplified), and ``v1_weight_1``, ``dv1/dD+_1``, whose
      denominator holds the virtual pair's ``e^{alpha m}``.
    """
    m, a, b = sp.symbols("m alpha beta", positive=True)
    Dp, Dn = _positive("D^+_", n_pos), _positive("D^-_", n_neg)
    v1 = derived(_gradient, lambda: _ms_v1(Dp, Dn, m, a, b), *Dp, *Dn, differentiates=True)
    # v2 over the pairs plus one virtual positive and one virtual negative at D = m
    virtual = lambda: _ms_v2([*Dp, m], [*Dn, m], m, a, b)
    v2_virtual = derived(_gradient, virtual, *Dp, *Dn, differentiates=True)
    Zp = _z_pos(Dp, m, a)
    factored = sp.log(sp.exp(-a * m) * sum(sp.exp(a * d) for d in Dp)) / a
    return {
        "v2_positive_factored": sp.expand(sp.expand_log(factored, force=True)),
        "v2_minus_lifted_star": sp.simplify(_ms_v2(Dp, Dn, m, a, b) - _lifted_star(Dp, Dn, a, b)),
        "v1_weight_1": sp.simplify(v1.value[0]),
        "v2_equals_lifted_star": prove_equal(
            lambda: _ms_v2(Dp, Dn, m, a, b), lambda: _lifted_star(Dp, Dn, a, b), verbose=False
        ),
        "v1_is_v2_plus_virtual_pair": prove_equal(v1, v2_virtual, verbose=False),
        "v2_weight_sum": sp.simplify(sum(sp.exp(a * (d - m)) / Zp for d in Dp)),
        "v1_weight_sum": sp.simplify(sum(sp.exp(a * (d - m)) / (1 + Zp) for d in Dp)),
    }


def ms_margin_derivatives(n_pos: int = 2, n_neg: int = 2) -> dict[str, object]:
    """``d/dm`` of MS v2's and MS v1's anchor term on distances: 0 for v2, not 0 for v1.

    v2 ``= (1/alpha) log Z_P + (1/beta) log Z_N`` with ``Z_P = sum_P e^{alpha (D - m)}`` and
    ``Z_N = sum_N e^{beta (m - D)}``: ``d/dm`` of the first log is ``-1``, of the second ``+1``,
    so v2's derivative in ``m`` is 0. v1 puts ``1 +`` inside each log, and its derivative is
    ``-Z_P / (1 + Z_P) + Z_N / (1 + Z_N)``. Returns ``{"v2": Expr, "v1": Expr, "v1_proved":
    bool}``: v2's derivative simplified, v1's written in the symbols ``Z_P``, ``Z_N``, and the
    proof that this form equals v1's derivative as SymPy differentiates it.
    """
    m, a, b = sp.symbols("m alpha beta", positive=True)
    Dp, Dn = _positive("D^+_", n_pos), _positive("D^-_", n_neg)
    z_p, z_n = sp.symbols("Z_P Z_N", positive=True)
    compact = -z_p / (1 + z_p) + z_n / (1 + z_n)
    v1_proved = prove_equal(
        derived(sp.diff, lambda: _ms_v1(Dp, Dn, m, a, b), m),
        lambda: (
            -_z_pos(Dp, m, a) / (1 + _z_pos(Dp, m, a)) + _z_neg(Dn, m, b) / (1 + _z_neg(Dn, m, b))
        ),
        verbose=False,
    )
    v2 = sp.diff(_ms_v2(Dp, Dn, m, a, b), m)
    return {"v2": sp.simplify(v2), "v1": compact, "v1_proved": v1_proved}

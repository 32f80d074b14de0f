"""Xuan & Pless's gradient decomposition, proved: Eq. 5-6, Table 1 row by row, and which
designed fields are gradients of a loss (Eq. 20 and the normalisation layer:
:mod:`.sphere_projection`).

Each function returns SymPy expressions (or a verdict built from :func:`prove_equal`) that
``tests/symbolic/test_gradient_surgery.py`` runs as a proof and
``book/13_gradient_surgery.ipynb`` (13.1, 13.3-13.5) displays. Conventions: ``f_a, f_p, f_n``
are vectors in R^3 (component symbols); ``s_ap, s_an`` are the similarities; a loss
``l(s_ap, s_an)`` of one triplet has weights ``w_+ = -dl/ds_ap`` and ``w_- = dl/ds_an`` on the
cosine directions of Eq. 6, so a Table 1 row ``(e^cos, P, T)`` reads ``w_+ = c T P_+`` and
``w_- = c T P_-`` for a constant ``c``.

Results (proved in the tests; errata in the chapter):

* Eq. 5 and Eq. 6 hold as printed (Eq. 6 for any vectors, its directions unit on the sphere).
* Euclidean triplet: ``(e^euc, P^euc, T^con)`` with ``c = 4`` while the hinge is active, 0 after.
* Cosine triplet: ``(e^cos, P^con, T^cos)`` with ``c = tau``.
* Binomial deviance: ``(e^cos, P^sig, T^con)`` with ``c = 2``.
* Circle loss (scale ``kappa``; Sun et al. write gamma): ``P^lin`` and Eq. 17 hold together
  only for the Circle loss whose weights are differentiated and ``m = 1/sqrt(2)``
  (``c = 2 kappa``); Sun et al.'s own form (weights held
  constant) gives ``P_+ = 1 + m - s_ap``, ``P_- = s_an + m`` and the exponent of Eq. 17 shifted
  by ``1 - 2 m^2``: the row holds for it only at ``m = 0`` and with the shift (erratum).
* MS loss: the weight of Eq. 13 has ``m_+ = 1 + sum exp(alpha (s_ap - s_ap_k))`` over the
  anchor's other kept positives ``s_ap_k`` (the paper's ``R^i_ap``), a sum plus one, not the
  printed mean (erratum); and the loss moves the other pairs too (``dl/ds_ap_k != 0``).
* SC triplet: ``(T^cos, T^sc1)`` is no gradient of any function on the hard side (its 1-form is
  not closed), whereas a contrastive term on the negative is: the row holds on easy triplets only.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy as sp
import torch

from ..surgery.directions import unit_directions
from ..surgery.weights import pair_weights, triplet_weight
from .counterexample import counterexample
from .proofs import define, derived, prove_equal
from .symbols import hyperparameters

__all__ = [
    "sig_ms_negative_term",
    "TRIPLET_ROWS",
    "circle_row",
    "circle_weights",
    "closed_form_test",
    "eq5_holds",
    "eq6_holds",
    "field_asymmetry",
    "ms_positive_weight",
    "ms_row",
    "others",
    "table_weights",
    "triplet_row_holds",
    "vectors",
]

s_ap, s_an = sp.symbols("s_ap s_an", real=True)
tau, alpha, beta, lam, margin = hyperparameters("tau alpha beta lambda m")
#: Circle loss's scale (the book's kappa; Sun et al. write gamma, the book's DRO temperature).
(kappa,) = hyperparameters("kappa", positive=True)


def vectors(d: int = 3) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """Column vectors ``f_a, f_p, f_n`` of real component symbols."""
    return tuple(sp.Matrix(sp.symbols(f"{name}_1:{d + 1}", real=True)) for name in ("a", "p", "n"))  # type: ignore[return-value]


# Every proof below takes its sides as typed or derived from a definition built as typed
# (:mod:`dmlbook.symbolic.sides`): a loss is written once by a builder from symbols, SymPy
# differentiates it (``derived``), and the printed form is typed inside the call, so that no
# division is cancelled before the proof sees it.


def _grad(L: sp.Expr, v: sp.Matrix) -> sp.Matrix:
    return sp.Matrix([sp.diff(L, x) for x in v])


def _gradients(L: sp.Expr, *vectors: sp.Matrix) -> list[sp.Expr]:
    """``[*dL/dv_1, *dL/dv_2, ...]``, component by component (``derived``'s operation)."""
    return [sp.diff(L, x) for v in vectors for x in v]


def _eq3_active(fa: sp.Matrix, fp: sp.Matrix, fn: sp.Matrix, m: sp.Symbol) -> sp.Expr:
    """Eq. 3 on its active branch: ``|f_a - f_p|^2 - |f_a - f_n|^2 + m``."""
    return (fa - fp).dot(fa - fp) - (fa - fn).dot(fa - fn) + m


def _eq5(fa: sp.Matrix, fp: sp.Matrix, fn: sp.Matrix) -> list[sp.Expr]:
    """Eq. 5 as printed, ``2 D_ap e_p``, ``2 D_an e_n``, ``-2 D_ap e_p - 2 D_an e_n``: typed in a
    proof, ``D * (v / D)`` keeps its division."""
    D_ap, D_an = sp.sqrt((fp - fa).dot(fp - fa)), sp.sqrt((fa - fn).dot(fa - fn))
    e_p, e_n = (fp - fa) / D_ap, (fa - fn) / D_an
    return [*(2 * D_ap * e_p), *(2 * D_an * e_n), *(-2 * D_ap * e_p - 2 * D_an * e_n)]


def eq5_holds(verbose: bool = False) -> bool:
    """Eq. 5 is the gradient of Eq. 3 (active branch) for all vectors with ``f_p != f_a`` and
    ``f_n != f_a`` (the unit directions ``e = (f_p - f_a) / D`` divide by the distances).

    With ``verbose`` it prints the first component of each gradient SymPy computed, beside the
    verdict."""
    fa, fp, fn = vectors()
    (m,) = hyperparameters("m")
    grads = derived(_gradients, lambda: _eq3_active(fa, fp, fn, m), fp, fn, fa, differentiates=True)
    apart = [sp.Ne((fp - fa).dot(fp - fa), 0), sp.Ne((fa - fn).dot(fa - fn), 0)]
    ok = prove_equal(grads, lambda: _eq5(fa, fp, fn), where=apart, verbose=False)
    if verbose:
        _print_gradients("Eq. 5 = gradient of Eq. 3", ok, grads.value)
    return ok


def _print_gradients(title: str, ok: bool, grads: list[sp.Expr]) -> None:
    """The first component of dL/df_p, dL/df_n, dL/df_a (vectors in R^3), and the verdict."""
    print(f"{title}: {'proved' if ok else 'NOT PROVED'} (vectors in R^3: one instance)")
    for k, name in enumerate(("f_p", "f_n", "f_a")):
        print(f"  dL/d{name}, first component: {sp.sstr(sp.factor(grads[3 * k]))}")


def _eq4(fa: sp.Matrix, fp: sp.Matrix, fn: sp.Matrix) -> sp.Expr:
    """Eq. 4, ``-log(e^{tau S_ap} / (e^{tau S_ap} + e^{tau S_an}))`` with ``S = f_a . f``."""
    sap, san = fa.dot(fp), fa.dot(fn)
    return -sp.log(sp.exp(tau * sap) / (sp.exp(tau * sap) + sp.exp(tau * san)))


def _eq6(fa: sp.Matrix, fp: sp.Matrix, fn: sp.Matrix) -> list[sp.Expr]:
    """Eq. 6 as printed: ``T tau (-f_a)``, ``T tau f_a``, ``T tau (-f_p + f_n)``."""
    T = 1 / (1 + sp.exp(tau * (fa.dot(fp) - fa.dot(fn))))
    return [*(T * tau * -fa), *(T * tau * fa), *(T * tau * (-fp + fn))]


def eq6_holds(verbose: bool = False) -> bool:
    """Eq. 6 is the gradient of Eq. 4 with ``e_p = -f_a``, ``e_n = f_a``, ``e_ap = -f_p``,
    ``e_an = f_n``, for all vectors (unit length needs the features on the sphere)."""
    fa, fp, fn = vectors()
    L = define(lambda: _eq4(fa, fp, fn))
    grads = derived(_gradients, L, fp, fn, fa, differentiates=True)
    ok = prove_equal(grads, lambda: _eq6(fa, fp, fn), verbose=False)
    if verbose:  # the scalar derivatives the chain rule multiplies by dS_ap/df_p = f_a, ...
        Ls = L.value.subs({fa.dot(fp): s_ap, fa.dot(fn): s_an}, simultaneous=True)
        print(f"Eq. 6 = gradient of Eq. 4: {'proved' if ok else 'NOT PROVED'} (vectors in R^3)")
        for S in (s_ap, s_an):
            print(f"  dL/d{S}: {sp.sstr(sp.simplify(sp.diff(Ls, S)))}")
    return ok


def _weights_of(loss: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """``(w_+, w_-) = (-dl/ds_ap, dl/ds_an)`` of a triplet loss on ``(s_ap, s_an)``."""
    return -sp.diff(loss, s_ap), sp.diff(loss, s_an)


def _weights_list(loss: sp.Expr) -> list[sp.Expr]:
    """:func:`_weights_of` as a list (``derived``'s operation: it differentiates)."""
    return list(_weights_of(loss))


def _T_cir(m: sp.Expr) -> sp.Expr:
    """``T^cir`` for Circle margin ``m``; ``m = 1/sqrt(2)`` is Eq. 17 as printed."""
    return 1 / (1 + sp.exp(kappa * (s_ap * (2 - s_ap) - s_an**2 - 1 + 2 * m**2)))


def _circle_loss(detached: bool) -> sp.Expr:
    """Circle loss of one triplet, ``log(1 + e^z)``, ``z = kappa (a_n (s_an - m) - a_p (s_ap - 1
    + m))``; with ``detached``, ``a_p, a_n`` are the symbols ``A_p, A_n`` (held constant)."""
    if detached:
        a_p, a_n = sp.symbols("A_p A_n", positive=True)
    else:
        a_p, a_n = 1 + margin - s_ap, s_an + margin
    return sp.log(1 + sp.exp(kappa * (a_n * (s_an - margin) - a_p * (s_ap - 1 + margin))))


def _put_back(v: object) -> object:
    """``A_p, A_n -> a_p, a_n`` (the held-constant weights' values), pointwise: applied to the
    weights (simplified) and, by ``derived``, to the conditions they carry."""
    A_p, A_n = sp.symbols("A_p A_n", positive=True)
    back = {A_p: 1 + margin - s_ap, A_n: s_an + margin}
    if isinstance(v, list):
        return [w.subs(back) for w in v]
    return v.subs(back)  # type: ignore[union-attr]


def _simplified(v: list[sp.Expr]) -> list[sp.Expr]:
    """Each weight simplified: equal wherever it is defined, so the conditions stay as they are
    (``derived(..., differentiates=True)``; SymPy cannot simplify an unevaluated expression)."""
    return [sp.simplify(w) for w in v]


def _circle_derived(detached: bool) -> object:
    """Circle loss's ``[w_+, w_-]`` derived from :func:`_circle_loss` as typed; held constant,
    the ``A``'s are put back after differentiating (a pointwise step: conditions mapped)."""
    w = derived(_weights_list, lambda: _circle_loss(detached), differentiates=True)
    if not detached:
        return w
    return derived(_simplified, derived(_put_back, w, differentiates=False), differentiates=True)


def circle_weights(detached: bool) -> tuple[sp.Expr, sp.Expr]:
    """``(w_+, w_-)`` of Circle loss on one triplet (weights ``a_p, a_n`` unclipped: ``s_an > -m``).

    ``detached``: ``a_p, a_n`` held constant in the derivative (Sun et al.'s code).
    """
    return tuple(_circle_derived(detached).value)  # type: ignore[return-value]


def _circle_claim(detached: bool) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """``(c, P_+, P_-)`` that :func:`circle_row` claims for each form."""
    return (kappa, 1 + margin - s_ap, s_an + margin) if detached else (2 * kappa, 1 - s_ap, s_an)


#: Table 1's rows that are losses of ``(s_ap, s_an)``: name -> a builder of (loss, P_+, P_-, T,
#: constant c). Each is built when called, so that a proof takes it as typed.
TRIPLET_ROWS: dict[str, Callable[[], tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr, sp.Expr]]] = {
    "Triplet (cosine) [23]": lambda: (
        sp.log(1 + sp.exp(tau * (s_an - s_ap))), sp.Integer(1), sp.Integer(1),
        1 / (1 + sp.exp(tau * (s_ap - s_an))), tau,
    ),
    "Binomial deviance [24]": lambda: (
        sp.log(1 + sp.exp(-alpha * (s_ap - lam))) / alpha
        + sp.log(1 + sp.exp(beta * (s_an - lam))) / beta,
        1 / (1 + sp.exp(alpha * (s_ap - lam))), 1 / (1 + sp.exp(-beta * (s_an - lam))),
        sp.Rational(1, 2), sp.Integer(2),
    ),
    "Circle loss [18], m = 1/sqrt(2), weights differentiated": lambda: (
        sp.log(1 + sp.exp(kappa * ((s_an**2 - sp.Rational(1, 2)) + (1 - s_ap) ** 2
                                   - sp.Rational(1, 2)))),
        1 - s_ap, s_an, _T_cir(1 / sp.sqrt(2)), 2 * kappa,
    ),
}  # fmt: skip


def _row_claim(row: Callable[[], tuple[sp.Expr, ...]]) -> list[sp.Expr]:
    """``[c T P_+, c T P_-]`` of a row of :data:`TRIPLET_ROWS`."""
    _, p_plus, p_minus, T, c = row()
    return [c * T * p_plus, c * T * p_minus]


def triplet_row_holds(name: str, verbose: bool = False) -> bool:
    """Prove ``-dl/ds_ap = c T P_+`` and ``dl/ds_an = c T P_-`` for a row of :data:`TRIPLET_ROWS`.

    The weights are derived from the row's loss as typed, the claim is typed. With ``verbose``
    it prints the row's verdict, then the two derivatives SymPy computed and the ``c``, ``T``
    and ``P_+``, ``P_-`` (the book's ``pi_+``, ``pi_-``) they are proved equal to."""
    row = TRIPLET_ROWS[name]
    w = derived(_weights_list, lambda: row()[0], differentiates=True)
    ok = prove_equal(w, lambda: _row_claim(row), verbose=False)
    if verbose:
        _, p_plus, p_minus, T, c = row()
        print(f"{name}: {'proved' if ok else 'NOT PROVED'}, c = {sp.sstr(c)}, T = {sp.sstr(T)}")
        for what, wk, p in (("-dl/ds_ap", w.value[0], p_plus), (" dl/ds_an", w.value[1], p_minus)):
            print(f"  {what} = {sp.sstr(sp.simplify(wk))}")
            print(f"  {' ' * len(what)} = c T pi with pi = {sp.sstr(p)}")
    return ok


def circle_row(detached: bool, verbose: bool = False) -> bool:
    """Circle loss on one triplet as a Table 1 row, for every margin ``m`` (``s_an > -m``).

    The exponent is ``z = kappa (a_n (s_an - m) - a_p (s_ap - 1 + m))`` with ``a_p = 1 + m - s_ap``
    and ``a_n = s_an + m``. With the ``a``'s differentiated (``detached=False``) the claim is
    ``w_+ = 2 kappa T^cir(m) (1 - s_ap)``, ``w_- = 2 kappa T^cir(m) s_an``: the pair weight
    ``P^lin`` for every ``m``; with them held constant (Sun et al.), ``w_+ = kappa T^cir(m)
    (1 + m - s_ap)``, ``w_- = kappa T^cir(m) (s_an + m)``: ``P^lin`` only at ``m = 0``. Here
    ``T^cir(m) = 1 / (1 + exp(kappa (s_ap (2 - s_ap) - s_an^2 - 1 + 2 m^2)))``, Eq. 17 at
    ``m^2 = 1/2``. The weights are derived from the loss as typed (:func:`_circle_loss`).

    With ``verbose`` it prints the exponent expanded, the two weights SymPy differentiated, the
    claim and the verdict. Returns the verdict of :func:`prove_equal`.
    """
    w = _circle_derived(detached)

    def claim() -> list[sp.Expr]:
        c, p_plus, p_minus = _circle_claim(detached)
        return [c * _T_cir(margin) * p_plus, c * _T_cir(margin) * p_minus]

    ok = prove_equal(w, claim, verbose=False)
    if verbose:
        c, p_plus, p_minus = _circle_claim(detached)
        w_plus, w_minus = w.value
        a_p, a_n = 1 + margin - s_ap, s_an + margin
        z = sp.expand(a_n * (s_an - margin) - a_p * (s_ap - 1 + margin))
        form = "weights held constant (Sun et al.)" if detached else "weights differentiated"
        print(f"Circle loss, {form}: {'proved' if ok else 'NOT PROVED'} for every m")
        print(f"  exponent z / kappa = {sp.sstr(z)}")
        for what, wk, p in (("-dl/ds_ap", w_plus, p_plus), (" dl/ds_an", w_minus, p_minus)):
            ratio = sp.simplify(wk / (c * p))  # 1/(1 + exp(X)) for the T SymPy finds
            (power,) = [e for e in ratio.atoms(sp.exp) if e.args[0].has(s_ap)]
            inner = sp.sstr(sp.expand(power.args[0] / kappa))
            print(f"  {what} = c pi T with c = {sp.sstr(c)}, pi = {sp.sstr(p)},")
            print(f"  {' ' * len(what)}   T = 1/(1 + exp(kappa*({inner})))")
    return ok


def _ms_anchor_loss(n_other: int) -> sp.Expr:
    """MS loss's positive half for one anchor (Wang et al. Eq. 15): ``(1/alpha) log(1 +
    sum e^{-alpha (s - lambda)})`` over ``s_ap`` and the other kept positives."""
    return sp.log(1 + sum(sp.exp(-alpha * (s - lam)) for s in (s_ap, *others(n_other)))) / alpha


def _ms_by_sum(n_other: int) -> sp.Expr:
    """Eq. 13 with ``m_+ = 1 + sum e^{alpha (s_ap - s_ap_k)}``."""
    R = others(n_other)
    return 1 / (1 + sum(sp.exp(alpha * (s_ap - r)) for r in R) + sp.exp(alpha * (s_ap - lam)))


def _ms_weight(n_other: int) -> object:
    """``-dl/ds_ap`` derived from :func:`_ms_anchor_loss` as typed."""
    return derived(
        lambda L: -sp.diff(L, s_ap), lambda: _ms_anchor_loss(n_other), differentiates=True
    )


def ms_positive_weight(n_other: int = 2) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """MS loss of one anchor (Wang et al. Eq. 15) with ``s_ap`` and ``n_other`` other kept
    positives ``s_ap1, s_ap2, ...`` (the paper's ``R^i_ap``): returns (its weight ``-dl/ds_ap``,
    Eq. 13 with the sum ``1 + sum``, Eq. 13 as printed with the mean over the others)."""
    R = others(n_other)
    by_mean = 1 / (
        sum(sp.exp(alpha * (s_ap - r)) for r in R) / n_other + sp.exp(alpha * (s_ap - lam))
    )
    return _ms_weight(n_other).value, _ms_by_sum(n_other), by_mean


def others(n_other: int = 2) -> tuple[sp.Symbol, ...]:
    """The similarities ``s_ap1, s_ap2, ...`` of the anchor's other kept positives (real)."""
    return sp.symbols(f"s_ap1:{n_other + 1}", real=True)


def ms_row(n_other: int = 2, verbose: bool = False) -> bool:
    """The MS row of Table 1 for one anchor with ``n_other`` other kept positives (one instance).

    Proves that the MS loss's weight ``-dl/ds_ap`` (derived from the loss as typed) is Eq. 13
    with ``1 + sum`` in place of the printed mean (:func:`ms_positive_weight`), finds a point
    where the printed mean differs (:func:`~dmlbook.symbolic.counterexample`) and
    differentiates the loss by the first other positive's similarity (not zero: the loss moves
    the other positives too). With ``verbose`` it prints each of the three beside its verdict.
    Returns whether all three came out so.
    """
    w, _, by_mean = ms_positive_weight(n_other)
    sum_ok = prove_equal(_ms_weight(n_other), lambda: _ms_by_sum(n_other), verbose=False)
    differ = counterexample(w, by_mean)
    other = others(n_other)[0]
    moves = sp.simplify(sp.diff(_ms_anchor_loss(n_other), other))
    if verbose:
        print(f"-dL/ds_ap, as SymPy differentiates it: {sp.sstr(w)}")
        print(
            f"  = 1/(1 + sum + exp(alpha*(s_ap - lambda))): {'proved' if sum_ok else 'NOT PROVED'}"
        )
        print(
            f"  = 1/(mean + exp(alpha*(s_ap - lambda))), as printed: {differ or 'no point found'}"
        )
        print(f"dL/d{other}: {sp.sstr(moves)} (not 0: the other positive moves too)")
    return sum_ok and differ is not None and moves != 0


def sig_ms_negative_term(n_other: int = 2, verbose: bool = False) -> dict[str, object]:
    """Appendix Sec. 2 on negative pairs: how ``m^sig_-`` of Eq. 13 moves ``P^sig-ms_-``.

    ``P_- = 1 / (m_- + e^{-beta (S_an - lambda)})`` with ``m_- = (1/|N|) sum_j
    e^{-beta (S_an - R^j_an)}``. Returns the proof that ``dP_-/dm_- = -P_-^2`` (so a larger
    ``m_-`` always *lowers* the weight), and, with ``Delta_j = S_an - R^j_an >= 0`` (hard
    negative mining: the selected negative is the most similar, appendix Sec. 3), the proof that
    ``log m_-``'s every term ``-beta Delta_j`` is ``<= 0``, so ``m_- <= 1`` and the relative term
    can only *raise* the negative weight. The relative term is the SymPy symbol ``mu_-`` (the
    paper's ``m^sig_-``; ``m`` is a margin in the book). With ``verbose`` it prints the derivative
    and the log-terms beside the verdicts.
    """
    m = sp.Symbol("mu_-", positive=True)
    P = lambda: 1 / (m + sp.exp(-beta * (s_an - lam)))  # as typed, in each proof
    deltas = sp.symbols(f"Delta_1:{n_other + 1}", nonnegative=True)
    exponents = [sp.expand_log(sp.log(sp.exp(-beta * d)), force=False) for d in deltas]
    dP = derived(sp.diff, P, m)
    verdicts = {
        "dpi-/dmu- = -pi-^2": prove_equal(dP, lambda: -(P() ** 2), verbose=False),
        "hard mining: every log-term <= 0": all(e.is_nonpositive for e in exponents),
    }
    if verbose:
        ok = ["proved" if v else "NOT PROVED" for v in verdicts.values()]
        print(f"dpi_-/dmu_- = {sp.sstr(dP.value)} = -pi_-^2: {ok[0]}")
        print(f"log of each term of mu_-: {', '.join(map(sp.sstr, exponents))} <= 0: {ok[1]}")
    return verdicts


def closed_form_test(w_plus: sp.Expr, w_minus: sp.Expr) -> sp.Expr:
    """The curl of the field ``-w_+ dS_ap + w_- dS_an``: zero iff some ``l(s_ap, s_an)`` has it
    as gradient (mixed partials; ``dS_ap`` and ``dS_an`` are independent for d >= 2)."""
    return sp.simplify(sp.diff(w_minus, s_ap) - sp.diff(-w_plus, s_an))


def field_asymmetry(
    direction: str,
    weights: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    x: torch.Tensor,
) -> float:
    """Relative asymmetry of the Jacobian of the pulled-back field of one triplet.

    ``x`` is (3, d) float64 (anchor, positive, negative, before the L2 layer); the field is
    ``J_norm^T G(f)`` with ``G`` built from the unit directions and ``weights(s_ap, s_an) ->
    (W_+, W_-)``. A gradient field has a symmetric Jacobian (its Hessian), so a value far from
    0 shows the field is no loss's gradient; ~1e-16 is consistent with one.
    """

    def field(flat: torch.Tensor) -> torch.Tensor:
        v = flat.reshape(3, -1)
        f = v / v.norm(dim=1, keepdim=True)
        fa, fp, fn = f[0:1], f[1:2], f[2:3]
        e = unit_directions(fa, fp, fn, direction)
        wp, wn = weights((fa * fp).sum(1), (fa * fn).sum(1))
        G = torch.cat([wp * e.e_ap + wn * e.e_an, wp * e.e_p, wn * e.e_n])
        (pulled,) = torch.autograd.grad(f, flat, G, create_graph=True)
        return pulled

    flat = x.reshape(-1).clone().requires_grad_(True)
    J = torch.autograd.functional.jacobian(
        lambda z: field(z if z.requires_grad else z.requires_grad_(True)), flat, create_graph=False
    )
    return float((J - J.T).norm() / J.norm())


def table_weights(
    pair: str, triplet: str, **hp: float
) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``(s_ap, s_an) -> (T P_+, T P_-)`` from the package's weights, for :func:`field_asymmetry`."""
    defaults = {"alpha": 2.0, "beta": 10.0, "lam": 0.5, "tau": 4.0}
    defaults.update(hp)

    def w(sp_: torch.Tensor, sn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pp, pm = pair_weights(
            pair, sp_, sn, alpha=defaults["alpha"], beta=defaults["beta"], lam=defaults["lam"]
        )
        T = triplet_weight(triplet, sp_, sn, tau=defaults["tau"])
        return T * pp, T * pm

    return w

"""The hinge ``[x]_+ = max(x, 0)`` as a SymPy function whose active region is explicit.

The hinge is :class:`Hinge`, whose derivative is the indicator ``1[x > 0]`` of its *active
region* (:class:`HingeActive`). At the kink ``x = 0`` the hinge has no derivative; the indicator
then reads 0, the same choice as ``torch.relu``'s backward pass. The kink is a set of measure zero
in ``S``, so the choice never matters for a proof on an open region, but it does decide what
autograd reports *at* the kink. :func:`hinge_branch` restricts an expression to one branch of its
hinges, :func:`hinge_conditions` states the regions. Used by the contrastive, triplet and Liu et
al.'s losses (Wang et al. 2019, Eq. 4-6; Liu et al., Eq. 11-12). Tests:
``tests/symbolic/test_hinge.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy as sp

__all__ = ["Hinge", "HingeActive", "hinge", "hinge_branch", "hinge_conditions"]


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

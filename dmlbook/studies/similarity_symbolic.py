"""Which of Wang et al.'s three similarities a *symbolic* negative-pair weight depends on.

The exact counterpart of the autograd probe (:mod:`dmlbook.studies.similarity_probe`): the
derivatives of a SymPy weight along the S, P and N directions (Wang et al. 2019, Sec. 4.1) are
proved zero (:func:`dmlbook.symbolic.prove_equal`) or witnessed nonzero, for the weight's value
and for each hinge gate. Re-exported by :mod:`dmlbook.studies.three_similarities`; chapter
``book/08_three_similarities.ipynb``; tests ``tests/studies/test_similarity_symbolic.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy as sp

from .. import symbolic as sy
from ..symbolic import HingeActive
from ..symbolic.sides import Derived
from .similarity_probe import SIMILARITIES

__all__ = ["symbolic_dependence"]


def _vanishes(expr: Any, free: Sequence[Any]) -> bool:
    """Whether ``expr`` is identically 0: numeric witness first, then an exact proof.

    A nonzero value at a random point (all hinges taken active) shows dependence at once; an
    expression that is 0 at every sampled point must then be *proved* 0 by
    :func:`dmlbook.symbolic.prove_equal`, else a ``RuntimeError`` says the question is open.
    """
    expr = sp.sympify(expr)
    if expr == 0:
        return True
    numeric = sy.hinge_branch(expr, True)
    if not sy.spot_check_equal(numeric, sp.S.Zero, n=16, seed=1):
        return False
    # prebuilt (unchecked for cancellations), on purpose: the statement is about the weight the
    # caller passes, a value built elsewhere (pair_weights of a loss); and the question is
    # whether it moves along a direction, which a factor cancelled where the weight is
    # undefined cannot change where it is defined.
    if sy.prove_equal(sy.prebuilt(lambda: expr), lambda: sp.S.Zero, verbose=False):
        return True
    raise RuntimeError(
        f"could not decide whether {sp.sstr(expr)} vanishes: it is 0 at every sampled point but "
        "SymPy found no proof. Simplify the weight first, or use the autograd probe."
    )


def _directional(expr: Any, anchor: Any, pair: Any) -> dict[str, bool]:
    """Does ``expr`` move along the S, P and N directions of the negative pair ``pair``?"""
    free = list(anchor.all)
    shift = sp.Add(*[sp.diff(expr, s) for s in anchor.all])  # d/dc of expr(s + c)
    others = [s for s in anchor.neg if s != pair]
    return {
        "S": not _vanishes(shift, free),
        "P": not all(_vanishes(sp.diff(expr, s), free) for s in anchor.pos),
        "N": not all(_vanishes(sp.diff(expr, s), free) for s in others),
    }


def symbolic_dependence(weight: Any, anchor: Any, pair: Any) -> dict[str, str]:
    """Which of the three similarities a symbolic negative-pair weight depends on, and how.

    Write the weight ``w`` of the negative pair ``s_j`` (``pair``) of one anchor as a function
    of the coordinates ``(s_j, s_j - s_p, s_j - s_k)``: Similarity-S, -P and -N (Wang et al.
    2019, Sec. 4.1). Its derivative along each coordinate, the others held fixed, is

    * S: ``sum_l dw/ds_l`` over *all* the anchor's similarities (shift the whole row);
    * P: ``dw/ds_p`` for each positive ``s_p``;
    * N: ``dw/ds_k`` for each other negative ``s_k``.

    A dependence is found either in the value of the weight (these derivatives, with every
    hinge indicator ``1[x > 0]`` held fixed) or in a *gate*: an indicator whose argument ``x``
    moves along that direction (the hinge or the mining rule can switch the pair on or off).

    Parameters
    ----------
    weight : sympy.Expr or Derived
        ``dL/ds_j`` from :func:`dmlbook.symbolic.pair_weights` (or a closed form such as
        BinLifted's supplement Eq. 10), or the entry of
        ``sy.derived(sy.pair_weights, L, anchor)`` (its value is read: a derivative that is 0
        wherever the weight is defined counts as no dependence).
    anchor : AnchorSimilarities
        The anchor's symbols (:func:`dmlbook.symbolic.anchor_similarities`).
    pair : sympy.Symbol
        The negative pair whose weight this is (one of ``anchor.neg``).

    Returns
    -------
    dict
        ``{"S": ..., "P": ..., "N": ...}``, each ``""`` (no dependence), ``"weight"``,
        ``"gate"`` or ``"weight, gate"``.

    Notes
    -----
    "No dependence" is an exact proof (:func:`dmlbook.symbolic.prove_equal` of a zero
    derivative); "dependence" is witnessed by a nonzero value at a random point, with every
    gate open. A gate counts whatever its argument depends on, even where the gate can never
    close in practice (the hinge of Eq. 6 at ``lambda = 1``; see
    :mod:`dmlbook.studies.three_similarities`).
    """
    if pair not in anchor.neg:
        raise ValueError(
            f"pair must be one of the anchor's negative symbols {anchor.neg}, got {pair}."
        )
    weight = sp.sympify(weight.value if isinstance(weight, Derived) else weight)
    value = _directional(weight, anchor, pair)
    gates = {s: False for s in SIMILARITIES}
    for gate in weight.atoms(HingeActive):
        for s, moves in _directional(gate.args[0], anchor, pair).items():
            gates[s] = gates[s] or moves
    out = {}
    for s in SIMILARITIES:
        kinds = [name for name, flag in (("weight", value[s]), ("gate", gates[s])) if flag]
        out[s] = ", ".join(kinds)
    return out

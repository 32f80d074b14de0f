"""How :func:`~dmlbook.symbolic.proofs.prove_equal` takes a side: as typed, derived, or prebuilt.

SymPy simplifies while it builds (``s*x/s`` *is* ``x``), so a side that was built before the
call carries no trace of a factor it cancelled: a proof about it may be false where that factor
vanishes. A side is therefore taken in one of three forms:

* **as typed**: a zero-argument callable, built here without SymPy's evaluation. It must build
  the statement from symbols and numbers: it may not *read* a SymPy expression built earlier
  (a variable, a closure cell, a default, an attribute of an object it reads, or what a helper
  function of the same module reads), and its result may not *contain* a compound expression
  that existed before the call (caught while it runs: every SymPy object created during the
  call is recorded). Either is refused with a ``TypeError`` that names the variable;
* **derived** (:func:`derived`): ``derived(sp.diff, lambda: L, s)`` builds the definition ``L``
  as typed (the same rules), records where it is undefined, and applies the operation to it
  evaluated. The proof must state the definition's conditions with ``where=`` as well as those
  of the derived value: a derivative of a definition that divides cannot lose the division;
* **prebuilt** (:func:`prebuilt`): the explicit, unchecked form, ``prebuilt(lambda: w4)`` (or
  ``prebuilt(w4)``): the proof is then about the value as SymPy built it, and a factor cancelled
  before the call is not seen. It exists so that a statement about a value computed elsewhere
  (a student's answer, an earlier cell) can still be checked; a call site that uses it says so.

What no check can see: a variable bound to an expression that SymPy reduced to a single symbol
(``e = s*x/s`` is the very object ``x``) reads exactly like that symbol. Write each side from its
definition; :func:`prebuilt` marks the places that do not.
Tests: ``tests/symbolic/test_sides.py`` and the traps in ``tests/symbolic/traps.py``.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

import sympy as sp
from sympy.core.basic import Basic
from sympy.core.cache import clear_cache

from .conditions import build_as_written, evaluated
from .differentiate import pair_weights
from .domain import Requirement, _text, refusals, requirements

__all__ = ["Derived", "Prebuilt", "define", "derived", "prebuilt", "take_side"]

#: Atoms a callable may read from a variable: they cannot be what a cancellation left behind
#: (but see the module note on a variable bound to a bare symbol).
_SYMBOL_LIKE = (sp.Symbol, sp.NumberSymbol, sp.IndexedBase, sp.Idx, sp.Indexed)
#: Operations that differentiate: a definition's conditions pass to the derivative unchanged.
_DIFFERENTIATIONS = (sp.diff, pair_weights, sp.Derivative)


@dataclass(frozen=True)
class Derived:
    """A value computed from a definition built as typed, with the definition's conditions;
    see :func:`derived` and :func:`define`. ``d[key]`` is the entry of a dict, list or matrix
    value with the same conditions (kept whole: an entry exists at most where the whole does)."""

    value: object
    requirements: tuple[Requirement, ...]
    definition: object
    refused: tuple[str, ...] = ()  # what no condition can rescue in the definition

    def __getitem__(self, key: object) -> Derived:
        return Derived(self.value[key], self.requirements, self.definition, self.refused)

    def open_conditions(self) -> tuple[Requirement, ...]:
        """The conditions the symbols' assumptions do not already guarantee (``e^s + 1 != 0``
        holds for every real ``s``; ``D != 0`` does not): those a proof must state."""
        kept = (r for r in dict.fromkeys(self.requirements) if not _guaranteed(r))
        return tuple(dict.fromkeys(replace(r, quantity=evaluated(r.quantity)) for r in kept))

    def where(self) -> str:
        """Where the value is defined, beyond the symbols' assumptions: ``'D_1 != 0, ...'``."""
        return ", ".join(dict.fromkeys(r.text() for r in self.open_conditions())) or "everywhere"

    def __repr__(self) -> str:
        where = self.where()
        return f"{self.value}  (defined {'' if where == 'everywhere' else 'where '}{where})"

    def _repr_latex_(self) -> str:  # a notebook shows the value and where it is defined
        body = sp.latex(sp.Matrix([list(self.value.values())]) if isinstance(self.value, dict)
                        else self.value)  # fmt: skip
        shown = [_latex(r) for r in self.open_conditions()]
        where = r"\quad\text{where } " + r",\ ".join(dict.fromkeys(shown)) if shown else ""
        return f"$\\displaystyle {body}{where}$"


@dataclass(frozen=True)
class Prebuilt:
    """A side taken as SymPy built it, unchecked for cancellations; see :func:`prebuilt`."""

    side: object


def _latex(r: Requirement) -> str:
    r"""``r`` in LaTeX, with its summation range (``D_k \neq 0 \text{ for } k = 1..P``)."""
    rel = {"nonzero": r" \neq 0", "nonnegative": r" \geq 0"}.get(r.kind, r" \in \mathbb{R}")
    ranges = [rf"{sp.latex(k)} = {sp.latex(lo)}..{sp.latex(hi)}" for k, lo, hi in r.bound]
    return sp.latex(r.quantity) + rel + (r"\text{ for }" + ", ".join(ranges) if ranges else "")


def _guaranteed(r: Requirement) -> bool:
    """Whether the symbols' assumptions alone make ``r`` hold (SymPy's own inference)."""
    if r.bound:
        return False
    q = r.quantity
    held = {"nonzero": q.is_nonzero, "nonnegative": q.is_nonnegative, "real": q.is_real}
    return held[r.kind] is True


def prebuilt(side: object) -> Prebuilt:
    """Mark a side of ``prove_equal`` as built before the call: its cancellations are unchecked.

    ``side`` is a zero-argument callable (built without evaluation, so divisions typed in it
    are still checked, but it may read values built earlier) or a value. The proof is about the
    value as SymPy built it: ``prebuilt(lambda: e)`` with ``e = s*x/s`` proves ``x == x``.
    """
    return Prebuilt(side)


def define(definition: Callable[[], object]) -> Derived:
    """A definition built as typed, kept with every point where it may be undefined.

    ``L = define(lambda: <the loss as typed>)`` can be passed to :func:`prove_equal` as a side
    and to :func:`derived` as the definition of a value derived from it
    (``derived(sp.diff, L, s)``): its conditions travel with it, however often it is used.
    """
    return derived(_same, definition, differentiates=True)


def _same(value: object) -> object:
    return value


def derived(
    op: object,
    definition: Callable[[], object] | Derived | None = None,
    *args: object,
    differentiates: bool | None = None,
) -> object:
    """A side derived by SymPy from a definition built as typed, with the definition's domain.

    ``derived(sp.diff, lambda: L, s)`` builds ``L`` without evaluation (by the rules of a side
    as typed: no expression built earlier), records every point where it may be undefined
    (:func:`~dmlbook.symbolic.domain.requirements`), evaluates it and returns
    ``sp.diff(L, s)`` with those conditions attached: ``prove_equal`` proves the statement only
    where they hold (``where=``). A derivative computed without evaluation would carry the
    product rule's spurious terms, so the value is computed from the evaluated definition.

    Parameters
    ----------
    op : callable
        ``sp.diff`` or :func:`~dmlbook.symbolic.differentiate.pair_weights` (the conditions are
        kept as they are: a derivative exists at most where its function does), or an operation
        applied pointwise (a substitution ``lambda e, d: e.subs(d)``, a rewrite): the
        conditions' quantities are then mapped by the same ``op`` (``s != 0`` under ``s -> 0``
        becomes ``0 != 0``, which no condition meets, so the proof is refused).
    definition : callable or Derived
        ``lambda: <the definition as typed>``, or a value already :func:`define`-d or derived
        (its conditions are carried on: ``derived(sp.diff, derived(sp.diff, L, s), s)``).
    *args
        ``op``'s further arguments (``s`` for ``sp.diff``).
    differentiates : bool, optional
        Whether ``op`` differentiates (keep the conditions) or acts pointwise (map them); by
        default, True for ``sp.diff``, ``pair_weights`` and ``gpw_identity`` only. Say True for
        an ``op`` that differentiates and then picks or signs entries (``lambda L, a:
        -sy.pair_weights(L, a)[s]``); a derivative exists at most where its function does.
        Such an ``op`` must do nothing else but simplify (a value equal wherever the argument is
        defined): a pointwise ``op`` (``differentiates=False``) is also built as typed, so that
        its own divisions and logs count; a differentiating one is not (SymPy cannot
        differentiate, solve or simplify an unevaluated expression in reasonable time).

    A single argument, ``derived(value)``, the earlier unchecked form, is refused: every call
    site now derives from a definition, and the unchecked form is spelled :func:`prebuilt`.
    """
    if definition is None and not args:
        raise TypeError(
            "derived(value) took a value as SymPy built it, unchecked; derive it from its "
            "definition, derived(sp.diff, lambda: <definition as typed>, s), or say that it "
            "is unchecked: sy.prebuilt(lambda: value)."
        )
    if not callable(op) or not (callable(definition) or isinstance(definition, Derived)):
        raise TypeError(
            "derived(op, definition, *args) takes the operation (sp.diff) and the definition "
            "as a zero-argument callable or a defined value: derived(sp.diff, lambda: L, s)."
        )
    if isinstance(definition, Derived):
        written, base = definition.definition, definition.value
        reqs, refused = list(definition.requirements), definition.refused
    else:
        written = _build_typed(definition, "the definition")
        reqs = _all_requirements(written)
        refused = tuple(dict.fromkeys(w for e in _entries(written) for w in _refusals(e)))
        base = evaluated_all(written)
    library = op in _DIFFERENTIATIONS or getattr(op, "__name__", "") == "gpw_identity"
    user_code = not (library or str(getattr(op, "__module__", "") or "").startswith("sympy"))
    read = _prebuilt_reads(op) if user_code else ""
    if read:  # the operation's own expressions are typed too: it may not read one built earlier
        _refuse("derived's operation", f"reads {read}")
    value = op(base, *args)
    if differentiates is None:
        differentiates = op in _DIFFERENTIATIONS or getattr(op, "__name__", "") == "gpw_identity"
    if not differentiates:
        reqs = [_mapped(r, op, args) for r in reqs]
        if user_code:  # what a pointwise operation itself divides by, takes the log of: as typed
            reqs += _all_requirements(build_as_written(lambda: op(base, *args)))
    return Derived(value, tuple(dict.fromkeys(reqs)), written, refused)


def evaluated_all(obj: object) -> object:
    """:func:`~dmlbook.symbolic.conditions.evaluated` entry by entry (matrices, lists, dicts)."""
    if isinstance(obj, Mapping):
        return {k: evaluated_all(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(evaluated_all(v) for v in obj)
    if isinstance(obj, sp.MatrixBase):
        return obj.applyfunc(evaluated)
    return evaluated(obj)


def _all_requirements(obj: object) -> list[Requirement]:
    return [r for e in _entries(obj) if isinstance(e, sp.Basic) for r in requirements(e)]


def _mapped(r: Requirement, op: Callable, args: tuple) -> Requirement:
    q = op(r.quantity, *args)
    if not isinstance(q, sp.Expr):
        raise TypeError(
            f"derived: {getattr(op, '__name__', op)} maps the definition's condition "
            f"{r.text()} to {type(q).__name__}, not an expression; use sp.diff, pair_weights "
            "or an operation applied pointwise (a substitution)."
        )
    return Requirement(q, r.kind, r.reason, r.bound, r.source)


def _refusals(e: object) -> list[str]:
    return refusals(e) if isinstance(e, sp.Basic) else []


def take_side(side: object, name: str) -> tuple[object, list[Requirement | str]]:
    """A side of ``prove_equal`` as the object to compare and the conditions it carries (a
    string: a refusal of its definition, which no condition can rescue)."""
    if isinstance(side, Derived):
        return side.value, [*side.requirements, *side.refused]
    if isinstance(side, Prebuilt):
        return build_as_written(side.side), []
    if callable(side) and not isinstance(side, sp.Basic):
        return _build_typed(side, f"side {name}"), []
    raise TypeError(f"not a side: {type(side).__name__}")


# --------------------------------------------------------------------------------------------
# a side as typed: what it reads, and what it returns that existed before the call


def _build_typed(fn: Callable[[], object], what: str) -> object:
    """``fn()`` without evaluation; refused (``TypeError``) if it uses an expression built earlier."""
    read = _prebuilt_reads(fn)
    if read:
        _refuse(what, f"reads {read}")
    created: list[object] = []
    original = Basic.__dict__["__new__"]

    def recording(cls: type, *a: object, **kw: object) -> object:
        obj = original.__func__(cls, *a, **kw)
        created.append(obj)
        return obj

    clear_cache()  # no compound expression built earlier can come back from SymPy's cache
    Basic.__new__ = staticmethod(recording)
    try:
        out = build_as_written(fn)
    finally:
        Basic.__new__ = original
    fresh = {id(o) for o in created}
    old = next(_foreign(out, fresh), None)
    if old is not None:
        _refuse(what, f"returns {_short(old)}, an expression that existed before the call")
    return out


def _refuse(what: str, found: str) -> None:
    raise TypeError(
        f"prove_equal: {what} {found}. SymPy simplifies while it builds (s*x/s is already x, "
        "(exp(s) - 1)/(exp(s) - 1) is already 1), so an expression built before the call may "
        "have lost a division, and the proof would be about a statement you did not type. "
        "Build it inside the callable from symbols and numbers (lambda: <as typed>); for a "
        "value SymPy derives, sy.derived(sp.diff, lambda: <definition as typed>, s) keeps the "
        "definition's conditions; to prove a statement about the value as SymPy built it "
        "(unchecked for cancellations), say so: sy.prebuilt(lambda: ...)."
    )


def _short(e: object) -> str:
    shown = _text(e) if isinstance(e, sp.Basic) else type(e).__name__
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _entries(obj: object) -> Iterator[object]:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield k
            yield from _entries(v)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _entries(v)
    elif isinstance(obj, sp.MatrixBase) and not isinstance(obj, sp.Basic):
        yield from obj
    else:
        yield obj


def _foreign(obj: object, fresh: set[int]) -> Iterator[sp.Basic]:
    """Compound SymPy expressions in ``obj`` that were not created during the call."""
    for e in _entries(obj):
        if not isinstance(e, sp.Basic):
            continue
        stack = [e]
        while stack:
            node = stack.pop()
            if node.is_Atom or not node.args or isinstance(node, _SYMBOL_LIKE):
                continue
            if id(node) not in fresh:
                yield node
                return
            stack.extend(a for a in node.args if isinstance(a, sp.Basic))


def _loaded_names(code: types.CodeType) -> Iterator[str]:
    """The global names ``code`` (and the functions and comprehensions nested in it) loads."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
            yield ins.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _loaded_names(const)


def _prebuilt_reads(fn: Callable, seen: set[int] | None = None) -> str:
    """``'w4 (-x/s + 1)'`` for the first variable ``fn`` reads that holds an expression built
    earlier; '' when it reads only symbols, numbers, functions, modules and containers of them."""
    seen = set() if seen is None else seen
    if id(fn) in seen:
        return ""
    seen.add(id(fn))
    code = getattr(fn, "__code__", None)
    if code is None:  # a builtin or another callable object: what it holds
        return _holds("the callable", fn, getattr(fn, "__module__", None), seen, 0)
    values: list[tuple[str, object]] = []
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            values.append((name, cell.cell_contents))
        except ValueError:  # an empty cell: nothing read yet
            continue
    values += [(n, v) for n, v in zip(code.co_varnames, fn.__defaults__ or (), strict=False)]
    values += list((fn.__kwdefaults__ or {}).items())
    g = getattr(fn, "__globals__", {})
    values += [(n, g[n]) for n in dict.fromkeys(_loaded_names(code)) if n in g]
    for name, v in values:
        found = _holds(name, v, fn.__module__, seen, 0)
        if found:
            return found
    return ""


def _holds(name: str, v: object, module: str | None, seen: set[int], depth: int) -> str:
    """What of ``v`` is a SymPy expression built earlier (containers, objects' attributes, and
    functions of the same module are looked into); '' when nothing is."""
    if isinstance(v, types.FunctionType):
        return _prebuilt_reads(v, seen) if v.__module__ == module else ""
    if id(v) in seen or depth > 4 or isinstance(v, str | bytes | int | float | complex | type):
        return ""
    seen.add(id(v))
    if isinstance(v, sp.Basic):
        return "" if isinstance(v, _SYMBOL_LIKE) else f"{name} ({_short(v)})"
    if isinstance(v, types.ModuleType | types.BuiltinFunctionType | types.MethodType):
        return ""
    if isinstance(v, Mapping | list | tuple | set | frozenset) or (
        isinstance(v, sp.MatrixBase) and not isinstance(v, sp.Basic)
    ):
        items = list(_entries(v))[:10_000]
        return next((f for x in items if (f := _holds(name, x, module, seen, depth + 1))), "")
    attrs = getattr(v, "__dict__", None)
    if isinstance(attrs, dict) and type(v).__module__.split(".")[0] in ("dmlbook", module):
        return next(
            (
                f
                for k, x in attrs.items()
                if (f := _holds(f"{name}.{k}", x, module, seen, depth + 1))
            ),
            "",
        )
    return ""

"""Hyper-parameters declared in a loss function's signature, and checked from that declaration.

A loss function (or miner) writes each hyper-parameter once, as a literal default and an annotation
from :mod:`dmlbook.core.validation` (``alpha: Scale = 2.0``); :func:`declared` checks what a call
passes against it (:func:`check_argument`), lets a family share another's declaration (``like=``)
and gives the frame every loss shares (:func:`loss_frame`: ``S``, ``labels``, ``reduction`` and the
miner's masks) to the parameters written bare. :func:`hyper_parameters` lists what a function
declares, for the loss modules, the registry and the configs. Tests:
``tests/core/test_declaration.py``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
import torch

from .validation import Mask, Number, Reduction

__all__ = ["check_argument", "declared", "hyper_parameters", "loss_frame"]


def loss_frame(
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    reduction: Reduction = "mean",
    pos_mask: Mask = None,
    neg_mask: Mask = None,
    triplet_mask: Mask = None,
) -> None:
    """The frame every pure loss function and miner shares, declared once.

    A :func:`declared` function names these parameters bare (``def circle_loss(S, labels, gamma:
    Scale = 80.0, ..., *, reduction, pos_mask, neg_mask)``) and takes their annotation and
    default from here, so its signature lists them without repeating what they are.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of the batch (``S_ij = <f_i, f_j>`` for unit embeddings).
    labels : int Tensor of shape (B,)
        Class labels; ``y_i = y_j`` makes ``(i, j)`` a positive pair.
    reduction : {"mean", "sum", "none"}
        Over the anchors (or pairs) a loss counts; ``"none"`` returns one value each.
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Pairs kept by a miner; they narrow the label masks (``None``: every pair).
    triplet_mask : bool Tensor of shape (B, B, B), optional
        Triplets ``(a, p, n)`` kept by a triplet miner.
    """


#: The frame's parameters by name, read once (every declared function takes from them).
_FRAME = inspect.signature(loss_frame, eval_str=True).parameters

#: True while a :func:`declared` function runs: the declared functions it calls check nothing.
_TRUSTED = contextvars.ContextVar("dmlbook_trusted_hyper_parameters", default=False)

_WORDS = {float: "a number", int: "an integer", bool: "True or False", str: "a string"}


def _options(annotation: Any) -> tuple[Any, ...] | None:
    """The alternatives of a declared annotation (``X | None`` gives two), or ``None`` when it
    declares no hyper-parameter (a tensor, a generator)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
    else:
        args = (annotation,)
    declared_ = all(
        a is type(None) or a in _WORDS or typing.get_origin(a) in (Annotated, Literal) for a in args
    )
    return args if declared_ else None


def check_argument(name: str, value: Any, annotation: Any) -> Any:
    """``value`` checked against its declared annotation and normalised (``numpy.int64(3)`` ->
    ``3``); ``TypeError`` or ``ValueError`` naming ``name`` (the exception's ``parameter``)."""
    try:
        return _check(name, value, _options(annotation) or (object,))
    except (TypeError, ValueError) as err:
        err.parameter = name
        raise


def _check(name: str, value: Any, options: tuple[Any, ...]) -> Any:
    if value is None and type(None) in options:
        return None
    (option,) = [a for a in options if a is not type(None)]
    origin = typing.get_origin(option)
    if origin is Annotated:
        return typing.get_args(option)[1].check(value, name)
    if origin is Literal:
        allowed = typing.get_args(option)
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {value!r} ({type(value).__name__}).")
        if value not in allowed:
            raise ValueError(
                f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}."
            )
        return value
    if option is bool:
        if not isinstance(value, bool | np.bool_):
            raise TypeError(f"{name} must be True or False, got {value!r}.")
        return bool(value)
    if option in (int, float):
        return Number(-math.inf, math.inf, integer=option is int).check(value, name)
    if option is str and not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {value!r} ({type(value).__name__}).")
    return value


def _take_declaration(function: Callable[..., Any], like: Callable[..., Any] | None) -> None:
    """Give ``function``'s bare parameters (no annotation, no default) the annotation and default
    of ``like``'s parameter of that name, else of :func:`loss_frame`'s (see :func:`declared`);
    ``TypeError`` for a bare name that neither declares."""
    source = dict(_FRAME)
    if like is not None:
        source |= inspect.signature(like, eval_str=True).parameters
    own = inspect.signature(function).parameters.values()
    bare = {p.name for p in own if p.annotation is p.empty and p.default is p.empty}
    if bare - set(source):
        missing = sorted(bare - set(source))
        by = f"{like.__name__} nor by loss_frame" if like is not None else "loss_frame"
        raise TypeError(f"{function.__name__}: {missing} are not declared by {by}.")
    for name in bare:
        function.__annotations__[name] = source[name].annotation
    defaults = [source[p.name].default if p.name in bare else p.default for p in own]
    positional = [
        d for p, d in zip(own, defaults, strict=True) if p.kind == p.POSITIONAL_OR_KEYWORD
    ]
    while positional and positional[0] is inspect.Parameter.empty:
        positional.pop(0)
    if inspect.Parameter.empty in positional:
        raise TypeError(f"{function.__name__}: a parameter without default follows one with.")
    function.__defaults__ = tuple(positional) or None
    keyword = {p.name: d for p, d in zip(own, defaults, strict=True) if p.kind == p.KEYWORD_ONLY}
    function.__kwdefaults__ = {n: d for n, d in keyword.items() if d is not inspect.Parameter.empty}


@functools.cache
def hyper_parameters(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The hyper-parameters a loss function declares: its parameters whose annotation is a
    declared type (a :class:`Number` range, a ``Literal``, ``bool``, ``float``, ``int``, ``str``,
    or one of them ``| None``; not ``S``, the labels, the masks), with their defaults."""
    params = inspect.signature(function, eval_str=True).parameters.values()
    return {p.name: p for p in params if _options(p.annotation) is not None}


def declared(
    function: Callable[..., Any] | None = None,
    *,
    like: Callable[..., Any] | None = None,
    rules: tuple[Callable[..., None], ...] = (),
) -> Any:
    """Decorate a loss function so that its signature is the declaration of its hyper-parameters.

    A call checks the hyper-parameters passed (:func:`check_argument` of the annotation) and then
    ``rules``, functions of all the hyper-parameters by name that raise for a combination (``K``
    even for DRO-TopK-PN); the declared functions it calls in turn (``pair_power_loss`` calls
    ``pair_weighted_loss``) trust what it checked and check nothing again. ``function.check(
    **values)`` runs the same checks once and returns every value normalised (what a module
    does at construction); ``function.trusted(...)`` computes without them (what the module
    calls).

    ``like=other`` says that ``function`` shares the declaration of the declared function
    ``other`` (``binomial_weights`` takes ``binomial_deviance_loss``'s): each of its parameters
    written bare (no annotation, no default) takes ``other``'s annotation and default of that
    name, and ``other``'s rules come along where ``function`` has all their parameters. A bare
    name that ``other`` does not declare (or any bare name, without ``like``) takes the frame's
    declaration, :func:`loss_frame`: ``S``, ``labels``, ``reduction`` and the miner's masks.
    """
    if function is None:
        return functools.partial(declared, like=like, rules=rules)
    _take_declaration(function, like)
    if like is not None:
        names = set(inspect.signature(function).parameters)
        inherited = [r for r in like.rules if set(inspect.signature(r).parameters) <= names]
        rules = tuple(dict.fromkeys((*rules, *inherited)))
    signature = inspect.signature(function)
    params = hyper_parameters(function)

    def check(**values: Any) -> dict[str, Any]:
        out = {n: check_argument(n, v, params[n].annotation) if n in params else v
               for n, v in values.items()}  # fmt: skip
        out = {name: p.default for name, p in params.items()} | out  # defaults: declared valid
        for rule in rules:
            rule(**{name: out[name] for name in inspect.signature(rule).parameters})
        return out

    def trusted(*args: Any, **kwargs: Any) -> Any:
        token = _TRUSTED.set(True)
        try:
            return function(*args, **kwargs)
        finally:
            _TRUSTED.reset(token)

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if _TRUSTED.get():  # called by a declared function, which checked its values
            return function(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        given = {n: v for n, v in bound.arguments.items() if n in params}
        if given or rules:
            bound.arguments.update({n: v for n, v in check(**given).items() if n in given})
        return trusted(*bound.args, **bound.kwargs)

    checked.check, checked.trusted, checked.rules = check, trusted, rules
    return checked

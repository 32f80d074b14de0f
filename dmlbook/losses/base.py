"""What every loss module shares: the declared hyper-parameters of a family and the thin module.

* :class:`HyperParameters` is the base of each family's frozen dataclass, which declares the
  family's hyper-parameters **once**: their defaults (the fields), the checks every call of the
  pure function makes (:meth:`HyperParameters.check`) and the stricter ones a training module
  adds (:meth:`HyperParameters.check_module`, e.g. no ``reduction="none"``).
* :class:`PairLoss` is the thin ``nn.Module``: ``loss(embeddings, labels)`` forms ``S`` and calls
  the family's pure function with the module's settings; its constructor *is* the dataclass.

The pair algebra (input checks, forms, masked log-sum-exp, reductions) lives one layer down in
:mod:`dmlbook.pairs` and is re-exported here for the names chapters already use
(``dmlbook.losses.base.dissimilarity``, ``resolve_masks``, ...). Tests: ``tests/losses/test_base.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from ..pairs import (
    FORMS,
    REDUCTIONS,
    Form,
    check_choice,
    check_positive,
    check_similarity,
    dissimilarity,
    masked_logsumexp,
    masked_mean,
    prepare_batch,
    reduce,
    resolve_masks,
    safe_distance,
)
from .first_order import first_order_only, second_derivative_refusal

__all__ = [
    "FORMS",
    "REDUCTIONS",
    "Form",
    "HyperParameters",
    "PairLoss",
    "check_choice",
    "check_positive",
    "check_similarity",
    "dissimilarity",
    "masked_logsumexp",
    "masked_mean",
    "prepare_batch",
    "reduce",
    "resolve_masks",
    "safe_distance",
]


@dataclasses.dataclass(frozen=True)
class HyperParameters:
    """Base of a loss family's hyper-parameters, declared once as a frozen dataclass.

    A family writes its fields (name, type, default; keyword-only ones after ``_: KW_ONLY``) and
    overrides :meth:`check`, which the pure function runs on every call (construction runs it),
    and :meth:`check_module` for what a module must satisfy on top (by default a ``reduction``
    that gives a scalar, :attr:`module_reductions`). Checks may normalise a value with
    :meth:`_set` (e.g. ``float(alpha)``).
    """

    #: The reductions a module accepts (a module returns a scalar).
    module_reductions: ClassVar[tuple[str, ...]] = ("mean", "sum")

    def __post_init__(self) -> None:
        self._check_types()
        self.check()

    def _check_types(self) -> None:
        """Each value against its field's declared type, naming the parameter (one place for
        every family): ``margin="a"`` fails here, not deep inside a comparison."""
        for name, expected in _declared_types(type(self)).items():
            value = getattr(self, name)
            if not _fits(value, expected):
                wanted = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in expected)
                raise TypeError(f"{name} must be {wanted}, got {value!r} ({type(value).__name__}).")

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _positive(self, *names: str) -> None:
        """Check that each named value is a finite number > 0 and store it as a float."""
        for name in names:
            self._set(name, check_positive(getattr(self, name), name))

    def check(self) -> None:
        """Validate (and normalise) the values; raise ``ValueError`` saying what to pass."""

    def check_module(self) -> None:
        """The stricter checks of a module; by default a scalar ``reduction``."""
        if hasattr(self, "reduction"):
            check_choice(self.reduction, self.module_reductions, "reduction")


_TYPE_WORDS = {float: "a number", int: "an integer", bool: "True or False", str: "a string",
               type(None): "None"}  # fmt: skip


@functools.cache
def _declared_types(cls: type) -> dict[str, tuple[type, ...]]:
    """The plain types (``float``, ``int``, ``str``, ``bool``, ``None``) each field declares."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        tp = hints.get(f.name)
        args = (
            typing.get_args(tp)
            if typing.get_origin(tp) in (typing.Union, types.UnionType)
            else (tp,)
        )
        if args and all(a in _TYPE_WORDS for a in args):
            out[f.name] = tuple(args)
    return out


def _fits(value: Any, expected: tuple[type, ...]) -> bool:
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return bool in expected
    if isinstance(value, (int, np.integer)):
        return int in expected or float in expected
    if isinstance(value, (float, np.floating)):
        return float in expected
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        return float in expected and torch.is_floating_point(value)
    return any(isinstance(value, t) for t in expected if t not in (int, float, bool))


class _HyperSignature:
    """``inspect.signature(LossClass)`` is its family's dataclass signature (for the registry and
    ``help``); instances have none here, so ``inspect.signature(loss)`` stays ``forward``'s."""

    def __get__(self, obj: Any, owner: type) -> inspect.Signature | None:
        if obj is not None:
            raise AttributeError("__signature__")
        if owner.hyper is None or owner.__init__ is not PairLoss.__init__:
            return None
        return inspect.signature(owner.hyper, eval_str=True)


class PairLoss(nn.Module):
    """Base class of the thin loss modules: ``loss(embeddings, labels)`` like pytorch-metric-learning.

    A subclass names the pure function of ``S`` it wraps (:attr:`loss_function`) and its family's
    :class:`HyperParameters` dataclass (:attr:`hyper`); the constructor takes exactly that
    dataclass's arguments, runs its checks (:meth:`HyperParameters.check_module` included) and
    stores each field as an attribute (:attr:`hyper_parameters`, shown by ``repr``).
    :meth:`loss_on_similarity` calls ``loss_function(S, labels, **settings, **masks)`` with the
    settings the function takes and the masks of :meth:`mine` (a built-in miner overrides it).

    Masks from a miner can be passed as ``loss(embeddings, labels, pos_mask=..., neg_mask=...)``;
    they are forwarded only when given, so a subclass whose :meth:`loss_on_similarity` takes no
    masks keeps working for the plain call.
    """

    #: The pure function of ``S`` the module calls (set with ``staticmethod`` in a subclass).
    loss_function: ClassVar[Callable[..., torch.Tensor] | None] = None
    #: The family's declared hyper-parameters (the constructor's arguments).
    hyper: ClassVar[type[HyperParameters] | None] = None
    #: Attribute names shown by ``repr``: the fields of :attr:`hyper`.
    hyper_parameters: ClassVar[tuple[str, ...]] = ()
    _passed: ClassVar[tuple[str, ...]] = ()
    __signature__ = _HyperSignature()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.hyper is not None and "hyper_parameters" not in cls.__dict__:
            cls.hyper_parameters = tuple(f.name for f in dataclasses.fields(cls.hyper))
        cls._passed = cls.hyper_parameters
        if cls.loss_function is not None:  # only the settings the function takes (not a miner's)
            takes = inspect.signature(cls.loss_function).parameters
            if not any(p.kind is p.VAR_KEYWORD for p in takes.values()):
                cls._passed = tuple(name for name in cls.hyper_parameters if name in takes)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        if self.hyper is None:
            if args or kwargs:
                raise TypeError(f"{type(self).__name__} declares no hyper-parameters (set hyper).")
            return
        settings = self.hyper(*args, **kwargs)
        settings.check_module()
        for name in self.hyper_parameters:
            setattr(self, name, getattr(settings, name))

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        S, y = prepare_batch(embeddings, labels)
        S = first_order_only(S, second_derivative_refusal(self))  # a detached solution: no Hessian
        masks = {}
        if pos_mask is not None:
            masks["pos_mask"] = pos_mask
        if neg_mask is not None:
            masks["neg_mask"] = neg_mask
        return self.loss_on_similarity(S, y, **masks)

    def mine(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        pos_mask: torch.Tensor | None,
        neg_mask: torch.Tensor | None,
    ) -> dict[str, torch.Tensor | None]:
        """The masks the loss function sees: the given ones (a built-in miner narrows them)."""
        return {"pos_mask": pos_mask, "neg_mask": neg_mask}

    def loss_on_similarity(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The loss of a similarity matrix: :attr:`loss_function` with this module's settings."""
        if self.loss_function is None:
            raise NotImplementedError(
                f"{type(self).__name__} must set loss_function or override loss_on_similarity."
            )
        settings = {name: getattr(self, name) for name in self._passed}
        masks = self.mine(S, labels, pos_mask, neg_mask)
        return self.loss_function(S, labels, **settings, **masks)

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self.hyper_parameters)

"""What every loss module shares: the thin ``nn.Module`` built from its loss function's signature.

A loss function's signature declares its hyper-parameters (literal defaults, annotations from
:mod:`dmlbook.core.validation`: ``alpha: Scale = 2.0``; the frame's ``S``, ``labels``,
``reduction`` and masks bare, declared by :func:`~dmlbook.core.declaration.loss_frame`) and
:func:`~dmlbook.core.declaration.declared` checks them at each call. :class:`PairLoss` is the thin
``nn.Module``: its constructor, ``repr``, hyper-parameter list, the registry and the configs are
derived from that signature; it checks the values once, at construction, and its
``loss(embeddings, labels)`` forms ``S`` and calls the function without checking them again.

The pair algebra (input checks, forms, masked log-sum-exp, reductions) lives one layer down in
:mod:`dmlbook.core.pairs` and the declared ranges in :mod:`dmlbook.core.validation`; the loss modules
import them from there. Tests: ``tests/losses/test_base.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from ..core.declaration import check_argument, hyper_parameters
from ..core.pairs import Mask, dissimilarity, pair_sets, prepare_batch, resolve_masks
from .first_order import first_order_only, second_derivative_refusal

#: Re-exported for the chapters' ``dmlbook.losses.base.dissimilarity`` and the package face.
__all__ = ["PairLoss", "dissimilarity", "pair_sets", "prepare_batch", "resolve_masks"]


class _Declaration:
    """``inspect.signature(LossClass)`` is its constructor's: the loss function's
    hyper-parameters (for the registry and ``help``); instances have none here, so
    ``inspect.signature(loss)`` stays ``forward``'s."""

    def __get__(self, obj: Any, owner: type) -> inspect.Signature | None:
        if obj is not None:
            raise AttributeError("__signature__")
        return owner._declaration if owner.__init__ is PairLoss.__init__ else None


class PairLoss(nn.Module):
    """Base class of the thin loss modules: ``loss(embeddings, labels)`` like pytorch-metric-learning.

    A subclass names the pure function of ``S`` it wraps (:attr:`loss_function`, decorated
    with :func:`~dmlbook.core.declaration.declared`); the constructor takes that function's
    hyper-parameters (and :attr:`module_options`'), checks them once and stores each as an
    attribute (:attr:`hyper_parameters`, shown by ``repr``; one assigned later is checked again). :meth:`loss_on_similarity` calls
    the function with them and the masks of :meth:`mine` (a built-in miner overrides it). A
    module without a loss function may name a class whose constructor checks its settings
    (:attr:`hyper`, e.g. :class:`dmlbook.surgery.SurgerySpec`).

    Masks from a miner can be passed as ``loss(embeddings, labels, pos_mask=..., neg_mask=...)``;
    they are forwarded only when given, so a subclass whose :meth:`loss_on_similarity` takes no
    masks keeps working for the plain call.
    """

    #: The pure function of ``S`` the module calls (set with ``staticmethod`` in a subclass).
    loss_function: ClassVar[Callable[..., torch.Tensor] | None] = None
    #: Settings of the module alone (keyword-only parameters of a function that does nothing):
    #: a built-in miner, a seed; a name the loss function has gets the module's default.
    module_options: ClassVar[Callable[..., None] | None] = None
    #: Without a loss function: a class whose constructor checks the settings.
    hyper: ClassVar[type | None] = None
    #: The reductions a module accepts (a module returns a scalar).
    module_reductions: ClassVar[tuple[str, ...]] = ("mean", "sum")
    #: Attribute names shown by ``repr``: the constructor's parameters.
    hyper_parameters: ClassVar[tuple[str, ...]] = ()
    _declaration: ClassVar[inspect.Signature] = inspect.Signature()
    _passed: ClassVar[tuple[str, ...]] = ()
    __signature__ = _Declaration()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        params = dict(hyper_parameters(cls.loss_function)) if cls.loss_function else {}
        cls._passed = tuple(params)
        for source in (cls.module_options, cls.hyper):
            for p in inspect.signature(source, eval_str=True).parameters.values() if source else ():
                params[p.name] = p.replace(kind=params[p.name].kind) if p.name in params else p
        if params or cls.loss_function:
            cls._declaration = inspect.Signature(list(params.values()))
            cls.hyper_parameters = tuple(params)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        values = self._declaration.bind(*args, **kwargs).arguments
        values = {p.name: p.default for p in self._declaration.parameters.values()} | values
        for name, value in self._checked(values).items():
            super().__setattr__(name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        """A setting assigned after construction (``loss.alpha = 3.0``) is checked as the
        constructor checks it, with the other settings; a bad one is refused and not stored."""
        if name in type(self).hyper_parameters and name in self.__dict__:
            settings = {n: getattr(self, n) for n in self.hyper_parameters}
            value = self._checked(settings | {name: value})[name]
        super().__setattr__(name, value)

    def _checked(self, values: dict[str, Any]) -> dict[str, Any]:
        """Every setting checked and normalised (the annotations, the function's rules, the
        :attr:`hyper` class, the module's reductions); the calls then trust them."""
        spec = self.hyper(**values) if self.hyper is not None else None
        if spec is not None:
            values = {name: getattr(spec, name) for name in values}
        else:
            values = {n: v if n in self._passed else check_argument(n, v, self._declaration
                      .parameters[n].annotation) for n, v in values.items()}  # fmt: skip
        check = getattr(self.loss_function, "check", None)
        if check is not None:
            values |= check(**{name: values[name] for name in self._passed})
        if "reduction" in values and values["reduction"] not in self.module_reductions:
            allowed = ", ".join(map(repr, self.module_reductions))
            raise ValueError(
                f"reduction must be one of {allowed} for a module (it returns a scalar); "
                f"got {values['reduction']!r}."
            )
        if spec is not None:
            super().__setattr__("_hyper_spec", spec)  # checked: what the calls use
        return values

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: Mask = None,
        neg_mask: Mask = None,
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
        self, S: torch.Tensor, labels: torch.Tensor, pos_mask: Mask, neg_mask: Mask
    ) -> dict[str, Mask]:
        """The masks the loss function sees: the given ones (a built-in miner narrows them)."""
        return {"pos_mask": pos_mask, "neg_mask": neg_mask}

    def loss_on_similarity(
        self, S: torch.Tensor, labels: torch.Tensor, *, pos_mask: Mask = None, neg_mask: Mask = None
    ) -> torch.Tensor:
        """The loss of a similarity matrix: :attr:`loss_function` with this module's settings."""
        if self.loss_function is None:
            raise NotImplementedError(
                f"{type(self).__name__} must set loss_function or override loss_on_similarity."
            )
        settings = {name: getattr(self, name) for name in self._passed}
        masks = self.mine(S, labels, pos_mask, neg_mask)
        fn = self.loss_function
        trusted = getattr(fn, "trusted", fn)  # its settings were checked at construction
        return trusted(S, labels, **settings, **masks)

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self.hyper_parameters)

"""Build a loss module by name: ``get_loss("triplet", margin=0.2, mining="batch_hard")``.

The registry maps a name (and a few aliases) to a :class:`~dmlbook.losses.PairLoss` factory. It is
what chapters, the training loop and the command line use to choose a loss from a string, and it
checks the hyper-parameters against the factory's signature so that a misspelt keyword fails
with the list of the accepted ones instead of a bare ``TypeError``.

Later losses join with :func:`register_loss`. Tests: ``tests/losses/test_registry.py``.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from .base import PairLoss
from .binomial import BinLiftedLoss, BinomialDevianceLoss
from .circle import CircleLoss
from .contrastive import ContrastiveDistanceLoss, ContrastiveLoss
from .dro import DROLoss
from .dro_grouped import DROGroupedLoss, DROSampledLoss, HAP2SLoss
from .histogram import HistogramLoss
from .lifted import LiftedLoss, LiftedStarLoss, LiftedStructureLoss
from .liu_triplet import TripletExponentialLoss, TripletPowerLoss
from .liu_weighting import MSDistanceLoss, PairExponentialLoss, PairPowerLoss
from .multi_similarity import MSMiningLoss, MultiSimilarityLoss
from .npair import NPairLoss
from .triplet import CosineTripletLoss, TripletLoss

__all__ = ["available_losses", "describe_loss", "get_loss", "loss_parameters", "register_loss"]

LossFactory = Callable[..., PairLoss]

_REGISTRY: dict[str, LossFactory] = {}
_ALIASES: dict[str, str] = {}


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def register_loss(
    name: str, factory: LossFactory, *, aliases: tuple[str, ...] = (), overwrite: bool = False
) -> None:
    """Make ``factory`` available as ``get_loss(name, ...)``.

    Parameters
    ----------
    name : str
        Case and ``-``/``_`` are ignored when looking it up.
    factory : callable
        Usually a :class:`~dmlbook.losses.PairLoss` subclass; called with the hyper-parameters.
    aliases : tuple of str
        Other names for the same loss.
    overwrite : bool
        Replace an existing entry instead of raising ``ValueError``.
    """
    if not callable(factory):
        raise TypeError(
            f"factory for loss {name!r} must be callable, got {type(factory).__name__}."
        )
    keys = [_key(name), *(_key(a) for a in aliases)]
    if not overwrite:
        taken = [k for k in keys if k in _REGISTRY or k in _ALIASES]
        if taken:
            raise ValueError(
                f"loss name(s) {', '.join(map(repr, taken))} already registered; "
                "pass overwrite=True to replace them."
            )
    _REGISTRY[keys[0]] = factory
    _ALIASES.pop(keys[0], None)
    for alias in keys[1:]:
        _ALIASES[alias] = keys[0]
        _REGISTRY.pop(alias, None)


def available_losses() -> list[str]:
    """The registered loss names (without aliases), sorted."""
    return sorted(_REGISTRY)


def _resolve(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"loss name must be a str, got {type(name).__name__}.")
    key = _key(name)
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        known = sorted([*_REGISTRY, *_ALIASES])
        close = difflib.get_close_matches(key, known, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"unknown loss {name!r}.{hint} Available: {', '.join(available_losses())}."
        )
    return key


def loss_parameters(name: str) -> dict[str, Any]:
    """The hyper-parameters a registered loss accepts, with their defaults.

    A parameter without a default maps to ``inspect.Parameter.empty``.
    """
    factory = _REGISTRY[_resolve(name)]
    params = inspect.signature(factory).parameters
    return {
        p.name: p.default
        for p in params.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    }


def get_loss(name: str, **hparams: Any) -> PairLoss:
    """A new loss module by name, with the given hyper-parameters.

    Parameters
    ----------
    name : str
        One of :func:`available_losses` (or an alias such as ``"binomial_deviance"``,
        ``"n_pairs"``, ``"lifted_struct_star"``).
    **hparams
        Keyword arguments of the loss's constructor; :func:`loss_parameters` lists them.

    Raises
    ------
    ValueError
        For an unknown name (with the closest names), an unknown hyper-parameter (with the
        accepted ones), or a hyper-parameter value the loss rejects (its declared type or
        range; the exception's ``parameter`` names it, so a config can say
        ``loss.params.<name>``).

    Examples
    --------
    >>> get_loss("triplet", margin=0.2, mining="batch_hard")
    TripletLoss(margin=0.2, form='similarity', reduction='mean', mining='batch_hard')
    """
    key = _resolve(name)
    factory = _REGISTRY[key]
    sig = inspect.signature(factory)
    takes_any = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    if not takes_any:
        accepted = loss_parameters(key)
        unknown = sorted(set(hparams) - set(accepted))
        if unknown:
            listing = ", ".join(
                f"{k}={v!r}" if v is not inspect.Parameter.empty else k for k, v in accepted.items()
            )
            hints = []
            for u in unknown:
                close = difflib.get_close_matches(u, list(accepted), n=1)
                if close:
                    hints.append(f"{u!r} -> {close[0]!r}?")
            hint = f" ({'; '.join(hints)})" if hints else ""
            raise ValueError(
                f"loss {key!r} has no hyper-parameter {', '.join(map(repr, unknown))}{hint}. "
                f"It accepts: {listing or '(none)'}."
            )
    try:
        return factory(**hparams)
    except (TypeError, ValueError) as err:  # a declared check names its ``parameter``
        parameter = getattr(err, "parameter", None)
        if parameter is None and isinstance(err, ValueError):
            raise
        why = f"loss {key!r}: {err}" if parameter else f"could not build loss {key!r}: {err}"
        wrapped = ValueError(why)
        wrapped.parameter = parameter
        raise wrapped from err


register_loss("contrastive", ContrastiveLoss)
register_loss("contrastive_distance", ContrastiveDistanceLoss)
register_loss("triplet", TripletLoss)
register_loss("lifted", LiftedLoss, aliases=("generalized_lifted",))
register_loss("lifted_structure", LiftedStructureLoss, aliases=("lifted_song",))
register_loss("lifted_star", LiftedStarLoss, aliases=("lifted_struct_star", "liftedstruct*"))
register_loss("binomial", BinomialDevianceLoss, aliases=("binomial_deviance",))
register_loss("binlifted", BinLiftedLoss, aliases=("bin_lifted",))
register_loss("npair", NPairLoss, aliases=("n_pair", "npairs", "n_pairs"))
register_loss("multi_similarity", MultiSimilarityLoss, aliases=("ms",))
register_loss("ms_mining", MSMiningLoss)
register_loss("circle", CircleLoss)
register_loss("cosine_triplet", CosineTripletLoss, aliases=("nca_triplet",))
register_loss("pair_p", PairPowerLoss, aliases=("pair_power",))
register_loss("pair_e", PairExponentialLoss, aliases=("pair_exponential",))
register_loss("triplet_p", TripletPowerLoss, aliases=("triplet_power",))
register_loss("triplet_e", TripletExponentialLoss, aliases=("triplet_exponential",))
register_loss("ms_distance", MSDistanceLoss, aliases=("ms_liu",))
register_loss("dro", DROLoss)
register_loss("dro_kl_sampled", DROSampledLoss)
register_loss("dro_kl_g", DROGroupedLoss, aliases=("dro_kl_grouped",))
register_loss("hap2s_e", HAP2SLoss, aliases=("hap2s",))
register_loss("histogram", HistogramLoss, aliases=("histogram_loss",))


def describe_loss(module: PairLoss) -> tuple[str, dict[str, Any]]:
    """The registry name and hyper-parameters that rebuild ``module`` with :func:`get_loss`.

    This is how a loss built in a notebook travels into a config file (``loss.name`` and
    ``loss.params``) and so to the training engine.

    Raises
    ------
    ValueError
        If the module's class is not registered (register it with :func:`register_loss`).

    Examples
    --------
    >>> describe_loss(get_loss("triplet", margin=0.2))
    ('triplet', {'margin': 0.2, 'form': 'similarity', 'reduction': 'mean', 'mining': 'all'})
    """
    names = [name for name, factory in _REGISTRY.items() if factory is type(module)]
    if not names:
        raise ValueError(
            f"{type(module).__name__} is not in the loss registry, so it cannot be named in a "
            "config; register it with dmlbook.losses.register_loss(name, "
            f"{type(module).__name__})."
        )
    return names[0], {h: getattr(module, h) for h in module.hyper_parameters}

"""Several losses, several seeds, one protocol: the grid of ``fit`` runs the chapters compare.

A comparison of losses is only as good as its protocol. :func:`compare_losses` fixes everything
but the loss: for every seed it builds the model afresh (after seeding, so every loss starts
from the *same* initial weights for that seed), trains it with :func:`dmlbook.training.fit` (so
every loss sees the *same* PK batches in the same order for that seed, and the same optimiser,
learning rate and number of steps) and scores Recall@K on the test split. Seeds change the
initial weights and the batches together.

The result is a tidy :class:`pandas.DataFrame` in the package's results layout
(:mod:`dmlbook.studies.results`), one row per (loss, seed, evaluated epoch), which
:func:`~dmlbook.studies.results.summarize` reduces to mean and standard deviation over seeds and
:func:`~dmlbook.studies.results.format_summary` prints as ``mean +- std`` (in percent).
:func:`dmlbook.chapters.plots.plot_recall_bars` draws the summary.

Because runs that share a seed share their initial weights and batches, the differences between
two losses *within* a seed are paired: :func:`~dmlbook.studies.results.paired_differences`
reports them, and their spread is usually smaller than the spread of either loss across seeds.
The same comparison at benchmark scale, with the engine, is :mod:`dmlbook.studies.benchmark`.

Tests: ``tests/studies/test_loss_grid.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from torch import nn

from ..core.reproducibility import seed_everything
from ..core.validation import is_integer
from ..evaluate import recall_at_k
from ..losses.registry import get_loss
from ..models.embedding import check_positive_int, embed
from ..training.in_memory import fit, inputs_and_labels
from .harness import run_grid

__all__ = ["LossSpec", "compare_losses"]


@dataclass(frozen=True)
class LossSpec:
    """A loss to build afresh for every run: a registry name and its hyper-parameters.

    Attributes
    ----------
    name : str
        A name known to :func:`dmlbook.losses.get_loss`.
    hparams : mapping
        Keyword arguments for :func:`~dmlbook.losses.get_loss`.
    """

    name: str
    hparams: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> nn.Module:
        """A new loss module (losses with parameters must not carry state across runs)."""
        return get_loss(self.name, **dict(self.hparams))


LossLike = LossSpec | str | tuple[str, Mapping[str, Any]] | Callable[[], Callable[..., Any]]


def _as_factory(label: str, spec: object) -> Callable[[], Callable[..., Any]]:
    """Turn one entry of ``losses`` into a zero-argument factory of a loss callable."""
    if isinstance(spec, LossSpec):
        spec.build()  # fail now, before any training, on a bad name or hyper-parameter
        return spec.build
    if isinstance(spec, str):
        return _as_factory(label, LossSpec(spec))
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        if not isinstance(spec[1], Mapping):
            raise TypeError(
                f"losses[{label!r}] = (name, hparams) needs a dict of hyper-parameters, got "
                f"{type(spec[1]).__name__}."
            )
        return _as_factory(label, LossSpec(spec[0], dict(spec[1])))
    if callable(spec) and not isinstance(spec, nn.Module):
        return spec  # a factory: called once per run
    raise TypeError(
        f"losses[{label!r}] must be a registry name, a (name, hparams) tuple, a LossSpec or a "
        f"zero-argument function returning a loss, got {type(spec).__name__}. (Pass a factory "
        "such as `lambda: MyLoss()` rather than a module, so that every run starts afresh.)"
    )


def _check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    if is_integer(seeds):
        seeds = (seeds,)
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed, e.g. seeds=(0, 1, 2).")
    for s in seeds:
        if not is_integer(s) or s < 0:
            raise ValueError(f"every seed must be a non-negative int, got {s!r}.")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}.")
    return seeds


def _checked_protocol(
    losses: Mapping[str, LossLike],
    make_model: Callable[[], nn.Module],
    seeds: Sequence[int],
    eval_every: int | None,
    ks: Sequence[int],
    fit_kwargs: Mapping[str, Any],
) -> tuple[dict[str, Callable[[], Callable[..., Any]]], tuple[int, ...], tuple[int, ...]]:
    """The argument checks of :func:`compare_losses`: ``(loss factories, seeds, ks)``."""
    if not isinstance(losses, Mapping) or not losses:
        raise ValueError("losses must be a non-empty dict {label: loss}.")
    factories = {str(label): _as_factory(str(label), spec) for label, spec in losses.items()}
    if not callable(make_model):
        raise TypeError(
            "make_model must be a zero-argument function returning a new model, e.g. "
            f"`lambda: SmallCNN(dim=64)`, got {type(make_model).__name__}."
        )
    seeds = _check_seeds(seeds)
    if eval_every is not None:
        check_positive_int(eval_every, "eval_every")
    ks = (ks,) if is_integer(ks) else tuple(ks)
    clash = sorted({"seed", "test", "eval_every", "ks"} & set(fit_kwargs))
    if clash:
        raise ValueError(
            f"compare_losses sets {', '.join(clash)} itself; pass seeds=..., eval_every=... and "
            "ks=... to compare_losses instead."
        )
    return factories, seeds, ks


@dataclass(frozen=True)
class _Protocol:
    """What every run of :func:`compare_losses` shares; calling it does one (loss, seed) run."""

    factories: Mapping[str, Callable[[], Callable[..., Any]]]
    make_model: Callable[[], nn.Module]
    train: object
    test: object
    test_xy: tuple[Any, Any]
    eval_every: int | None
    ks: tuple[int, ...]
    progress: bool | None
    fit_kwargs: Mapping[str, Any]

    def __call__(self, label: str, seed: int) -> tuple[pd.DataFrame, bool]:
        """``(history, interrupted)`` of the run of loss ``label`` with ``seed``."""
        test_x, test_y = self.test_xy
        device = self.fit_kwargs.get("device", "cpu")
        start = time.perf_counter()
        seed_everything(seed)
        model = self.make_model()
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"make_model() must return a torch.nn.Module, got {type(model).__name__}."
            )
        loss_fn = self.factories[label]()
        kwargs = dict(self.fit_kwargs, progress=self.progress, seed=seed, ks=self.ks)
        if self.eval_every is None:
            history = fit(model, loss_fn, self.train, None, **kwargs)
            interrupted = bool(history.attrs.get("interrupted", False))
            history = history.iloc[[-1]].copy()
            if not interrupted:  # score the finished run once
                recall = recall_at_k(embed(model, test_x, device=device), test_y, self.ks)
                for k in self.ks:
                    history[f"R@{k}"] = float(recall[k])
            history["seconds"] = time.perf_counter() - start
        else:
            history = fit(
                model, loss_fn, self.train, self.test, eval_every=self.eval_every, **kwargs
            )
            interrupted = bool(history.attrs.get("interrupted", False))
        return history.rename(columns={"loss": "train_loss"}), interrupted


def _tidy_runs(
    frames: list[pd.DataFrame],
    interrupted: bool,
    seeds: tuple[int, ...],
    eval_every: int | None,
    ks: tuple[int, ...],
    fit_kwargs: Mapping[str, Any],
) -> pd.DataFrame:
    """The runs of :func:`compare_losses` as one table, with the protocol in ``attrs``."""
    columns = ["loss", "seed", "epoch", "train_loss", *(f"R@{k}" for k in ks), "seconds"]
    if not frames:
        out = pd.DataFrame(columns=columns)
        out.attrs.update(interrupted=True, seeds=list(seeds), eval_every=eval_every, ks=list(ks))
        return out
    # every batch's loss of every run (fit's attrs["step_loss"]; concat keeps no per-frame attrs)
    step_loss = {
        (f["loss"].iloc[0], int(f["seed"].iloc[0])): list(f.attrs.get("step_loss", []))
        for f in frames
    }
    out = pd.concat(frames, ignore_index=True)
    for col in columns:  # an interrupted evaluate-once run never gets its R@K columns
        if col not in out.columns:
            out[col] = float("nan")
    out = out[columns]
    out["seed"] = out["seed"].astype(int)
    out["epoch"] = out["epoch"].astype(int)
    out.attrs.update(
        interrupted=interrupted,
        seeds=list(seeds),
        eval_every=eval_every,
        ks=list(ks),
        step_loss=step_loss,
        fit={
            k: (v if isinstance(v, int | float | str | bool) else repr(v))
            for k, v in fit_kwargs.items()
        },
    )
    return out


def compare_losses(
    losses: Mapping[str, LossLike],
    make_model: Callable[[], nn.Module],
    train: object,
    test: object,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    eval_every: int | None = None,
    ks: Sequence[int] = (1, 2, 4, 8),
    progress: bool | None = None,
    **fit_kwargs: Any,
) -> pd.DataFrame:
    """Train one model per (loss, seed) under one protocol and record Recall@K on ``test``.

    Parameters
    ----------
    losses : mapping of str to loss
        Run label (e.g. ``"binomial (Wang Eq. 9)"``) to the loss: a registry name, a
        ``(name, hparams)`` tuple, a :class:`LossSpec`, or a zero-argument function returning a
        loss callable. A new loss is built for every run.
    make_model : callable
        ``make_model() -> nn.Module``, called once per run right after
        :func:`dmlbook.seed_everything` (seed), so the initial weights depend on the seed only.
    train, test : dataset or (inputs, labels)
        As for :func:`dmlbook.training.fit`.
    seeds : sequence of int
        One run per loss and seed; the seed fixes the initial weights and the PK batches.
    eval_every : int, optional
        ``None`` (default): evaluate once, after training (the cheapest; no curves). An int:
        pass ``test`` and ``eval_every`` to :func:`~dmlbook.training.fit`, which records Recall@K
        before training (epoch 0), every ``eval_every`` epochs and after the last one.
    ks : sequence of int
        The ``K`` of Recall@K.
    progress : bool, optional
        A tqdm bar over the runs (and ``fit``'s bar within each run). ``None``: on unless the
        environment variable ``TQDM_DISABLE`` is set.
    **fit_kwargs
        Everything else :func:`~dmlbook.training.fit` accepts (``epochs``, ``batch_size``, ``k``,
        ``lr``, ``optimizer``, ``batches_per_epoch``, ``device`` ...), the same for every run.

    Returns
    -------
    pandas.DataFrame
        Tidy: one row per (loss, seed, evaluated epoch), losses in the order given. Columns
        ``loss`` (the label), ``seed``, ``epoch``, ``train_loss`` (mean training loss of that
        epoch; NaN at epoch 0 and, with ``eval_every=None``, the last epoch's value),
        ``R@K`` for each ``K`` (fractions) and ``seconds`` (wall time of the run so far; the
        only column that varies between identical runs). ``attrs`` holds the protocol:
        ``interrupted``, ``seeds``, ``eval_every``, ``ks`` and the ``fit`` keyword arguments, and
        ``step_loss``: ``{(loss, seed): [the loss of every training batch]}`` (training curves,
        :func:`dmlbook.chapters.curves.plot_loss_curves`).

    Raises
    ------
    ValueError, TypeError
        For an empty ``losses``, a bad seed or loss entry, or a ``fit`` keyword that
        :func:`compare_losses` sets itself (``seed``, ``test``, ``eval_every``, ``ks``).

    Notes
    -----
    Ctrl-C (``KeyboardInterrupt``) stops the grid: the runs that finished are returned with
    ``attrs["interrupted"] = True``; the run in progress is dropped, since a shorter run is not
    comparable with the others.

    Examples
    --------
    >>> runs = compare_losses(  # doctest: +SKIP
    ...     {"binomial": "binomial", "triplet": ("triplet", {"mining": "batch_hard"})},
    ...     lambda: SmallCNN(dim=64, width=16), train, test, seeds=(0, 1, 2), epochs=4)
    >>> format_summary(summarize(runs))  # doctest: +SKIP
    """
    factories, seeds, ks = _checked_protocol(losses, make_model, seeds, eval_every, ks, fit_kwargs)
    test_xy = inputs_and_labels(test, "test")
    run_one = _Protocol(
        factories, make_model, train, test, test_xy, eval_every, ks, progress, fit_kwargs
    )
    # a run cut short is not comparable with the others: it is dropped
    runs = [(label, seed) for label in factories for seed in seeds]
    frames, interrupted = run_grid(runs, run_one, keep_interrupted=False, progress=progress)
    if interrupted:
        print(
            f"compare_losses interrupted: returning the {len(frames)} of {len(runs)} runs that "
            "finished; the run in progress was dropped."
        )
    return _tidy_runs(frames, interrupted, seeds, eval_every, ks, fit_kwargs)

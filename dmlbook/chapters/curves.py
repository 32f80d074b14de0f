"""Training curves: the loss of every batch and a retrieval metric against training steps.

:func:`dmlbook.training.fit` keeps the loss of every training batch in its history's
``attrs["step_loss"]`` (at no extra cost: the loop computes it anyway) and evaluates Recall@K
every ``eval_every`` epochs. :func:`plot_training_curves` draws both against the step, one style
per run (:func:`dmlbook.chapters.palette.series_style`) and, where a run has several seeds, one thin line
per seed in that style and their mean over the seeds as a thick one. :func:`plot_loss_curves` draws the grid of
:func:`dmlbook.studies.compare_losses` (its ``attrs["step_loss"]``), one small panel per loss,
since losses do not share a scale. ``dmlbook.chapters.plots`` re-exports both.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .palette import series_style

__all__ = ["plot_training_curves", "plot_loss_curves", "smooth"]


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Running mean of ``values`` over the last ``window`` entries (fewer at the start)."""
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(f"window must be a positive int, got {window!r}.")
    window = int(window)  # a numpy integer too
    x = np.asarray(values, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(x)])
    n = np.arange(1, len(x) + 1)
    lo = np.maximum(0, n - window)
    return (c[n] - c[lo]) / (n - lo)


def _runs(histories: Mapping[str, object]) -> dict[str, list[pd.DataFrame]]:
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty dict {run name: history or list of them}.")
    runs = {}
    for name, value in histories.items():
        seeds = [value] if isinstance(value, pd.DataFrame) else list(value)
        for h in seeds:
            if not isinstance(h, pd.DataFrame) or "step_loss" not in h.attrs:
                raise ValueError(
                    f"histories[{name!r}] must hold DataFrames returned by dmlbook.training.fit "
                    "(their attrs['step_loss'] is the curve); got one without it."
                )
        runs[str(name)] = seeds
    return runs


def plot_training_curves(
    histories: Mapping[str, pd.DataFrame | Sequence[pd.DataFrame]],
    metric: str = "R@1",
    *,
    window: int | None = None,
    figsize: tuple[float, float] = (10, 3.4),
) -> Figure:
    """Training loss (left) and ``metric`` (right, %) against the training step, run by run.

    Parameters
    ----------
    histories : mapping of str to DataFrame or sequence of DataFrames
        Run name (the legend entry) to the history :func:`dmlbook.training.fit` returned, or to
        one history per seed: each seed a thin line, their mean over the seeds (step by step)
        a thick one with the run's marker; the legend's title then says so.
    metric : str
        The evaluated column drawn on the right (fractions, shown in percent); the step of an
        evaluation at ``epoch`` e is ``e`` times the run's batches per epoch.
    window : int, optional
        Batches of the running mean drawn for the loss; default a tenth of a run's steps.

    Returns
    -------
    Figure
        Two axes; on each, one line per run, or per seed and one for their mean.

    Raises
    ------
    ValueError
        For an empty mapping, a history without ``attrs["step_loss"]`` or ``metric``, or seeds
        of one run that did not run the same steps and evaluations.
    """
    runs = _runs(histories)
    several = max(len(seeds) for seeds in runs.values()) > 1
    fig, (loss_ax, metric_ax) = plt.subplots(1, 2, figsize=figsize)
    for n, (name, seeds) in enumerate(runs.items()):
        style = series_style(n)
        curves = [_curves(name, history, metric, window) for history in seeds]
        if len(seeds) == 1:
            (x, loss, at, value), every = curves[0], max(1, len(curves[0][0]) // 6)
            loss_ax.plot(x, loss, lw=1.6, label=name, markevery=every, **style)
            metric_ax.plot(at, value, lw=1.6, label=name, **style)
            continue
        thin = {"color": style["color"], "linestyle": style["linestyle"], "lw": 0.7, "alpha": 0.6}
        for x, loss, at, value in curves:
            loss_ax.plot(x, loss, **thin)
            metric_ax.plot(at, value, **thin)
        if len({(len(c[0]), tuple(c[2])) for c in curves}) > 1:
            raise ValueError(
                f"the seeds of histories[{name!r}] ran different numbers of steps or "
                "evaluations; their mean needs one protocol (the same epochs, batches and "
                "eval_every for every seed)."
            )
        x, at = curves[0][0], curves[0][2]
        mean_loss = np.mean([c[1] for c in curves], axis=0)
        mean_value = np.mean([c[3] for c in curves], axis=0)
        thick = {"lw": 2.2, "label": name, **style}
        loss_ax.plot(x, mean_loss, markevery=max(1, len(x) // 6), **thick)
        metric_ax.plot(at, mean_value, **thick)
    loss_ax.set(xlabel="training step (batch)", ylabel="training loss (running mean)")
    metric_ax.set(xlabel="training step (batch)", ylabel=f"{metric} on the test split (%)")
    title = "thick: mean over seeds, thin: each seed" if several else None
    loss_ax.legend(fontsize="small", loc="best", title=title, title_fontsize="small")
    fig.tight_layout()
    return fig


def _curves(
    name: str, history: pd.DataFrame, metric: str, window: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One history's loss curve (step, running mean) and ``metric`` curve (step, percent)."""
    if metric not in history.columns:
        raise ValueError(f"histories[{name!r}] has no column {metric!r}.")
    steps = np.asarray(history.attrs["step_loss"], dtype=float)
    epochs = max(int(history["epoch"].max()), 1)
    per_epoch = len(steps) / epochs
    w = window or max(1, len(steps) // 10)
    at = history["epoch"].to_numpy() * per_epoch
    value = 100 * history[metric].to_numpy(dtype=float)
    return np.arange(1, len(steps) + 1), smooth(steps, w), at, value


def plot_loss_curves(
    results: pd.DataFrame, *, ncols: int = 4, window: int | None = None, size: float = 2.6
) -> Figure:
    """One panel per loss of a :func:`dmlbook.studies.compare_losses` grid: its training loss.

    Each seed's loss of every batch is a thin line (running mean over ``window`` batches, default
    a tenth of the run) and their mean over seeds a thick one; each panel has its own scale.

    Parameters
    ----------
    results : DataFrame
        As returned by :func:`dmlbook.studies.compare_losses` (``attrs["step_loss"]`` holds
        ``{(loss, seed): [loss of every batch]}``).
    ncols : int
        Panels per row.

    Returns
    -------
    Figure
    """
    curves = results.attrs.get("step_loss") if isinstance(results, pd.DataFrame) else None
    if not curves:
        raise ValueError(
            "results must be the DataFrame of dmlbook.studies.compare_losses, whose "
            "attrs['step_loss'] holds every run's batch losses; got none."
        )
    names = list(dict.fromkeys(name for name, _ in curves))
    rows = -(-len(names) // ncols)
    fig, axes = plt.subplots(
        rows, min(ncols, len(names)), figsize=(size * min(ncols, len(names)), 0.8 * size * rows),
        squeeze=False, sharex=True,
    )  # fmt: skip
    for n, name in enumerate(names):
        ax, style = axes.flat[n], series_style(n)
        seeds = [np.asarray(v, dtype=float) for (k, _), v in curves.items() if k == name]
        w = window or max(1, len(seeds[0]) // 10)
        x = np.arange(1, len(seeds[0]) + 1)
        for steps in seeds:
            ax.plot(x, smooth(steps, w), color=style["color"], ls="-", lw=0.7, alpha=0.8)
        mean = np.mean([smooth(s, w) for s in seeds], axis=0)
        ax.plot(x, mean, lw=2, markevery=max(1, len(x) // 5), **style)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(names) :]:
        ax.set_axis_off()
    fig.supxlabel("training step (batch)", fontsize=9)
    fig.supylabel("training loss (running mean)", fontsize=9)
    fig.tight_layout()
    return fig

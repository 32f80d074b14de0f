"""Figures of the book: training histories and 2-D maps of an embedding space.

Every function draws on a given ``ax`` or on a new pyplot figure, and returns the
:class:`~matplotlib.figure.Figure`; none calls ``plt.show()`` (a chapter ends its plotting cell
with it). Recall values are stored as fractions and shown in percent.

Colour is never the only cue. The book's colours are Okabe and Ito's eight (:data:`PALETTE`),
chosen to stay apart under the common colour-vision deficiencies; the ``n``-th series of a figure
also takes the ``n``-th marker and line style (:func:`series_style`), and :func:`book_rc` (applied
by ``dmlbook.setup()``) makes colour and line style matplotlib's default cycle, so that a plain
``ax.plot`` follows the rule. ``tests/test_book_figures.py`` renders every stored figure under a simulated
deuteranopia and fails when two colours a reader with normal vision tells apart merge.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..core.validation import as_embeddings, as_labels, check_same_length
from .curves import plot_loss_curves, plot_training_curves
from .palette import HATCHES, LINESTYLES, MARKERS, PALETTE, book_rc, series_style

__all__ = [
    "plot_history",
    "plot_embeddings",
    "plot_image_grid",
    "compare_histories",
    "plot_recall_bars",
    "project_2d",
    "METHODS",
    "PALETTE",
    "MARKERS",
    "LINESTYLES",
    "HATCHES",
    "series_style",
    "book_rc",
    "plot_training_curves",
    "plot_loss_curves",
]


#: Projection methods of :func:`plot_embeddings`.
METHODS = ("pca", "tsne")


def _new_axes(ax: Axes | None) -> Axes:
    if ax is None:
        _, ax = plt.subplots()
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}.")
    return ax


def _check_history(history: object, name: str = "history") -> pd.DataFrame:
    if not isinstance(history, pd.DataFrame):
        raise TypeError(
            f"{name} must be the pandas.DataFrame returned by dmlbook.training.fit, "
            f"got {type(history).__name__}."
        )
    if "epoch" not in history.columns:
        raise ValueError(f"{name} has no 'epoch' column; pass the frame returned by fit().")
    if len(history) == 0:
        raise ValueError(f"{name} is empty; there is nothing to plot.")
    return history


def _is_recall(metric: str) -> bool:
    return metric.startswith(("R@", "P@")) or metric in ("MAP@R", "RP")


def plot_history(
    history: pd.DataFrame, metrics: Sequence[str] | None = None, ax: Axes | None = None
) -> Figure:
    """Plot the training loss (left axis) and retrieval metrics (right axis, %) against epoch.

    Parameters
    ----------
    history : DataFrame
        As returned by :func:`dmlbook.training.fit`: an ``epoch`` column and metric columns.
    metrics : sequence of str, optional
        Columns to draw. Default: ``loss`` and every ``R@K`` column present. Retrieval metrics
        (``R@K``, ``P@1``, ``MAP@R``, ``RP``) are drawn in percent on a second y axis when the
        loss is drawn too.
    ax : Axes, optional
        Where to draw; a new figure by default.

    Returns
    -------
    Figure
    """
    history = _check_history(history)
    if metrics is None:
        metrics = [c for c in history.columns if c == "loss" or str(c).startswith("R@")]
    else:
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    if not metrics:
        raise ValueError("No metric to plot: history has neither 'loss' nor 'R@K' columns.")
    missing = [m for m in metrics if m not in history.columns]
    if missing:
        raise ValueError(
            f"history has no column {', '.join(map(repr, missing))}; "
            f"available: {', '.join(map(str, history.columns))}."
        )
    ax = _new_axes(ax)
    epoch = history["epoch"].to_numpy()
    scores = [m for m in metrics if m != "loss"]
    handles = []
    if "loss" in metrics:
        (line,) = ax.plot(epoch, history["loss"].to_numpy(dtype=float), "k-o", ms=3, label="loss")
        handles.append(line)
        ax.set_ylabel("training loss")
        score_ax = ax.twinx() if scores else None
    else:
        score_ax = ax
    if scores:
        for metric in scores:
            values = history[metric].to_numpy(dtype=float)
            if _is_recall(metric):
                values = 100.0 * values
            style = series_style(1 + len(handles))
            (line,) = score_ax.plot(epoch, values, ms=3, markevery=1, label=metric, **style)
            handles.append(line)
        unit = " (%)" if all(_is_recall(m) for m in scores) else ""
        score_ax.set_ylabel("retrieval metric" + unit if len(scores) > 1 else scores[0] + unit)
    ax.set_xlabel("epoch")
    # the legend goes on the top-most axes, so that no curve is drawn over it
    (score_ax or ax).legend(handles=handles, loc="best", fontsize="small")
    return ax.figure


def project_2d(
    embeddings: torch.Tensor | np.ndarray, method: str = "pca", *, seed: int = 0
) -> np.ndarray:
    """Project embeddings to two dimensions.

    ``"pca"``: the first two principal components (SVD of the centred data; each component's
    sign is fixed so that its largest-magnitude loading is positive, making the picture
    reproducible). ``"tsne"``: :class:`sklearn.manifold.TSNE` with ``init="pca"`` and
    ``random_state=seed``.

    Returns
    -------
    ndarray of shape (N, 2)
    """
    method = str(method).lower()
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; use one of {', '.join(METHODS)}.")
    x = as_embeddings(embeddings).detach().cpu().double()
    n = x.shape[0]
    if method == "pca":
        centred = x - x.mean(0, keepdim=True)
        _, _, vh = torch.linalg.svd(centred, full_matrices=False)
        comps = vh[:2]
        signs = torch.sign(comps.gather(1, comps.abs().argmax(1, keepdim=True)))
        signs[signs == 0] = 1.0
        xy = (centred @ (comps * signs).T).numpy()
        if xy.shape[1] < 2:  # one-dimensional embeddings
            xy = np.concatenate([xy, np.zeros((n, 2 - xy.shape[1]))], axis=1)
        return xy
    if n < 5:
        raise ValueError(f"t-SNE needs at least 5 points, got {n}; use method='pca'.")
    from sklearn.manifold import TSNE

    perplexity = float(min(30.0, (n - 1) / 3))
    tsne = TSNE(n_components=2, init="pca", random_state=seed, perplexity=perplexity)
    return tsne.fit_transform(x.numpy())


def _class_styles(n_classes: int) -> list[dict]:
    """Colour and marker of each class (:func:`series_style`): classes 8 apart differ by marker."""
    return [series_style(i) for i in range(n_classes)]


def plot_embeddings(
    embeddings: torch.Tensor | np.ndarray,
    labels: torch.Tensor | np.ndarray | Sequence[int],
    *,
    method: str = "pca",
    ax: Axes | None = None,
    max_points: int = 2000,
    seed: int = 0,
    title: str | None = None,
) -> Figure:
    """Scatter a 2-D projection of ``embeddings``, one colour and marker per class.

    Parameters
    ----------
    embeddings : Tensor or ndarray of shape (N, d)
    labels : Tensor, ndarray or list of shape (N,)
    method : {"pca", "tsne"}
        See :func:`project_2d`.
    ax : Axes, optional
        Where to draw; a new figure by default.
    max_points : int
        Above this many points a random subset of this size (drawn with ``seed``) is shown,
        which keeps t-SNE fast and the picture readable.
    seed : int
        Seed of the subsample and of t-SNE.
    title : str, optional
        Axes title; default names the method and the number of points and classes.

    Returns
    -------
    Figure
        One scatter collection per class (its colour and marker from :func:`series_style`, so
        classes 8 apart share a colour but not a marker); a legend when there are at most 10
        classes.
    """
    method = str(method).lower()
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; use one of {', '.join(METHODS)}.")
    if (
        isinstance(max_points, bool)
        or not isinstance(max_points, numbers.Integral)
        or max_points < 1
    ):
        raise ValueError(f"max_points must be a positive int, got {max_points!r}.")
    max_points = int(max_points)  # a numpy integer too
    x = as_embeddings(embeddings).detach().cpu()
    y = as_labels(labels).cpu()
    check_same_length(x, y)
    if x.shape[0] > max_points:
        keep = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))
        keep = keep[:max_points].sort().values
        x, y = x[keep], y[keep]
    classes, index = torch.unique(y, return_inverse=True)
    styles = _class_styles(len(classes))
    xy = project_2d(x, method, seed=seed)
    ax = _new_axes(ax)
    index = index.numpy()
    for i, c in enumerate(classes):
        style = styles[i]
        ax.scatter(
            *xy[index == i].T,
            s=14,
            color=style["color"],
            marker=style["marker"],
            linewidths=0,
            label=str(int(c)),
        )
    if len(classes) <= 10:
        ax.legend(title="class", fontsize="small", loc="best", markerscale=1)
    name = "PCA" if method == "pca" else "t-SNE"
    ax.set_xlabel(f"{name} 1")
    ax.set_ylabel(f"{name} 2")
    ax.set_xticks([])
    ax.set_yticks([])
    if title is None:
        title = f"{name} of {x.shape[0]} embeddings, {len(classes)} classes"
    ax.set_title(title)
    return ax.figure


def compare_histories(
    histories: Mapping[str, pd.DataFrame], metric: str = "R@1", ax: Axes | None = None
) -> Figure:
    """Draw one metric against epoch for several runs, one line per run.

    Parameters
    ----------
    histories : mapping of str to DataFrame
        Run name (the legend entry, e.g. the loss) to the history returned by
        :func:`dmlbook.training.fit`.
    metric : str
        Column to compare; retrieval metrics are shown in percent.
    ax : Axes, optional

    Returns
    -------
    Figure
    """
    if not isinstance(histories, Mapping) or not histories:
        raise ValueError("histories must be a non-empty dict {run name: history DataFrame}.")
    for name, history in histories.items():
        _check_history(history, f"histories[{name!r}]")
        if metric not in history.columns:
            raise ValueError(
                f"histories[{name!r}] has no column {metric!r}; available: "
                f"{', '.join(map(str, history.columns))}."
            )
    ax = _new_axes(ax)
    scale = 100.0 if _is_recall(metric) else 1.0
    for n, (name, history) in enumerate(histories.items()):
        values = scale * history[metric].to_numpy(dtype=float)
        x = history["epoch"].to_numpy()
        ax.plot(x, values, ms=3, markevery=1, label=str(name), **series_style(n))
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric + (" (%)" if scale != 1.0 else ""))
    ax.legend(fontsize="small", loc="best")
    return ax.figure


def plot_image_grid(
    images: torch.Tensor | np.ndarray,
    titles: Sequence[str] | None = None,
    *,
    ncols: int = 8,
    size: float = 1.0,
) -> Figure:
    """Show images in a grid, one small axes each, with optional titles.

    Parameters
    ----------
    images : Tensor or ndarray of shape (N, C, H, W) with C in {1, 3}, or (N, H, W)
        Values in ``[0, 1]``.
    titles : sequence of str, optional
        One title per image.
    ncols : int
        Images per row.
    size : float
        Side of one image in inches.

    Returns
    -------
    Figure
    """
    x = torch.as_tensor(np.asarray(images) if not isinstance(images, torch.Tensor) else images)
    x = x.detach().cpu().float()
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4 or x.shape[1] not in (1, 3) or x.shape[0] == 0:
        raise ValueError(
            "images must have shape (N, C, H, W) with C = 1 or 3 (or (N, H, W)) and N >= 1, "
            f"got {tuple(x.shape)}."
        )
    if titles is not None and len(titles) != x.shape[0]:
        raise ValueError(f"got {len(titles)} titles for {x.shape[0]} images; give one per image.")
    if isinstance(ncols, bool) or not isinstance(ncols, numbers.Integral) or ncols < 1:
        raise ValueError(f"ncols must be a positive int, got {ncols!r}.")
    ncols = int(ncols)  # a numpy integer too (np.uint8 arithmetic would wrap)
    n = x.shape[0]
    cols = min(ncols, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows * 1.15), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if i >= n:
            continue
        img = x[i].clamp(0, 1).permute(1, 2, 0).numpy()
        ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap="gray", vmin=0, vmax=1)
        if titles is not None:
            ax.set_title(str(titles[i]), fontsize=6)
    fig.tight_layout(pad=0.2)
    return fig


def plot_recall_bars(
    summary: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    results: pd.DataFrame | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Grouped bars of mean Recall@K per run (loss), with +- one standard deviation over seeds.

    Parameters
    ----------
    summary : DataFrame
        As returned by :func:`dmlbook.studies.summarize`: one row per run, columns
        ``"<metric> mean"`` and ``"<metric> std"``.
    metrics : sequence of str, optional
        Metrics to draw, one bar per metric within each run's group; default every ``R@K`` of
        ``summary``, in increasing ``K``.
    results : DataFrame, optional
        The tidy frame of :func:`dmlbook.studies.compare_losses`; when given, every seed's
        final value is drawn as a dot on its bar, so the spread is visible and not only its
        summary.
    ax : Axes, optional

    Returns
    -------
    Figure
        One bar container per metric (``len(summary)`` bars each), with error bars.
    """
    if not isinstance(summary, pd.DataFrame) or len(summary) == 0:
        raise ValueError("summary must be the non-empty DataFrame returned by summarize().")
    if metrics is None:
        names = {str(c).split(" ")[0] for c in summary.columns if str(c).startswith("R@")}
        metrics = sorted(names, key=lambda m: int(m[2:]))
    else:
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    missing = [
        f"{m} {stat}" for m in metrics for stat in ("mean", "std") if f"{m} {stat}" not in summary
    ]
    if missing or not metrics:
        raise ValueError(
            f"summary has no column {', '.join(map(repr, missing)) or '(no metric)'}; "
            f"available: {', '.join(map(str, summary.columns))}."
        )
    ax = _new_axes(ax)
    labels = [str(i) for i in summary.index]
    x = np.arange(len(labels), dtype=float)
    width = 0.8 / len(metrics)
    for n, metric in enumerate(metrics):
        scale = 100.0 if _is_recall(metric) else 1.0
        mean = scale * summary[f"{metric} mean"].to_numpy(dtype=float)
        std = np.nan_to_num(scale * summary[f"{metric} std"].to_numpy(dtype=float))
        offset = x - 0.4 + width * (n + 0.5)
        ax.bar(
            offset,
            mean,
            width,
            yerr=std,
            capsize=2,
            label=metric,
            color=PALETTE[n % len(PALETTE)],
            hatch=HATCHES[n % len(HATCHES)],
            edgecolor="white",
        )
        if results is not None:
            last = results.groupby(["loss", "seed"], sort=False)["epoch"].transform("max")
            final = results[results["epoch"] == last]
            for i, label in enumerate(summary.index):
                values = scale * final.loc[final["loss"] == label, metric].to_numpy(dtype=float)
                ax.scatter(np.full(len(values), offset[i]), values, s=6, color="k", zorder=3, lw=0)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=30, ha="right")
    unit = " (%)" if all(_is_recall(m) for m in metrics) else ""
    ax.set_ylabel(("Recall@K" if len(metrics) > 1 else metrics[0]) + unit)
    ax.legend(fontsize="small", loc="best", ncols=min(len(metrics), 4))
    return ax.figure

"""The results schema: one layout for every table of runs the book prints, and its summaries.

Every comparison in the package returns (or converts to) a *results* frame, one row per
(run, evaluation), with these columns:

=============  ==========================================================================
``loss``       the run's label (a loss, an ablation variant, a configuration)
``seed``       the seed of the run; runs of one seed share initial weights and batches
``epoch``      the evaluated epoch (``iteration`` instead, or as well, for engine runs;
               neither when a run is evaluated once)
``train_loss`` mean training loss before that evaluation (NaN before training)
``R@K``        Recall@K, fractions in [0, 1], increasing K (:func:`recall_columns`)
``MAP@R``      MAP@R and ``RP`` (R-precision), where measured (:func:`metric_columns`)
``seconds``    wall time of the run so far (the only column that varies between identical runs)
=============  ==========================================================================

Other columns (``dim``, ``study``, ``out_dir``, ...) follow them. :func:`as_results` turns any
table of runs into this layout (renaming its label and epoch columns); :func:`summarize`,
:func:`format_summary`, :func:`paired_differences` and :func:`format_paired` read it.

Producers: :func:`dmlbook.studies.compare_losses` (chapters, in memory),
:func:`dmlbook.studies.compare_on_benchmark` through :func:`as_results` (benchmark runs), the
ablation CSV files of ``bench/`` (Chapter 10) through :func:`as_results`. Tests:
``tests/studies/test_results.py`` and, on the tables of ``compare_losses``,
``tests/studies/test_loss_grid.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

__all__ = [
    "KEY_COLUMNS",
    "as_results",
    "format_paired",
    "format_summary",
    "metric_columns",
    "paired_differences",
    "recall_columns",
    "summarize",
]

#: The columns that identify a row of a results frame, in order (``epoch`` where evaluated).
KEY_COLUMNS = ("loss", "seed", "epoch", "iteration")
_LEADING = ("train_loss",)
_TRAILING = ("seconds",)


def metric_columns(frame: pd.DataFrame) -> list[str]:
    """The metric columns of a results frame: ``R@K`` by increasing ``K``, then MAP@R and RP."""
    return recall_columns(frame) + [c for c in ("MAP@R", "RP") if c in frame.columns]


def as_results(
    frame: pd.DataFrame,
    *,
    loss: str = "loss",
    epoch: str | None = "epoch",
    train_loss: str | None = "train_loss",
) -> pd.DataFrame:
    """A table of runs in the results layout: key columns, metrics, then everything else.

    Parameters
    ----------
    frame : DataFrame
        One row per run (or per run and evaluation), with a seed column and metric columns.
        Index levels (e.g. the ``(label, seed)`` index of
        :func:`dmlbook.studies.compare_on_benchmark`) are read as columns.
    loss : str
        The column holding the run label (``"variant"`` for the ablation CSV files, ``"label"``
        for benchmark tables); renamed ``loss``.
    epoch : str or None
        The column holding the evaluated epoch (``"epochs"`` in the ablation CSV files), renamed
        ``epoch``; ``None`` or a missing column: no epoch column.
    train_loss : str or None
        The column holding the mean training loss, renamed ``train_loss``.

    Returns
    -------
    DataFrame
        Columns in the order of the module docstring; ``seed`` (and ``epoch``) as integers;
        ``attrs`` kept.

    Raises
    ------
    ValueError
        If the label or seed column is missing, or there is no metric column.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas.DataFrame, got {type(frame).__name__}.")
    names = [n for n in frame.index.names if n is not None]
    out = frame.reset_index() if names else frame.copy()
    renames = {loss: "loss", epoch: "epoch", train_loss: "train_loss"}
    missing = [c for c in (loss, "seed") if c not in out.columns]
    if missing:
        raise ValueError(
            f"frame has no column {', '.join(map(repr, missing))} (columns: "
            f"{', '.join(map(str, out.columns))}); name the run label with loss=..."
        )
    out = out.rename(columns={k: v for k, v in renames.items() if k is not None and k != v})
    metrics = metric_columns(out)
    if not metrics:
        raise ValueError("frame has no metric column (R@K, MAP@R or RP).")
    keys = [c for c in KEY_COLUMNS if c in out.columns]
    lead = [c for c in _LEADING if c in out.columns]
    tail = [c for c in _TRAILING if c in out.columns]
    known = {*keys, *lead, *metrics, *tail}
    others = [c for c in out.columns if c not in known]
    out = out[[*keys, *lead, *metrics, *tail, *others]]
    for col in ("seed", "epoch", "iteration"):
        if col in out.columns:
            out[col] = out[col].astype(int)
    out.attrs = dict(frame.attrs)
    return out


def recall_columns(frame: pd.DataFrame) -> list[str]:
    """The ``R@K`` columns of a results or summary frame, in increasing ``K``."""
    cols = {c.split(" ")[0] for c in frame.columns if str(c).startswith("R@")}
    return sorted(cols, key=lambda c: int(c[2:]))


def _check_results(results: object) -> pd.DataFrame:
    if not isinstance(results, pd.DataFrame):
        raise TypeError(
            "results must be the DataFrame returned by compare_losses, got "
            f"{type(results).__name__}."
        )
    missing = [c for c in ("loss", "seed") if c not in results.columns]
    if missing:
        raise ValueError(
            f"results has no column {', '.join(map(repr, missing))}; pass the frame returned by "
            "compare_losses (or a table of runs through as_results)."
        )
    if len(results) == 0:
        raise ValueError("results is empty; there is nothing to summarise.")
    return results


def _final_rows(results: pd.DataFrame, epoch: int | None) -> pd.DataFrame:
    step = next((c for c in ("epoch", "iteration") if c in results.columns), None)
    if step is None:  # one evaluation per run
        if epoch is not None:
            raise ValueError("results has no epoch column; leave epoch=None.")
        return results
    if epoch is None:
        last = results.groupby(["loss", "seed"], sort=False)[step].transform("max")
        return results[results[step] == last]
    rows = results[results[step] == epoch]
    if len(rows) == 0:
        have = sorted(results["epoch"].unique().tolist())
        raise ValueError(f"no row has epoch {epoch}; the evaluated epochs are {have}.")
    return rows


def summarize(
    results: pd.DataFrame, metrics: Sequence[str] | None = None, *, epoch: int | None = None
) -> pd.DataFrame:
    """Mean and standard deviation over seeds of each metric, one row per loss.

    Parameters
    ----------
    results : DataFrame
        As returned by :func:`compare_losses`.
    metrics : sequence of str, optional
        Columns to summarise; default every ``R@K`` column.
    epoch : int, optional
        Summarise this epoch; default the last evaluated epoch of every run.

    Returns
    -------
    pandas.DataFrame
        Index ``loss`` (in the order of first appearance), columns ``"<metric> mean"`` and
        ``"<metric> std"`` for each metric (the sample standard deviation, ``ddof=1``; NaN for
        a single seed) and ``seeds`` (the number of runs averaged).
    """
    results = _check_results(results)
    metrics = recall_columns(results) if metrics is None else list(metrics)
    missing = [m for m in metrics if m not in results.columns]
    if missing or not metrics:
        raise ValueError(
            f"results has no column {', '.join(map(repr, missing)) or '(none asked)'}; "
            f"available: {', '.join(map(str, results.columns))}."
        )
    rows = _final_rows(results, epoch)
    grouped = rows.groupby("loss", sort=False)
    out = pd.DataFrame(index=pd.Index(list(grouped.groups), name="loss"))
    order = list(dict.fromkeys(rows["loss"]))
    out = out.loc[order]
    for m in metrics:
        out[f"{m} mean"] = grouped[m].mean()
        out[f"{m} std"] = grouped[m].std(ddof=1)
    out["seeds"] = grouped["seed"].nunique().astype(int)
    return out


def format_summary(
    summary: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    scale: float = 100.0,
    decimals: int = 1,
    sort_by: str | None = None,
) -> pd.DataFrame:
    """``mean ± std`` strings for printing a :func:`summarize` table (percent by default).

    Parameters
    ----------
    summary : DataFrame
        As returned by :func:`summarize`.
    metrics : sequence of str, optional
        Default: every metric of ``summary``.
    scale : float
        Multiplier (100 shows recall as percent).
    decimals : int
    sort_by : str, optional
        A metric to sort by, best (largest mean) first; default keeps the given order.

    Returns
    -------
    pandas.DataFrame
        One string column per metric, plus ``seeds``.
    """
    if not isinstance(summary, pd.DataFrame) or "seeds" not in summary.columns:
        raise TypeError("summary must be the DataFrame returned by summarize().")
    metrics = recall_columns(summary) if metrics is None else list(metrics)
    if sort_by is not None:
        if f"{sort_by} mean" not in summary.columns:
            raise ValueError(f"cannot sort by {sort_by!r}: summary has no '{sort_by} mean'.")
        summary = summary.sort_values(f"{sort_by} mean", ascending=False, kind="stable")
    out = pd.DataFrame(index=summary.index)
    for m in metrics:
        mean, std = summary[f"{m} mean"] * scale, summary[f"{m} std"] * scale
        out[m] = [
            f"{a:.{decimals}f} ± {b:.{decimals}f}" if not math.isnan(b) else f"{a:.{decimals}f}"
            for a, b in zip(mean, std, strict=True)
        ]
    out["seeds"] = summary["seeds"]
    return out


def paired_differences(
    results: pd.DataFrame, reference: str, metric: str = "R@1", *, epoch: int | None = None
) -> pd.DataFrame:
    """Each loss minus ``reference``, seed by seed (runs of one seed share weights and batches).

    Returns
    -------
    pandas.DataFrame
        Index ``loss`` (every loss but the reference), columns ``mean``, ``std`` (over seeds,
        ``ddof=1``), ``min``, ``max`` of the per-seed difference and ``wins`` (seeds where the
        loss scored higher than the reference), in the units of ``metric``.
    """
    results = _check_results(results)
    if metric not in results.columns:
        raise ValueError(f"results has no column {metric!r}.")
    rows = _final_rows(results, epoch)
    table = rows.pivot(index="seed", columns="loss", values=metric)
    if reference not in table.columns:
        raise ValueError(
            f"unknown reference {reference!r}; the losses are {', '.join(table.columns)}."
        )
    order = [label for label in dict.fromkeys(rows["loss"]) if label != reference]
    diff = table[order].sub(table[reference], axis=0)
    out = pd.DataFrame(
        {
            "mean": diff.mean(),
            "std": diff.std(ddof=1),
            "min": diff.min(),
            "max": diff.max(),
            "wins": (diff > 0).sum().astype(int),
        }
    )
    out.index.name = "loss"
    return out


def format_paired(paired: pd.DataFrame, *, scale: float = 100.0, decimals: int = 1) -> pd.DataFrame:
    """A :func:`paired_differences` table for printing: differences scaled (percentage points by
    default) and rounded, ``wins`` unchanged."""
    if not isinstance(paired, pd.DataFrame) or "wins" not in paired.columns:
        raise TypeError("paired must be the DataFrame returned by paired_differences().")
    out = paired.copy()
    cols = ["mean", "std", "min", "max"]
    out[cols] = (scale * paired[cols]).round(decimals)
    return out

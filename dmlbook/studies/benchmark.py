"""Several losses under one benchmark recipe: the loss chapters' comparison at full scale.

The loss chapters compare losses on the embedded ``synthetic`` data with
:func:`dmlbook.studies.compare_losses` (runs of :func:`dmlbook.training.fit`). At benchmark scale
they plan one engine run per (loss, seed) of a benchmark config (e.g.
``configs/liu_cub_bninception.yaml``) in which only the loss, and where a chapter asks a few
settings, change: :func:`plan_benchmark` builds and checks those configs without touching any data
(so the chapters show the plan on every profile), and :func:`compare_on_benchmark` trains them
with ``DMLBOOK_PROFILE=full``. Each run has its own folder and resumes from its ``last.pt``, so an
interrupted comparison continues where it stopped.

Tests: ``tests/studies/test_benchmark.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from ..engine.config import Config, ConfigError, load_config, read_file
from ..engine.trainer import train
from ..losses import describe_loss, get_loss, loss_parameters
from .harness import run_grid

__all__ = ["compare_on_benchmark", "plan_benchmark"]

LossEntry = nn.Module | str | tuple[str, Mapping[str, Any]]
PLAN_COLUMNS = ["loss", "hyper-parameters", "batch", "length", "out_dir", "config"]


def _loss_section(label: str, entry: object) -> dict[str, Any]:
    """``{"name", "params"}`` for a config from a module, a registry name or ``(name, params)``."""
    if isinstance(entry, nn.Module):
        name, params = describe_loss(entry)
    elif isinstance(entry, str):
        name, params = entry, {}
    elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str):
        name, params = entry[0], dict(entry[1])
    else:
        raise TypeError(
            f"losses[{label!r}] must be a registered loss module, a registry name or a "
            f"(name, hyper-parameters) tuple, got {type(entry).__name__}."
        )
    get_loss(name, **params)  # fail before any training on a bad name or value
    return {"name": name, "params": params}


def _folder(label: str) -> str:
    """A file-system-safe folder name for a run label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "loss"


def _length(cfg: Config) -> str:
    t = cfg.train
    return f"{t.iterations:,} iterations" if t.iterations is not None else f"{t.epochs} epochs"


def _plan_row(label: str, seed: int, cfg: Config, out: Path) -> dict[str, Any]:
    """One row of :func:`plan_benchmark` (the columns of :data:`PLAN_COLUMNS`, label, seed)."""
    t = cfg.train
    defaults = loss_parameters(cfg.loss.name)
    changed = {k: v for k, v in cfg.loss.params.items() if defaults.get(k) != v}
    params = ", ".join(f"{k}={v}" for k, v in changed.items()) or "defaults"
    return {
        "label": label, "seed": seed, "loss": cfg.loss.name,
        "hyper-parameters": params, "batch": f"{t.batch_size // t.k} x {t.k}",
        "length": _length(cfg), "out_dir": str(out), "config": cfg,
    }  # fmt: skip


def plan_benchmark(
    losses: Mapping[str, LossEntry],
    config: str | Path | dict[str, Any],
    *,
    out_root: str | Path,
    data_dir: str | Path | None = None,
    seeds: Sequence[int] = (0,),
    overrides: Sequence[str] = (),
    run_overrides: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """The configs of one run per (loss, seed) of ``config``, with only the loss swapped; checked.

    Nothing is read from the data folder and nothing is trained: the plan can be shown (and its
    configs checked) on any machine.

    Parameters
    ----------
    losses : mapping of str to loss
        Run label to a loss: a registered loss module (its hyper-parameters are read with
        :func:`~dmlbook.losses.describe_loss`), a registry name, or ``(name, hyper-parameters)``.
        The config's own ``loss`` section is replaced.
    config : str, Path or dict
        A benchmark config: a file, the name of a shipped one (``"liu_cub_bninception"``) or
        the values themselves.
    out_root : str or Path
        Runs go to ``out_root/<label>/seed<seed>`` (``~`` is expanded when training starts).
    data_dir : str or Path, optional
        The folder holding the data sets (``data.root``).
    seeds : sequence of int
        ``train.seed`` of the runs.
    overrides : sequence of str
        ``"key=value"`` assignments for every run (e.g. ``"train.iterations=500"``).
    run_overrides : mapping of str to sequence of str, optional
        Extra assignments for the runs of one label (e.g. ``{"N-pair, K=2": ["train.k=2"]}``).

    Returns
    -------
    pandas.DataFrame
        Indexed by (``label``, ``seed``); columns ``loss`` (registry name), ``hyper-parameters``
        (those that differ from the loss's defaults), ``batch`` (classes x images per class), ``length``, ``out_dir`` and ``config`` (the
        checked :class:`~dmlbook.engine.Config` that :func:`compare_on_benchmark` trains).

    Raises
    ------
    ValueError, TypeError, ConfigError
        For an empty ``losses``, a bad loss entry, an override for an unknown label or an
        invalid config (the message names the run).
    """
    if not isinstance(losses, Mapping) or not losses:
        raise ValueError("losses must be a non-empty dict {label: loss}.")
    run_overrides = dict(run_overrides or {})
    unknown = sorted(set(run_overrides) - set(losses))
    if unknown:
        raise ValueError(
            f"run_overrides names label(s) {unknown} that are not in losses "
            f"({', '.join(map(repr, losses))})."
        )
    base = dict(config) if isinstance(config, dict) else read_file(config)
    rows = []
    for label, entry in losses.items():
        values = {**base, "loss": _loss_section(str(label), entry)}
        for seed in seeds:
            out = Path(out_root) / _folder(str(label)) / f"seed{seed}"
            assignments = [
                *overrides, *run_overrides.get(label, ()), f"train.seed={seed}",
                f"train.out_dir={out}",
            ]  # fmt: skip
            try:
                cfg = load_config(values, assignments, data_dir=data_dir)
            except ConfigError as err:
                raise ConfigError(f"run {label!r} (seed {seed}): {err}") from err
            rows.append(_plan_row(str(label), seed, cfg, out))
    return pd.DataFrame(rows).set_index(["label", "seed"])[PLAN_COLUMNS]


def compare_on_benchmark(plan: pd.DataFrame, *, progress: bool | None = None) -> pd.DataFrame:
    """Train every run of a :func:`plan_benchmark` plan (resuming any) and return final metrics.

    Parameters
    ----------
    plan : pandas.DataFrame
        From :func:`plan_benchmark`.
    progress : bool, optional
        Each run's progress bar; default on unless ``TQDM_DISABLE`` is set.

    Returns
    -------
    pandas.DataFrame
        One row per run, indexed like the plan: ``R@K`` for the config's ``K``, ``MAP@R`` and
        ``RP`` of the **last** evaluation (the final model, chosen without looking at the test
        set), ``best R@1`` (the test-selected checkpoint, as the public codes report it),
        ``iterations`` and ``out_dir``. ``attrs["interrupted"]`` is True if Ctrl-C stopped a run
        (its row holds the metrics so far, later runs are left out; calling again resumes).
        ``dmlbook.studies.results.as_results(table, loss="label")`` puts it in the package's
        results layout, which :func:`~dmlbook.studies.results.summarize` and
        :func:`~dmlbook.studies.results.paired_differences` read.
    """
    if not isinstance(plan, pd.DataFrame) or "config" not in plan.columns:
        raise TypeError("plan must be the table returned by plan_benchmark(...).")
    configs = dict(plan["config"].items())

    def run_one(label: str, seed: int) -> tuple[pd.DataFrame, bool]:
        result = train(configs[label, seed], resume="auto", progress=progress, verbose=False)
        last = result.history.iloc[-1]
        metrics = [c for c in result.history.columns if c.startswith("R@")] + ["MAP@R", "RP"]
        row = {c: float(last[c]) for c in metrics}
        row["best R@1"] = float(result.best["metrics"]["R@1"]) if result.best else float("nan")
        row["iterations"] = int(last["iteration"])
        row["out_dir"] = str(result.out_dir)
        return pd.DataFrame([row]), result.interrupted

    # an interrupted run keeps its row: calling again resumes it from its last.pt
    frames, interrupted = run_grid(list(configs), run_one, keep_interrupted=True, progress=False)
    table = pd.concat(frames, ignore_index=True).rename(columns={"loss": "label"})
    table = table.set_index(["label", "seed"])
    table.attrs["interrupted"] = interrupted
    return table

"""``summary.md`` of ``bench/omniglot_compare.py``: the choices, then every test number with both
of its uncertainties (imported by that script; tests in ``tests/bench/test_omniglot_compare.py``).

A test number here is a mean over training seeds of an error on Lake et al.'s 20 one-shot runs.
Two things would change it: other seeds (the 95 % t-interval over seeds, the 20 runs fixed) and
other test characters (the 95 % percentile bootstrap over the 20 runs,
:func:`dmlbook.evaluate.oneshot.bootstrap_runs`, the seeds fixed). Paired differences resample the same
runs for both losses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dmlbook.evaluate.oneshot import bootstrap_runs  # noqa: E402
from dmlbook.studies import fair_comparison as fc  # noqa: E402

#: The anchor the recipe is set beside: one-shot error in percent (see :data:`ANCHOR_SOURCE`).
ANCHOR = 8.0
ANCHOR_SOURCE = (
    "issue 44's anchor, which it attributes to Koch et al. 2015 (siamese networks, trained on "
    "the 30 background alphabets); their paper is not among the book's transcribed sources, so "
    "the number is not in dmlbook/data/paper_results.csv and is not checked against their text"
)


def run_errors(rows: pd.DataFrame) -> np.ndarray:
    """``(seeds, 20)`` per-run errors of the rows (one row per seed), in seed order."""
    rows = rows.sort_values("seed")
    return np.array([json.loads(e) for e in rows["run errors"]], dtype=float)


def interval_table(part: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Each loss's mean with its t-interval over seeds and, for the one-shot error, its bootstrap
    interval over the 20 runs; percent."""
    t = 100 * fc.mean_intervals(part, metric)[["mean", "low", "high"]]
    t.columns = ["mean", "seeds low", "seeds high"]
    if metric == "one-shot error":
        boot = {loss: bootstrap_runs(run_errors(g)) for loss, g in part.groupby("loss", sort=False)}
        t["runs low"] = [100 * boot[loss][1] for loss in t.index]
        t["runs high"] = [100 * boot[loss][2] for loss in t.index]
    t["seeds"] = part.groupby("loss", sort=False).size()
    return t.round(1)


def paired_table(part: pd.DataFrame, reference: str) -> pd.DataFrame:
    """One-shot error minus ``reference``'s, seed by seed (t-interval) and run by run (bootstrap
    of the same runs for both), points."""
    t = 100 * fc.paired_intervals(part, reference, "one-shot error", lower_is_better=True)
    t = t[["mean", "low", "high"]].rename(columns={"low": "seeds low", "high": "seeds high"})
    ref = part[part["loss"] == reference].set_index("seed")
    lows, highs = [], []
    for loss in t.index:
        other = part[part["loss"] == loss].set_index("seed")
        seeds = sorted(set(ref.index) & set(other.index))
        diff = run_errors(other.loc[seeds].reset_index()) - run_errors(ref.loc[seeds].reset_index())
        _, low, high = bootstrap_runs(diff)
        lows.append(100 * low)
        highs.append(100 * high)
    t["runs low"], t["runs high"] = lows, highs
    return t.round(1)


def block(title: str, table: pd.DataFrame) -> str:
    return f"{title}\n\n```\n{table.to_string()}\n```\n"


def choices_text(choices: pd.DataFrame) -> list[str]:
    """The choices made on validation rows (tune and recipe-val), as summary.md prints them."""
    out = []
    val = choices.loc[choices["phase"].isin(["tune", "recipe-val"]), list(fc.VALIDATION_COLUMNS)]
    tune = fc.declared_order(val[val["phase"] == "tune"])
    if tune.empty:
        return out
    tuned = fc.select_tuned(tune)
    means = fc.fold_means(tune, ("loss", "hparams"))
    order = [
        [json.dumps(h, sort_keys=True) for h in fc.family(loss).grid].index(hp) + 1
        for loss, hp in zip(means["loss"], means["hparams"], strict=True)
    ]
    table = means.assign(**{"val MAP@R": 100 * means["val MAP@R"], "setting": order}).pivot_table(
        index="loss", columns="setting", values="val MAP@R", sort=False
    )
    table = table.loc[
        [f.label for f in fc.FAMILIES if f.label in table.index], sorted(table.columns)
    ]
    table.columns = [f"setting {c}" for c in table.columns]
    table["chosen"] = [json.dumps(tuned[f]) for f in table.index]
    out.append(
        f"## tune ({fc.TRIALS} settings per family, seed 0, {int(tune['steps'].max())} steps, "
        f"{tune['fold'].nunique()} validation folds)\n"
    )
    out.append(
        block(
            "val MAP@R (percent, mean over the validation folds) of each declared setting, in "
            "the order of fc.FAMILIES:",
            table.round(1),
        )
    )
    family = fc.select_family(tune)
    out.append(f"validation-chosen family: {family} {json.dumps(tuned[family])}\n")
    trials = val[
        (val["loss"] == family) & (val["hparams"] == json.dumps(tuned[family], sort_keys=True))
    ]
    if (trials.phase == "recipe-val").sum() == len(fc.RECIPE_CANDIDATES) * tune["fold"].nunique():
        out.append("## recipe-val (seed 0, scored on the validation alphabets of each fold)\n")
        out.append(block("the recipe's candidates (val MAP@R, percent, per fold and mean):",
                         candidates_table(trials)))  # fmt: skip
        out.append(
            f"validation-chosen recipe: {json.dumps(fc.select_recipe(trials.drop(columns='phase')))}\n"
        )
    return out


def candidates_table(trials: pd.DataFrame) -> pd.DataFrame:
    """The recipe's candidates (the tune run of the chosen setting and the recipe-val runs):
    val MAP@R of each fold and the mean that :func:`fc.select_recipe` reads, percent."""
    t = trials.pivot_table(index=["phase", "steps", "width", "variant"], columns="fold",
                           values="val MAP@R", sort=False)  # fmt: skip
    t.columns = [f"fold {c}" for c in t.columns]
    means = fc.fold_means(trials, ("phase", "steps", "width", "variant"))
    t["mean"] = means.set_index(["phase", "steps", "width", "variant"])["val MAP@R"]
    return (100 * t).round(1)


def design_text(rows: pd.DataFrame) -> str:
    """The design as run: runs, seeds and steps of each phase and the CPU they took."""
    parts = []
    for phase, g in rows.groupby("phase", sort=False):
        steps = ", ".join(f"{s:,}" for s in sorted(g["steps"].unique()))
        carried = int(g["device"].astype(str).str.endswith("carried over").sum())
        parts.append(f"{phase}: {len(g)} runs of {steps} steps, seeds "
                     f"{', '.join(map(str, sorted(g['seed'].unique())))}"
                     + (f" ({carried} carried over from an earlier run of the same configuration, "
                        "see the # lines of runs.csv)" if carried else ""))  # fmt: skip
    own = rows[~rows["device"].astype(str).str.endswith("carried over")]
    return (
        "## design\n\n" + "; ".join(parts) + f". CPU in all: {own['cpu_s'].sum() / 60:.0f} "
        "minutes of one core (one torch thread per run; carried rows not counted). Every family "
        "tries the same "
        f"{fc.TRIALS} declared settings (no extension) on each of {len(fc.VALIDATION_FOLDS)} "
        "class-disjoint validation folds ("
        + "; ".join(" + ".join(f) for f in fc.VALIDATION_FOLDS)
        + "); every choice (setting, family, recipe steps, width "
        + "/".join(str(w) for w in widths(rows))
        + ", training set) takes the best mean val MAP@R over the folds, ties to the declared "
        "order; the test runs are read only by runs whose settings are frozen.\n"
    )


def widths(rows: pd.DataFrame) -> list[int]:
    """The network widths the rows tried."""
    return sorted({int(w) for w in rows["width"].dropna()})


def summary(rows: pd.DataFrame, choices: pd.DataFrame) -> str:
    """Markdown: the design, the choices (from ``choices``' validation rows), then each test
    phase of ``rows`` with both intervals, and the recipe beside :data:`ANCHOR`."""
    out = [design_text(rows)] if len(rows) else []
    out += choices_text(choices)
    tune = fc.declared_order(choices.loc[choices["phase"] == "tune", list(fc.VALIDATION_COLUMNS)])
    tuned = (
        {f: json.dumps(hp, sort_keys=True) for f, hp in fc.select_tuned(tune).items()}
        if len(tune)
        else {}
    )
    for phase in ("final", "sampler", "recipe"):
        part = rows[rows["phase"] == phase]
        if phase == "final" and tuned:  # the chosen settings' rows only
            part = part[part["hparams"] == part["loss"].map(tuned)]
        if part.empty:
            continue
        out.append(
            f"## {phase} ({', '.join(str(s) for s in sorted(part['steps'].unique()))} steps, "
            f"width {', '.join(str(w) for w in widths(part))})\n"
        )
        out.append(block(
            "one-shot error (percent; mean, 95 % t-interval over seeds, 95 % bootstrap interval "
            "over the 20 runs):", interval_table(part, "one-shot error"),
        ))  # fmt: skip
        for metric in ("MAP@R", "R@1"):
            if part[metric].notna().all():
                out.append(block(f"{metric} (percent, mean and 95 % t-interval over seeds):",
                                 interval_table(part, metric)))  # fmt: skip
        if phase == "final" and part["loss"].nunique() > 1 and not tune.empty:
            chosen = fc.select_family(tune)
            if chosen in set(part["loss"]):
                out.append(block(
                    f"one-shot error minus {chosen}'s (the validation-chosen family), points:",
                    paired_table(part, chosen),
                ))  # fmt: skip
        if phase == "recipe":
            mean, low, high = (100 * v for v in bootstrap_runs(run_errors(part)))
            verdict = "inside" if low <= ANCHOR <= high else "outside"
            out.append(
                f"anchor {ANCHOR:g} % ({ANCHOR_SOURCE}): {verdict} the recipe's bootstrap interval "
                f"over the runs [{low:.1f}, {high:.1f}] (mean {mean:.1f} %)\n"
            )
            out.append(
                f"CPU per recipe run: {part['cpu_s'].min():.0f} to {part['cpu_s'].max():.0f} s\n"
            )
    return "\n".join(out)

"""A fair comparison of every loss family of the book on Omniglot (Musgrave et al.'s protocol).

The protocol is :mod:`dmlbook.studies.fair_comparison`'s: one model (``SmallCNN(stride=1)``,
64-d), one step budget, Adam, P x K batches with Koch et al.'s affine distortions; each family's
hyper-parameters chosen by MAP@R on two held-out *training* alphabets (never the test alphabets);
final runs on every seed, scored by the 20-way one-shot error (Lake et al.'s 20 runs), MAP@R and
R@1 on the 106 test characters. The phases, in order:

``tune``     every family's grid, seed 0, trained on 3 training alphabets, scored on the other 2;
             one more setting beyond the grid where its best lies at an end of the grid
``final``    every family with its tuned setting, every seed (seed by seed, so a cut-off run
             has every loss for the seeds it finished)
``sampler``  Liu et al.'s Table II on Omniglot: their baseline pair loss (Pair-P, w = 1, m1 = 0,
             m2 = 0.8) with random batches (``sampler="random"``), with P x K batches, and with
             P x K batches plus triplet-margin mining (epsilon = 0.1)
``long``     the family with the lowest mean one-shot error in ``final``, trained
             ``recipe_steps`` (several times longer) on the training split, every seed
``recipe``   the recommended recipe for the one-shot task: the same long run on every character
             shipped with dmlbook (the 136 ``train`` and the 106 ``test`` characters, 8
             alphabets, as Koch et al. trained on all background alphabets); the one-shot runs'
             20 alphabets are still unseen, but ``test`` no longer is, so only the one-shot error
             is recorded
``recipe-shifts`` the recipe with whole-pixel shifts (``RandomAffine.shifts(2)``) in place of
             Koch et al.'s distortions, which resample (and so blur) 1-3 pixel strokes: an
             ablation of the augmentation, paired with ``recipe`` seed by seed

Usage::

    python bench/omniglot_compare.py                                  # CPU protocol, all phases
    python bench/omniglot_compare.py --device cuda --scale gpu --seeds 0 1 2 \\
        --out-dir DIR --budget-s 240       # a lent GPU: tuned settings of the CPU run, finals first
    python bench/omniglot_compare.py --smoke --out-dir /tmp/x         # seconds (the test suite)

Options: ``--scale {cpu,gpu,smoke}`` (:data:`~dmlbook.studies.fair_comparison.SCALES`: model
width, steps, batch), ``--device {auto,cpu,cuda,...}``, ``--seeds``, ``--phases``, ``--losses``
(family labels, a subset), ``--out-dir`` (default ``bench/results/omniglot_compare_<scale>``),
``--budget-s`` (wall seconds: no run starts that the mean duration of the runs so far says would
end after it; the process then exits 0 with what it finished), ``--use-tuned RUNS_CSV`` (take
each family's setting from the ``tune`` rows of an earlier run instead of tuning; the ``tune``
phase is then skipped; with ``--scale gpu`` the default is the committed CPU run,
``bench/results/omniglot_compare_cpu/runs.csv``), ``--threads`` (torch CPU threads, default 1:
on a shared machine one thread costs the least CPU per step), ``--smoke`` (= ``--scale smoke``).

Output: ``<out-dir>/runs.csv``, one row per finished run, appended as soon as it finishes (a
cut-off or interrupted run keeps every finished row; ``#`` lines record the machine, its load
and the scale of each invocation). Runs already in the file are skipped, so the same command
resumes. ``<out-dir>/summary.md`` is rewritten at the end of each invocation: means with 95 %
t-intervals and paired differences against the best loss. Uses torch, numpy, pandas, scipy and
tqdm only; no network.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch
from machine import device_name, load_average
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a source tree without an install (PYTHONPATH unset)
    sys.path.insert(0, str(ROOT))

from dmlbook.data import EmbeddedDataset, RandomAffine, load_dataset  # noqa: E402
from dmlbook.data.omniglot import one_shot_runs  # noqa: E402
from dmlbook.studies import fair_comparison as fc  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: The committed CPU protocol; ``--scale gpu`` takes its tuned settings unless told otherwise.
CPU_RUNS = RESULTS / "omniglot_compare_cpu" / "runs.csv"
PHASES = ("tune", "final", "sampler", "long", "recipe", "recipe-shifts")
#: The phases that train the best family of ``final`` for ``recipe_steps``.
LONG = ("long", "recipe", "recipe-shifts")
#: The phases trained on every shipped character (train and test splits).
EVERY_CHARACTER = ("recipe", "recipe-shifts")
COLUMNS = [
    "phase", "loss", "hparams", "seed", "steps", "sampler", "val MAP@R", "val R@1",
    "one-shot error", "MAP@R", "R@1", "cpu_s", "wall_s", "load1", "device", "finished",
]  # fmt: skip
KEY = ["phase", "loss", "hparams", "seed", "steps", "sampler"]
#: Liu et al.'s Table II rows: (label, sampler, extra hyper-parameters of their baseline).
TABLE_II = (
    ("Random sampler", "random", {}),
    ("baseline (PK sampler, thresholds)", "pk", {}),
    ("+ triplet margin", "pk", {"epsilon": 0.1}),
)
#: Their baseline: Eq. 18 with w_ij = 1 (p = q = 0), m1 = 0, m2 = 0.8, weights normalised per
#: anchor (its R@1, 65.5, is Table III's v1 row for p, q = 0, 0). For "+ triplet margin" the OCR
#: reads "m1 = 07, m2 = 0.8"; the baseline's m1 = 0 is kept.
TABLE_II_BASELINE = fc.LossFamily(
    "Pair-P w=1", "pair_p", "Liu et al., Eq. 18, Table II",
    ({"p": 0.0, "q": 0.0, "pos_margin": 0.0, "neg_margin": 0.8},),
)  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--scale", choices=sorted(fc.SCALES), default="cpu")
    p.add_argument("--smoke", action="store_true", help="= --scale smoke (seconds)")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:1")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    p.add_argument("--losses", nargs="+", metavar="LABEL", help="a subset of the family labels")
    p.add_argument("--out-dir", type=Path, help="default bench/results/omniglot_compare_<scale>")
    p.add_argument("--budget-s", type=float, default=None, help="wall-clock budget in seconds")
    p.add_argument(
        "--use-tuned",
        type=Path,
        metavar="RUNS_CSV",
        help="skip tuning: take settings from this file",
    )
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args(argv)
    if args.smoke:
        args.scale = "smoke"
    if args.out_dir is None:
        args.out_dir = RESULTS / f"omniglot_compare_{args.scale}"
    known = [f.label for f in fc.FAMILIES]
    unknown = sorted(set(args.losses or []) - set(known))
    if unknown:
        p.error(
            f"unknown --losses {', '.join(map(repr, unknown))}; the families are: {', '.join(map(repr, known))}"
        )
    if args.use_tuned is None and args.scale == "gpu" and CPU_RUNS.is_file():
        args.use_tuned = CPU_RUNS  # the settings tuned on this machine's CPU protocol
    if args.use_tuned is not None and not args.use_tuned.is_file():
        p.error(
            f"--use-tuned {args.use_tuned}: no such file (pass the runs.csv of a run that tuned)"
        )
    if args.budget_s is not None and args.budget_s <= 0:
        p.error("--budget-s must be a positive number of seconds")
    if (
        args.threads < 1
        or any(s < 0 for s in args.seeds)
        or len(set(args.seeds)) != len(args.seeds)
    ):
        p.error("--threads must be >= 1 and --seeds distinct non-negative integers")
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this torch sees no CUDA device; use --device cpu")
    return args


class Ledger:
    """``runs.csv``: the rows finished so far; appends one row per run, under a file lock."""

    def __init__(self, path: Path, header: str) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        columns = ",".join(f'"{c}"' if " " in c else c for c in COLUMNS)
        self._write(lambda f: f.write((columns + "\n" if f.tell() == 0 else "") + header + "\n"))

    def rows(self) -> pd.DataFrame:
        return pd.read_csv(self.path, comment="#", dtype={"hparams": str, "sampler": str})

    def done(self) -> set[tuple]:
        rows = self.rows()
        return {tuple(r) for r in rows[KEY].astype(str).itertuples(index=False)}

    def append(self, row: dict) -> None:
        line = pd.DataFrame([row], columns=COLUMNS).to_csv(header=False, index=False)
        self._write(lambda f: f.write(line))

    def _write(self, write) -> None:
        """``write(f)`` on the file opened for appending, under an exclusive lock (several
        invocations may share one file, e.g. one per group of families)."""
        with open(self.path, "a") as f:
            try:
                import fcntl

                fcntl.flock(f, fcntl.LOCK_EX)
            except ImportError:  # pragma: no cover - not POSIX
                pass
            f.seek(0, os.SEEK_END)
            write(f)
            f.flush()


def key_of(row: dict) -> tuple:
    return tuple(str(row[k]) for k in KEY)


class Budget:
    """Refuses a run that the mean duration of the runs so far says would end past the budget."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds, self.start, self.durations = seconds, time.perf_counter(), []

    def allows_another(self) -> bool:
        if self.seconds is None:
            return True
        mean = sum(self.durations) / len(self.durations) if self.durations else 0.0
        return time.perf_counter() - self.start + mean <= self.seconds


def plan(args: argparse.Namespace, scale: fc.Scale, ledger: Ledger) -> list[dict]:
    """The runs of the asked phases that can be planned now, each a dict of KEY values."""
    families = [f for f in fc.FAMILIES if not args.losses or f.label in args.losses]
    runs: list[dict] = []
    if "tune" in args.phases and args.use_tuned is None:
        rows = ledger.rows()
        for fam in families:
            beyond = fc.extension(fam, tuning_rows(rows, fam, scale))
            for hp in [*fam.grid, *([beyond] if beyond else [])]:
                runs.append(dict(phase="tune", fam=fam, hp=hp, seed=0, steps=scale.steps))
    tuned = tuned_settings(args, ledger, scale)
    for seed in args.seeds if "final" in args.phases else ():
        for fam in families:
            if fam.label in tuned:
                runs.append(
                    dict(phase="final", fam=fam, hp=tuned[fam.label], seed=seed, steps=scale.steps)
                )
    for seed in args.seeds if "sampler" in args.phases else ():
        for label, sampler, extra in TABLE_II:
            fam = fc.LossFamily(label, TABLE_II_BASELINE.name, TABLE_II_BASELINE.source)
            hp = {**TABLE_II_BASELINE.grid[0], **extra}
            runs.append(
                dict(phase="sampler", fam=fam, hp=hp, seed=seed, steps=scale.steps, sampler=sampler)
            )
    long_runs = set(LONG) & set(args.phases)
    best = recipe_family(ledger, scale, families, args.seeds) if long_runs else None
    for phase in [p for p in LONG if p in long_runs and best is not None]:
        for seed in args.seeds:
            runs.append(dict(phase=phase, fam=fc.family(best), hp=tuned[best], seed=seed,
                             steps=scale.recipe_steps))  # fmt: skip
    for r in runs:
        r.setdefault("sampler", "pk")
        r.update(loss=r["fam"].label, hparams=json.dumps(r["hp"], sort_keys=True))
    return runs


def tuning_rows(rows: pd.DataFrame, fam: fc.LossFamily, scale: fc.Scale | None) -> pd.DataFrame:
    """The finished tuning runs of one family (at this scale's step count, when given)."""
    keep = (rows["phase"] == "tune") & (rows["loss"] == fam.label)
    if scale is not None:
        keep &= rows["steps"] == scale.steps
    return rows[keep]


def tuning_done(fam: fc.LossFamily, rows: pd.DataFrame) -> bool:
    """Whether a family's tuning is finished: its grid and, where it applies, its extension."""
    tried = [json.loads(h) for h in rows["hparams"]]
    beyond = fc.extension(fam, rows)
    return all(dict(hp) in tried for hp in fam.grid) and (beyond is None or beyond in tried)


def tuned_settings(args: argparse.Namespace, ledger: Ledger, scale: fc.Scale) -> dict[str, dict]:
    """Each family's chosen setting, from --use-tuned or from this ledger's finished tuning."""
    if args.use_tuned is not None:  # tuned at another scale (the CPU protocol): any step count
        rows, at = pd.read_csv(args.use_tuned, comment="#", dtype={"hparams": str}), None
    else:
        rows, at = ledger.rows(), scale
    parts = {f.label: tuning_rows(rows, f, at) for f in fc.FAMILIES}
    done = [parts[f.label] for f in fc.FAMILIES if tuning_done(f, parts[f.label])]
    tuned = fc.select_tuned(pd.concat(done)) if done else {}
    if args.use_tuned is not None:
        missing = [
            f.label
            for f in fc.FAMILIES
            if (not args.losses or f.label in args.losses) and f.label not in tuned
        ]
        if missing:
            sys.exit(f"--use-tuned {args.use_tuned} has no complete tuning of {', '.join(missing)}; "
                     "rerun the tune phase for them or leave them out with --losses.")  # fmt: skip
    return tuned


def recipe_family(
    ledger: Ledger, scale: fc.Scale, families: list[fc.LossFamily], seeds: list[int]
) -> str | None:
    """The family with the lowest mean one-shot error in ``final``, once every family asked has
    its final runs for every seed asked (None before)."""
    rows = ledger.rows()
    rows = rows[(rows["phase"] == "final") & (rows["steps"] == scale.steps)]
    rows = rows[rows["loss"].isin([f.label for f in families]) & rows["seed"].isin(seeds)]
    if len(rows.drop_duplicates(["loss", "seed"])) < len(families) * len(seeds):
        return None
    return str(rows.groupby("loss")["one-shot error"].mean().idxmin())


def run_one(r: dict, scale: fc.Scale, data: dict, device: str) -> dict:
    cpu, wall = time.process_time(), time.perf_counter()
    tuning = r["phase"] == "tune"
    train = data["fit"] if tuning else data["all" if r["phase"] in EVERY_CHARACTER else "train"]
    augment = RandomAffine.shifts(2) if r["phase"] == "recipe-shifts" else RandomAffine()
    model = fc.train_one(r["fam"], r["hp"], train, scale, seed=r["seed"], steps=r["steps"],
                         sampler=r["sampler"], device=device, augment=augment)  # fmt: skip
    row = {k: r[k] for k in KEY}
    if tuning:
        metrics = fc.score(model, data["val"], device=device)
        row.update({"val MAP@R": metrics["MAP@R"], "val R@1": metrics["R@1"]})
    elif r["phase"] in EVERY_CHARACTER:  # trained on the test split too: only the runs are new
        row["one-shot error"] = fc.score(model, data["test"], data["runs"], device=device)[
            "one-shot error"
        ]
    else:
        row.update(fc.score(model, data["test"], data["runs"], device=device))
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    row.update(
        cpu_s=round(time.process_time() - cpu, 2), wall_s=round(time.perf_counter() - wall, 2),
        load1=round(os.getloadavg()[0], 2), device=device,
        finished=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
    )  # fmt: skip
    return {
        k: (
            round(v, 5)
            if isinstance(v, float)
            and k in ("val MAP@R", "val R@1", "one-shot error", "MAP@R", "R@1")
            else v
        )
        for k, v in row.items()
    }


def summary(rows: pd.DataFrame) -> str:
    """Markdown: every phase's means with 95 % intervals, paired differences to the best loss."""
    out = []
    for phase in ("final", "sampler", *LONG):
        part = rows[rows["phase"] == phase]
        if part.empty:
            continue
        out.append(
            f"## {phase} ({', '.join(str(s) for s in sorted(part['steps'].unique()))} steps)\n"
        )
        for metric in (
            ("one-shot error", "MAP@R", "R@1")
            if phase not in EVERY_CHARACTER
            else ("one-shot error",)
        ):
            table = (100 * fc.mean_intervals(part, metric)[["mean", "low", "high"]]).round(1)
            table["seeds"] = part.groupby("loss", sort=False).size()
            out.append(
                f"{metric} (percent, mean and 95 % t-interval over seeds):\n\n```\n{table.to_string()}\n```\n"
            )
        if phase == "final" and part["loss"].nunique() > 1:
            best = part.groupby("loss")["one-shot error"].mean().idxmin()
            diff = (
                100 * fc.paired_intervals(part, best, "one-shot error")[["mean", "low", "high"]]
            ).round(1)
            out.append(
                f"one-shot error minus {best}'s, seed by seed (points, 95 % t-interval):\n\n```\n{diff.to_string()}\n```\n"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    scale = fc.SCALES[args.scale]
    header = (
        f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: bench/omniglot_compare.py --scale {args.scale} "
        f"--phases {' '.join(args.phases)}; {device_name(args.device)}; load average {load_average()}; "
        f"torch {torch.__version__}; {scale}"
    )  # fmt: skip
    ledger = Ledger(args.out_dir / "runs.csv", header)
    train = load_dataset("omniglot", "train")
    fit_part, val = fc.validation_split(train)
    test = load_dataset("omniglot", "test")
    everything = EmbeddedDataset(
        inputs=torch.cat([train.inputs, test.inputs]), labels=torch.cat([train.labels, test.labels]),
        name="omniglot", split="train+test", class_names=train.class_names,
    )  # fmt: skip
    data = {"train": train, "fit": fit_part, "val": val, "test": test, "all": everything,
            "runs": one_shot_runs()}  # fmt: skip
    budget, finished, stopped = Budget(args.budget_s), 0, False
    for phase in PHASES:  # phases plan in turn: final needs tuning, recipe needs final
        if phase not in args.phases:
            continue
        while not stopped:  # tuning plans again once a grid is done (its extension)
            done = ledger.done()
            todo = [
                r
                for r in plan(args, scale, ledger)
                if r["phase"] == phase and key_of(r) not in done
            ]
            if not todo:
                break
            bar = tqdm(todo, desc=phase, unit="run", file=sys.stdout)
            for r in bar:
                if not budget.allows_another():
                    stopped = True
                    break
                bar.set_postfix(loss=r["loss"], seed=r["seed"], refresh=True)
                start = time.perf_counter()
                ledger.append(run_one(r, scale, data, args.device))
                budget.durations.append(time.perf_counter() - start)
                finished += 1
            bar.close()
        if stopped:
            break
    rows = ledger.rows()
    (args.out_dir / "summary.md").write_text(f"{header.lstrip('# ')}\n\n{summary(rows)}")
    print(summary(rows))
    state = "the time budget is spent; run the same command again to resume" if stopped else "done"
    print(f"{finished} run(s) finished in this invocation, {len(rows)} in {ledger.path}: {state}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

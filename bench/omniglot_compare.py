"""A fair comparison of every loss family of the book on Omniglot (Musgrave et al.'s protocol).

The protocol is :mod:`dmlbook.studies.fair_comparison`'s: one model (``SmallCNN(stride=1)``,
64-d), one step budget, Adam, P x K batches with Koch et al.'s affine distortions. Every choice
is made on validation runs (trained on three training alphabets, scored by MAP@R on the other
two, once per fold of ``fc.VALIDATION_FOLDS``, :func:`~dmlbook.studies.fair_comparison.validation_split`)
by the mean over the folds, and the test data (the 106
``test`` characters and Lake et al.'s 20 one-shot runs) are read only by runs whose settings are
frozen. The phases, in order:

``tune``        every family's declared search (``fc.TRIALS`` settings each, the same budget for
                every family), seed 0, on every validation fold
``recipe-val``  the family whose tuned setting scores best on validation
                (``fc.select_family``), trained ``recipe_steps`` on every fold three ways
                (``fc.RECIPE_CANDIDATES``: the comparison's width, twice that width, one
                alphabet fewer, twice the steps), seed 0, with its validation curve
``final``       every family with its tuned setting on all 136 training characters, every seed,
                scored on the test data (seed by seed, so a cut-off run has every loss for the
                seeds it finished)
``sampler``     Liu et al.'s Table II on Omniglot: their baseline pair loss (Pair-P, w = 1,
                m1 = 0, m2 = 0.8) with random batches, P x K batches, and P x K batches plus
                triplet-margin mining (epsilon = 0.1); no choice is made from it
``recipe``      the recipe ``fc.select_recipe`` chose on the ``recipe-val`` runs (steps, width,
                augmentation, training set), every seed; trained on every shipped character
                (``train+test``) when more characters helped on validation, when only the one-
                shot error is recorded (its 20 alphabets stay unseen)

Usage::

    python bench/omniglot_compare.py --phases recipe --seeds 0 --out /tmp/recipe0
        # a reader's reproduction: one phase and seed into a new folder; the choices (tuned
        # settings, family, recipe) come from the committed ledger
    python bench/omniglot_compare.py --out bench/results/omniglot_compare_cpu --resume
        # the committed CPU results: every phase, resuming where the ledger stops
    python bench/omniglot_compare.py --smoke --out /tmp/x          # seconds (the test suite)

Options: ``--out DIR`` (required: a new or empty folder, or ``--resume`` to continue the one
named), ``--scale {cpu,gpu,smoke}`` (:data:`~dmlbook.studies.fair_comparison.SCALES`),
``--device``, ``--seeds``, ``--phases``, ``--losses`` (a subset of the family labels),
``--choices RUNS_CSV`` (take every choice, tuned settings, family and recipe, from the
validation rows of that file instead of running ``tune`` and ``recipe-val``; the default with
``--scale gpu``, and when neither runs here and the ledger has none, is the committed CPU
ledger), ``--budget-s`` (wall
seconds: no run starts that the mean duration so far says would end after it; the process exits
0 with what it finished), ``--every`` (steps between progress lines and checkpoints of a run
longer than the comparison's steps), ``--threads`` (torch CPU threads, default 1),
``--carry RUNS_CSV`` (final runs of a configuration that file already holds, e.g. a previous
protocol's with the same chosen setting, are copied into the ledger, not re-trained; its ``#``
line says so).

Output in ``DIR``: ``runs.csv``, one row per finished run, appended as soon as it finishes
(``#`` lines record the machine, its instruction set, torch's CPU capability, its load and the
scale of each invocation; ``run errors`` holds the 20 one-shot runs' errors of a test run);
``models/`` (each run's trained weights), ``histories/`` (each run's loss per step, and MAP@R on
the validation alphabets along a ``recipe-val`` run), ``checkpoints/`` (a long run's state every
``--every`` steps: the same command continues it) and ``summary.md`` (rewritten at the end of each
invocation: choices, means with 95 % t-intervals over seeds and bootstrap intervals over the 20
runs, paired differences). Runs already in ``runs.csv`` are skipped, so ``--resume`` continues.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch
from machine import device_name, load_average

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a source tree without an install (PYTHONPATH unset)
    sys.path.insert(0, str(ROOT))

from omniglot_ledger import COLUMNS, KEY, Ledger, busy, claim, key_of, read_runs, release, slug  # noqa: E402,F401
from omniglot_summary import summary  # noqa: E402

from dmlbook.data import EmbeddedDataset, RandomAffine, load_dataset  # noqa: E402
from dmlbook.data.handwritten.omniglot import one_shot_runs  # noqa: E402
from dmlbook.studies import fair_comparison as fc  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: The committed CPU protocol: the choices a reproduction (or ``--scale gpu``) takes by default.
CPU_RUNS = RESULTS / "omniglot_compare_cpu" / "runs.csv"
PHASES = ("tune", "recipe-val", "final", "sampler", "recipe")
#: The phases that choose: they read validation data only, and ``--choices`` replaces them.
CHOOSING = ("tune", "recipe-val")
FOLDS = range(len(fc.VALIDATION_FOLDS))
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
    p.add_argument("--out", "--out-dir", dest="out", type=Path, help="a new or empty folder")
    p.add_argument("--resume", action="store_true", help="continue the runs of a used --out")
    p.add_argument("--scale", choices=sorted(fc.SCALES), default="cpu")
    p.add_argument("--smoke", action="store_true", help="= --scale smoke (seconds)")
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:1")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    p.add_argument("--losses", nargs="+", metavar="LABEL", help="a subset of the family labels")
    p.add_argument("--choices", "--use-tuned", dest="choices", type=Path, metavar="RUNS_CSV",
                   help="take the tuned settings, family and recipe from this file's "
                   "validation rows")  # fmt: skip
    p.add_argument("--budget-s", type=float, default=None, help="wall-clock budget in seconds")
    p.add_argument("--carry", type=Path, metavar="RUNS_CSV", help="copy final rows of the same "
                   "configuration from this file instead of re-training them")  # fmt: skip
    p.add_argument("--every", type=int, default=None, help="steps between progress lines")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = p.parse_args(argv)
    if args.smoke:
        args.scale = "smoke"
    if args.out is None:
        p.error("--out DIR is required: a new or empty folder (or --resume to continue one)")
    used = args.out.is_dir() and any(args.out.iterdir())
    if used and not args.resume:
        p.error(f"--out {args.out} is not empty; name a new folder, or add --resume to continue "
                "the runs recorded there")  # fmt: skip
    known = [f.label for f in fc.FAMILIES]
    unknown = sorted(set(args.losses or []) - set(known))
    if unknown:
        p.error(
            f"unknown --losses {', '.join(map(repr, unknown))}; the families are: {', '.join(map(repr, known))}"
        )
    if args.choices is not None and not args.choices.is_file():
        p.error(f"--choices {args.choices}: no such file (pass the runs.csv of a run that tuned)")
    if args.choices is None and args.scale == "gpu" and CPU_RUNS.is_file():
        args.choices = CPU_RUNS  # a lent GPU runs the CPU protocol's choices at its own scale
    if args.choices is not None:
        args.phases = [ph for ph in args.phases if ph not in CHOOSING]
    if args.carry is not None and not args.carry.is_file():
        p.error(f"--carry {args.carry}: no such file (pass a runs.csv with final rows)")
    if args.budget_s is not None and args.budget_s <= 0:
        p.error("--budget-s must be a positive number of seconds")
    bad_seeds = any(s < 0 for s in args.seeds) or len(set(args.seeds)) != len(args.seeds)
    if args.threads < 1 or bad_seeds or (args.every is not None and args.every < 1):
        p.error("--threads and --every must be >= 1 and --seeds distinct non-negative integers")
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this torch sees no CUDA device; use --device cpu")
    return args


class Budget:
    """Refuses a run that the mean duration of the runs so far says would end past the budget."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds, self.start, self.durations = seconds, time.perf_counter(), []

    def allows_another(self) -> bool:
        if self.seconds is None:
            return True
        mean = sum(self.durations) / len(self.durations) if self.durations else 0.0
        return time.perf_counter() - self.start + mean <= self.seconds


class Choices:
    """Every choice of the protocol, made by ``fc.select_*`` on validation rows alone."""

    def __init__(self, rows: pd.DataFrame, scale: fc.Scale | None, families: list) -> None:
        keep = rows["phase"].isin(CHOOSING)
        if scale is not None:  # tuned here: at this scale's step count and width
            keep &= (rows["phase"] != "tune") | (
                (rows["steps"] == scale.steps) & (rows["width"] == scale.width)
            )
        val = rows.loc[keep, list(fc.VALIDATION_COLUMNS)]  # no test column can reach a choice
        tune = fc.declared_order(val[val["phase"] == "tune"])  # ties: the paper's setting
        self.tune = tune
        complete = [f for f in fc.FAMILIES if self._tuned(tune, f)]
        done = tune[tune["loss"].isin([f.label for f in complete])]
        self.tuned = fc.select_tuned(done) if len(done) else {}
        asked = [f.label for f in families]
        self.family = (
            fc.select_family(done[done["loss"].isin(asked)])
            if all(a in self.tuned for a in asked)
            else None
        )
        self.recipe = None
        if self.family is not None:
            hp = json.dumps(self.tuned[self.family], sort_keys=True)
            mine = val[(val["loss"] == self.family) & (val["hparams"] == hp)]
            rv = mine[mine.phase == "recipe-val"]
            base = int(mine.loc[mine.phase == "tune", "width"].min())
            unit = int(rv["steps"].min()) if len(rv) else 0  # the scale's recipe steps
            have = set(
                zip(rv["variant"], rv["width"].astype(int), rv["steps"], rv["fold"], strict=True)
            )
            need = {
                (v, m * base, n * unit, str(k)) for v, m, n in fc.RECIPE_CANDIDATES for k in FOLDS
            }
            if need <= have:  # "times": the chosen width as a multiple of the tuning width
                self.recipe = fc.select_recipe(mine.drop(columns="phase"))
                self.recipe["times"] = self.recipe["width"] // base

    @staticmethod
    def _tuned(tune: pd.DataFrame, fam: fc.LossFamily) -> bool:
        mine = tune[tune["loss"] == fam.label]
        pairs = zip(mine["hparams"], mine["fold"], strict=True)
        tried = [(json.loads(h), str(k)) for h, k in pairs]
        return all((dict(hp), str(k)) in tried for hp in fam.grid for k in FOLDS)


def plan(args: argparse.Namespace, scale: fc.Scale, choices: Choices) -> list[dict]:
    """The runs of the asked phases that can be planned now, each a dict of KEY values."""
    families = [f for f in fc.FAMILIES if not args.losses or f.label in args.losses]
    runs: list[dict] = []
    if "tune" in args.phases:
        for fam in families:
            runs += [dict(phase="tune", fam=fam, hp=hp, seed=0, steps=scale.steps,
                          variant="affine/fit", fold=k) for k in FOLDS for hp in fam.grid]  # fmt: skip
    best = choices.family
    if "recipe-val" in args.phases and best is not None:
        for k in FOLDS:
            for variant, times, longer in fc.RECIPE_CANDIDATES:
                runs.append(dict(phase="recipe-val", fam=fc.family(best), hp=choices.tuned[best],
                                 seed=0, steps=longer * scale.recipe_steps, variant=variant,
                                 fold=k, width=times * scale.width))  # fmt: skip
    for seed in args.seeds if "final" in args.phases else ():
        for fam in families:
            if fam.label in choices.tuned:
                runs.append(dict(phase="final", fam=fam, hp=choices.tuned[fam.label], seed=seed,
                                 steps=scale.steps, variant="affine/train"))  # fmt: skip
    for seed in args.seeds if "sampler" in args.phases else ():
        for label, sampler, extra in TABLE_II:
            fam = fc.LossFamily(label, TABLE_II_BASELINE.name, TABLE_II_BASELINE.source)
            hp = {**TABLE_II_BASELINE.grid[0], **extra}
            runs.append(dict(phase="sampler", fam=fam, hp=hp, seed=seed, steps=scale.steps,
                             sampler=sampler, variant="affine/train"))  # fmt: skip
    recipe = choices.recipe
    for seed in args.seeds if "recipe" in args.phases and recipe is not None else ():
        variant = f"{recipe['augment']}/{recipe['training']}"
        runs.append(dict(phase="recipe", fam=fc.family(best), hp=choices.tuned[best], seed=seed,
                         steps=recipe["steps"], variant=variant,
                         width=recipe["times"] * scale.width))  # fmt: skip
    for r in runs:
        r.setdefault("sampler", "pk")
        r.setdefault("width", scale.width)
        r["fold"] = str(r.get("fold", "-"))
        r.update(loss=r["fam"].label, hparams=json.dumps(r["hp"], sort_keys=True))
    return runs


def run_one(r: dict, scale: fc.Scale, data: dict, args: argparse.Namespace) -> dict:
    """Train one planned run, save its model and history under ``--out``, score it."""
    cpu, wall = time.process_time(), time.perf_counter()
    augment_name, training = r["variant"].split("/")
    part = data["folds"][int(r["fold"])] if r["fold"] != "-" else data
    wide = replace(scale, width=int(r["width"]))
    augment = RandomAffine.shifts(2) if augment_name == "shifts" else RandomAffine()
    name, out = slug(r), args.out
    long = r["steps"] > scale.steps
    every = (args.every or max(1, scale.recipe_steps // 8)) if long else 0
    for sub in ("models", "histories", "checkpoints"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    choosing = r["phase"] in CHOOSING
    model, history = fc.train_one(
        r["fam"], r["hp"], part[training], wide, seed=r["seed"], steps=r["steps"],
        sampler=r["sampler"], device=args.device, augment=augment,
        evaluate=part["val"] if choosing and long else None, every=every,
        checkpoint=out / "checkpoints" / f"{name}.pt" if long else None,
        log=(lambda line: print(f"  {r['phase']} {r['loss']} seed {r['seed']}: {line}",
                                flush=True)) if long else None,
    )  # fmt: skip
    torch.save(model.state_dict(), out / "models" / f"{name}.pt")
    history.round(5).to_csv(out / "histories" / f"{name}.csv", index=False)
    row = {k: r[k] for k in KEY}
    if choosing:  # validation runs: scored on the held-out training alphabets only
        metrics = fc.score(model, part["val"], device=args.device)
        row.update({"val MAP@R": metrics["MAP@R"], "val R@1": metrics["R@1"]})
    else:  # frozen settings: the test data, read once for this row
        test = None if training == "train+test" else data["test"]
        metrics = fc.score(model, test, data["runs"], device=args.device)
        metrics["run errors"] = json.dumps([round(e, 4) for e in metrics["run errors"]])
        row.update(metrics)
    if torch.device(args.device).type == "cuda":
        torch.cuda.synchronize(args.device)
    (out / "checkpoints" / f"{name}.pt").unlink(missing_ok=True)
    row.update(
        cpu_s=round(time.process_time() - cpu, 2), wall_s=round(time.perf_counter() - wall, 2),
        load1=round(os.getloadavg()[0], 2), device=args.device,
        finished=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
    )  # fmt: skip
    scores = ("val MAP@R", "val R@1", "one-shot error", "MAP@R", "R@1")
    return {k: round(v, 5) if isinstance(v, float) and k in scores else v for k, v in row.items()}


def carried_rows(path: Path, scale: fc.Scale) -> dict[tuple, dict]:
    """``--carry``: the final rows of ``path`` at this scale's width, by their configuration
    (every :data:`KEY` value but width and fold, which a final run fixes)."""
    rows = read_runs(path)
    rows = rows[(rows["phase"] == "final") & rows["width"].fillna(scale.width).eq(scale.width)]
    rows = rows.assign(width=scale.width, fold="-")
    return {key_of(r): r for r in rows.to_dict("records")}


def load_data() -> dict:
    """Every split a run may train or score on, by the names the variants use; ``folds``: each
    validation fold's ``fit``, ``fit-1`` (the fit part without its last alphabet) and ``val``."""
    train = load_dataset("omniglot", "train")
    folds = []
    for k in FOLDS:
        fit_part, val = fc.validation_split(train, k)
        alphabet = [fit_part.class_names[int(c)].split("/")[1] for c in fit_part.labels]
        dropped = sorted(set(alphabet))[-1]
        keep = torch.tensor([a != dropped for a in alphabet]).nonzero().flatten()
        folds.append({"fit": fit_part, "fit-1": fit_part.subset(keep), "val": val})
    test = load_dataset("omniglot", "test")
    everything = EmbeddedDataset(
        inputs=torch.cat([train.inputs, test.inputs]), labels=torch.cat([train.labels, test.labels]),
        name="omniglot", split="train+test", class_names=train.class_names,
    )  # fmt: skip
    return {"train": train, "folds": folds, "test": test, "train+test": everything,
            "runs": one_shot_runs()}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    scale = fc.SCALES[args.scale]
    header = (
        f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: bench/omniglot_compare.py --scale {args.scale} "
        f"--phases {' '.join(args.phases)}; {device_name(args.device)}; load average {load_average()}; "
        f"torch {torch.__version__}; {scale}"
        + (f"; final rows of the same configuration carried over from {args.carry}" if args.carry else "")
    )  # fmt: skip
    ledger = Ledger(args.out / "runs.csv", header)
    own = ledger.rows()
    if args.choices is None and not set(CHOOSING) & set(args.phases):
        if not own["phase"].isin(CHOOSING).any() and args.scale != "smoke" and CPU_RUNS.is_file():
            args.choices = CPU_RUNS  # a reproduction: the committed choices
    if args.choices is not None:
        print(f"choices (tuned settings, family, recipe) from {args.choices}")
    data = load_data()
    families = [f for f in fc.FAMILIES if not args.losses or f.label in args.losses]
    budget, finished, stopped = Budget(args.budget_s), 0, False
    carry = carried_rows(args.carry, scale) if args.carry is not None else {}
    while not stopped:  # passes over the phases until nothing is left that this process may run
        started = 0
        for phase in PHASES:  # in turn: every later phase needs the choices before it
            if phase not in args.phases or stopped:
                continue
            source = read_runs(args.choices) if args.choices is not None else ledger.rows()
            choices = Choices(source, None if args.choices else scale, families)
            todo = [r for r in plan(args, scale, choices) if r["phase"] == phase]
            for r in todo:
                if key_of(r) in carry and key_of(r) not in ledger.done():
                    row = carry[key_of(r)]  # the same configuration, run before
                    ledger.append({**row, "device": f"{row['device']}, carried over"})
                    print(f"{phase}: {r['loss']} {r['hparams']} seed {r['seed']}: carried over")
                    continue
                if key_of(r) in ledger.done() or not claim(args.out, slug(r)):
                    continue  # finished, or running in another process on this folder
                if not budget.allows_another():
                    stopped = True
                    release(args.out, slug(r))
                    break
                print(f"{phase}: {r['loss']} {r['hparams']} seed {r['seed']}", flush=True)
                start = time.perf_counter()
                try:
                    ledger.append(run_one(r, scale, data, args))
                finally:
                    release(args.out, slug(r))
                budget.durations.append(time.perf_counter() - start)
                finished, started = finished + 1, started + 1
        if not started and not busy(args.out):
            break
        if not started:  # others hold runs whose rows later phases may need
            time.sleep(15)
    rows = ledger.rows()
    text = summary(rows, read_runs(args.choices) if args.choices is not None else rows)
    (args.out / "summary.md").write_text(f"{header.lstrip('# ')}\n\n{text}")
    print(text)
    state = (
        "the time budget is spent; run the same command with --resume to continue"
        if stopped
        else "done"
    )
    print(f"{finished} run(s) finished in this invocation, {len(rows)} in {ledger.path}: {state}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

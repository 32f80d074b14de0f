"""A longer Omniglot run than Chapter 9 can afford: Recall@K and 20-way one-shot error.

Chapter 9 trains each classic loss for 160 steps of a width-8 ``SmallCNN`` on the shipped
Omniglot copy, within its 60-second budget, and reports this script's results beside its own.

Protocol (the chapter's, longer; identical for every run, :func:`dmlbook.experiments.compare_losses`):
``load_dataset("omniglot", "train")`` (136 characters of 5 alphabets, 20 drawings each, 28 x 28)
for training, the 106 characters of 3 other alphabets of the ``test`` split for Recall@K, and the
20 official runs of Lake et al.'s 20-way one-shot task (20 evaluation alphabets, disjoint from
both) for the one-shot error (:func:`dmlbook.oneshot.evaluate_one_shot`, cosine similarity).
For each seed the same initial weights and the same PK batches (12 characters x 5 drawings)
for every loss; Adam, learning rate 3e-3, as in the chapter. The raw pixels and the untrained
network are scored as baselines.

Writes ``bench/results/omniglot_oneshot.csv`` (``#`` lines name the machine, its load and the
protocol; a row per run, appended as runs finish; runs already in the file are skipped, so an
interrupted run resumes) and prints a summary table.

Usage::

    python bench/omniglot_oneshot.py                              # 4 losses x 3 seeds, 1,500 steps
    python bench/omniglot_oneshot.py --epochs 1 --seeds 0 --out /tmp/x.csv   # smoke test
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from machine import device_name, load_average  # noqa: E402

import dmlbook  # noqa: E402
from dmlbook.data import load_dataset  # noqa: E402
from dmlbook.data.omniglot import one_shot_runs  # noqa: E402
from dmlbook.evaluate import recall_at_k  # noqa: E402
from dmlbook.experiments import compare_losses  # noqa: E402
from dmlbook.models import SmallCNN, embed  # noqa: E402
from dmlbook.oneshot import evaluate_one_shot  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: The losses and hyper-parameters of Chapter 9 (a subset, to keep the run short).
LOSSES = {
    "contrastive (Wang Eq. 4)": ("contrastive", {"margin": 0.5}),
    "triplet, semi-hard (Eq. 5)": ("triplet", {"margin": 0.1, "mining": "semihard"}),
    "LiftedStruct* (Eq. 16)": ("lifted_star", {"alpha": 2.0, "beta": 50.0}),
    "binomial (Eq. 9)": ("binomial", {"alpha": 2.0, "beta": 50.0, "margin": 0.5}),
}
COLUMNS = [
    "loss",
    "seed",
    "epochs",
    "steps",
    "R@1",
    "R@2",
    "R@4",
    "R@8",
    "one-shot error",
    "seconds",
    "load1",
]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=30, help="epochs of 50 batches (default 30)")
    p.add_argument("--width", type=int, default=16, help="SmallCNN width (default 16)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--out", type=Path, default=RESULTS / "omniglot_oneshot.csv")
    return p.parse_args(argv)


def recorder(models: list[torch.nn.Module], width: int):
    """A ``make_model`` for compare_losses that keeps each model it builds (to score it later)."""

    def make_model() -> torch.nn.Module:
        models.append(SmallCNN(in_channels=1, dim=64, width=width))
        return models[-1]

    return make_model


def header(args: argparse.Namespace, device: str) -> str:
    return "\n".join(
        [
            f"# bench/omniglot_oneshot.py, started {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
            f"# machine: {device_name(device)}; load average at start {load_average()}",
            f"# protocol: omniglot train (136 characters) -> test (106) R@K, 20 official one-shot "
            f"runs; SmallCNN(in_channels=1, width={args.width}, dim=64); PK 12 x 5; "
            f"{args.epochs} epochs x 50 batches; Adam lr 3e-3",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    train, test = load_dataset("omniglot", "train"), load_dataset("omniglot", "test")
    runs = one_shot_runs()
    done = pd.DataFrame(columns=COLUMNS)
    if args.out.is_file():
        done = pd.read_csv(args.out, comment="#")
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(header(args, device) + "\n" + ",".join(COLUMNS) + "\n")

    print(
        f"raw pixels: R@1 {recall_at_k(test.inputs.flatten(1), test.labels, 1)[1]:.3f}, "
        f"one-shot error {evaluate_one_shot(None, runs).error:.3f}"
    )
    for seed in args.seeds:
        dmlbook.seed_everything(seed)
        model = SmallCNN(in_channels=1, dim=64, width=args.width).to(device)
        print(
            f"untrained, seed {seed}: R@1 "
            f"{recall_at_k(embed(model, test), test.labels, 1)[1]:.3f}, one-shot error "
            f"{evaluate_one_shot(model, runs).error:.3f}"
        )

    for label, spec in LOSSES.items():
        for seed in args.seeds:
            if ((done["loss"] == label) & (done["seed"] == seed)).any():
                continue
            models: list[torch.nn.Module] = []
            make_model = recorder(models, args.width)
            start = time.perf_counter()
            result = compare_losses(
                {label: spec},
                make_model,
                train,
                test,
                seeds=(seed,),
                epochs=args.epochs,
                batch_size=60,
                k=5,
                lr=3e-3,
                optimizer="adam",
                batches_per_epoch=50,
                device=device,
            )
            last = result.iloc[-1]
            row = {
                "loss": label,
                "seed": seed,
                "epochs": args.epochs,
                "steps": 50 * args.epochs,
                **{f"R@{k}": round(float(last[f"R@{k}"]), 4) for k in (1, 2, 4, 8)},
                "one-shot error": round(
                    evaluate_one_shot(models[-1], runs, device=device).error, 4
                ),
                "seconds": round(time.perf_counter() - start, 1),
                "load1": round(os.getloadavg()[0], 2),
            }
            pd.DataFrame([row], columns=COLUMNS).to_csv(
                args.out, mode="a", header=False, index=False
            )
            print(row, flush=True)
    table = pd.read_csv(args.out, comment="#")
    summary = table.groupby("loss", sort=False)[["R@1", "one-shot error"]].agg(["mean", "std"])
    print((100 * summary).round(1).to_string())


if __name__ == "__main__":
    main()

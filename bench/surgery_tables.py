"""Chapter 13's small-scale Tables 2-4 (Xuan & Pless): every designed-gradient cell, every seed.

The chapter reads the committed result (``bench/results/surgery_tables_cpu.csv``) and re-trains
one pair of cells live beside it (issue 46: the expensive comparison from committed results, one
short live run). The runs are the chapter's: the embedded Omniglot characters (136 train, 106
test), ``EmbeddingMLP(784, (128,), dim=32)``, SGD without momentum at ``lr = 1.0``, batches of 16
classes x 4 images with Koch et al.'s ``RandomAffine``, 4 epochs, R@1 on the test characters.

Usage::

    python bench/surgery_tables.py                    # seeds 0 and 1, every cell (resumes)
    python bench/surgery_tables.py --seeds 0 --cells e^cos e^cos-orth --out /tmp/x.csv

Output: one row per (cell, seed) with its R@1, CPU and wall seconds, appended as each run
finishes (runs already in the file are skipped, so the same command resumes); ``#`` lines name
the machine, its load and torch's CPU capability of each invocation. Uses torch and pandas only; no network.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import torch
from machine import device_name, load_average
from torch import nn

import dmlbook
from dmlbook.data import RandomAffine, load_dataset
from dmlbook.losses import get_loss
from dmlbook.models import EmbeddingMLP
from dmlbook.training import fit

#: label -> (the parts of ``get_loss("gradient_surgery", ...)``, paper table, paper method)
CELLS = {
    "e^euc": ({"direction": "euc"}, "Table 2", "direction e^euc, P^con, T^con"),
    "e^cos": ({}, "Table 2", "direction e^cos, P^con, T^con"),
    "e^euc-orth": ({"direction": "euc_orth"}, "Table 2", "direction e^euc-orth, P^con, T^con"),
    "e^cos-orth": ({"direction": "cos_orth"}, "Table 2", "direction e^cos-orth, P^con, T^con"),
    "e^cos P^euc": ({"pair_weight": "euc"}, "Table 3", "pair weight P^euc, direction e^cos, T^con"),
    "e^cos P^lin": ({"pair_weight": "lin"}, "Table 3", "pair weight P^lin, direction e^cos, T^con"),
    "e^cos P^lin-ms": (
        {"pair_weight": "lin_ms"}, "Table 3", "pair weight P^lin-ms, direction e^cos, T^con"
    ),
    "e^cos P^sig": ({"pair_weight": "sig"}, "Table 3", "pair weight P^sig, direction e^cos, T^con"),
    "e^cos P^sig-ms": (
        {"pair_weight": "sig_ms"}, "Table 3", "pair weight P^sig-ms, direction e^cos, T^con"
    ),
    "e^euc P^euc": (
        {"direction": "euc", "pair_weight": "euc"}, "Table 3",
        "pair weight P^euc, direction e^euc, T^con",
    ),
    "e^euc P^lin": (
        {"direction": "euc", "pair_weight": "lin"}, "Table 3",
        "pair weight P^lin, direction e^euc, T^con",
    ),
    "e^euc P^sig": (
        {"direction": "euc", "pair_weight": "sig"}, "Table 3",
        "pair weight P^sig, direction e^euc, T^con",
    ),
    "T^cos": ({"triplet_weight": "cos"}, "Table 4", "triplet weight T^cos, pair weight P^con"),
    "T^cos & sc1": (
        {"triplet_weight": "cos", "selection": "sc1"}, "Table 4",
        "triplet weight T^cos & T^sc1, pair weight P^con",
    ),
    "T^cos & sc2": (
        {"triplet_weight": "cos", "selection": "sc2"}, "Table 4",
        "triplet weight T^cos & T^sc2, pair weight P^con",
    ),
    "T^cir": ({"triplet_weight": "cir"}, "Table 4", "triplet weight T^cir, pair weight P^con"),
    "T^cir & sc1": (
        {"triplet_weight": "cir", "selection": "sc1"}, "Table 4",
        "triplet weight T^cir & T^sc1, pair weight P^con",
    ),
    "T^cir & sc2": (
        {"triplet_weight": "cir", "selection": "sc2"}, "Table 4",
        "triplet weight T^cir & T^sc2, pair weight P^con",
    ),
}  # fmt: skip


COLUMNS = ("loss", "seed", "R@1", "table", "method", "cpu_s", "wall_s")


def train_cell(parts: dict, seed: int, train, test, epochs: int = 4) -> float:
    """R@1 on the test characters after ``epochs`` of the designed gradient ``parts``."""
    dmlbook.seed_everything(seed)
    model = nn.Sequential(nn.Flatten(), EmbeddingMLP(784, (128,), dim=32))
    history = fit(
        model, get_loss("gradient_surgery", **parts), train, test, epochs=epochs,
        batch_size=64, k=4, lr=1.0, optimizer="sgd", momentum=0.0, eval_every=epochs, ks=(1,),
        seed=seed, progress=False, augment=RandomAffine(),
    )  # fmt: skip
    return float(history["R@1"].iloc[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--cells", nargs="+", default=list(CELLS))
    parser.add_argument("--threads", type=int, default=1)
    here = Path(__file__).resolve().parent
    parser.add_argument("--out", type=Path, default=here / "results" / "surgery_tables_cpu.csv")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    train, test = load_dataset("omniglot", "train"), load_dataset("omniglot", "test")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (
        f"# {stamp}: bench/surgery_tables.py; {device_name('cpu')}; torch {torch.__version__}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}; load average {load_average()}"
    )
    done = set()
    if args.out.exists():  # resume: runs already in the file are skipped
        old = pd.read_csv(args.out, comment="#")
        done = set(zip(old["loss"], old["seed"], strict=True))
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(",".join(COLUMNS) + "\n")
    with args.out.open("a") as out:
        out.write(header + "\n")
    for label in args.cells:
        parts, table, method = CELLS[label]
        for seed in args.seeds:
            if (label, seed) in done:
                continue
            cpu, wall = time.process_time(), time.perf_counter()
            r1 = train_cell(parts, seed, train, test)
            row = {
                "loss": label, "seed": seed, "R@1": round(r1, 6), "table": table,
                "method": method, "cpu_s": round(time.process_time() - cpu, 2),
                "wall_s": round(time.perf_counter() - wall, 2),
            }  # fmt: skip
            with args.out.open("a") as out:  # one row as soon as it finishes
                pd.DataFrame([row]).to_csv(out, index=False, header=False)
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

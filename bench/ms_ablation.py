"""Re-run Wang et al. 2019, Table 2 (and the embedding-size study of Fig. 3) on ``synthetic``.

Too long for a chapter's 60 s on two CPU cores, so Chapter 10 reads the results this script
writes:

* ``bench/results/ms_ablation.csv``: the eight Table 2 variants (:mod:`dmlbook.losses.ablation`)
  x seeds, SmallCNN with a 64-d embedding (Table 2 uses 64);
* ``bench/results/ms_embedding_size.csv``: the MS loss x embedding sizes x seeds (Fig. 3).

Protocol (identical for every run, :func:`dmlbook.studies.compare_losses`): ``synthetic``
train split (100 classes) for training, test split (100 unseen classes) for Recall@K; for each
seed the same initial weights and the same PK batches (12 classes x 5 images, M = 5 as in the
paper) for every loss; Adam; Recall@1/2/4/8 after the last epoch. Hyper-parameters: alpha = 2,
beta = 50, epsilon = 0.1 (paper, Sec. 5) and lambda = 0.5 (the authors' code; see the chapter).

Each CSV starts with ``#`` comment lines naming the machine and the protocol; rows are appended
as runs finish, and runs already in the file are skipped, so an interrupted run resumes.

Usage::

    .venv/bin/python bench/ms_ablation.py                      # both studies, 5 seeds
    .venv/bin/python bench/ms_ablation.py --study table2 --seeds 0 1 2 3 4
    .venv/bin/python bench/ms_ablation.py --epochs 1 --seeds 0 --out-dir /tmp/x   # smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from machine import cpu_description  # noqa: E402

from dmlbook.data import load_dataset  # noqa: E402
from dmlbook.losses import ablation_loss, table_2_names  # noqa: E402
from dmlbook.models import SmallCNN  # noqa: E402
from dmlbook.studies import compare_losses  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = [
    "study",
    "variant",
    "dim",
    "seed",
    "epochs",
    "train_loss",
    "R@1",
    "R@2",
    "R@4",
    "R@8",
    "seconds",
    "load1",
]


def header(args: argparse.Namespace, study: str) -> str:
    lines = [
        f"MS {'Table 2 ablation' if study == 'table2' else 'embedding-size study (Fig. 3)'} "
        "on synthetic (bench/ms_ablation.py)",
        f"started {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; CPU {cpu_description()}, "
        f"nproc {os.cpu_count()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"Python {platform.python_version()}",
        f"protocol: SmallCNN(width={args.width}), epochs={args.epochs}, batch 60 = 12 classes x 5, "
        f"adam lr={args.lr}, alpha=2, beta=50, lambda={args.margin}, epsilon=0.1; "
        "Recall@K on the 100 unseen test classes after the last epoch",
    ]
    return "".join(f"# {line}\n" for line in lines)


def done_runs(path: Path) -> set[tuple[str, int, int]]:
    if not path.exists():
        return set()
    old = pd.read_csv(path, comment="#")
    return {
        (str(v), int(d), int(s))
        for v, d, s in zip(old["variant"], old["dim"], old["seed"], strict=True)
    }


def run(args: argparse.Namespace, study: str, jobs: list[tuple[str, int]], path: Path) -> None:
    train, test = load_dataset("synthetic", "train"), load_dataset("synthetic", "test")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header(args, study) + ",".join(COLUMNS) + "\n")
    have = done_runs(path)
    for variant, dim in jobs:
        for seed in args.seeds:
            if (variant, dim, seed) in have:
                continue
            t0 = time.perf_counter()
            frame = compare_losses(
                {variant: lambda v=variant: ablation_loss(v, margin=args.margin)},
                lambda d=dim: SmallCNN(dim=d, width=args.width),
                train,
                test,
                seeds=(seed,),
                epochs=args.epochs,
                batch_size=60,
                k=5,
                lr=args.lr,
                progress=False,
            )
            row = frame.iloc[-1]
            out = {
                "study": study,
                "variant": variant,
                "dim": dim,
                "seed": seed,
                "epochs": args.epochs,
                "train_loss": f"{row['train_loss']:.6f}",
                **{f"R@{k}": f"{row[f'R@{k}']:.6f}" for k in (1, 2, 4, 8)},
                "seconds": f"{time.perf_counter() - t0:.1f}",
                "load1": f"{os.getloadavg()[0]:.2f}",
            }
            with path.open("a") as fh:
                fh.write(",".join(str(out[c]) for c in COLUMNS) + "\n")
            print(
                f"{study} {variant:16s} d={dim:4d} seed {seed}: R@1 {100 * row['R@1']:.1f}% "
                f"({out['seconds']} s, load {out['load1']})",
                flush=True,
            )


def reuse_table2_runs(args: argparse.Namespace) -> None:
    """Copy the MS runs at d = 64 of the Table 2 study into the embedding study (same protocol)."""
    source, target = args.out_dir / "ms_ablation.csv", args.out_dir / "ms_embedding_size.csv"
    if 64 not in args.dims or not source.exists():
        return
    rows = pd.read_csv(source, comment="#")
    rows = rows[(rows["variant"] == "MS") & (rows["dim"] == 64) & (rows["epochs"] == args.epochs)]
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(header(args, "embedding") + ",".join(COLUMNS) + "\n")
    have = done_runs(target)
    with target.open("a") as fh:
        for _, r in rows.iterrows():
            if ("MS", 64, int(r["seed"])) in have or int(r["seed"]) not in args.seeds:
                continue
            r = r.copy()
            r["study"] = "embedding"
            fh.write(",".join(str(r[c]) for c in COLUMNS) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=("table2", "embedding", "all"), default="all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--margin", type=float, default=0.5)
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    parser.add_argument("--variants", nargs="+", default=list(table_2_names()))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    # One thread by default: on a shared machine two OpenMP threads stall whenever the other
    # core is busy (runs then take 10-100x longer); the numbers do not depend on it.
    torch.set_num_threads(args.threads)
    if args.study in ("table2", "all"):
        run(args, "table2", [(v, 64) for v in args.variants], args.out_dir / "ms_ablation.csv")
    if args.study in ("embedding", "all"):
        reuse_table2_runs(args)
        run(
            args,
            "embedding",
            [("MS", d) for d in args.dims],
            args.out_dir / "ms_embedding_size.csv",
        )


if __name__ == "__main__":
    main()

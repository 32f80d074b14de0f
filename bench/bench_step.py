"""A training step of the chapters' CNN on Omniglot, this checkout against another, interleaved.

What a user of the book runs: ``fit``'s step (:meth:`dmlbook.engine.loop.Trainer.step`, Adam,
the finite-loss check) on ``SmallCNN(in_channels=1, dim=64, width=16)`` over Omniglot's 28 x 28
images (``load_dataset("omniglot", "train")``), P x K batches of 60 (12 classes x 5), the MS loss
by default (``get_loss("multi_similarity")``). Each checkout runs in its own worker process (its
``dmlbook`` first on ``PYTHONPATH``), both built alike from the same seed on the same batches;
the parent asks them in turn for a few steps at a time, round after round, so that a busy spell
on a shared machine hits both alike, and records the CPU time (``time.process_time``: all
threads of the worker) and the wall time of every step. The loss's share of a step is measured
in the same workers (forward and backward of the loss alone on the step's embeddings).

Writes a markdown table (machine, load average before and after, medians, the ratio and a 95 %
interval of the ratio of means over rounds).

Usage::

    git worktree add /tmp/base <commit>       # the checkout to compare with
    python bench/bench_step.py --baseline /tmp/base --out bench/results/step_cpu.md
    python bench/bench_step.py --baseline /tmp/base --threads 1 2 --rounds 40 --loss triplet
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# ----------------------------------------------------------------------------- worker


def worker(loss_name: str, threads: int, width: int, batch: int, k: int) -> None:
    """Serve ``steps N`` (answer: CPU and wall seconds of each step) and ``loss N`` (the loss's
    forward + backward alone, N times) on stdin/stdout, one JSON line each."""
    import torch

    from dmlbook.data import PKSampler, load_dataset
    from dmlbook.engine.loop import Trainer
    from dmlbook.losses import get_loss
    from dmlbook.models import SmallCNN

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    train = load_dataset("omniglot", "train")
    model = SmallCNN(in_channels=1, dim=64, width=width)
    loss_fn = get_loss(loss_name)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    trainer = Trainer(model, loss_fn, opt, check_finite=True)
    sampler = PKSampler(train.labels, batch, k, seed=0)
    batches = [(train.inputs[i], train.labels[i]) for i in sampler]
    position = 0
    print(json.dumps({"ready": str(Path(sys.modules["dmlbook"].__file__).parent)}), flush=True)
    for line in sys.stdin:
        what, n = line.split()
        cpu, wall = [], []
        for _ in range(int(n)):
            x, y = batches[position % len(batches)]
            position += 1
            if what == "steps":
                c0, w0 = time.process_time(), time.perf_counter()
                trainer.step(x, y)
            else:  # the loss alone, on this batch's embeddings
                emb = model(x).detach().requires_grad_(True)
                c0, w0 = time.process_time(), time.perf_counter()
                loss_fn(emb, y).backward()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        print(json.dumps({"cpu": cpu, "wall": wall}), flush=True)


# ----------------------------------------------------------------------------- parent


class Worker:
    def __init__(self, checkout: Path, args: argparse.Namespace, threads: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(checkout), OMP_WAIT_POLICY="PASSIVE")
        shape = [str(v) for v in (threads, args.width, args.batch, args.k)]
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", args.loss, *shape]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd="/"
        )
        self.where = json.loads(self.proc.stdout.readline())["ready"]

    def ask(self, what: str, n: int) -> dict[str, list[float]]:
        self.proc.stdin.write(f"{what} {n}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def load_average() -> str:
    return ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def ratio_interval(new: list[float], old: list[float]) -> tuple[float, float, float]:
    """Ratio of the means of per-round times (new / old) and a 95 % interval (delta method on
    the paired per-round ratios' logarithms)."""
    import math

    logs = [math.log(a / b) for a, b in zip(new, old, strict=True)]
    m = statistics.fmean(logs)
    half = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else 0.0
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def run(args: argparse.Namespace) -> str:
    before = load_average()
    rows = []
    for threads in args.threads:
        workers = {
            "this checkout": Worker(ROOT, args, threads),
            "baseline": Worker(args.baseline, args, threads),
        }
        for w in workers.values():  # warm-up: allocator, thread pool, first calls
            w.ask("steps", args.warmup)
            w.ask("loss", args.warmup)
        per_round = {(name, what): [] for name in workers for what in ("steps", "loss")}
        every = {(name, what): [] for name in workers for what in ("steps", "loss")}
        for r in range(args.rounds):
            order = list(workers.items()) if r % 2 == 0 else list(workers.items())[::-1]
            for name, w in order:
                for what in ("steps", "loss"):
                    got = w.ask(what, args.steps)
                    per_round[name, what].append(statistics.fmean(got["cpu"]))
                    every[name, what].extend(got["cpu"])
        where = {name: w.where for name, w in workers.items()}
        for w in workers.values():
            w.close()
        for what in ("steps", "loss"):
            new, old = per_round["this checkout", what], per_round["baseline", what]
            ratio, lo, hi = ratio_interval(new, old)
            rows.append(
                (threads, what, 1e3 * statistics.median(every["this checkout", what]),
                 1e3 * statistics.median(every["baseline", what]), ratio, lo, hi)
            )  # fmt: skip
        share = statistics.median(every["this checkout", "loss"]) / statistics.median(
            every["this checkout", "steps"]
        )
        rows.append((threads, "share", share, None, None, None, None))
    return render(args, before, load_average(), where, rows)


def render(args, before, after, where, rows) -> str:
    import platform

    import torch

    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    lines = [
        "# A training step of the chapters' CNN on Omniglot: this checkout against a baseline (CPU)",
        "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {cpu}, `nproc` = {os.cpu_count()}; torch {torch.__version__}, "
        f"Python {platform.python_version()}",
        f"- Load average (1, 5, 15 min) before: {before}; after: {after} (a shared machine: the "
        "two checkouts are interleaved round by round, so a busy spell hits both)",
        f"- This checkout: `{where['this checkout']}`; baseline: `{where['baseline']}`"
        + (f" ({args.label})" if args.label else ""),
        f"- Step: `Trainer.step` (what `fit` runs: Adam lr 1e-3, finite-loss check) of "
        f"`SmallCNN(in_channels=1, dim=64, width={args.width})` on Omniglot 28 x 28, P x K "
        f"batches of {args.batch} ({args.batch // args.k} classes x {args.k}), loss "
        f"`get_loss({args.loss!r})`; the same seed and batches in both workers",
        f"- {args.rounds} rounds x {args.steps} steps per checkout after {args.warmup} warm-up "
        "steps; CPU time (`time.process_time`, all threads of the worker); the ratio is of the "
        "per-round means, with a 95 % interval",
        "",
        "| threads | what | this checkout (ms CPU, median) | baseline (ms CPU, median) | "
        "ratio | 95 % interval |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for threads, what, new, old, ratio, lo, hi in rows:
        if what == "share":
            lines.append(
                f"| {threads} | the loss's share of a step (this checkout) | {100 * new:.1f} % "
                "| | | |"
            )
            continue
        label = "training step" if what == "steps" else "the loss alone (forward + backward)"
        lines.append(
            f"| {threads} | {label} | {new:.2f} | {old:.2f} | {ratio:.3f} | {lo:.3f}-{hi:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=Path, help="a checkout of dmlbook to compare with")
    p.add_argument("--label", default="", help="what the baseline is (a commit), for the table")
    p.add_argument("--loss", default="multi_similarity")
    p.add_argument("--width", type=int, default=16, help="SmallCNN width (Chapter 1: 16)")
    p.add_argument("--batch", type=int, default=60, help="batch size (fit's default, 60)")
    p.add_argument("--k", type=int, default=5, help="samples per class in a batch")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", type=Path, default=HERE / "results" / "step_cpu.md")
    p.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker[0], *map(int, args.worker[1:]))
        return
    if args.baseline is None:
        p.error("--baseline is required (a checkout to compare with, e.g. a git worktree)")
    text = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

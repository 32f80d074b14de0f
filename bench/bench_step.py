"""A training step of the chapters' CNN on Omniglot, this checkout against another, interleaved.

What a user of the book runs: ``fit``'s step (:meth:`dmlbook.training.Trainer.step`, Adam,
the finite-loss check) on ``SmallCNN(in_channels=1, dim=64, width=16)`` over Omniglot's 28 x 28
images (``load_dataset("omniglot", "train")``), P x K batches of 60 (12 classes x 5), the MS loss
by default (``get_loss("multi_similarity")``). Each checkout runs in its own worker process (its
``dmlbook`` first on ``PYTHONPATH``), both built alike from the same seed on the same batches;
the parent asks them in turn for a few steps at a time, round after round, so that a busy spell
on a shared machine hits both alike, and records the CPU time (``time.process_time``: all
threads of the worker) of every step. A pair of processes keeps a step-time offset of its own,
so this is repeated over several sessions, each a fresh pair, and the interval is over them.
The loss's share of a step is measured in the same workers (forward and backward of the loss
alone on the step's embeddings).

Writes a markdown table (machine, load average before and after, medians, the ratio and a 95 %
interval over the sessions, and the sessions' range).

Usage::

    git worktree add /tmp/base <commit>       # the checkout to compare with
    python bench/bench_step.py --baseline /tmp/base --out bench/results/step_cpu.md
    python bench/bench_step.py --baseline /tmp/base --threads 1 --sessions 12 --loss triplet
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
    from dmlbook.losses import get_loss
    from dmlbook.models import SmallCNN

    try:
        from dmlbook.training import Trainer
    except ImportError:  # a baseline checkout from before dmlbook.training: the loop's old home
        from dmlbook.engine.loop import Trainer

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


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of the sessions' ratios and a 95 % t-interval over the sessions.

    The interval is over sessions (a fresh pair of worker processes each), not over rounds: on
    this machine a pair of processes keeps a step-time offset of its own (measured: the ratio of
    one pair's steps ranged from 0.88 to 1.19 over four pairs, each with a round-to-round
    interval of +-2 %; 0.78 to 1.13 over ten), so rounds within one pair are not independent
    samples of the ratio.
    """
    import math

    from scipy.stats import t

    logs = [math.log(r) for r in ratios]
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(m), float("nan"), float("nan")
    half = t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def session(args: argparse.Namespace, threads: int) -> tuple[dict, dict]:
    """One fresh pair of workers: the per-step CPU times of each, and where each imported from."""
    workers = {
        "this checkout": Worker(ROOT, args, threads),
        "baseline": Worker(args.baseline, args, threads),
    }
    for w in workers.values():  # warm-up: allocator, thread pool, first calls
        w.ask("steps", args.warmup)
        w.ask("loss", args.warmup)
    times = {(name, what): [] for name in workers for what in ("steps", "loss")}
    for r in range(args.rounds):
        order = list(workers.items()) if r % 2 == 0 else list(workers.items())[::-1]
        for name, w in order:
            for what in ("steps", "loss"):
                times[name, what].extend(w.ask(what, args.steps)["cpu"])
    where = {name: w.where for name, w in workers.items()}
    for w in workers.values():
        w.close()
    return times, where


def run(args: argparse.Namespace) -> str:
    before = load_average()
    rows = []
    for threads in args.threads:
        every = {
            (name, what): [] for name in ("this checkout", "baseline") for what in ("steps", "loss")
        }
        ratios = {"steps": [], "loss": []}
        for _ in range(args.sessions):
            times, where = session(args, threads)
            for key, values in times.items():
                every[key].extend(values)
            for what in ratios:
                new, old = times["this checkout", what], times["baseline", what]
                ratios[what].append(statistics.fmean(new) / statistics.fmean(old))
        for what in ("steps", "loss"):
            ratio, lo, hi = ratio_interval(ratios[what])
            spread = f"{min(ratios[what]):.2f}-{max(ratios[what]):.2f}"
            rows.append(
                (threads, what, 1e3 * statistics.median(every["this checkout", what]),
                 1e3 * statistics.median(every["baseline", what]), ratio, lo, hi, spread)
            )  # fmt: skip
        share = statistics.median(every["this checkout", "loss"]) / statistics.median(
            every["this checkout", "steps"]
        )
        rows.append((threads, "share", share, None, None, None, None, None))
        # what the loss's change does to a step: the baseline's loss share x (loss ratio - 1)
        old_share = statistics.median(every["baseline", "loss"]) / statistics.median(
            every["baseline", "steps"]
        )
        _, _, _, _, ratio, lo, hi, _ = rows[-2]
        rows.append((threads, "effect", old_share, None, ratio, lo, hi, None))
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
        f"- {args.sessions} sessions per thread count, each a fresh pair of worker processes: "
        f"{args.rounds} rounds x {args.steps} steps per checkout after {args.warmup} warm-up "
        "steps; CPU time (`time.process_time`, all threads of the worker); a session's ratio is "
        "of its mean times; the ratio below is the sessions' geometric mean, with a 95 % "
        "t-interval over the sessions and their range",
        "",
        "| threads | what | this checkout (ms CPU, median) | baseline (ms CPU, median) | "
        "ratio | 95 % interval | sessions' range |",
        "|---:|---|---:|---:|---:|---|---|",
    ]
    for threads, what, new, old, ratio, lo, hi, spread in rows:
        if what == "share":
            lines.append(
                f"| {threads} | the loss's share of a step (this checkout) | {100 * new:.1f} % "
                "| | | | |"
            )
            continue
        if what == "effect":
            lines.append(
                f"| {threads} | the loss's change, as a share of a step (baseline's loss share x "
                f"(ratio - 1)) | | | {100 * new * (ratio - 1):+.2f} % | "
                f"{100 * new * (lo - 1):+.2f} % to {100 * new * (hi - 1):+.2f} % | |"
            )
            continue
        label = "training step" if what == "steps" else "the loss alone (forward + backward)"
        lines.append(
            f"| {threads} | {label} | {new:.2f} | {old:.2f} | {ratio:.3f} | {lo:.3f}-{hi:.3f} "
            f"| {spread} |"
        )
    lines += [
        "",
        "A pair of worker processes keeps a step-time offset of its own on this machine (its "
        "placement in memory and on the cores; the sessions' range above), larger than the whole "
        "loss; hence fresh pairs, and an interval over them, which stays a few per cent wide. "
        "The loss alone is everything this comparison can change (the model, the optimiser and "
        "`Trainer.step` are the same code in both checkouts), so its change times its share of "
        "a step (the last row of each thread count) is the change of the step, measured far "
        "more tightly than the step itself.",
    ]
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
    p.add_argument("--sessions", type=int, default=8, help="fresh worker pairs per thread count")
    p.add_argument("--rounds", type=int, default=10, help="rounds per session")
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

"""Time the chunked retrieval metrics against the bare similarity matrix product on this CPU.

For each N the script draws N random unit vectors in d dimensions with SOP-like labels (5 items
per class), then times, interleaved over several rounds (the minimum is kept, which is the
least disturbed by other processes on the machine):

* ``bare X Q^T``: the chunked matrix product alone, ``X[chunk] @ X.T`` with the result
  discarded, a fresh output every chunk (what a naive loop does);
* ``bare, out=``: the same product written into one preallocated chunk buffer, as
  ``dmlbook.evaluate`` does; this is the floor for any exact chunked evaluation;
* ``recall_at_k`` (ks = 1, 2, 4, 8) and ``retrieval_metrics`` (R@K, P@1, MAP@R, RP).

It prints a markdown table and writes it, with the machine described, to
``bench/results/recall_cpu.md``.

Usage::

    .venv/bin/python bench/bench_recall.py                 # N = 10,000 and 60,000, d = 512
    .venv/bin/python bench/bench_recall.py --sizes 2000 --repeats 1 --out /tmp/x.md
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # before tqdm is imported: keep the output clean

import torch  # noqa: E402
from machine import cpu_description, load_average  # noqa: E402

from dmlbook.evaluate import recall_at_k, retrieval_metrics  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "recall_cpu.md"


def bare_matmul(x: torch.Tensor, chunk_size: int, preallocated: bool) -> None:
    """The chunked similarity product alone, result discarded."""
    xt = x.T
    buffer = torch.empty(min(chunk_size, x.shape[0]), x.shape[0]) if preallocated else None
    with torch.no_grad():
        for lo in range(0, x.shape[0], chunk_size):
            q = x[lo : lo + chunk_size]
            if buffer is None:
                q @ xt
            else:
                torch.mm(q, xt, out=buffer[: q.shape[0]])


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_size(
    n: int, d: int, chunk_size: int, repeats: int, min_seconds: float, seed: int
) -> dict[str, object]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(n, d, generator=gen), dim=1)
    labels = torch.arange(n) % (n // 5)  # 5 items per class, as in Stanford Online Products
    tasks: dict[str, Callable[[], object]] = {
        "bare": lambda: bare_matmul(x, chunk_size, preallocated=False),
        "bare_out": lambda: bare_matmul(x, chunk_size, preallocated=True),
        "recall": lambda: recall_at_k(x, labels, (1, 2, 4, 8), chunk_size=chunk_size),
        "all": lambda: retrieval_metrics(x, labels, (1, 2, 4, 8), chunk_size=chunk_size),
    }
    best = {name: float("inf") for name in tasks}
    values: dict[str, object] = {}
    rounds, started = 0, time.perf_counter()
    # At least `repeats` rounds, and more for small N until `min_seconds` have been spent.
    while rounds < repeats or (time.perf_counter() - started < min_seconds and rounds < 50):
        for name, fn in tasks.items():  # interleaved, so that a busy spell hits all alike
            seconds, out = timed(fn)
            best[name] = min(best[name], seconds)
            values[name] = out
        rounds += 1
    return {"n": n, "best": best, "values": values, "rounds": rounds}


def render(rows: list[dict[str, object]], args: argparse.Namespace, load: str) -> str:
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "# Retrieval metrics on CPU: `dmlbook.evaluate` vs the bare similarity product",
        "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {cpu_description()}, `nproc` = {os.cpu_count()}",
        f"- torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, "
        f"Python {platform.python_version()}",
        f"- Data: N random unit vectors, d = {args.dim}, 5 items per class (SOP-like), "
        f"float32, chunk_size = {args.chunk_size}",
        "- Timing: best of interleaved rounds (at least "
        f"{args.repeats}, more for small N, see the table); load average (1, 5, 15 min) at start: "
        f"{load}, at end: {load_average()}",
        f"- Peak resident memory of the whole run: {peak_mb:,.0f} MB "
        f"(the full N x N float32 matrix at N = {max(r['n'] for r in rows):,} would be "
        f"{max(r['n'] for r in rows) ** 2 * 4 / 2**30:,.1f} GiB)",
        "",
        "| N | rounds | bare `X Q^T` (s) | bare, `out=` (s) | `recall_at_k` (s) | ratio | "
        "`retrieval_metrics` (s) | ratio | R@1 | MAP@R |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        b = r["best"]
        all_metrics = r["values"]["all"]
        lines.append(
            f"| {r['n']:,} | {r['rounds']} | {b['bare']:.2f} | {b['bare_out']:.2f} | "
            f"{b['recall']:.2f} | "
            f"{b['recall'] / b['bare']:.2f} | {b['all']:.2f} | {b['all'] / b['bare']:.2f} | "
            f"{all_metrics['R@1']:.4f} | {all_metrics['MAP@R']:.4f} |"
        )
    lines += [
        "",
        "Ratio = time / bare `X Q^T` (the naive chunked product, a fresh output every chunk). "
        "`dmlbook.evaluate` writes every chunk into one preallocated buffer, so the `out=` column "
        "is the floor for any exact chunked evaluation; the difference to it is the cost of the "
        "metrics themselves (a gather and a scatter of each query's positives, one `topk` of the "
        "negatives per chunk). The metric values are those of random vectors (near chance).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 60_000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--chunk-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-seconds", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    load = load_average()
    rows = []
    for n in args.sizes:
        print(f"N = {n:,} ...", flush=True)
        rows.append(
            bench_size(n, args.dim, args.chunk_size, args.repeats, args.min_seconds, args.seed)
        )
    table = render(rows, args, load)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

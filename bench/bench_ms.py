"""Time the MS loss with mining, forward + backward, on this CPU: dmlbook vs PML vs a per-anchor loop.

For each batch size B (d = 512, float32, 5 samples per class as in the MS paper's batches) the
script draws one batch of raw features and times, interleaved round by round (a busy spell on a
shared machine then hits every contender alike), the median of:

* ``floor``: the bare ``X X^T`` forward + backward (``(x @ x.T).sum().backward()``), the matrix
  product every pair-based loss has to do; no loss can be cheaper than this;
* ``dmlbook``: ``MultiSimilarityLoss(2, 50, 0.5, 0.1)(x, y).backward()`` (normalisation, ``S``,
  mining Eq. 11-12, Eq. 15, differentiated by autograd: its gradient is Eq. 13-14);
* ``PML``: pytorch-metric-learning's ``MultiSimilarityLoss(2, 50, 0.5)`` with
  ``MultiSimilarityMiner(0.1)`` as its ``indices_tuple``;
* ``loop``: :func:`dmlbook.reference.multi_similarity_loss_reference` on ``cosine_similarity(x)``,
  one anchor at a time (fewer rounds: it is slow).

All compute the same number on the same input; the values are printed side by side. The
table, with the machine, the thread count and the load average before and after, goes to
``bench/results/ms_cpu.md``.

Usage::

    .venv/bin/python bench/bench_ms.py
    .venv/bin/python bench/bench_ms.py --sizes 80 320 --repeats 5 --out /tmp/ms.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402
from machine import cpu_description, load_average  # noqa: E402
from pytorch_metric_learning import __version__ as pml_version  # noqa: E402
from pytorch_metric_learning import losses as pml_losses  # noqa: E402
from pytorch_metric_learning import miners as pml_miners  # noqa: E402

from dmlbook.core.similarity import cosine_similarity  # noqa: E402
from dmlbook.losses import MultiSimilarityLoss  # noqa: E402
from dmlbook.reference import multi_similarity_loss_reference  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "ms_cpu.md"
ALPHA, BETA, LAMBDA, EPS = 2.0, 50.0, 0.5, 0.1


def contenders(x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], float]]:
    """Each contender: one forward + backward from the raw features; returns the loss value."""
    ours = MultiSimilarityLoss(ALPHA, BETA, LAMBDA, EPS)
    pml_loss = pml_losses.MultiSimilarityLoss(ALPHA, BETA, LAMBDA)
    pml_miner = pml_miners.MultiSimilarityMiner(EPS)

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], float]:
        def run() -> float:
            x.grad = None
            out = fn(x)
            out.backward()
            return float(out.detach())

        return run

    return {
        "floor": step(lambda z: (z @ z.T).sum()),
        "dmlbook": step(lambda z: ours(z, y)),
        "PML": step(lambda z: pml_loss(z, y, pml_miner(z, y))),
        "loop": step(
            lambda z: multi_similarity_loss_reference(
                cosine_similarity(z), y, ALPHA, BETA, LAMBDA, EPS
            )
        ),
    }


def bench_size(B: int, d: int, repeats: int, loop_repeats: int, seed: int) -> dict[str, object]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, d, generator=g).requires_grad_(True)
    y = torch.arange(B) // 5
    tasks = contenders(x, y)
    times: dict[str, list[float]] = {name: [] for name in tasks}
    values: dict[str, float] = {}
    for _ in range(2):  # warm-up (allocator, thread pool, first-call overheads)
        for name, fn in tasks.items():
            if name != "loop":
                values[name] = fn()
    values["loop"] = tasks["loop"]()  # one call: it is slow
    for r in range(repeats):
        for name, fn in tasks.items():
            if name == "loop" and r >= loop_repeats:
                continue
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {
        "B": B,
        "median": {k: statistics.median(v) for k, v in times.items()},
        "n": {k: len(v) for k, v in times.items()},
        "values": values,
    }


def render_header(args: argparse.Namespace, before: str) -> list[str]:
    return [
        "# MS loss with mining on CPU: dmlbook vs pytorch-metric-learning vs a per-anchor loop",
        "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {cpu_description()}, `nproc` = {os.cpu_count()}",
        f"- torch {torch.__version__}, pytorch-metric-learning {pml_version}, "
        f"Python {platform.python_version()}",
        f"- Input: B random raw features, d = {args.dim}, float32, 5 samples per class; "
        f"alpha = {ALPHA}, beta = {BETA}, lambda = {LAMBDA}, epsilon = {EPS}",
        f"- Timing: median of {args.repeats} interleaved rounds of forward + backward "
        f"(the loop: {args.loop_repeats}), after warm-up calls",
        f"- Load average (1, 5, 15 min) before: {before}; after: {load_average()} "
        "(the machine is shared with other jobs)",
        "",
    ]


def render_table(rows: list[dict[str, object]], threads: int) -> list[str]:
    lines = [
        f"## {threads} intra-op thread{'s' if threads > 1 else ''}",
        "",
        "| B | floor `X X^T` (ms) | dmlbook (ms) | / floor | PML (ms) "
        "| PML / dmlbook | loop (ms) | loop / dmlbook |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m = {k: 1e3 * v for k, v in r["median"].items()}
        lines.append(
            f"| {r['B']:,} | {m['floor']:.2f} | {m['dmlbook']:.2f} | "
            f"{m['dmlbook'] / m['floor']:.2f} | {m['PML']:.2f} | "
            f"{m['PML'] / m['dmlbook']:.1f} | {m['loop']:.0f} | {m['loop'] / m['dmlbook']:.0f} |"
        )
    lines += [
        "",
        "Loss values on the same input (float32):",
        "",
        "| B | dmlbook | PML | loop | max rel. difference |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        v = r["values"]
        ref = v["loop"]
        names = ("dmlbook", "PML", "loop")
        spread = max(abs(v[k] - ref) for k in names) / abs(ref)
        lines.append(
            f"| {r['B']:,} | {v['dmlbook']:.7f} | {v['PML']:.7f} | {v['loop']:.7f} | {spread:.1e} |"
        )
    return [*lines, ""]


FOOTER = [
    "Targets (issue 5): dmlbook >= 3x faster than PML at B = 1000, >= 15x faster than the loop, "
    "and at most 1.5x the bare matrix product; issue 33 removed the fused closed form (the loss "
    "is the readable Eq. 15, differentiated by autograd) and asks only that it stay at least as "
    "fast as PML. `floor` is `(x @ x.T).sum().backward()`: one product forward and two backward. "
    "dmlbook's forward is a finite check, normalisation, the product, the mining of Eq. 11-12 "
    "(`dmlbook.mining.ms_mining_masks`) and Eq. 15 as one masked log-sum-exp over both halves; "
    "autograd's backward goes back through them. At small B all contenders are dominated by "
    "per-call overhead (tens of small tensor operations), which no matrix product of 80 x 512 "
    "can hide.",
    "",
    "On a shared two-core machine the two-thread rows are fragile: whenever another job holds a "
    "core, every parallel region waits for it, which inflates the many small operations of a "
    "loss (and of the loop) far more than one large matrix product. Compare the two tables: "
    "the one-thread rows are the stable measurement.",
    "",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[80, 320, 1000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--loop-repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    before = load_average()
    tables: list[str] = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        rows = []
        for B in args.sizes:
            print(f"{threads} thread(s), B = {B:,} ...", flush=True)
            rows.append(bench_size(B, args.dim, args.repeats, args.loop_repeats, args.seed))
        tables += render_table(rows, threads)
    text = "\n".join([*render_header(args, before), *tables, *FOOTER])
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

"""Time Liu et al.'s losses (Pair-P/E, Triplet-P/E, MS v1/v2 on distances) against the bare floor.

For each batch size B (d = 512, float32, 5 samples per class as in Liu et al.'s P x K batches)
the script draws one batch of raw features and times, interleaved round by round (a busy spell
on a shared machine then hits every contender alike), the median forward + backward of:

* ``floor``: normalise ``X``, ``S = X X^T``, ``S.sum().backward()``: what every loss on ``S``
  has to do (no loss can be cheaper);
* ``Pair-P``, ``Pair-E``, ``Triplet-P``, ``Triplet-E`` with Liu et al.'s defaults, and
  ``MS v1``, ``MS v2`` (:class:`dmlbook.losses.MSDistanceLoss`), each from the raw features.

The triplet losses never build the (B, B, B) tensor (each anchor's K - 1 positives are
gathered, the anchors taken in blocks: :func:`dmlbook.losses.triplet.triplet_sums`), so they run
at every size;
``--max-triplet-batch`` can still leave them out above a size. The table, with the machine, threads and load average before and after, goes to
``bench/results/liu_cpu.md``. Chapter: ``book/11_liu_weighting.ipynb``.

Usage::

    /work/main/.venv/bin/python bench/bench_liu.py
    /work/main/.venv/bin/python bench/bench_liu.py --sizes 320 --repeats 5 --out /tmp/liu.md
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

from dmlbook.losses import get_loss  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "liu_cpu.md"
LOSSES = {
    "Pair-P": ("pair_p", {}),
    "Pair-E": ("pair_e", {}),
    "Triplet-P": ("triplet_p", {}),
    "Triplet-E": ("triplet_e", {}),
    "MS v1": ("ms_distance", {"version": "v1"}),
    "MS v2": ("ms_distance", {"version": "v2"}),
}


def floor(z: torch.Tensor) -> torch.Tensor:
    x = torch.nn.functional.normalize(z, dim=1)
    return (x @ x.T).sum()


def contenders(x: torch.Tensor, y: torch.Tensor, triplets: bool) -> dict[str, Callable[[], float]]:
    """Each contender: one forward + backward from the raw features; returns the loss value."""

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], float]:
        def run() -> float:
            x.grad = None
            out = fn(x)
            out.backward()
            return float(out.detach())

        return run

    tasks = {"floor": step(floor)}
    for label, (name, params) in LOSSES.items():
        if label.startswith("Triplet") and not triplets:
            continue
        loss = get_loss(name, **params)
        tasks[label] = step(lambda z, loss=loss: loss(z, y))
    return tasks


def bench_size(B: int, d: int, repeats: int, seed: int, triplets: bool) -> dict[str, object]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, d, generator=g).requires_grad_(True)
    y = torch.arange(B) // 5
    tasks = contenders(x, y, triplets)
    times: dict[str, list[float]] = {name: [] for name in tasks}
    values = {name: fn() for name, fn in tasks.items()}  # warm-up
    for _ in range(repeats):
        for name, fn in tasks.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {"B": B, "median": {k: statistics.median(v) for k, v in times.items()}, "values": values}


def profile(B: int, d: int, seed: int, labels: tuple[str, ...], top: int = 6) -> list[str]:
    """Self CPU time per call of each loss's costliest operators (torch.profiler, 5 calls)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, d, generator=g).requires_grad_(True)
    tasks = contenders(x, torch.arange(B) // 5, True)
    lines = [
        "",
        f"Profile at B = {B:,} (torch.profiler, self CPU time per call, 5 calls; the operators "
        "of the floor's work, `mm` and the normalisation, are in every row):",
        "",
        "| contender | total (ms) | costliest operators (ms) |",
        "| --- | ---: | --- |",
    ]
    for label in ("floor", *labels):
        tasks[label]()
        with torch.profiler.profile() as prof:
            for _ in range(5):
                tasks[label]()
        events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
        total = sum(e.self_cpu_time_total for e in events) / 5e3
        ops = ", ".join(f"`{e.key}` {e.self_cpu_time_total / 5e3:.1f}" for e in events[:top])
        lines.append(f"| {label} | {total:.1f} | {ops} |")
    return lines


def render(rows: list[dict[str, object]], args: argparse.Namespace, before: str) -> str:
    lines = [
        "# Liu et al.'s losses on CPU: forward + backward against the bare floor",
        "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {cpu_description()}, `nproc` = {os.cpu_count()}, torch threads = "
        f"{torch.get_num_threads()}",
        f"- torch {torch.__version__}, Python {platform.python_version()}",
        f"- Input: B random raw features, d = {args.dim}, float32, 5 samples per class; the "
        "registered losses with Liu et al.'s defaults",
        f"- Timing: median of {args.repeats} interleaved rounds of forward + backward after one "
        "warm-up call",
        f"- Load average (1, 5, 15 min) before: {before}; after: {load_average()} "
        "(the machine is shared with other jobs)",
        "",
        "| B | floor (ms) | " + " | ".join(f"{k} (ms) | / floor" for k in LOSSES) + " |",
        "|---:|---:|" + "---:|---:|" * len(LOSSES),
    ]
    for r in rows:
        m = {k: 1e3 * v for k, v in r["median"].items()}
        cells = []
        for k in LOSSES:
            if k in m:
                cells.append(f"{m[k]:.2f} | {m[k] / m['floor']:.2f}")
            else:
                cells.append("not run (--max-triplet-batch) | -")
        lines.append(f"| {r['B']:,} | {m['floor']:.2f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "`floor` is `normalize(x)`, `S = x x^T`, `S.sum().backward()`. Every loss is the "
        "readable code its chapter prints, differentiated by autograd. The pair losses are a "
        "few elementwise passes over the B x B matrix (mining, the detached weights, the "
        "hinges) plus the floor's work; so are MS v1/v2 on distances (two masked log-sum-exps); "
        "the triplet losses sum over (B, K - 1, B) blocks (`triplet_sums`), i.e. O(B^2 K) time "
        "and O(B^2) memory (the profile below says where the time goes).",
    ]
    lines += profile(max(args.sizes), args.dim, args.seed, ("Triplet-P", "Triplet-E", "MS v1"))
    return "\n".join(lines + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[320, 1000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-triplet-batch", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    before = load_average()
    rows = []
    for B in args.sizes:
        print(f"B = {B:,} ...", flush=True)
        rows.append(bench_size(B, args.dim, args.repeats, args.seed, B <= args.max_triplet_batch))
    text = render(rows, args, before)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()

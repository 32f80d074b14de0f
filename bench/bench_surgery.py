"""Time the designed gradient (custom backward) against autograd of the MS loss, on this CPU.

Xuan & Pless train with a ``torch.autograd.Function`` whose backward builds the designed gradient
(Sec. 4). This script times, for B in {128, 512}, d = 512, float32, 4 samples per class, one
forward + backward from raw features, interleaved round by round (a busy spell on the shared
machine hits every contender alike), and reports the median of:

* ``floor``: the bare ``X X^T`` forward + backward, what every pair-based loss must do;
* ``MS autograd``: ``MultiSimilarityLoss(2, 10, 0.5, 0.1)``, the MS loss
  (Wang et al. 2019, Eq. 11-15) differentiated by autograd: the reference cost;
* ``surgery``: ``get_loss("gradient_surgery", ...)`` for the baseline (``cos / con / con``), the
  paper's best combination (``cos_orth / lin_ms / cir``) and the heaviest pair weight
  (``euc / sig_ms / cos & sc1``).

The table (with machine, threads and load average before and after) goes to
``bench/results/surgery_cpu.md``. The aim (issue 14): every surgery column within 2x of MS
autograd.

Usage::

    .venv/bin/python bench/bench_surgery.py
    .venv/bin/python bench/bench_surgery.py --sizes 128 --repeats 5 --out /tmp/surgery.md
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

from dmlbook.losses import MultiSimilarityLoss, get_loss  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "surgery_cpu.md"
COMBOS = {
    "cos / con / con": {},
    "cos_orth / lin_ms / cir": {
        "direction": "cos_orth", "pair_weight": "lin_ms", "triplet_weight": "cir",
    },
    "euc / sig_ms / cos & sc1": {
        "direction": "euc", "pair_weight": "sig_ms", "triplet_weight": "cos", "selection": "sc1",
    },
}  # fmt: skip


def contenders(x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], float]]:
    """Each contender: one forward + backward from the raw features; returns the forward value."""
    ms = MultiSimilarityLoss(2.0, 10.0, 0.5, 0.1)

    def step(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], float]:
        def run() -> float:
            x.grad = None
            out = fn(x)
            out.backward()
            return float(out.detach())

        return run

    out = {"floor": step(lambda z: (z @ z.T).sum()), "MS autograd": step(lambda z: ms(z, y))}
    for label, parts in COMBOS.items():
        loss = get_loss("gradient_surgery", **parts)
        out[label] = step(lambda z, loss=loss: loss(z, y))
    return out


def time_batch(B: int, d: int, repeats: int, seed: int) -> dict[str, float]:
    """Median milliseconds of each contender on one batch, rounds interleaved."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, d, generator=g).requires_grad_(True)
    y = torch.arange(B) // 4
    runs = contenders(x, y)
    for run in runs.values():  # warm-up
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            t0 = time.perf_counter()
            run()
            times[name].append(1000 * (time.perf_counter() - t0))
    return {name: statistics.median(ts) for name, ts in times.items()}


def table(rows: dict[int, dict[str, float]]) -> list[str]:
    names = list(next(iter(rows.values())))
    surgery = names[2:]
    head = "| B | floor (ms) | MS autograd (ms) | " + " | ".join(
        f"{n} (ms) | / MS" for n in surgery
    ) + " |"  # fmt: skip
    lines = [head, "|---:" * (3 + 2 * len(surgery)) + "|"]
    for B, t in rows.items():
        cells = [f"{B:,}", f"{t['floor']:.2f}", f"{t['MS autograd']:.2f}"]
        for n in surgery:
            cells += [f"{t[n]:.2f}", f"{t[n] / t['MS autograd']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    before = load_average()
    rows = {B: time_batch(B, args.dim, args.repeats, seed=B) for B in args.sizes}
    after = load_average()
    report = [
        "# Designed gradient (custom backward) vs autograd of the MS loss, on CPU",
        "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- CPU: {cpu_description()}, `nproc` = {os.cpu_count()}, {args.threads} intra-op threads",
        f"- torch {torch.__version__}, Python {platform.python_version()}",
        f"- Input: B random raw features, d = {args.dim}, float32, 4 samples per class",
        f"- Timing: median of {args.repeats} interleaved rounds of forward + backward, after a "
        "warm-up call",
        f"- Load average (1, 5, 15 min) before: {before}; after: {after} (the machine is shared)",
        "",
        *table(rows),
        "",
        "`/ MS`: the surgery time over MS autograd's (the aim: at most 2).",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()

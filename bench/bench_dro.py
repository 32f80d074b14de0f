"""Time the DRO losses forward + backward against the bare ``X X^T`` floor, side by side.

For each batch size B (default 320 and 1000; d = 512, float32, M = 5 images per class as in the
DRO paper's batches) the script draws one batch of raw features and times, interleaved round by
round (a busy spell on a shared machine then hits every contender alike), the median of:

* ``floor``: normalise ``X``, ``S = X X^T``, ``S.sum().backward()``: what every pair-based loss
  on cosine similarities has to do; no such loss can be cheaper;
* ``DRO-TopK``: ``DROLoss(uncertainty="topk", K=2B)`` (Sec. 3.2; ``K = 2B`` as in Sec. 4.2.2);
* ``DRO-TopK-PN``: ``DROLoss(uncertainty="topk_pn", K=2B)``;
* ``DRO-KL``: ``DROLoss(uncertainty="kl", gamma=0.1)`` (the runtime study's gamma, Sec. 4.2.4).

Each loss is the margin loss (m = 0.2, lambda = 0.5) with zero-loss pairs removed, on the same
features as the floor. The table (times in ms and the ratio to the floor), with the machine, the
thread count and the load average before and after, goes to ``bench/results/dro_cpu.md``
(``--device cuda`` writes ``dro_cuda.md``). Chapter: ``book/12_dro.ipynb``.

Usage::

    python bench/bench_dro.py
    python bench/bench_dro.py --sizes 320 1000 --repeats 15 --device cuda
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
import torch.nn.functional as F  # noqa: E402
from machine import device_name, load_average, sync  # noqa: E402

from dmlbook.losses import DROLoss  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def contenders(B: int) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The loss of each contender, as a function of (features, labels)."""

    def floor(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = F.normalize(x, dim=1)
        return (z @ z.T).sum()

    return {
        "floor": floor,
        "DRO-TopK": DROLoss(uncertainty="topk", K=2 * B),
        "DRO-TopK-PN": DROLoss(uncertainty="topk_pn", K=2 * B),
        "DRO-KL": DROLoss(uncertainty="kl", gamma=0.1),
    }


def time_sizes(sizes: list[int], dim: int, repeats: int, device: str) -> list[dict[str, object]]:
    """Median forward + backward time (ms) of each contender per batch size."""
    rows = []
    for B in sizes:
        g = torch.Generator().manual_seed(B)
        x0 = torch.randn(B, dim, generator=g).to(device)
        y = torch.arange(B // 5).repeat_interleave(5)[:B].to(device)
        fns = contenders(B)
        times: dict[str, list[float]] = {name: [] for name in fns}
        values = {}
        for r in range(repeats + 2):  # two warm-up rounds
            for name, fn in fns.items():
                x = x0.clone().requires_grad_(True)
                sync(device)
                t = time.perf_counter()
                loss = fn(x, y)
                loss.backward()
                sync(device)
                if r >= 2:
                    times[name].append(1000 * (time.perf_counter() - t))
                values[name] = float(loss)
        floor = statistics.median(times["floor"])
        for name in fns:
            med = statistics.median(times[name])
            rows.append({"B": B, "loss": name, "ms": med, "x floor": med / floor,
                         "value": values[name]})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[320, 1000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    before = load_average()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = time_sizes(args.sizes, args.dim, args.repeats, args.device)
    after = load_average()
    out = args.out or RESULTS / f"dro_{torch.device(args.device).type}.md"
    lines = [
        "# DRO losses, forward + backward, against the X X^T floor (bench/bench_dro.py)",
        "",
        f"started {started}; {device_name(args.device)}; torch {torch.__version__}; "
        f"Python {platform.python_version()}",
        f"load average before: {before}; after: {after}",
        f"d = {args.dim}, float32, M = 5 per class, median of {args.repeats} interleaved rounds",
        "",
        "| B | loss | ms | x floor | value |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['B']} | {r['loss']} | {r['ms']:.2f} | {r['x floor']:.2f} | {r['value']:.4f} |"
        )
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

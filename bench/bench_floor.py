"""Every pair-based loss of dmlbook against the matrix-product floor and pytorch-metric-learning.

One run times, side by side and interleaved round by round (a busy spell on a shared machine then
hits every contender alike), the median CPU time (``time.process_time``: every thread of the
process) of one forward + backward of:

* ``floor``: ``normalize(X)``, ``S = X X^T``, ``S.sum().backward()`` on the same batch, with
  autograd (its backward takes two products);
* ``dmlbook's S alone``: ``cosine_similarity(X).sum().backward()``, the similarity every loss
  module forms (plain autograd, the same arithmetic as the floor): what a loss adds is its time
  minus this one;
* every loss of :data:`ENTRIES` (the classic losses, MS with its mining, the Table 2 ablation
  family) and every other loss in the registry (:func:`dmlbook.losses.available_losses`, built
  with its defaults) that runs on a default batch: new loss families join the table by
  registering, or by adding an :class:`Entry` here;
* pytorch-metric-learning's equivalent where it has one (:attr:`Entry.pml`), with the parameter
  mapping stated in the table and the two values checked to agree on the benchmark's batch.

Each timed call comes right after an untimed call of the same contender (as a loss is called
in training), so that no row pays for the previous row's allocations or idle thread pool.

Batches: B random raw features (d = 512, float32, 5 samples per class as in the MS paper), B =
80, 320, 1000; the whole table for each thread count of ``--threads`` (1 and 2 by default). Recall@K (ks 1, 2, 4, 8, self excluded) of N random unit vectors (d = 512, 5 items
per class) is timed against its floor: the full chunked matrix product plus a top-k per row.
For the all-triplets loss the peak memory is measured too (a fresh process per contender).
Losses above 1.5x the floor get a ``torch.profiler`` table of their top operators.

Writes ``bench/results/floor_cpu.md`` (machine, threads, load average before and after).

Usage::

    python bench/bench_floor.py                      # the full table (about 30 minutes)
    python bench/bench_floor.py --sizes 80 320 --recall-n 0 --out /tmp/floor.md
    python bench/bench_floor.py --only triplet --sizes 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
# idle OpenMP threads sleep: CPU time at 2 threads is then work, not spinning (as `make bench`)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from floor_entries import ENTRIES, Entry, registry_entries  # noqa: E402
from machine import cpu_description, load_average  # noqa: E402
from pytorch_metric_learning import __version__ as pml_version  # noqa: E402

from dmlbook.core.similarity import cosine_similarity  # noqa: E402
from dmlbook.evaluate import recall_at_k  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "floor_cpu.md"
DIM = 512
PER_CLASS = 5
TARGET = 1.5
OWN = "dmlbook's S alone (cosine_similarity)"

Step = Callable[[], float]

PROFILE_NOTE = """\
Every loss is the readable PyTorch its chapter prints, differentiated by autograd (issue 33
removed the fused forward/backward paths: a loss is a few per cent of a training step, see
`bench/results/step_cpu.md`). At B = 320 and 1000 the matrix products are the largest item of
every profile. At B = 80 they are small (about 50 us
each) and what remains is the fixed cost of the calls: each ATen call costs a few microseconds
whatever its size, and a loss needs tens of them forward and backward (checks, masks, its masked
log-sum-exps), against about 15 for the floor. The profiles below are of the rows above 1.5x the
floor (2x at B = 80); their top entries are the matrix products and many small kernels (`mul`,
`sum`, `where`, index ops), not any one expensive operation."""


def batch(B: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """B raw features (d = 512) requiring grad, 5 per class."""
    g = torch.Generator().manual_seed(seed + B)
    return torch.randn(B, DIM, generator=g).requires_grad_(True), torch.arange(B) // PER_CLASS


def own_similarity(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dmlbook's ``S`` alone: :func:`~dmlbook.core.similarity.cosine_similarity` (plain autograd)."""
    return cosine_similarity(x).sum()


def floor_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The floor: normalise, ``S = X X^T``, ``S.sum()`` (its backward is two products)."""
    z = F.normalize(x, dim=1)
    return (z @ z.T).sum()


def step(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], x, y) -> Step:
    """One forward + backward of ``fn`` on ``(x, y)``; returns the value."""

    def run() -> float:
        x.grad = None
        out = fn(x, y)
        out.backward()
        return float(out.detach())

    return run


@dataclass
class Row:
    entry: Entry
    ms: dict[int, float]  # B -> median ms, ours
    pml_ms: dict[int, float]
    values: dict[int, tuple[float, float | None]]  # B -> (ours mapped to PML's, PML)
    error: str = ""


def time_size(
    B: int, entries: list[Entry], rounds: int
) -> tuple[float, dict[str, float], dict[str, float], dict[str, tuple[float, float | None]]]:
    """Median ms of the floor, of each entry and of its PML equivalent, interleaved."""
    x, y = batch(B)
    tasks: dict[str, Step] = {"floor": step(floor_loss, x, y), OWN: step(own_similarity, x, y)}
    for e in entries:
        tasks[e.name] = step(e.ours(), x, y)
        if e.pml is not None and B <= e.pml_max_batch:
            tasks["PML " + e.name] = step(e.pml(), x, y)
    values: dict[str, float] = {}
    for _ in range(2):  # warm-up: allocator, thread pool, first calls
        for name, fn in tasks.items():
            values[name] = fn()
    times: dict[str, list[float]] = {name: [] for name in tasks}
    for _ in range(rounds):
        for name, fn in tasks.items():
            # One untimed call first, so that each timed call follows a call of its own, as a
            # loss does in training: otherwise a row after a slow one (PML's single-threaded
            # lifted-structure loop takes 40 ms at B = 80) pays for the other's allocations,
            # cold caches and sleeping thread pool (N-pair measured 4x its own time there).
            fn()
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    checked = {}
    for e in entries:
        ours = e.to_pml_value(values[e.name], y) if e.pml is not None else values[e.name]
        checked[e.name] = (ours, values.get("PML " + e.name))
    ours_ms = {e.name: med[e.name] for e in entries}
    pml_ms = {e.name: med["PML " + e.name] for e in entries if "PML " + e.name in med}
    ours_ms[OWN] = med[OWN]
    return med["floor"], ours_ms, pml_ms, checked


def profile_entry(e: Entry, B: int, rows: int = 10) -> str:
    """The top operators of one forward + backward of ``e`` at ``B`` (self CPU time)."""
    x, y = batch(B)
    run = step(e.ours(), x, y)
    for _ in range(3):
        run()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            run()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def peak_memory_mb(which: str, name: str, B: int) -> float:
    """Peak resident memory added by one forward + backward, in a fresh process."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__)), "--memory-probe", which, name, str(B)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def memory_probe(which: str, name: str, B: int) -> None:
    """Child process of :func:`peak_memory_mb`: print the MB one call adds to the resident peak."""
    if which == "recall":
        fn = _recall_tasks(B)[name]
    else:
        e = next(e for e in _all_entries() if e.name == name)
        fn = step(e.ours() if which == "ours" else e.pml(), *batch(B))
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current RSS
    base = _status_kb("VmRSS")
    fn()
    print((_status_kb("VmHWM") - base) / 1024)


def floor_recall(x: torch.Tensor, ks: tuple[int, ...], chunk: int = 1024) -> None:
    """Recall's floor: every row's full product with the set, then its top ``max(ks) + 1``."""
    buffer = torch.empty(min(chunk, x.shape[0]), x.shape[0])
    with torch.no_grad():
        for lo in range(0, x.shape[0], chunk):
            q = x[lo : lo + chunk]
            s = torch.mm(q, x.T, out=buffer[: q.shape[0]])
            torch.topk(s, max(ks) + 1, dim=1)


def _recall_tasks(n: int) -> dict[str, Callable[[], object]]:
    g = torch.Generator().manual_seed(n)
    x = F.normalize(torch.randn(n, DIM, generator=g), dim=1)
    labels = torch.arange(n) // PER_CLASS
    ks = (1, 2, 4, 8)
    return {
        "floor": lambda: floor_recall(x, ks),
        "dmlbook": lambda: recall_at_k(x, labels, ks),
    }


def time_recall(n: int, rounds: int) -> dict[str, float]:
    tasks = _recall_tasks(n)
    times: dict[str, list[float]] = {k: [] for k in tasks}
    for _ in range(rounds):
        for k, fn in tasks.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _all_entries(only: str = "") -> list[Entry]:
    entries = [*ENTRIES, *registry_entries(ENTRIES, batch(80))]
    return [e for e in entries if only.lower() in e.name.lower()]


@dataclass
class Run:
    """One thread count's tables."""

    threads: int
    rows: list[Row]
    floors: dict[int, float]
    owns: dict[int, float]


def loss_tables(sizes: list[int], run: Run) -> list[str]:
    """The ratio table and the milliseconds table of one thread count."""
    rows, floors, owns = run.rows, run.floors, run.owns
    lines = [
        f"## {run.threads} intra-op thread{'s' if run.threads > 1 else ''}",
        "",
        "| loss | "
        + " | ".join(f"B={B} / floor" for B in sizes)
        + " | "
        + " | ".join(f"B={B} PML / dmlbook" for B in sizes)
        + " | max rel. diff. to PML |",
        "|---|" + "---:|" * (2 * len(sizes) + 1),
        f"| {OWN} | "
        + " | ".join([f"{owns[B] / floors[B]:.2f}" for B in sizes] + ["-"] * (len(sizes) + 1))
        + " |",
    ]
    for r in rows:
        if r.error:
            lines.append(f"| {r.entry.name} | failed: {r.error} |")
            continue
        ratio = [f"{r.ms[B] / floors[B]:.2f}" if B in r.ms else "-" for B in sizes]
        vs = [f"{r.pml_ms[B] / r.ms[B]:.2f}" if B in r.pml_ms else "-" for B in sizes]
        diffs = [abs(a - b) / max(abs(b), 1e-12) for a, b in r.values.values() if b is not None]
        diff = f"{max(diffs):.1e}" if diffs else "-"
        lines.append(f"| {r.entry.name} | " + " | ".join(ratio + vs) + f" | {diff} |")
    lines += ["", "Milliseconds of CPU time (median):", ""]
    lines += [
        "| loss | "
        + " | ".join(f"B={B}" for B in sizes)
        + " | "
        + " | ".join(f"PML B={B}" for B in sizes)
        + " |",
        "|---|" + "---:|" * (2 * len(sizes)),
    ]
    lines.append(
        "| floor | " + " | ".join(f"{floors[B]:.2f}" for B in sizes) + " |" + " |" * len(sizes)
    )
    lines.append(
        f"| {OWN} | " + " | ".join(f"{owns[B]:.2f}" for B in sizes) + " |" + " |" * len(sizes)
    )
    for r in rows:
        if not r.error:
            ours = [f"{r.ms[B]:.2f}" if B in r.ms else "-" for B in sizes]
            pml = [f"{r.pml_ms[B]:.2f}" if B in r.pml_ms else "-" for B in sizes]
            lines.append(f"| {r.entry.name} | " + " | ".join(ours + pml) + " |")
    slower = [
        f"{r.entry.name} at B = {B}"
        for r in rows
        for B in r.pml_ms
        if not r.error and r.pml_ms[B] < r.ms[B]
    ]
    lines += ["", "Slower than PML: " + ("; ".join(slower) if slower else "none") + ".", ""]
    return lines


def render(args, before: str, runs, recall, memory, profiles) -> str:
    sizes = [B for B in args.sizes if runs and B in runs[0].floors]
    lines = [
        "# Every loss against the matrix-product floor and pytorch-metric-learning (CPU)",
        "",
        f"- Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {cpu_description()}, `nproc` = {os.cpu_count()}; torch {torch.__version__}, "
        f"pytorch-metric-learning {pml_version}",
        f"- Load average (1, 5, 15 min) before: {before}; after: {load_average()} "
        "(the machine is shared with other jobs: compare ratios within this run)",
        f"- Input: B random raw features, d = {DIM}, float32, {PER_CLASS} per class; forward + "
        f"backward from the raw features; CPU time (`time.process_time`, all threads), median "
        f"of {args.rounds} interleaved rounds after 2 warm-up calls, each timed call right after "
        "an untimed call of the same contender; the whole table at "
        + " and ".join(str(t) for t in args.threads)
        + " intra-op threads",
        "- floor: `normalize(X)`, `S = X X^T`, `S.sum().backward()` on the same batch; "
        "target: never slower than PML (PML / dmlbook >= 1)",
        "",
    ]
    for run in runs:
        lines += loss_tables(sizes, run)
    if runs:
        lines += ["Parameter mappings (dmlbook = PML), and what the last column compares:", ""]
        lines += [f"- {r.entry.name}: {r.entry.mapping}" for r in runs[0].rows if r.entry.mapping]
    if memory:
        lines += ["", "Peak memory added by one forward + backward (fresh process each):", ""]
        lines += [f"- {k}: {v:,.0f} MB" for k, v in memory.items()]
    if recall:
        lines += [
            "",
            "## Recall@K (ks 1, 2, 4, 8, self excluded), d = 512, 5 items per class",
            "",
            f"Wall time, {args.threads[-1]} threads.",
            "",
            "| N | floor: full product + top-k (s) | dmlbook `recall_at_k` (s) | ratio |",
            "|---:|---:|---:|---:|",
        ]
        for n, t in recall.items():
            lines.append(
                f"| {n:,} | {t['floor']:.2f} | {t['dmlbook']:.2f} | "
                f"{t['dmlbook'] / t['floor']:.2f} |"
            )
    if profiles:
        lines += ["", "## Profiles of the rows above 1.5x the floor", "", PROFILE_NOTE, ""]
        for title, table in profiles:
            lines += [f"### {title}", "", "```", table.rstrip(), "```", ""]
    return "\n".join(lines) + "\n"


def time_losses(args, entries: list[Entry], threads: int) -> Run:
    torch.set_num_threads(threads)
    run = Run(threads, [Row(e, {}, {}, {}) for e in entries], {}, {})
    for B in args.sizes:
        fit = [r for r in run.rows if B <= r.entry.max_batch]
        run.floors[B], ours, pml, values = time_size(B, [r.entry for r in fit], args.rounds)
        run.owns[B] = ours.pop(OWN)
        for r in fit:
            r.ms[B] = ours[r.entry.name]
            if r.entry.name in pml:
                r.pml_ms[B] = pml[r.entry.name]
            r.values[B] = values[r.entry.name]
        print(f"{threads} threads, B={B}: floor {run.floors[B]:.2f} ms", flush=True)
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[80, 320, 1000])
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--only", default="", help="run the entries whose name contains this")
    p.add_argument("--recall-n", type=int, nargs="*", default=[60_000])
    p.add_argument("--recall-rounds", type=int, default=3)
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-losses", action="store_true", help="only the Recall@K table")
    p.add_argument("--no-profiles", action="store_true")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--memory-probe", nargs=3, metavar=("WHICH", "NAME", "B"), help=argparse.SUPPRESS
    )
    args = p.parse_args()
    if args.memory_probe:
        torch.set_num_threads(args.threads[-1])
        which, name, B = args.memory_probe
        memory_probe(which, name, int(B))
        return
    before = load_average()
    entries = [] if args.no_losses else _all_entries(args.only)
    runs = [time_losses(args, entries, t) for t in args.threads] if entries else []
    torch.set_num_threads(args.threads[-1])
    memory: dict[str, float] = {}
    if not args.no_memory:
        for e in entries:
            if e.memory:
                B = max(args.sizes)
                memory[f"{e.name}, B={B}, dmlbook"] = peak_memory_mb("ours", e.name, B)
                if e.pml is not None:
                    memory[f"{e.name}, B={B}, PML"] = peak_memory_mb("pml", e.name, B)
    recall = {n: time_recall(n, args.recall_rounds) for n in args.recall_n if n > 0}
    for n in recall:
        if not args.no_memory:
            for k in ("floor", "dmlbook"):
                memory[f"Recall@K N={n:,} {k}"] = peak_memory_mb("recall", k, n)
    profiles = []
    if not args.no_profiles and runs:
        last = runs[-1]
        for r in last.rows:
            over = [B for B in r.ms if B >= 320 and r.ms[B] / last.floors[B] > TARGET]
            over += [B for B in r.ms if B < 320 and r.ms[B] / last.floors[B] > 2 * TARGET / 1.5]
            for B in sorted(over)[-1:]:
                title = f"{r.entry.name}, B = {B} ({r.ms[B] / last.floors[B]:.2f}x the floor)"
                profiles.append((title, profile_entry(r.entry, B)))
    text = render(args, before, runs, recall, memory, profiles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

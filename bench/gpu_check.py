"""GPU day one: one command that turns a lent GPU's minutes into committed measurements.

Run from the source tree with the machine's own PyTorch, nothing installed::

    make gpu-check                                   # = PYTHONPATH=. python3 bench/gpu_check.py
    PYTHONPATH=. python3 bench/gpu_check.py --out DIR [--parts losses recall ...] [--scale 0.5]
    PYTHONPATH=. python3 bench/gpu_check.py --smoke  # the same code paths on the CPU, <= 60 s

Parts, in order, each with its own time budget (seconds on one H100; ``--scale`` multiplies
them all), each run in a child process that is stopped when its budget is spent, so that one
slow part cannot eat the others' time:

======== ====== ==================================================================================
part     budget what it measures
======== ====== ==================================================================================
losses   20     every registered loss, forward + backward, float32 and bf16 autocast on the
                device against float64 on the CPU (relative error of value and gradient), and
                its device time at B = 80 and 320 (d = 512)
training 230    each benchmark config (BN-Inception and ResNet-50 at the configs' crops and
                batches): synthetic uint8 images through the engine's own input path (PK sampler,
                GPU augmentation, channels-last, bf16), eager, with ``torch.compile`` right after
                the eager run of one config per backbone: images/s, peak memory, the input path
                alone, the loss's share of a step, beside ``--dry-run``'s prediction and the
                utilisation the measurement implies
recall   15     Recall@K (K = 1, 10, 100, 1000) and MAP@R at SOP scale (N = 60,502, d = 512):
                seconds and peak memory; R@1 of a subset checked against the CPU
omniglot 100    the fair Omniglot comparison (``bench/omniglot_compare.py``) at GPU scale, family
                by family, seed by seed, as far as the budget goes (about 15 s a run on an H200:
                the first run got seed 0 of five families; the same command resumes a ledger)
torchrun 35     ``torchrun --nproc-per-node 1 -m dmlbook.cli train`` on the device (an NCCL
                process group) for a few iterations of the synthetic config
chapters 80     the chapters under nbval on this machine's CPU (another CPU family and another
                torch: their byte-compared outputs must not depend on the machine); run only
                where pytest, pytest-xdist and nbval import (carry them as wheels)
======== ====== ==================================================================================

In all 8 minutes at most (plus a few seconds to start each part); each part stops itself at its budget and writes what it has.
Every result is one JSON line in ``<out>/results.jsonl``, appended as soon as it is measured,
so a run that is cut off keeps what it measured; ``<out>/summary.md`` is rewritten after each
part and printed at the end; ``<out>/log.txt`` holds every part's output. ``--smoke`` runs every
part on the CPU at toy sizes (tiny batches and crops, no compile of the large backbones) in at
most about 60 s, and is part of the test suite (``tests/bench/test_gpu_check.py``), so the
script cannot rot between the rare days a GPU is lent.

Results of a real run are committed under ``bench/results/gpu_check_<device>.md`` (and the raw
``.jsonl``) with the device named; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: (name, budget in seconds on one H100)
#: Rebalanced after the first real run (one H200, bench/results/gpu_check_h200.md): losses took
#: 11 s, recall 7 s, torchrun 28 s, chapters 73 s, while training ran out of its 170 s after the
#: eager configs, before any torch.compile.
PARTS: list[tuple[str, float]] = [
    ("losses", 20.0),
    ("training", 230.0),
    ("recall", 15.0),
    ("omniglot", 100.0),
    ("torchrun", 35.0),
    ("chapters", 80.0),
]
#: Budgets of the CPU smoke run (toy sizes; the whole run stays within about 60 s of CPU).
SMOKE_BUDGETS = {
    "losses": 20.0, "training": 45.0, "recall": 15.0, "omniglot": 45.0, "torchrun": 40.0,
    "chapters": 30.0,
}  # fmt: skip
#: Seconds a child may take beyond its budget to write what it has before it is killed.
GRACE = 15.0


def _env(smoke: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(HERE), env.get("PYTHONPATH")]))
    env.setdefault("TQDM_DISABLE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    if smoke:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the smoke run is the CPU run, also on a GPU machine
    return env


def run_part(name: str, budget: float, out: Path, smoke: bool, log) -> dict:
    """Run one part in a child process, stopped at ``budget + GRACE`` seconds."""
    cmd = [sys.executable, str(HERE / "gpu_check_parts.py"), name, "--out", str(out)]
    cmd += ["--budget-s", f"{budget:.1f}"] + (["--smoke"] if smoke else [])
    start = time.perf_counter()
    log.write(f"\n===== part {name} (budget {budget:.0f} s) =====\n")
    log.flush()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=_env(smoke), stdout=log, stderr=subprocess.STDOUT,
            timeout=budget + GRACE,
        )  # fmt: skip
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        status = f"stopped at {budget + GRACE:.0f} s"
    seconds = time.perf_counter() - start
    record = {"part": name, "kind": "part", "status": status, "seconds": round(seconds, 1)}
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check")
    p.add_argument("--parts", nargs="+", choices=[n for n, _ in PARTS], default=None)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every part's budget")
    p.add_argument("--smoke", action="store_true", help="CPU, toy sizes, about 60 s")
    args = p.parse_args(argv)
    if args.scale <= 0:
        p.error(f"--scale must be positive, got {args.scale}")
    from gpu_check_report import write_summary  # noqa: E402  (bench/ is on sys.path)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.jsonl").unlink(missing_ok=True)
    chosen = args.parts or [n for n, _ in PARTS]
    with open(args.out / "log.txt", "w") as log:
        run_part("machine", 60.0, args.out, args.smoke, log)
        for name, budget in PARTS:
            if name not in chosen:
                continue
            budget = (SMOKE_BUDGETS[name] if args.smoke else budget) * args.scale
            record = run_part(name, budget, args.out, args.smoke, log)
            print(f"part {name:<9} {record['status']:<16} {record['seconds']:7.1f} s", flush=True)
            write_summary(args.out)
    print()
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a chapter's training step spends its CPU: AVX-512 against AVX2 kernels, NCHW against NHWC.

Issue 46: the same chapter costs 3-4x the CPU on an AVX2-only machine. The instruction set can be
isolated on one machine: ``ATEN_CPU_CAPABILITY=avx2`` makes torch's own kernels use AVX2 and
``ONEDNN_MAX_CPU_ISA=AVX2`` does the same for oneDNN (the convolutions). Both are read once, when
torch loads, so each setting runs in a subprocess of its own. For every model shape the chapters
train (below), each subprocess times a training step (forward, loss, backward, Adam) and an
embedding pass in CPU time, in both memory layouts: the default (N, C, H, W) order and
channels-last (N, H, W, C), which ``dmlbook.models.SmallCNN`` uses since this measurement. The
settings are interleaved round by round, so a change of machine load hits them alike; the table
gives the median over rounds. ``--profile`` adds torch.profiler's top operators (self CPU time) of
one shape under both instruction sets.

Usage::

    python bench/step_layout.py [--rounds 3] [--steps 12] [--profile] [--out FILE]

Appends a dated section to ``bench/results/step_layout_cpu.md`` (the machine's CPU model, its
AVX-512/AVX2 flags and torch's CPU capability in each setting are in the section's header).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from machine import cpu_flags, cpu_model, load_average

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "default": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
#: name -> (chapters, model constructor call, batch shape); the shapes of the chapters that train.
SHAPES = {
    "omniglot w16": (
        "1, 9",
        "SmallCNN(in_channels=1, dim=64, width=16, stride=1)",
        (60, 1, 28, 28),
    ),
    "synthetic w16": ("4, 5, 7, 11", "SmallCNN(dim=64, width=16)", (60, 3, 32, 32)),
    "omniglot w32": ("9, 15", "SmallCNN(in_channels=1, width=32, stride=1)", (80, 1, 28, 28)),
    "mlp 784": ("12, 13", "EmbeddingMLP(784, (128,))", (80, 784)),
}

WORKER = r"""
import json, sys, time, torch
from dmlbook.losses import MultiSimilarityLoss
from dmlbook.models import EmbeddingMLP, SmallCNN
shapes, steps, layouts, profile = json.loads(sys.argv[1])
torch.set_num_threads(2)
out = {"capability": torch.backends.cpu.get_cpu_capability(), "times": {}}
for name, (chapters, ctor, shape) in shapes.items():
    for layout in layouts:
        torch.manual_seed(0)
        model = eval(ctor)
        x = torch.randn(*shape)
        if len(shape) == 4:
            fmt = torch.channels_last if layout == "NHWC" else torch.contiguous_format
            model = model.to(memory_format=fmt)
            x = x.contiguous(memory_format=fmt)
            if layout == "NCHW":  # SmallCNN converts its input itself: undo that for the baseline
                model.forward = lambda t, m=model: m.norm(m.head(m.features(t)))
        elif layout == "NHWC":
            continue
        y = torch.arange(shape[0]) % (shape[0] // 5)
        loss_fn, opt = MultiSimilarityLoss(), torch.optim.Adam(model.parameters(), 1e-3)
        def step():
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        for _ in range(3):
            step()
        t = time.process_time()
        for _ in range(steps):
            step()
        train = (time.process_time() - t) / steps
        model.eval()
        with torch.no_grad():
            t = time.process_time()
            for _ in range(steps):
                model(x)
            embed = (time.process_time() - t) / steps
        model.train()
        out["times"][f"{name}|{layout}"] = [train, embed]
        if profile and name == profile and layout == "NHWC":
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    step()
            out["profile"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)
print(json.dumps(out))
"""


def run_worker(setting: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", **SETTINGS[setting])
    env.setdefault("PYTHONPATH", str(ROOT))
    profile = "omniglot w32" if args.profile else ""
    payload = json.dumps([SHAPES, args.steps, ["NCHW", "NHWC"], profile])
    done = subprocess.run(
        [sys.executable, "-c", WORKER, payload], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "step_layout_cpu.md")
    args = p.parse_args(argv)
    load_before = load_average()
    runs: dict[str, list[dict]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for setting in SETTINGS:
            print(f"round {r + 1}/{args.rounds}: {setting} kernels ...", flush=True)
            runs[setting].append(run_worker(setting, args))
    med = {
        s: {k: [statistics.median(run["times"][k][i] for run in rs) for i in (0, 1)]
            for k in rs[0]["times"]}
        for s, rs in runs.items()
    }  # fmt: skip
    caps = {s: rs[0]["capability"] for s, rs in runs.items()}
    lines = [
        f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs; flags: {cpu_flags()}); torch's CPU "
        f"capability: {caps['default']} by default, {caps['avx2']} under "
        "`ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`; 2 threads; load average "
        f"{load_before} before, {load_average()} after; median of {args.rounds} interleaved "
        f"rounds of {args.steps} steps. CPU milliseconds per training step (MS loss, Adam) and per "
        "embedding pass of one batch.",
        "",
        "| shape (chapters) | layout | step default | step AVX2 | AVX2/default | embed default "
        "| embed AVX2 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in med["default"]:
        name, layout = key.split("|")
        d, a = med["default"][key], med["avx2"][key]
        lines.append(
            f"| {name} (Ch. {SHAPES[name][0]}) | {layout} | {1e3 * d[0]:.1f} | {1e3 * a[0]:.1f} "
            f"| {a[0] / d[0]:.2f} | {1e3 * d[1]:.1f} | {1e3 * a[1]:.1f} |"
        )
    if args.profile:
        for setting in SETTINGS:
            lines += ["", f"Top operators, omniglot w32, NHWC, {setting} kernels:", "", "```"]
            lines += [runs[setting][-1]["profile"].rstrip(), "```"]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "a") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

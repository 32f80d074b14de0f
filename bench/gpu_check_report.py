"""``summary.md`` of a ``bench/gpu_check.py`` run, from its ``results.jsonl`` (imported by it).

``python bench/gpu_check_report.py DIR [--out FILE]`` rewrites the summary of a finished (or
cut-off) run, e.g. to commit it as ``bench/results/gpu_check_<device>.md``.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path


def read_rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut off by a hard stop
            continue
    return rows


def junit_counts(xml: Path) -> dict:
    """Passed / failed / errors / skipped of a pytest JUnit XML file, and the failing tests."""
    if not xml.is_file():
        return {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failures": []}
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        kinds = [child.tag for child in case]
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if "failure" in kinds:
            counts["failed"] += 1
            failures.append(name)
        elif "error" in kinds:
            counts["errors"] += 1
            failures.append(name)
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures}


def _f(value: object, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_f(v) for v in r) + " |" for r in rows]
    return lines + [""]


def _losses(rows: list[dict]) -> list[str]:
    ok = [r for r in rows if r.get("loss")]
    if not ok:
        return []
    head = ["loss", "K", "fp32 value", "fp32 grad", "bf16 value", "bf16 grad", "ms B=80",
            "ms B=320", "note"]  # fmt: skip
    body = []
    for r in ok:
        note = r.get("status", "")
        if r.get("stochastic"):
            note = "sampled: differs from float64 by its own randomness"
        for key in ("fp32_error", "bf16_error"):
            if key in r:
                note = f"{key[:4]}: {r[key]}"
        body.append([
            r["loss"], r.get("k"), r.get("fp32_value_rel"), r.get("fp32_grad_rel"),
            r.get("bf16_value_rel"), r.get("bf16_grad_rel"), r.get("ms_B80", r.get("ms_B16")),
            r.get("ms_B320"), "" if note == "ok" else note,
        ])  # fmt: skip
    return [
        "## Losses on the device against float64 on the CPU", "",
        "Relative error of the value and of the gradient (norm of the difference over the norm "
        "of the float64 one), forward + backward with default hyper-parameters on a 64 x 128 "
        "batch (K images per class); milliseconds of one float32 forward + backward at d = 512.",
        "", *_table(head, body),
    ]  # fmt: skip


def _training(rows: list[dict]) -> list[str]:
    ok = [r for r in rows if r.get("config")]
    if not ok:
        return []
    head = ["config", "mode", "batch", "crop", "precision", "images/s", "step ms", "input ms",
            "loss share", "peak GiB", "predicted images/s", "predicted GiB", "implied u", "note"]  # fmt: skip
    body = [[
        r["config"], r.get("mode"), r.get("batch"), r.get("crop"), r.get("precision"),
        r.get("images_per_s"), r.get("step_ms"), r.get("input_ms"), r.get("loss_share"),
        r.get("peak_gib"), r.get("predicted_images_per_s"), r.get("predicted_gib"),
        r.get("implied_utilization"), "" if r.get("status") == "ok" else r.get("status"),
    ] for r in ok]  # fmt: skip
    return [
        "## Training throughput of the benchmark configs", "",
        "The engine's own Trainer.step on random uint8 images read through its input path "
        "(PK sampler, host-to-device copy, GPU random resized crop + flip + normalisation, "
        "channels-last as configured); `input ms` is that path alone, `loss share` the loss's "
        "forward + backward over the step; beside it the dry run's prediction at its stated "
        "utilisation and the utilisation the measurement implies.", "",
        *_table(head, body),
    ]  # fmt: skip


def _simple(title: str, rows: list[dict], keys: list[str]) -> list[str]:
    if not rows:
        return []
    return [f"## {title}", "", *_table(keys, [[r.get(k) for k in keys] for r in rows])]


def write_summary(out: Path, target: Path | None = None) -> Path:
    """Write ``summary.md`` (or ``target``) from the run's results so far."""
    rows = read_rows(out)
    by_part: dict[str, list[dict]] = {}
    for r in rows:
        by_part.setdefault(r.get("part", "?"), []).append(r)
    machine = next((r for r in rows if r.get("kind") == "machine"), {})
    parts = [r for r in rows if r.get("kind") == "part" and r["part"] != "machine"]
    lines = [
        "# GPU check", "",
        f"- Device: {machine.get('device', '-')}; CPU: {machine.get('cpu', '-')} "
        f"({machine.get('cpus', '-')} logical CPUs)",
        f"- torch {machine.get('torch', '-')} (CUDA {machine.get('cuda', '-')}); "
        f"{machine.get('date', '-')}; smoke run: {_f(machine.get('smoke'))}", "",
        *_table(["part", "status", "seconds"], [[p["part"], p["status"], p["seconds"]] for p in parts]),
    ]  # fmt: skip
    measured = {k: [r for r in v if r.get("kind") not in ("machine", "part")]
                for k, v in by_part.items()}  # fmt: skip
    lines += _losses(measured.get("losses", []))
    lines += _training(measured.get("training", []))
    lines += _simple("Recall@K at SOP scale", measured.get("recall", []),
                     ["n", "d", "seconds", "peak_gib", "metrics", "subset_R1_cpu",
                      "subset_R1_device", "status"])  # fmt: skip
    lines += _simple("Omniglot comparison", measured.get("omniglot", []), ["status", "files"])
    lines += _simple("torchrun, one process", measured.get("torchrun", []),
                     ["status", "seconds", "iterations", "process_group", "device", "best_R1"])  # fmt: skip
    lines += _simple("Chapters under nbval on this CPU", measured.get("chapters", []),
                     ["status", "cpu", "chapters", "passed", "failed", "errors", "failures"])  # fmt: skip
    target = target or out / "summary.md"
    target.write_text("\n".join(lines) + "\n")
    return target


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    print(write_summary(a.dir, a.out))

"""``bench/gpu_check.py --smoke``: every part of the GPU check runs on the CPU and reports.

The GPU check is run on the rare days a GPU is lent; this test runs the same code at toy sizes
so that it cannot rot in between. Its budgets are scaled far up (a busy machine must not make
it fail); the budget mechanism itself is tested with a budget that is always spent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.py"


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _measured(out: Path, part: str) -> list[dict]:
    """The measurement rows of one part (not its status record)."""
    return [r for r in _rows(out) if r["part"] == part and "kind" not in r]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu_check")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--scale", "100", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_every_part_finishes(smoke):
    parts = {r["part"]: r["status"] for r in _rows(smoke) if r.get("kind") == "part"}
    assert set(parts) == {"machine", "losses", "training", "recall", "omniglot", "torchrun",
                          "chapters"}  # fmt: skip
    assert all(status == "ok" for status in parts.values()), parts


def test_every_registered_loss_is_checked_against_float64(smoke):
    rows = {r["loss"]: r for r in _measured(smoke, "losses")}
    (registry,) = [r["losses"] for r in _rows(smoke) if r.get("kind") == "registry"]
    assert len(registry) > 20 and set(rows) == set(registry)
    for name, r in rows.items():
        assert r["status"] == "ok", (name, r)
        assert r["fp32_finite"] and r["fp32_grad_rel"] < 1e-4, (name, r)  # float32 rounding
        assert r["ms_B16"] is not None and r["ms_B16"] > 0


def test_training_rows_have_measurement_and_prediction(smoke):
    rows = _measured(smoke, "training")
    assert {r["config"] for r in rows} == {"ms_cub_bninception", "gs_cars_resnet50"}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["images_per_s"] > 0 and 0 < r["loss_share"] < 1
        assert r["predicted_images_per_s"] > 0
        ratio = r["implied_utilization"] / r["utilization"]
        assert ratio == pytest.approx(r["images_per_s"] / r["predicted_images_per_s"])


def test_recall_agrees_with_the_cpu_and_torchrun_trains(smoke):
    (recall,) = _measured(smoke, "recall")
    assert recall["subset_R1_cpu"] == recall["subset_R1_device"]
    assert set(recall["metrics"]) >= {"R@1", "R@10", "R@100", "R@1000", "MAP@R"}
    (run,) = _measured(smoke, "torchrun")
    assert run["iterations"] == 4 and run["process_group"] == "gloo"  # torchrun joined a group
    (chapters,) = _measured(smoke, "chapters")
    assert chapters["passed"] > 0 and chapters["failed"] == chapters["errors"] == 0


def test_summary_has_a_section_per_part(smoke):
    text = (smoke / "summary.md").read_text()
    for title in ("## Losses", "## Training throughput", "## Recall@K", "## Omniglot",
                  "## torchrun", "## Chapters"):  # fmt: skip
        assert title in text


def test_a_spent_budget_stops_a_part_and_says_so(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check_parts.py"), "losses", "--smoke",
         "--out", str(tmp_path), "--budget-s", "0"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in _rows(tmp_path) if "kind" not in r]
    assert len(rows) > 20
    assert all(r["status"].startswith("skipped: part budget spent") for r in rows)


_CHILD = """
import pathlib, sys, time
out = pathlib.Path(sys.argv[1])
try:  # "started" only once a SIGINT is caught: one between the two would leave no reports
    (out / "started").write_text("")
    time.sleep(120)
except KeyboardInterrupt:  # what pytest does on SIGINT: write its reports, then exit
    (out / "reports").write_text("written")
"""


def test_a_child_stopped_at_the_budget_is_interrupted_first_and_writes_its_reports(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gpu_check_parts as parts
    finally:
        sys.path.remove(str(ROOT / "bench"))
    # a busy machine may start the child after its deadline: then the run says nothing about
    # the interrupt, and the budget is doubled until the child was running when it came
    for budget in (2.0, 4.0, 8.0, 16.0, 32.0):
        out = tmp_path / f"budget_{budget:g}"
        out.mkdir()
        ctx = parts.Ctx(out, parts.torch.device("cpu"), parts.time.perf_counter() + budget,
                        True, "chapters")  # fmt: skip
        status = parts.run_child(ctx, [sys.executable, "-c", _CHILD, str(out)])
        if (out / "started").exists():
            break
    assert status == "stopped at the part's budget"
    assert (out / "reports").read_text() == "written"

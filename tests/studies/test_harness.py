"""Tests of dmlbook.studies.harness.run_grid, the grid of both comparisons."""

from __future__ import annotations

import pandas as pd
import pytest

from dmlbook.studies.harness import run_grid


def _runner(stop_at: tuple[str, int] | None = None, raise_at: tuple[str, int] | None = None):
    calls = []

    def run_one(label: str, seed: int) -> tuple[pd.DataFrame, bool]:
        calls.append((label, seed))
        if (label, seed) == raise_at:
            raise KeyboardInterrupt
        return pd.DataFrame({"epoch": [0, 1], "R@1": [0.1, 0.2 + seed]}), (label, seed) == stop_at

    return run_one, calls


def test_runs_in_order_with_label_and_seed_columns():
    run_one, calls = _runner()
    runs = [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    frames, interrupted = run_grid(runs, run_one, keep_interrupted=False, progress=False)
    assert calls == runs and not interrupted
    table = pd.concat(frames, ignore_index=True)
    assert list(table.columns) == ["loss", "seed", "epoch", "R@1"]
    assert table[["loss", "seed"]].drop_duplicates().apply(tuple, axis=1).tolist() == runs
    assert table.loc[table["seed"] == 1, "R@1"].tolist() == pytest.approx([0.1, 1.2] * 2)


@pytest.mark.parametrize("keep", [False, True])
def test_an_interrupted_run_stops_the_grid(keep):
    run_one, calls = _runner(stop_at=("a", 1))
    runs = [("a", 0), ("a", 1), ("b", 0)]
    frames, interrupted = run_grid(runs, run_one, keep_interrupted=keep, progress=False)
    assert interrupted and calls == runs[:2]
    assert [f["seed"].iloc[0] for f in frames] == ([0, 1] if keep else [0])


def test_ctrl_c_inside_a_run_returns_what_finished():
    run_one, calls = _runner(raise_at=("b", 0))
    runs = [("a", 0), ("b", 0), ("b", 1)]
    frames, interrupted = run_grid(runs, run_one, keep_interrupted=True, progress=False)
    assert interrupted and calls == runs[:2] and len(frames) == 1

"""Tests of dmlbook.studies.results: the results layout, as_results, and the paired helpers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dmlbook.studies.ms_ablation import read_ablation_csv
from dmlbook.studies.results import (
    as_results,
    format_paired,
    format_summary,
    metric_columns,
    paired_differences,
    summarize,
)

ROOT = Path(__file__).resolve().parents[2]


def _benchmark_table() -> pd.DataFrame:
    """The shape of dmlbook.studies.compare_on_benchmark's table: indexed by (label, seed)."""
    rows = [
        ("MS", 0, 0.60, 0.70, 0.30, 0.62), ("MS", 1, 0.64, 0.74, 0.32, 0.65),
        ("triplet", 0, 0.55, 0.66, 0.27, 0.56), ("triplet", 1, 0.50, 0.62, 0.25, 0.52),
    ]  # fmt: skip
    table = pd.DataFrame(rows, columns=["label", "seed", "R@1", "R@2", "MAP@R", "best R@1"])
    table["iterations"], table["out_dir"] = 3000, "runs/x"
    return table.set_index(["label", "seed"])


def test_as_results_puts_keys_then_metrics_then_the_rest():
    runs = as_results(_benchmark_table(), loss="label")
    assert list(runs.columns) == [
        "loss", "seed", "R@1", "R@2", "MAP@R", "best R@1", "iterations", "out_dir",
    ]  # fmt: skip
    assert metric_columns(runs) == ["R@1", "R@2", "MAP@R"]
    diff = paired_differences(runs, "MS", "R@1")  # one evaluation per run: no epoch needed
    # by hand: triplet - MS per seed = (-0.05, -0.14)
    assert diff.loc["triplet", "mean"] == pytest.approx(-0.095)
    assert diff.loc["triplet", "min"] == pytest.approx(-0.14)
    assert diff.loc["triplet", "wins"] == 0
    summary = summarize(runs, ["R@1", "MAP@R"])
    assert summary.loc["MS", "R@1 mean"] == pytest.approx(0.62)
    assert summary.loc["triplet", "MAP@R mean"] == pytest.approx(0.26)
    printed = format_paired(diff)
    assert printed.loc["triplet", ["mean", "min", "max"]].tolist() == [-9.5, -14.0, -5.0]
    assert printed.loc["triplet", "wins"] == 0


def test_chapter_10_ablation_table_through_the_schema():
    """The ablation CSV through as_results gives what Chapter 10's hand-glued frame gave."""
    ablation = read_ablation_csv(ROOT / "bench" / "results" / "ms_ablation.csv")
    by_hand = ablation.rename(columns={"variant": "loss"}).assign(epoch=ablation["epochs"])
    runs = as_results(ablation, loss="variant", epoch="epochs")
    assert list(runs.columns[:4]) == ["loss", "seed", "epoch", "train_loss"]
    pd.testing.assert_frame_equal(
        paired_differences(runs, "MS", "R@1"), paired_differences(by_hand, "MS", "R@1")
    )
    # every paired difference recomputed from the raw rows
    table = ablation.pivot(index="seed", columns="variant", values="R@1")
    expected = table.sub(table["MS"], axis=0).drop(columns="MS").mean()
    got = paired_differences(runs, "MS", "R@1")["mean"]
    assert got.to_dict() == pytest.approx(expected.to_dict())


def test_as_results_errors_name_the_missing_columns():
    with pytest.raises(ValueError, match="no column 'variant'.*loss=..."):
        as_results(_benchmark_table(), loss="variant")
    with pytest.raises(ValueError, match="no metric column"):
        as_results(pd.DataFrame({"loss": ["a"], "seed": [0]}))
    with pytest.raises(TypeError, match="pandas.DataFrame"):
        as_results([1, 2])
    with pytest.raises(TypeError, match="paired_differences"):
        format_paired(pd.DataFrame({"mean": [1.0]}))


def test_format_summary_and_sorting():
    summary = pd.DataFrame(
        {"R@1 mean": [0.5, 0.7], "R@1 std": [0.01, 0.123], "seeds": [3, 3]},
        index=pd.Index(["a", "b"], name="loss"),
    )
    text = format_summary(summary)
    assert text.loc["a", "R@1"] == "50.0 ± 1.0" and text.loc["b", "R@1"] == "70.0 ± 12.3"
    assert list(format_summary(summary, sort_by="R@1").index) == ["b", "a"]
    with pytest.raises(ValueError, match="sort"):
        format_summary(summary, sort_by="R@2")


def test_paired_differences():
    res = pd.DataFrame(
        {
            "loss": ["a"] * 3 + ["b"] * 3,
            "seed": [0, 1, 2] * 2,
            "epoch": [4] * 6,
            "R@1": [0.50, 0.60, 0.55, 0.52, 0.61, 0.54],
        }
    )
    d = paired_differences(res, "a")
    assert list(d.index) == ["b"]
    assert d.loc["b", "mean"] == pytest.approx((0.02 + 0.01 - 0.01) / 3)
    assert d.loc["b", "wins"] == 2
    assert d.loc["b", "min"] == pytest.approx(-0.01) and d.loc["b", "max"] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="reference"):
        paired_differences(res, "c")

"""Tests of dmlbook.studies.benchmark: several losses under one engine recipe, planned and run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tiny_run import tiny_config

from dmlbook.engine import ConfigError
from dmlbook.losses import ContrastiveLoss, TripletLoss
from dmlbook.studies import as_results, compare_on_benchmark, paired_differences, plan_benchmark

# Single-threaded CPU math: a resumed comparison gives the same table.
pytestmark = pytest.mark.usefixtures("one_thread")


def test_compare_on_benchmark_swaps_only_the_loss_and_resumes(tmp_path):
    base = tiny_config(tmp_path / "run")
    base["train"].pop("out_dir")
    losses = {
        "contrastive (m=0.3)": ContrastiveLoss(margin=0.3),
        "MS": ("multi_similarity", {"beta": 40.0}),
    }
    plan = plan_benchmark(
        losses, base, out_root=tmp_path / "cmp", overrides=["train.iterations=4"],
        run_overrides={"MS": ["train.k=2"]},
    )  # fmt: skip
    assert not (tmp_path / "cmp").exists()  # planning trains nothing
    assert plan.drop(columns=["config", "out_dir"]).to_dict("index") == {
        ("contrastive (m=0.3)", 0): {"loss": "contrastive", "hyper-parameters": "margin=0.3",
                                     "batch": "4 x 4", "length": "4 iterations"},
        ("MS", 0): {"loss": "multi_similarity", "hyper-parameters": "beta=40.0",
                    "batch": "8 x 2", "length": "4 iterations"},
    }  # fmt: skip
    table = compare_on_benchmark(plan, progress=False)
    assert list(table.index) == list(plan.index)
    assert not table.attrs["interrupted"]
    for _, row in table.iterrows():
        run = json.loads((Path(row["out_dir"]) / "run.json").read_text())
        assert run["complete"] and row["iterations"] == 4
        assert Path(row["out_dir"]).parent.parent == tmp_path / "cmp"
        last = pd.read_csv(Path(row["out_dir"]) / "metrics.csv").iloc[-1]
        assert row[["R@1", "R@2", "R@4", "MAP@R"]].to_list() == pytest.approx(
            last[["R@1", "R@2", "R@4", "MAP@R"]].to_list()
        )
    configs = {label: json.loads((Path(r["out_dir"]) / "run.json").read_text())["config"]
               for (label, _), r in table.iterrows()}  # fmt: skip
    loss = configs["contrastive (m=0.3)"]["loss"]
    # a module travels with every hyper-parameter (describe_loss), its backward path included
    assert loss == {"name": "contrastive", "params": {"margin": 0.3}}
    assert configs["MS"]["loss"] == {"name": "multi_similarity", "params": {"beta": 40.0}}
    assert (configs["contrastive (m=0.3)"]["train"]["k"], configs["MS"]["train"]["k"]) == (4, 2)
    runs = as_results(table, loss="label")  # the package's results layout
    assert list(runs.columns[:6]) == ["loss", "seed", "R@1", "R@2", "R@4", "MAP@R"]
    assert paired_differences(runs, "MS", "R@1").loc["contrastive (m=0.3)", "mean"] == (
        pytest.approx(table["R@1"].iloc[0] - table["R@1"].iloc[1])
    )
    checkpoint = Path(table.iloc[0]["out_dir"]) / "last.pt"
    stamp = checkpoint.stat().st_mtime_ns
    again = compare_on_benchmark(plan, progress=False)
    assert checkpoint.stat().st_mtime_ns == stamp  # finished runs are not trained again
    pd.testing.assert_frame_equal(again, table)


def test_plan_benchmark_rejects_bad_entries(tmp_path):
    base = tiny_config(tmp_path / "run")
    kw = {"out_root": tmp_path / "cmp"}
    with pytest.raises(ValueError, match="non-empty"):
        plan_benchmark({}, base, **kw)
    with pytest.raises(TypeError, match="registered loss module, a registry name"):
        plan_benchmark({"x": 3}, base, **kw)
    with pytest.raises(ValueError, match="unknown loss 'tripplet'"):
        plan_benchmark({"x": "tripplet"}, base, **kw)
    with pytest.raises(ValueError, match="not in losses"):
        plan_benchmark({"x": "triplet"}, base, run_overrides={"y": ["train.k=2"]}, **kw)

    class Unregistered(ContrastiveLoss):
        pass

    with pytest.raises(ValueError, match="not in the loss registry"):
        plan_benchmark({"x": Unregistered()}, base, **kw)
    with pytest.raises(ConfigError, match="run 'x' \\(seed 0\\)"):
        plan_benchmark({"x": "triplet"}, base, overrides=["train.batch_size=-3"], **kw)
    with pytest.raises(TypeError, match="plan_benchmark"):
        compare_on_benchmark(pd.DataFrame({"a": [1]}))


def test_shipped_benchmark_plans_check_without_data():
    plan = plan_benchmark(
        {"triplet": TripletLoss(0.1, mining="semihard"), "N-pair": "npair"},
        "liu_cub_bninception", out_root="~/runs", seeds=(0, 1),
        run_overrides={"N-pair": ["train.k=2"]},
    )  # fmt: skip
    assert plan.loc[("triplet", 1), "hyper-parameters"] == "mining=semihard"
    assert plan.loc[("N-pair", 0), "batch"] == "40 x 2"
    assert plan.loc[("triplet", 0), "length"] == "20 epochs"
    assert plan.loc[("N-pair", 1), "out_dir"] == "~/runs/N-pair/seed1"
    assert plan.loc[("N-pair", 1), "config"].train.seed == 1

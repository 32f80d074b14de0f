"""Tests of dmlbook.studies.loss_grid (multi-seed loss comparisons with fit), and of what reads
its tables: summarize and plots.plot_recall_bars on a real grid."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from dmlbook.chapters.plots import plot_recall_bars  # noqa: E402
from dmlbook.losses import ContrastiveLoss  # noqa: E402
from dmlbook.models import EmbeddingMLP  # noqa: E402
from dmlbook.studies import (  # noqa: E402
    LossSpec,
    compare_losses,
    format_summary,
    recall_columns,
    summarize,
)


def _blobs(n_classes: int, per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian blobs in 8-d: an easy retrieval problem whose recall training can improve."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(n_classes, 8, generator=g) * 1.5
    y = torch.arange(n_classes).repeat_interleave(per_class)
    x = centres[y] + torch.randn(len(y), 8, generator=g)
    return x, y


TRAIN = _blobs(6, 10, 0)
TEST = _blobs(6, 10, 1)
MODEL = lambda: EmbeddingMLP(in_features=8, hidden=(16,), dim=4)  # noqa: E731
FIT = {"epochs": 2, "batch_size": 12, "k": 4, "lr": 1e-2, "progress": False}
LOSSES = {"contrastive": "contrastive", "triplet": ("triplet", {"margin": 0.2})}


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return compare_losses(LOSSES, MODEL, TRAIN, TEST, seeds=(0, 1, 2), **FIT)


def test_tidy_frame_one_row_per_loss_and_seed(results):
    assert list(results.columns) == [
        "loss", "seed", "epoch", "train_loss", "R@1", "R@2", "R@4", "R@8", "seconds",
    ]  # fmt: skip
    assert len(results) == 6
    assert results["loss"].tolist() == ["contrastive"] * 3 + ["triplet"] * 3
    assert results["seed"].tolist() == [0, 1, 2, 0, 1, 2]
    assert (results["epoch"] == 2).all()
    assert results[["R@1", "R@8"]].stack().between(0, 1).all()
    assert (results["R@8"] >= results["R@1"]).all()
    assert results["train_loss"].notna().all()
    assert results.attrs["seeds"] == [0, 1, 2] and results.attrs["fit"]["epochs"] == 2


def test_every_runs_batch_losses_are_kept_and_average_to_its_last_epoch(results):
    curves = results.attrs["step_loss"]
    assert sorted(curves) == [(name, s) for name in ("contrastive", "triplet") for s in (0, 1, 2)]
    for (name, seed), steps in curves.items():
        row = results[(results["loss"] == name) & (results["seed"] == seed)].iloc[-1]
        per_epoch = len(steps) // 2  # two epochs
        assert len(steps) == 2 * per_epoch > 0
        assert row["train_loss"] == pytest.approx(sum(steps[per_epoch:]) / per_epoch)


def test_runs_repeat_exactly_and_seeds_differ(results):
    again = compare_losses({"contrastive": "contrastive"}, MODEL, TRAIN, TEST, seeds=(1,), **FIT)
    first = results[(results["loss"] == "contrastive") & (results["seed"] == 1)]
    cols = ["train_loss", "R@1", "R@2", "R@4", "R@8"]
    assert first[cols].to_numpy().tolist() == again[cols].to_numpy().tolist()
    losses = results[results["loss"] == "contrastive"]["train_loss"]
    assert losses.nunique() == 3  # different initial weights and batches per seed


def test_same_seed_means_same_initial_model_for_every_loss():
    """Epoch 0 (before training) is identical across losses for one seed: a paired design."""
    res = compare_losses(LOSSES, MODEL, TRAIN, TEST, seeds=(0, 5), eval_every=1, **FIT)
    assert sorted(res["epoch"].unique().tolist()) == [0, 1, 2]
    start = res[res["epoch"] == 0].pivot(index="seed", columns="loss", values="R@1")
    assert (start["contrastive"] == start["triplet"]).all()
    assert res[res["epoch"] == 0]["train_loss"].isna().all()
    # the final row of an evaluated run equals the evaluate-once run of the same seed
    once = compare_losses(LOSSES, MODEL, TRAIN, TEST, seeds=(0,), **FIT)
    last = res[(res["epoch"] == 2) & (res["seed"] == 0)]
    assert last["R@1"].tolist() == once["R@1"].tolist()


def test_summary_is_mean_and_sample_std_over_seeds(results):
    summary = summarize(results)
    assert list(summary.index) == ["contrastive", "triplet"]
    assert recall_columns(summary) == ["R@1", "R@2", "R@4", "R@8"]
    values = results[results["loss"] == "triplet"]["R@2"]
    assert summary.loc["triplet", "R@2 mean"] == pytest.approx(values.mean())
    assert summary.loc["triplet", "R@2 std"] == pytest.approx(values.std(ddof=1))
    assert summary["seeds"].tolist() == [3, 3]


def test_summary_of_one_seed_has_nan_std_and_formats_without_it():
    res = compare_losses({"c": "contrastive"}, MODEL, TRAIN, TEST, seeds=(0,), **FIT)
    summary = summarize(res)
    assert math.isnan(summary.loc["c", "R@1 std"])
    text = format_summary(summary, ["R@1"])
    assert "±" not in text.loc["c", "R@1"]


def test_loss_entries_of_every_kind(results):
    kinds = {
        "name": "contrastive",
        "tuple": ("contrastive", {"margin": 0.5}),
        "spec": LossSpec("contrastive", {"margin": 0.5}),
        "factory": lambda: ContrastiveLoss(margin=0.5),
    }
    res = compare_losses(kinds, MODEL, TRAIN, TEST, seeds=(2,), **FIT)
    assert res["R@1"].nunique() == 1  # four spellings of one loss
    ref = results[(results["loss"] == "contrastive") & (results["seed"] == 2)]["R@1"].item()
    assert res["R@1"].iloc[0] == ref


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"losses": {}}, ValueError, "non-empty"),
        ({"losses": {"x": "contrastiv"}}, ValueError, "unknown loss"),
        ({"losses": {"x": ("triplet", {"margn": 0.1})}}, ValueError, "hyper-parameter"),
        ({"losses": {"x": ContrastiveLoss()}}, TypeError, "factory"),
        ({"losses": {"x": ("triplet", 0.1)}}, TypeError, "dict"),
        ({"seeds": ()}, ValueError, "at least one"),
        ({"seeds": (0, 0)}, ValueError, "distinct"),
        ({"seeds": (-1,)}, ValueError, "non-negative"),
        ({"seed": 3}, ValueError, "sets seed"),
        ({"make_model": "mlp"}, TypeError, "make_model"),
        ({"eval_every": 0}, ValueError, "eval_every"),
    ],
)
def test_bad_arguments_fail_before_training(kwargs, error, match):
    args = {"losses": {"c": "contrastive"}, "make_model": MODEL, "seeds": (0,)} | kwargs
    losses, make_model = args.pop("losses"), args.pop("make_model")
    with pytest.raises(error, match=match):
        compare_losses(losses, make_model, TRAIN, TEST, **(FIT | args))


def test_summarize_checks_its_input(results):
    with pytest.raises(TypeError, match="compare_losses"):
        summarize([1, 2])
    with pytest.raises(ValueError, match="no column"):
        summarize(results, ["MAP@R"])
    with pytest.raises(ValueError, match="epoch"):
        summarize(results, epoch=7)


def test_plot_recall_bars(results):
    summary = summarize(results)
    fig = plot_recall_bars(summary, results=results)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.containers) >= 4  # one bar container per metric (plus error bars)
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    assert len(bars) == 4 and all(len(b.patches) == 2 for b in bars)
    heights = [p.get_height() for p in bars[0].patches]
    assert heights == pytest.approx((100 * summary["R@1 mean"]).tolist())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["contrastive", "triplet"]
    assert len(ax.collections) >= 8  # per-seed dots: 2 losses x 4 metrics
    one = plot_recall_bars(summary, "R@1")
    assert one.axes[0].get_ylabel() == "R@1 (%)"
    with pytest.raises(ValueError, match="no column"):
        plot_recall_bars(summary, ["R@16"])


def test_interrupt_keeps_the_finished_runs_and_drops_the_one_in_progress(capsys):
    calls = {"n": 0}

    def flaky():
        inner = ContrastiveLoss(margin=0.5)

        def loss(emb, y):
            calls["n"] += 1
            if calls["n"] > 12:  # 2 epochs x 5 batches per run: the second run is cut short
                raise KeyboardInterrupt
            return inner(emb, y)

        return loss

    res = compare_losses({"flaky": flaky}, MODEL, TRAIN, TEST, seeds=(0, 1, 2), **FIT)
    assert res.attrs["interrupted"]
    assert res["seed"].tolist() == [0] and res["R@1"].notna().all()
    assert "1 of 3 runs" in capsys.readouterr().out

    def stop():
        raise KeyboardInterrupt

    empty = compare_losses({"c": "contrastive"}, stop, TRAIN, TEST, seeds=(0,), **FIT)
    assert empty.attrs["interrupted"] and len(empty) == 0


def test_progress_bar_over_runs_can_be_shown(capsys):
    res = compare_losses(
        {"c": "contrastive"}, MODEL, TRAIN, TEST, seeds=(0,), **(FIT | {"progress": True})
    )
    assert len(res) == 1 and not res.attrs["interrupted"]
    assert "runs" in capsys.readouterr().err


def test_numpy_integer_seeds_and_ks_are_one_seed_and_one_k():
    """Issue 38: seeds=numpy.int64(3) is the seed 3, as seeds=3 is; a bool seed is refused."""
    import numpy as np

    from dmlbook.studies.loss_grid import _check_seeds

    assert _check_seeds(np.int64(3)) == (3,) and _check_seeds([np.uint8(1), 2]) == (1, 2)
    with pytest.raises(ValueError):
        _check_seeds([True])

"""Tests of dmlbook.chapters.curves: the running mean against a loop, and the curves drawn per run and seed."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dmlbook.chapters.curves import plot_loss_curves, plot_training_curves, smooth  # noqa: E402
from dmlbook.chapters.palette import PALETTE  # noqa: E402


@given(
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=40),
    st.integers(1, 10),
)
def test_smooth_is_the_running_mean_of_the_last_window_values(values, window):
    expected = [np.mean(values[max(0, i + 1 - window) : i + 1]) for i in range(len(values))]
    np.testing.assert_allclose(smooth(values, window), expected, rtol=1e-9, atol=1e-9)


def _history(losses, r1, seed=0):
    h = pd.DataFrame({"epoch": [0, 1, 2], "loss": [np.nan, 1.0, 0.5], "R@1": r1})
    h.attrs["step_loss"] = losses
    h.attrs["seed"] = seed
    return h


def test_one_line_per_run_and_seed_with_the_runs_style():
    runs = {
        "a": _history([4.0, 3.0, 2.0, 1.0], [0.1, 0.2, 0.3]),
        "b": [_history([2.0] * 4, [0.1, 0.1, 0.2], s) for s in range(3)],
    }
    fig = plot_training_curves(runs, window=2)
    loss_ax, r_ax = fig.axes
    assert len(loss_ax.lines) == len(r_ax.lines) == 5  # a; b's three seeds, then their mean
    np.testing.assert_allclose(loss_ax.lines[0].get_ydata(), [4.0, 3.5, 2.5, 1.5])
    np.testing.assert_allclose(r_ax.lines[0].get_xdata(), [0, 2, 4])  # 2 batches per epoch
    np.testing.assert_allclose(r_ax.lines[0].get_ydata(), [10, 20, 30])
    assert [ln.get_color() for ln in r_ax.lines] == [PALETTE[0]] + [PALETTE[1]] * 4
    assert r_ax.lines[1].get_linewidth() < r_ax.lines[0].get_linewidth()  # seeds: thin
    assert r_ax.lines[4].get_linewidth() > r_ax.lines[0].get_linewidth()  # their mean: thick
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == ["a", "b"]
    assert "thin: each seed" in loss_ax.get_legend().get_title().get_text()
    plt.close(fig)


def test_the_thick_line_is_the_mean_over_the_seeds_step_by_step():
    """By hand: R@1 of the seeds (10, 20, 60) %, (30, 40, 20) % -> mean (20, 30, 40) %; running
    means over 2 batches of (1, 2, 3, 3) and (3, 2, 1, 1): (1, 1.5, 2.5, 3) and (3, 2.5, 1.5, 1),
    whose mean is (2, 2, 2, 2)."""
    seeds = [
        _history([1.0, 2.0, 3.0, 3.0], [0.1, 0.2, 0.6], 0),
        _history([3.0, 2.0, 1.0, 1.0], [0.3, 0.4, 0.2], 1),
    ]
    fig = plot_training_curves({"only": seeds}, window=2)
    loss_ax, r_ax = fig.axes
    np.testing.assert_allclose(r_ax.lines[2].get_ydata(), [20.0, 30.0, 40.0])
    np.testing.assert_allclose(loss_ax.lines[2].get_ydata(), [2.0, 2.0, 2.0, 2.0])
    assert r_ax.lines[2].get_marker() == "o" and r_ax.lines[0].get_marker() in ("None", "", None)
    plt.close(fig)
    uneven = [seeds[0], _history([1.0, 2.0], [0.1, 0.2, 0.3], 1)]
    with pytest.raises(ValueError, match="one protocol"):
        plot_training_curves({"only": uneven})


def test_errors_name_what_to_pass():
    with pytest.raises(ValueError, match="non-empty"):
        plot_training_curves({})
    with pytest.raises(ValueError, match="step_loss"):
        plot_training_curves({"a": pd.DataFrame({"epoch": [0]})})
    with pytest.raises(ValueError, match="no column 'R@8'"):
        plot_training_curves({"a": _history([1.0, 1.0], [0.1, 0.2, 0.3])}, metric="R@8")
    with pytest.raises(ValueError, match="window"):
        smooth([1.0], 0)


def test_loss_curves_one_panel_per_loss_thin_seeds_and_their_mean():
    results = pd.DataFrame({"loss": ["a", "b"], "seed": [0, 0]})
    results.attrs["step_loss"] = {
        ("a", 0): [2.0, 2.0, 2.0],
        ("a", 1): [4.0, 4.0, 4.0],
        ("b", 0): [1.0, 0.0, 1.0],
    }
    fig = plot_loss_curves(results, ncols=4, window=1)
    a, b = fig.axes
    assert [a.get_title(), b.get_title()] == ["a", "b"]
    assert len(a.lines) == 3 and len(b.lines) == 2  # seeds, then their mean
    np.testing.assert_allclose(a.lines[2].get_ydata(), [3.0, 3.0, 3.0])
    assert a.lines[2].get_linewidth() > a.lines[0].get_linewidth()
    assert a.lines[0].get_color() == PALETTE[0] and b.lines[0].get_color() == PALETTE[1]
    plt.close(fig)
    with pytest.raises(ValueError, match="step_loss"):
        plot_loss_curves(pd.DataFrame({"loss": ["a"]}))


@pytest.mark.parametrize("kind", [np.int64, np.int16])
def test_a_numpy_integer_is_a_window(kind):
    """Issue 38: the running mean over a window given by NumPy, by hand: (1), (1+2)/2, (2+4)/2."""
    np.testing.assert_allclose(smooth([1.0, 2.0, 4.0], kind(2)), [1.0, 1.5, 3.0])

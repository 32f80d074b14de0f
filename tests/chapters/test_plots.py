"""Tests of dmlbook.chapters.plots: each function returns a figure holding what it should draw."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from dmlbook.chapters.plots import compare_histories, plot_embeddings, plot_history, project_2d  # noqa: E402


def _history(shift: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "epoch": [0, 1, 2, 3],
            "loss": [math.nan, 0.9, 0.7, 0.6],
            "R@1": [0.30 + shift, 0.50, 0.60, 0.65],
            "R@2": [0.40, 0.60, 0.70, 0.75],
            "seconds": [0.1, 1.0, 2.0, 3.0],
        }
    )


def test_plot_history_default_draws_loss_and_recalls_on_two_axes():
    fig = plot_history(_history())
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    loss_ax, recall_ax = fig.axes
    assert [line.get_label() for line in loss_ax.lines] == ["loss"]
    assert [line.get_label() for line in recall_ax.lines] == ["R@1", "R@2"]
    np.testing.assert_allclose(recall_ax.lines[0].get_ydata(), [30, 50, 60, 65])
    legend = recall_ax.get_legend()  # on the top axes: one legend for both
    assert [t.get_text() for t in legend.get_texts()] == ["loss", "R@1", "R@2"]
    assert "seconds" not in [line.get_label() for ax in fig.axes for line in ax.lines]


def test_plot_history_metric_subsets_and_given_axes():
    fig, ax = plt.subplots()
    assert plot_history(_history(), metrics=["R@1"], ax=ax) is fig
    assert len(fig.axes) == 1 and len(ax.lines) == 1
    fig = plot_history(_history(), metrics="loss")
    assert len(fig.axes) == 1
    fig = plot_history(_history().drop(columns=["R@1", "R@2"]))
    assert len(fig.axes) == 1


def test_plot_history_errors():
    with pytest.raises(ValueError, match="no column 'R@8'"):
        plot_history(_history(), metrics=["R@8"])
    with pytest.raises(TypeError, match="DataFrame"):
        plot_history({"epoch": [0]})
    with pytest.raises(ValueError, match="empty"):
        plot_history(_history().iloc[:0])
    with pytest.raises(ValueError, match="No metric"):
        plot_history(_history()[["epoch", "seconds"]])


def _blobs(n_per_class: int, n_classes: int, dim: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    centres = 3 * torch.randn(n_classes, dim, generator=g)
    labels = torch.arange(n_classes).repeat_interleave(n_per_class)
    return centres[labels] + torch.randn(len(labels), dim, generator=g), labels


def _points(ax) -> np.ndarray:
    return np.concatenate(
        [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]
    )


def test_plot_embeddings_pca_one_collection_per_class_with_its_colour_and_marker():
    from dmlbook.chapters.palette import PALETTE

    x, y = _blobs(20, 4)
    fig = plot_embeddings(x, y)
    (ax,) = fig.axes
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert [s.get_offsets().shape for s in scatters] == [(20, 2)] * 4
    colours = [matplotlib.colors.to_hex(s.get_facecolors()[0]) for s in scatters]
    assert colours == [c.lower() for c in PALETTE[:4]]
    paths = [s.get_paths()[0].vertices.tobytes() for s in scatters]
    assert len(set(paths)) == 4  # four markers: the classes differ without colour
    assert len(ax.get_legend().get_texts()) == 4
    assert "PCA" in ax.get_title()


def test_plot_embeddings_subsamples_deterministically_and_many_classes():
    x, y = _blobs(5, 40)
    fig = plot_embeddings(x, y, max_points=50, title="many")
    offsets = _points(fig.axes[0])
    assert offsets.shape == (50, 2)
    assert fig.axes[0].get_legend() is None  # no legend for 40 classes
    assert fig.axes[0].get_title() == "many"
    again = _points(plot_embeddings(x, y, max_points=50).axes[0])
    np.testing.assert_array_equal(offsets, again)


def test_pca_matches_numpy_up_to_sign_and_separates_blobs():
    x, _ = _blobs(10, 3)
    xy = project_2d(x, "pca")
    centred = x.double().numpy() - x.double().numpy().mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    ref = centred @ vt[:2].T
    np.testing.assert_allclose(np.abs(xy), np.abs(ref), atol=1e-8)
    assert project_2d(torch.randn(6, 1)).shape == (6, 2)  # 1-D embeddings are padded


def test_plot_embeddings_tsne_and_errors():
    x, y = _blobs(8, 3)
    fig = plot_embeddings(x.numpy(), y.tolist(), method="tsne", seed=1)
    assert _points(fig.axes[0]).shape == (24, 2)
    assert "t-SNE" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="Unknown method 'umap'"):
        plot_embeddings(x, y, method="umap")
    with pytest.raises(ValueError, match="rows"):
        plot_embeddings(x, y[:-1])
    with pytest.raises(ValueError, match="max_points"):
        plot_embeddings(x, y, max_points=0)


def test_compare_histories_one_line_per_run():
    fig = compare_histories({"contrastive": _history(), "triplet": _history(0.1)})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == ["contrastive", "triplet"]
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [40, 50, 60, 65])
    assert ax.get_ylabel() == "R@1 (%)"
    fig = compare_histories({"a": _history()}, metric="loss")
    assert fig.axes[0].get_ylabel() == "loss"
    with pytest.raises(ValueError, match="no column 'R@16'"):
        compare_histories({"a": _history()}, metric="R@16")
    with pytest.raises(ValueError, match="non-empty"):
        compare_histories({})


def test_plot_image_grid_shapes_and_errors():
    from dmlbook.chapters.plots import plot_image_grid

    fig = plot_image_grid(torch.rand(5, 3, 8, 8), [str(i) for i in range(5)], ncols=3)
    assert len(fig.axes) == 6 and sum(len(ax.images) for ax in fig.axes) == 5
    assert len(plot_image_grid(torch.rand(2, 8, 8)).axes) == 2
    with pytest.raises(ValueError, match="one per image"):
        plot_image_grid(torch.rand(2, 1, 4, 4), ["a"])
    with pytest.raises(ValueError, match="C = 1 or 3"):
        plot_image_grid(torch.rand(2, 2, 4, 4))
    plt.close("all")


@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint8])
def test_numpy_integers_are_accepted_where_ints_are(kind):
    """Issue 38: a count from NumPy (``np.int64(3)``) is an int for ncols and max_points."""
    from dmlbook.chapters.plots import plot_image_grid

    fig = plot_image_grid(torch.rand(5, 3, 8, 8), ncols=kind(3))
    assert len(fig.axes) == 6  # 2 rows of 3, as with ncols=3
    x, y = _blobs(5, 4)
    assert _points(plot_embeddings(x, y, max_points=kind(7)).axes[0]).shape == (7, 2)
    with pytest.raises(ValueError, match="ncols"):
        plot_image_grid(torch.rand(2, 8, 8), ncols=np.bool_(True))
    plt.close("all")

"""dmlbook.chapters.explorer: the weight explorer's numbers (its JupyterLab controls are tested in
tests/chapters/test_explorer_widget.py and, in JupyterLab itself, tests/test_lab.py).

The weights are checked against central finite differences of the loss value (no autograd), and
the mined pairs of the contrastive loss against its hinge written out (Wang et al. 2019, Eq. 4:
a negative pair gets gradient iff S_ij > margin).
"""

from __future__ import annotations

import pytest
import torch

from dmlbook.chapters.explorer import (
    batch_weights,
    default_batch,
    explorer_figure,
    pair_weights,
    paper_row,
    similarity_dependence,
    tunable_parameters,
)
from dmlbook.losses import get_loss


@pytest.fixture(scope="module")
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    return default_batch()


def finite_differences(name: str, params: dict, S: torch.Tensor, labels: torch.Tensor, h=1e-6):
    loss = get_loss(name, **params).loss_on_similarity
    grad = torch.zeros_like(S)
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            up, down = S.clone(), S.clone()
            up[i, j] += h
            down[i, j] -= h
            grad[i, j] = (loss(up, labels) - loss(down, labels)) / (2 * h)
    return grad


@pytest.mark.parametrize(
    ("name", "params"), [("contrastive", {"margin": 0.3}), ("multi_similarity", {"beta": 10.0})]
)
def test_pair_weights_are_the_loss_derivative(batch, name, params):
    S, labels = batch[0][:8, :8], batch[1][:8]
    expected = finite_differences(name, params, S, labels)
    assert torch.allclose(pair_weights(name, params, S, labels), expected, atol=1e-7)


def test_mined_pairs_are_those_the_hinge_keeps(batch):
    S, labels = batch
    assert S.dtype == torch.float64 and S.shape == (32, 32) and len(set(labels.tolist())) == 8
    for margin in (0.3, 0.5):
        w = batch_weights("contrastive", {"margin": margin}, S, labels)
        assert w.counts["pos"] == 8 * 4 * 3 and w.counts["neg"] == 32 * 28
        assert w.counts["neg_mined"] == int((S[w.neg] > margin).sum()) > 0
        assert w.counts["pos_mined"] == w.counts["pos"]  # (1 - S_ij) never closes
        assert f"{w.counts['neg_mined']} of 896 negative pairs" in w.summary()


def test_table_1_row_of_a_loss_and_the_papers_column():
    assert similarity_dependence("contrastive", {"margin": 0.5}) == {
        "S": True,
        "P": False,
        "N": False,
    }
    assert similarity_dependence("multi_similarity", {}) == {"S": True, "P": True, "N": True}
    assert paper_row("multi_similarity") == ("MS", {"S": True, "P": True, "N": True})
    assert paper_row("not_a_loss") is None


def test_tunable_parameters_are_the_numbers_and_switches():
    params = tunable_parameters("multi_similarity")
    assert {"alpha", "beta", "margin", "epsilon"} <= set(params)
    assert not {"reduction", "backward"} & set(params)
    assert all(isinstance(v, int | float | bool) for v in params.values())


def test_a_loss_that_cannot_run_on_the_batch_is_reported_not_raised(batch, monkeypatch):
    def broken(name, **params):
        raise ValueError("needs two samples per class\nmore detail")

    monkeypatch.setattr("dmlbook.chapters.explorer.get_loss", broken)
    w = batch_weights("contrastive", {}, *batch)
    assert w.error == "ValueError: needs two samples per class"
    assert "cannot be evaluated on this batch" in w.summary()
    assert explorer_figure(w).startswith(b"\x89PNG")


def test_the_figure_leaves_pyplots_backend_alone(batch):
    """Chapters 2 and 10 lost every figure after the explorer's: it switched pyplot to Agg."""
    import matplotlib
    import matplotlib.pyplot as plt

    w = batch_weights("contrastive", {"margin": 0.3}, *batch)
    before, open_figures = matplotlib.get_backend(), plt.get_fignums()
    plt.switch_backend("pdf")  # any backend that is not Agg
    try:
        assert explorer_figure(w).startswith(b"\x89PNG")
        assert matplotlib.get_backend() == "pdf"
        assert plt.get_fignums() == open_figures  # no figure added to pyplot's either
    finally:
        plt.switch_backend(before)

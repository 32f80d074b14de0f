"""Tests of dmlbook.models.embedding: L2Normalize and the batched embed() (mode, batches, inputs,
errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dmlbook.models import EmbeddingMLP, L2Normalize, embed
from dmlbook.models.embedding import check_positive_int


def test_l2normalize_zero_row_stays_finite():
    out = L2Normalize()(torch.zeros(2, 3))
    assert torch.equal(out, torch.zeros(2, 3))


class _Recorder(nn.Module):
    """An MLP with BatchNorm that records its batch sizes and training flag on every call."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
        self.calls: list[tuple[int, bool, bool]] = []

    def forward(self, x):
        self.calls.append((x.shape[0], self.training, torch.is_grad_enabled()))
        return self.net(x)


@pytest.mark.parametrize("was_training", [True, False])
def test_embed_restores_mode_and_batches(was_training):
    torch.manual_seed(0)
    model = _Recorder().train(was_training)
    x = torch.randn(23, 6)
    out = embed(model, x, batch_size=10)
    assert model.training is was_training
    assert [c[0] for c in model.calls] == [10, 10, 3]
    assert all(not training and not grad for _, training, grad in model.calls)
    assert out.dtype == torch.float32 and out.device.type == "cpu" and not out.requires_grad
    model.eval()
    assert torch.allclose(out, model(x), atol=1e-6)  # batching does not change the result


def test_embed_restores_mode_after_error():
    model = EmbeddingMLP(4, (), 2).train()
    with pytest.raises(ValueError):
        embed(model, torch.rand(5, 3))
    assert model.training


def test_embed_accepts_datasets_arrays_and_objects():
    torch.manual_seed(0)
    model = EmbeddingMLP(5, (7,), 3)
    x = torch.randn(11, 5)
    want = embed(model, x)

    class WithInputs:
        inputs = x

    pairs = [(x[i], torch.tensor(i % 2)) for i in range(11)]
    assert torch.allclose(embed(model, WithInputs()), want)
    assert torch.allclose(embed(model, pairs, batch_size=4), want)
    assert torch.allclose(embed(model, x.double().numpy()), want, atol=1e-6)


def test_embed_errors():
    model = EmbeddingMLP(5, (), 3)
    with pytest.raises(ValueError, match="no inputs"):
        embed(model, torch.zeros(0, 5))
    with pytest.raises(ValueError, match="batch_size"):
        embed(model, torch.zeros(2, 5), batch_size=0)
    with pytest.raises(TypeError, match="nn.Module"):
        embed(lambda x: x, torch.zeros(2, 5))
    with pytest.raises(TypeError, match="embed expects"):
        embed(model, 3.0)
    with pytest.raises(ValueError, match=r"shape \(B, d\)"):
        embed(nn.Identity(), torch.zeros(2, 3, 4))


def test_check_positive_int_takes_numpy_integers_and_refuses_bools_and_floats():
    assert check_positive_int(np.int64(3), "dim") == 3
    assert type(check_positive_int(np.int64(3), "dim")) is int
    for bad in (True, 2.0, "4"):
        with pytest.raises(TypeError, match="dim must be a positive int"):
            check_positive_int(bad, "dim")
    with pytest.raises(ValueError, match=r"width must be a positive int \(at least 1\), got 0"):
        check_positive_int(0, "width")

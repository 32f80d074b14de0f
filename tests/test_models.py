"""Tests of dmlbook.models: shapes, unit norm, raw features, errors and the batched embed()."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from dmlbook.models import EmbeddingMLP, L2Normalize, SmallCNN, embed


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 9),
    in_features=st.integers(1, 20),
    hidden=st.lists(st.integers(1, 16), max_size=2),
    dim=st.integers(1, 12),
)
def test_mlp_shapes_and_unit_norm(n, in_features, hidden, dim):
    torch.manual_seed(0)
    model = EmbeddingMLP(in_features, tuple(hidden), dim)
    out = model(torch.randn(n, in_features))
    assert out.shape == (n, dim)
    norms = out.norm(dim=1)
    # A row can be exactly zero only if the head output is zero; otherwise it is unit length.
    assert torch.allclose(norms[norms > 0], torch.ones_like(norms[norms > 0]), atol=1e-5)


def test_mlp_default_matches_digits():
    model = EmbeddingMLP()
    assert model(torch.rand(4, 64)).shape == (4, 32)
    assert model.dim == 32 and model.in_features == 64


@pytest.mark.parametrize("side", [8, 17, 32, 40])
def test_small_cnn_any_size(side):
    torch.manual_seed(0)
    model = SmallCNN(in_channels=3, dim=16, width=4)
    out = model(torch.rand(3, 3, side, side))
    assert out.shape == (3, 16)
    assert torch.allclose(out.norm(dim=1), torch.ones(3), atol=1e-5)


def test_small_cnn_grayscale():
    model = SmallCNN(in_channels=1, dim=8, width=4)
    assert model(torch.rand(2, 1, 32, 32)).shape == (2, 8)


@pytest.mark.parametrize(
    "model, x",
    [
        (EmbeddingMLP(8, (6,), 5, normalize=False), torch.randn(7, 8)),
        (SmallCNN(3, 5, width=4, normalize=False), torch.rand(7, 3, 16, 16)),
    ],
)
def test_normalize_false_returns_raw_features(model, x):
    torch.manual_seed(0)
    model.eval()
    raw = model(x)
    assert raw.shape == (7, 5)
    assert not torch.allclose(raw.norm(dim=1), torch.ones(7))  # not normalised
    assert isinstance(model.norm, nn.Identity)
    # the normalised model is the raw one followed by L2Normalize
    assert torch.allclose(L2Normalize()(raw), raw / raw.norm(dim=1, keepdim=True), atol=1e-6)


def test_l2normalize_zero_row_stays_finite():
    out = L2Normalize()(torch.zeros(2, 3))
    assert torch.equal(out, torch.zeros(2, 3))


@pytest.mark.parametrize("bad", [0, -3])
def test_non_positive_dim_raises(bad):
    with pytest.raises(ValueError, match="dim must be a positive int"):
        EmbeddingMLP(dim=bad)
    with pytest.raises(ValueError, match="dim must be a positive int"):
        SmallCNN(dim=bad)


def test_bad_constructor_arguments():
    with pytest.raises(TypeError, match="dim"):
        SmallCNN(dim=2.5)
    with pytest.raises(ValueError, match=r"hidden\[1\]"):
        EmbeddingMLP(hidden=(4, 0))
    with pytest.raises(ValueError, match="width"):
        SmallCNN(width=0)


def test_wrong_input_shapes_raise_clear_errors():
    with pytest.raises(ValueError, match=r"SmallCNN expects images of shape \(N, C, H, W\)"):
        SmallCNN()(torch.rand(4, 64))
    with pytest.raises(ValueError, match="C = 3"):
        SmallCNN()(torch.rand(4, 1, 32, 32))
    with pytest.raises(ValueError, match="at least 8x8"):
        SmallCNN()(torch.rand(4, 3, 4, 4))
    with pytest.raises(ValueError, match=r"EmbeddingMLP expects inputs of shape \(N, 64\)"):
        EmbeddingMLP()(torch.rand(4, 3, 32, 32))
    with pytest.raises(ValueError, match=r"\(N, 64\)"):
        EmbeddingMLP()(torch.rand(4, 63))


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


def test_mlp_and_cnn_are_deterministic_under_a_seed():
    torch.manual_seed(3)
    a = SmallCNN(dim=8, width=4)
    torch.manual_seed(3)
    b = SmallCNN(dim=8, width=4)
    x = torch.rand(5, 3, 32, 32)
    assert torch.equal(embed(a, x), embed(b, x))
    assert np.isfinite(embed(a, x).numpy()).all()


def test_small_cnn_stride_one_keeps_the_first_stage_at_full_resolution():
    seen = {}
    strided, full = SmallCNN(1, 8, width=4), SmallCNN(1, 8, width=4, stride=1)
    for name, model in (("strided", strided), ("full", full)):
        conv = model.features[0][0]
        conv.register_forward_hook(lambda m, i, o, name=name: seen.__setitem__(name, o.shape))
        assert model(torch.rand(2, 1, 28, 28)).shape == (2, 8)
    assert seen == {"strided": (2, 4, 14, 14), "full": (2, 4, 28, 28)}
    assert isinstance(full.features[1], nn.MaxPool2d) and full.stride == 1
    # the same parameters, only the first stage's subsampling differs
    assert [p.shape for p in strided.parameters()] == [p.shape for p in full.parameters()]
    assert full(torch.rand(1, 1, 8, 8)).shape == (1, 8)  # the smallest input still works
    for bad in (0, 3, True, 2.0):
        with pytest.raises(ValueError, match="stride must be 2"):
            SmallCNN(stride=bad)

"""Tests of dmlbook.models.small_cnn: any image size, channels, stride, errors, determinism; the
checks it shares with EmbeddingMLP (``normalize=False``, bad arguments and input shapes) test both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dmlbook.models import EmbeddingMLP, L2Normalize, SmallCNN, embed


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


def test_a_numpy_integer_stride_is_accepted():
    """Issue 38: stride=numpy.int64(1) builds the full-resolution network; stride=True is refused."""
    import numpy as np

    assert SmallCNN(in_channels=3, dim=16, width=4, stride=np.int64(1)).stride == 1
    with pytest.raises(ValueError, match="stride must be"):
        SmallCNN(in_channels=3, dim=16, width=4, stride=True)

"""Tests of dmlbook.models.resnet against an independent, hand-written layer table.

torchvision does not import here, so the expected state-dict keys and shapes come from the stage
table of He et al. 2016 (Table 1) with torchvision's module naming (``layerS.B.convN``,
``downsample.0/1``, ``fc``); torchvision's ``resnet50()`` has 25,557,032 parameters and 320
state-dict entries, ``resnet18()`` 11,689,512.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from dmlbook.models import ResNet, resnet18, resnet50

from .layer_tables import bn_keys, conv_keys, n_params, shapes

pytestmark = pytest.mark.usefixtures("one_thread")


# He et al. 2016, Table 1: (blocks, width) of conv2_x .. conv5_x
RESNET50_STAGES = [(3, 64), (4, 128), (6, 256), (3, 512)]


RESNET18_STAGES = [(2, 64), (2, 128), (2, 256), (2, 512)]


def torchvision_resnet_keys(stages: list[tuple[int, int]], bottleneck: bool) -> dict:
    keys: dict = {}
    conv_keys(keys, "conv1", 3, 64, 7)
    bn_keys(keys, "bn1", 64)
    c_in = 64
    for s, (blocks, width) in enumerate(stages, start=1):
        out = width * (4 if bottleneck else 1)
        for b in range(blocks):
            p = f"layer{s}.{b}."
            if bottleneck:
                conv_keys(keys, p + "conv1", c_in, width, 1)
                bn_keys(keys, p + "bn1", width)
                conv_keys(keys, p + "conv2", width, width, 3)
                bn_keys(keys, p + "bn2", width)
                conv_keys(keys, p + "conv3", width, out, 1)
                bn_keys(keys, p + "bn3", out)
            else:
                conv_keys(keys, p + "conv1", c_in, width, 3)
                bn_keys(keys, p + "bn1", width)
                conv_keys(keys, p + "conv2", width, width, 3)
                bn_keys(keys, p + "bn2", width)
            if b == 0 and (c_in != out or s > 1):
                conv_keys(keys, p + "downsample.0", c_in, out, 1)
                bn_keys(keys, p + "downsample.1", out)
            c_in = out
    keys["fc.weight"] = (1000, c_in)
    keys["fc.bias"] = (1000,)
    return keys


@functools.lru_cache(maxsize=1)
def _resnet50() -> ResNet:
    torch.manual_seed(0)
    return resnet50()


def test_resnet50_keys_and_shapes_match_torchvision_exactly():
    model = _resnet50()
    expected = torchvision_resnet_keys(RESNET50_STAGES, bottleneck=True)
    assert list(shapes(model)) == list(expected)  # same names, same order
    assert shapes(model) == expected
    assert len(expected) == 320
    assert n_params(model) == 25_557_032


def test_resnet18_keys_and_parameter_count():
    model = resnet18()
    assert shapes(model) == torchvision_resnet_keys(RESNET18_STAGES, bottleneck=False)
    assert n_params(model) == 11_689_512


def test_resnet50_v15_stride_on_3x3_and_forward_shapes():
    model = _resnet50().eval()
    first = model.layer2[0]
    assert first.conv1.stride == (1, 1) and first.conv2.stride == (2, 2)
    assert first.downsample[0].stride == (2, 2)
    assert not any(m.bias is not None for m in model.modules() if isinstance(m, nn.Conv2d))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert model.features(x).shape == (2, 2048, 2, 2)
        assert model(x).shape == (2, 1000)
    assert model.num_features == 2048


def test_resnet_without_classifier_and_narrow_width():
    model = resnet18(num_classes=0, width=8)
    assert isinstance(model.fc, nn.Identity) and model.num_features == 64
    assert model(torch.randn(3, 3, 32, 32)).shape == (3, 64)
    with pytest.raises(ValueError, match="pretrained weights need width=64"):
        resnet18("unused.pth", width=8)
    with pytest.raises(ValueError, match=r"shape \(N, 3, H, W\)"):
        model(torch.randn(2, 1, 32, 32))


def test_a_numpy_integer_class_count_is_accepted():
    """Issue 38: num_classes=numpy.int64(0) is accepted like 0; True is refused."""
    import numpy as np

    assert resnet18(num_classes=np.int64(0)) is not None
    with pytest.raises(ValueError, match="num_classes must be an int"):
        resnet18(num_classes=True)

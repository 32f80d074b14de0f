"""Tests of dmlbook.data.batches.normalization: the backbones' input conventions (channel order, range,
mean and standard deviation).

Expected values are the published constants (torchvision's ImageNet statistics; the Caffe
BN-Inception port's BGR means) worked out by hand, and the docstring's formula written as a loop.
"""

from __future__ import annotations

import pytest
import torch

from dmlbook.data.batches.normalization import (
    BN_INCEPTION,
    IMAGENET,
    Normalization,
    normalization_for,
)


def test_imagenet_constants():
    assert IMAGENET.channels == "RGB" and IMAGENET.max_value == 1.0
    assert IMAGENET.mean == (0.485, 0.456, 0.406) and IMAGENET.std == (0.229, 0.224, 0.225)
    x = torch.zeros(1, 3, 2, 2)
    x[:, 0] = 255.0  # pure red
    out = IMAGENET(x)
    torch.testing.assert_close(
        out[0, :, 0, 0], torch.tensor([(1 - 0.485) / 0.229, -0.456 / 0.224, -0.406 / 0.225])
    )


def test_bn_inception_is_bgr_0_255():
    assert BN_INCEPTION.channels == "BGR" and BN_INCEPTION.max_value == 255.0
    assert BN_INCEPTION.mean == (104.0, 117.0, 128.0) and BN_INCEPTION.std == (1.0, 1.0, 1.0)
    x = torch.zeros(1, 3, 2, 2)
    x[:, 0] = 255.0  # red
    x[:, 1] = 10.0  # a little green
    out = BN_INCEPTION(x)
    # channel 0 is blue, channel 2 red, in the 0-255 range minus the mean
    torch.testing.assert_close(
        out[0, :, 0, 0], torch.tensor([0.0 - 104.0, 10.0 - 117.0, 255.0 - 128.0])
    )


def test_normalization_names():
    assert normalization_for("resnet50") is IMAGENET and normalization_for("ResNet-18") is IMAGENET
    assert (
        normalization_for("bn_inception") is BN_INCEPTION
        and normalization_for("BNInception") is BN_INCEPTION
    )
    custom = Normalization("RGB", 255.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    assert normalization_for(custom) is custom
    with pytest.raises(ValueError, match="bn_inception"):
        normalization_for("vit")
    with pytest.raises(ValueError, match="RGB"):
        Normalization("HSV", 1.0, (0, 0, 0), (1, 1, 1))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float64], ids=["uint8", "float64"])
def test_any_normalization_is_the_documented_formula(dtype):
    norm = Normalization("BGR", 2.0, (0.1, -0.2, 0.3), (0.5, 2.0, 4.0))
    x = torch.randint(0, 256, (2, 3, 3, 4), generator=torch.Generator().manual_seed(0)).to(dtype)
    out = norm(x)
    assert out.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    for c, src in enumerate((2, 1, 0)):  # output channel c reads input channel src (BGR)
        expected = (x[:, src].double() * 2.0 / 255 - norm.mean[c]) / norm.std[c]
        torch.testing.assert_close(out[:, c].double(), expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"shape \(B, 3, H, W\), got \(3, 3, 4\)"):
        norm(x[0])
    with pytest.raises(ValueError, match="std positive"):
        Normalization("RGB", 1.0, (0, 0, 0), (1, 0, 1))

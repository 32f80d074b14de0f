"""Tests of dmlbook.models.bn_inception against an independent, hand-written layer table.

The ``pretrainedmodels`` port does not import here, so the expected keys are every convolution of
Cadene's ``pretrainedmodels/models/bninception.py`` (commit
181b05df642c83345d06db17cbd5357fc0e8734c), transcribed as ``name in out kernel``: 69 biased
convolutions each followed by ``<name>bn_keys``, then ``last_linear`` (1024 -> 1000): 11,295,240
parameters; 485 state-dict entries, 416 without ``num_batches_tracked`` (the port's file predates
those counters).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from dmlbook.models import BNInception, bn_inception
from dmlbook.models.bn_inception import BN_INCEPTION_INPUT, squeeze_bn

from .layer_tables import bn_keys, conv_keys, n_params, port_style_state, shapes

pytestmark = pytest.mark.usefixtures("one_thread")


# Cadene's bninception.py, constructor order: name, in channels, out channels, kernel.
BN_INCEPTION_CONVS = """
conv1_7x7_s2 3 64 7
conv2_3x3_reduce 64 64 1
conv2_3x3 64 192 3
inception_3a_1x1 192 64 1
inception_3a_3x3_reduce 192 64 1
inception_3a_3x3 64 64 3
inception_3a_double_3x3_reduce 192 64 1
inception_3a_double_3x3_1 64 96 3
inception_3a_double_3x3_2 96 96 3
inception_3a_pool_proj 192 32 1
inception_3b_1x1 256 64 1
inception_3b_3x3_reduce 256 64 1
inception_3b_3x3 64 96 3
inception_3b_double_3x3_reduce 256 64 1
inception_3b_double_3x3_1 64 96 3
inception_3b_double_3x3_2 96 96 3
inception_3b_pool_proj 256 64 1
inception_3c_3x3_reduce 320 128 1
inception_3c_3x3 128 160 3
inception_3c_double_3x3_reduce 320 64 1
inception_3c_double_3x3_1 64 96 3
inception_3c_double_3x3_2 96 96 3
inception_4a_1x1 576 224 1
inception_4a_3x3_reduce 576 64 1
inception_4a_3x3 64 96 3
inception_4a_double_3x3_reduce 576 96 1
inception_4a_double_3x3_1 96 128 3
inception_4a_double_3x3_2 128 128 3
inception_4a_pool_proj 576 128 1
inception_4b_1x1 576 192 1
inception_4b_3x3_reduce 576 96 1
inception_4b_3x3 96 128 3
inception_4b_double_3x3_reduce 576 96 1
inception_4b_double_3x3_1 96 128 3
inception_4b_double_3x3_2 128 128 3
inception_4b_pool_proj 576 128 1
inception_4c_1x1 576 160 1
inception_4c_3x3_reduce 576 128 1
inception_4c_3x3 128 160 3
inception_4c_double_3x3_reduce 576 128 1
inception_4c_double_3x3_1 128 160 3
inception_4c_double_3x3_2 160 160 3
inception_4c_pool_proj 576 128 1
inception_4d_1x1 608 96 1
inception_4d_3x3_reduce 608 128 1
inception_4d_3x3 128 192 3
inception_4d_double_3x3_reduce 608 160 1
inception_4d_double_3x3_1 160 192 3
inception_4d_double_3x3_2 192 192 3
inception_4d_pool_proj 608 128 1
inception_4e_3x3_reduce 608 128 1
inception_4e_3x3 128 192 3
inception_4e_double_3x3_reduce 608 192 1
inception_4e_double_3x3_1 192 256 3
inception_4e_double_3x3_2 256 256 3
inception_5a_1x1 1056 352 1
inception_5a_3x3_reduce 1056 192 1
inception_5a_3x3 192 320 3
inception_5a_double_3x3_reduce 1056 160 1
inception_5a_double_3x3_1 160 224 3
inception_5a_double_3x3_2 224 224 3
inception_5a_pool_proj 1056 128 1
inception_5b_1x1 1024 352 1
inception_5b_3x3_reduce 1024 192 1
inception_5b_3x3 192 320 3
inception_5b_double_3x3_reduce 1024 192 1
inception_5b_double_3x3_1 192 224 3
inception_5b_double_3x3_2 224 224 3
inception_5b_pool_proj 1024 128 1
"""


def port_bn_inception_keys(counters: bool = True) -> dict:
    keys: dict = {}
    for line in BN_INCEPTION_CONVS.split("\n"):
        if line.strip():
            name, c_in, c_out, k = line.split()
            conv_keys(keys, name, int(c_in), int(c_out), int(k), bias=True)
            bn_keys(keys, name + "_bn", int(c_out), counter=counters)
    keys["last_linear.weight"] = (1000, 1024)
    keys["last_linear.bias"] = (1000,)
    return keys


def test_bn_inception_keys_match_the_pretrained_port():
    model = BNInception()
    expected = port_bn_inception_keys()
    assert list(shapes(model)) == list(expected)
    assert shapes(model) == expected
    assert len(expected) == 485 and len(port_bn_inception_keys(counters=False)) == 416
    assert n_params(model) == 11_295_240
    assert sum(isinstance(m, nn.Conv2d) for m in model.modules()) == 69


def test_bn_inception_forward_shapes_and_input_spec():
    model = BNInception().eval()
    with torch.no_grad():
        assert model.features(torch.randn(1, 3, 224, 224)).shape == (1, 1024, 7, 7)
        assert model.features(torch.randn(2, 3, 64, 64)).shape == (2, 1024, 2, 2)
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 1000)
        assert model.features(torch.randn(1, 3, 227, 227)).shape == (1, 1024, 7, 7)  # MS crop
    with pytest.raises(ValueError, match="32k-1 to 32k\\+6"):
        model.features(torch.randn(1, 3, 112, 112))  # 4e: strided conv 4x4, max pool 3x3
    assert BN_INCEPTION_INPUT.color == "BGR" and BN_INCEPTION_INPUT.scale == 255.0
    assert BN_INCEPTION_INPUT.mean == (104.0, 117.0, 128.0)


def test_bn_inception_batchnorm_momentum_is_pytorch_convention():
    model = BNInception()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 69 and all(m.momentum == 0.1 and m.eps == 1e-5 for m in bns)
    with pytest.raises(ValueError, match="Caffe's convention"):
        BNInception(bn_momentum=0.9)
    # One training step moves the running mean 10 % of the way to the batch mean, no more.
    bn = model.conv1_7x7_s2_bn
    before = bn.running_mean.clone()
    seen = {}
    model.conv1_7x7_s2.register_forward_hook(lambda m, i, o: seen.update(out=o.detach()))
    model.train()(torch.randn(2, 3, 64, 64) * 50)
    batch_mean = seen["out"].mean(dim=(0, 2, 3))
    assert torch.allclose(bn.running_mean, 0.9 * before + 0.1 * batch_mean, atol=1e-4)


def test_bn_inception_builder_squeezes_and_drops_the_classifier(tmp_path):
    src = BNInception()
    path = tmp_path / "port.pth"
    torch.save(port_style_state(src), path)
    model = bn_inception(path, num_classes=0)
    assert isinstance(model.last_linear, nn.Identity)
    assert torch.equal(
        model.inception_5b_pool_proj_bn.running_var, src.inception_5b_pool_proj_bn.running_var
    )
    assert sorted(model.load_report.ignored) == ["last_linear.bias", "last_linear.weight"]


def test_squeeze_bn_only_touches_batchnorm_tensors():
    state = {
        "a_bn.weight": torch.ones(1, 4),
        "a_bn.num_batches_tracked": torch.tensor(3),
        "a.weight": torch.ones(1, 4),
    }
    out = squeeze_bn(state)
    assert out["a_bn.weight"].shape == (4,) and out["a.weight"].shape == (1, 4)


def test_a_numpy_integer_class_count_is_accepted():
    """Issue 38: num_classes=numpy.int64(0) is accepted like 0; True is refused."""
    import numpy as np

    assert BNInception(num_classes=np.int64(0)) is not None
    with pytest.raises(ValueError, match="num_classes must be an int"):
        BNInception(num_classes=True)

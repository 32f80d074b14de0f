"""Tests of dmlbook.engine.data: a split as a source of model-ready batches, and its errors."""

from __future__ import annotations

import pytest
import torch
from tiny_run import tiny_config

from dmlbook.data.base.dataset import EmbeddedDataset
from dmlbook.engine import ConfigError, load_config
from dmlbook.engine.data import Source, build_splits
from dmlbook.models.pretrained import InputSpec

CPU = torch.device("cpu")
#: torchvision's ImageNet statistics, written out (the RGB, [0, 1] input of a ResNet).
MEAN, STD = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])


def _images(n: int = 7, channels: int = 3, side: int = 8) -> EmbeddedDataset:
    x = torch.rand(n, channels, side, side, generator=torch.Generator().manual_seed(0))
    return EmbeddedDataset(x, torch.arange(n) % 3, name="tiny", split="test")


def _cfg(tmp_path, **train):
    data = {"crop": 8, "resize": 8, "scale": [0.5, 1.0]}
    return load_config(tiny_config(tmp_path / "run", data=data, train=train))


def test_eval_batches_are_the_uint8_images_normalised_in_order(tmp_path):
    dataset = _images()
    source = Source(dataset, _cfg(tmp_path), CPU, InputSpec(), train=False)
    assert len(source) == 7 and torch.equal(source.labels, dataset.labels)
    pixels = (dataset.inputs * 255).round() / 255  # stored once as uint8
    expected = (pixels - MEAN[:, None, None]) / STD[:, None, None]
    got = torch.cat(list(source.eval_batches(3)))
    assert torch.allclose(got, expected, atol=1e-6)
    shard = torch.cat(list(source.eval_batches(2, bounds=(2, 5))))  # one process's share
    assert torch.allclose(shard, expected[2:5], atol=1e-6)
    assert source.augment is None  # no training transform for an evaluation split


def test_train_batches_follow_the_generator_and_the_memory_format(tmp_path):
    source = Source(_images(), _cfg(tmp_path, channels_last=True), CPU, InputSpec(), train=True)
    index = [torch.tensor([0, 1, 2, 3]), torch.tensor([4, 5, 6, 0])]

    def batches(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(source.train_batches(index, torch.Generator().manual_seed(seed)))

    first, again, other = batches(1), batches(1), batches(2)
    for (x, y), (x2, _), idx in zip(first, again, index, strict=True):
        assert x.shape == (4, 3, 8, 8) and torch.equal(y, idx % 3)
        assert torch.equal(x, x2) and x.is_contiguous(memory_format=torch.channels_last)
    assert not torch.equal(first[0][0], other[0][0])  # the augmentation is random per seed


def test_splits_that_cannot_be_read_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"inputs of shape \(1, 8, 8\); .* RGB images"):
        Source(_images(channels=1), _cfg(tmp_path), CPU, InputSpec(), train=False)
    cfg = load_config(tiny_config(tmp_path / "run"), ["data.test_split=val"])
    with pytest.raises(ConfigError, match="has no split 'val'; its splits are train, test"):
        build_splits(cfg, CPU, InputSpec())
    cfg = load_config(tiny_config(tmp_path / "run"), data_dir=tmp_path)
    with pytest.raises(ConfigError, match="'synthetic' is built in and takes no data folder"):
        build_splits(cfg, CPU, InputSpec())


def test_a_numpy_integer_batch_size_reads_the_images_in_order():
    """Issue 38: batches(numpy.int64(3)) is batches(3) (it used to iterate over the integer)."""
    import numpy as np

    from dmlbook.engine.data import _TensorImages

    images = _TensorImages(_images())
    got = [lab.tolist() for _, lab, _ in images.batches(np.int64(3), device=torch.device("cpu"))]
    want = [lab.tolist() for _, lab, _ in images.batches(3, device=torch.device("cpu"))]
    assert got == want and len(got) == 3

"""Tests of dmlbook.data.cache.cached_dataset: ``CachedImageDataset``, reading a split from the cache.

Most tests read the cache of the eight images in ``image_files.py`` (fixture ``cached``); the
first one builds an :class:`~dmlbook.data.cache.image_cache_file.ImageCache` by hand, so that what the
data set returns is checked against an array the test wrote.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dmlbook.data import PKSampler
from dmlbook.data.cache.cached_dataset import CachedImageDataset
from dmlbook.data.cache.image_cache_file import ImageCache

from ..image_files import SIZE


def test_items_batches_and_subsets_read_the_cache_rows():
    cells = np.arange(4 * 2 * 2 * 3, dtype=np.uint8).reshape(4, 2, 2, 3)
    cache = ImageCache(
        path=Path("hand-made.npy"),
        images=cells,
        image_sizes=np.full((4, 2), 2),
        regions=np.array([[0, 0, 2, 2]] * 4),
        manifest={"size": 2, "fit": "crop"},
    )
    ds = CachedImageDataset(
        cache, [5, 6, 5, 7], "toy", "test", metadata={"id": torch.tensor([10, 11, 12, 13])}
    )
    image, label = ds[3]
    assert image.dtype == torch.uint8 and int(label) == 7
    np.testing.assert_array_equal(image.numpy(), cells[3].transpose(2, 0, 1))
    sub = ds.subset([3, 1])
    assert sub.rows.tolist() == [3, 1] and sub.metadata["id"].tolist() == [13, 11]
    np.testing.assert_array_equal(
        sub.batch([0, 1]).images.numpy(), cells[[3, 1]].transpose(0, 3, 1, 2)
    )
    on_cpu = next(iter(ds.batches(4, device="cpu", prefetch=0)))
    assert torch.equal(on_cpu.images, ds.batch(torch.arange(4)).images)
    with pytest.raises(ValueError, match="3 labels for 4 cached images"):
        CachedImageDataset(cache, [0, 1, 2], "toy", "test")
    with pytest.raises(ValueError, match="prefetch must be a non-negative int"):
        next(ds.batches(2, prefetch=-1))


def test_dataset_conventions(cached):
    assert len(cached) == 8 and cached.num_classes == 2 and cached.class_counts().tolist() == [4, 4]
    assert cached.input_shape == (3, SIZE, SIZE)
    assert cached.describe() == "toy/train: 8 images, 2 classes, 4-4 per class, cached 32x32 (crop)"
    img, label = cached[5]
    assert img.dtype == torch.uint8 and img.shape == (3, SIZE, SIZE) and int(label) == 1
    np.testing.assert_array_equal(img.permute(1, 2, 0).numpy(), cached.cache.images[5])


def test_batch(cached):
    b = cached.batch(torch.tensor([6, 1, 6]))
    assert b.images.shape == (3, 3, SIZE, SIZE) and b.images.dtype == torch.uint8
    assert b.images.is_contiguous(memory_format=torch.channels_last)
    assert b.labels.tolist() == [1, 0, 1] and b.indices.tolist() == [6, 1, 6]
    assert b.regions.tolist() == [[0, 0, SIZE, SIZE]] * 3
    torch.testing.assert_close(b.images[1], cached[1][0])
    images, labels, regions, indices = cached.batch([0])  # a NamedTuple
    assert images.shape[0] == 1


def test_batches_in_order_and_sampled(cached):
    got = list(cached.batches(3))
    assert [len(b.labels) for b in got] == [3, 3, 2]
    assert torch.cat([b.indices for b in got]).tolist() == list(range(8))
    sampler = PKSampler(cached.labels, batch_size=4, k=2, seed=1)
    threaded = [b.indices for b in cached.batches(sampler, prefetch=2)]
    plain = [b.indices for b in cached.batches(sampler, prefetch=0)]
    assert len(threaded) == len(sampler) and all(
        torch.equal(a, b) for a, b in zip(threaded, plain, strict=True)
    )
    first = next(iter(cached.batches(sampler)))  # stopping early must not hang
    assert first.labels.shape == (4,)


def test_batches_propagate_errors(cached):
    with pytest.raises(IndexError):
        list(cached.batches([torch.tensor([0, 1]), torch.tensor([99])]))
    with pytest.raises(ValueError, match="batch size"):
        list(cached.batches(0))


def test_subset_view(cached):
    sub = cached.subset(cached.labels == 1)
    assert len(sub) == 4 and sub.rows.tolist() == [4, 5, 6, 7]
    torch.testing.assert_close(sub[0][0], cached[4][0])
    torch.testing.assert_close(sub.batch([1]).images, cached.batch([5]).images)
    assert cached.subset([5, 4]).rows.tolist() == [5, 4]
    with pytest.raises(ValueError, match=f"a boolean mask needs {len(cached)} entries, got 2"):
        cached.subset(torch.tensor([True, False]))


def test_pad_regions(images, tmp_path):
    padded = images.cached(SIZE, fit="pad", cache_dir=tmp_path / "cache", progress=False)
    assert padded.regions[5].tolist() == [8, 0, 16, 32]  # 70 x 35
    assert padded.regions[1].tolist() == [0, 4, 32, 24]  # 30 x 40
    assert padded.batch([5]).regions.tolist() == [[8, 0, 16, 32]]
    assert padded.describe().endswith("cached 32x32 (pad)")


def test_a_numpy_integer_batch_size_and_prefetch_are_accepted(cached):
    """Issue 38: batches(numpy.int64(3), prefetch=numpy.int64(1)) is batches(3, prefetch=1)."""
    got = [b.labels.tolist() for b in cached.batches(np.int64(3), prefetch=np.int64(1))]
    assert got == [b.labels.tolist() for b in cached.batches(3, prefetch=1)]
    with pytest.raises(ValueError, match="a batch size must be a positive int"):
        next(iter(cached.batches(True)))

"""Tests of dmlbook.data.benchmarks.image_folder: ``ImageListDataset``, a split as image files with labels.

Decoded pixels are compared with the arrays the test wrote into lossless PNG files.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from dmlbook.data.benchmarks import cub as cub_module
from dmlbook.data.benchmarks import sop as sop_module
from dmlbook.data.benchmarks.image_folder import ImageListDataset


def test_corrupt_image_named(cub_dir):
    ds = cub_module.load("train", root=cub_dir, allow_partial=True)
    ds.path(0).write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=str(ds.path(0)).replace("\\", "\\\\")):
        ds[0]


def test_subset_keeps_alignment(sop_dir):
    ds = sop_module.load("train", root=sop_dir, allow_partial=True)
    sub = ds.subset([4, 0])
    assert sub.paths == [ds.paths[4], ds.paths[0]]
    assert sub.labels.tolist() == [int(ds.labels[4]), int(ds.labels[0])]
    assert sub.metadata["super_label"].tolist() == [
        int(ds.metadata["super_label"][4]),
        int(ds.metadata["super_label"][0]),
    ]
    mask = ds.labels == ds.labels[0]
    assert len(ds.subset(mask)) == int(mask.sum())
    assert ds.subset(np.array([4, 0])).paths == sub.paths
    with pytest.raises(ValueError, match=f"a boolean mask needs {len(ds)} entries, got 3"):
        ds.subset(mask[:3])


def test_items_are_the_files_pixels_as_uint8_channels_first(tmp_path):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)  # height 5, width 7
    grey = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    Image.fromarray(grey).save(tmp_path / "grey.png")
    ds = ImageListDataset(tmp_path, ["rgb.png", "grey.png"], torch.tensor([3, 8]), "toy", "test")
    image, label = ds[0]
    assert image.dtype == torch.uint8 and image.shape == (3, 5, 7) and int(label) == 3
    np.testing.assert_array_equal(image.numpy(), rgb.transpose(2, 0, 1))
    image, label = ds[1]  # grey becomes three equal channels
    np.testing.assert_array_equal(image.numpy(), np.stack([grey] * 3))
    assert ds.path(1) == tmp_path / "grey.png" and ds.files == [ds.path(0), ds.path(1)]


def test_construction_checks_and_conventions(tmp_path):
    with pytest.raises(ValueError, match="2 paths but 3 labels; pass one label per image"):
        ImageListDataset(tmp_path, ["a.jpg", "b.jpg"], torch.tensor([0, 1, 1]), "toy", "train")
    with pytest.raises(ValueError, match=r"metadata\['bbox'\] must be a tensor with 2 rows"):
        ImageListDataset(
            tmp_path,
            ["a.jpg", "b.jpg"],
            [0, 1],
            "toy",
            "train",
            metadata={"bbox": torch.zeros(3, 4)},
        )
    ds = ImageListDataset(str(tmp_path), ["a.jpg"], [7], "toy", "train", class_names=range(8))
    assert ds.root == tmp_path and ds.labels.dtype == torch.int64
    assert ds.class_names[7] == "7"
    empty = ds.subset([])
    assert len(empty) == 0 and empty.describe() == "toy/train: 0 images"

"""Tests of dmlbook.data's registry, ``EmbeddedDataset`` and the digits data set."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from dmlbook.data import (
    EmbeddedDataset,
    available_datasets,
    dataset_info,
    load_dataset,
    register_dataset,
)
from dmlbook.data.registry import _REGISTRY

# ------------------------------------------------------------------------------------------
# registry
# ------------------------------------------------------------------------------------------


def test_available_datasets():
    names = available_datasets()
    assert names == sorted(names)
    assert {"digits", "synthetic"} <= set(names)


def test_unknown_name():
    with pytest.raises(
        ValueError, match=r"Unknown data set 'xyz'\. Available: .*digits, .*synthetic\."
    ):
        load_dataset("xyz")


@pytest.mark.parametrize("name", ["digits", "synthetic"])
def test_unknown_split(name):
    with pytest.raises(ValueError, match=r"Unknown split 'val'.*'train', 'test'"):
        load_dataset(name, "val")


@pytest.mark.parametrize("name", ["digits", "synthetic"])
def test_unknown_option_is_named(name):
    with pytest.raises(TypeError, match=r"Unknown option 'colour'.*Valid options"):
        load_dataset(name, "train", colour=True)


def test_name_is_case_insensitive():
    assert load_dataset("DIGITS").name == "digits"


def test_register_dataset_and_its_checks():
    def toy(split: str, *, size: int = 4) -> EmbeddedDataset:
        return EmbeddedDataset(torch.zeros(size, 2), torch.arange(size) % 2, "toy", split)

    try:
        register_dataset("toy", toy, splits=("all",), summary="a toy")
        assert "toy" in available_datasets()
        assert dataset_info("toy").options() == {"size": 4}
        assert len(load_dataset("toy", "all", size=6)) == 6
        with pytest.raises(ValueError, match="Valid splits: 'all'"):
            load_dataset("toy", "train")
        with pytest.raises(ValueError, match="already registered"):
            register_dataset("toy", toy)
        with pytest.raises(ValueError, match="module:function"):
            register_dataset("toy2", "no_colon_here")
    finally:
        _REGISTRY.pop("toy", None)
    assert "toy" not in available_datasets()


# ------------------------------------------------------------------------------------------
# EmbeddedDataset
# ------------------------------------------------------------------------------------------


def test_embedded_dataset_basics():
    x = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    y = torch.tensor([3, 1, 3, 1, 1, 7])
    ds = EmbeddedDataset(x, y, "toy", "train", class_names=None)
    assert len(ds) == 6
    xi, yi = ds[2]
    assert torch.equal(xi, x[2]) and int(yi) == 3
    xb, yb = ds[torch.tensor([0, 5])]
    assert xb.shape == (2, 4) and yb.tolist() == [3, 7]
    assert ds.classes.tolist() == [1, 3, 7]
    assert ds.num_classes == 3
    assert ds.class_counts().tolist() == [3, 2, 1]
    assert ds.input_shape == (4,)
    assert ds.describe() == "toy/train: 6 samples, 3 classes, input shape (4,), 1-3 per class"
    assert "toy/train" in repr(ds)
    sub = ds.subset(ds.labels != 7)
    assert len(sub) == 5 and sub.num_classes == 2


def test_embedded_dataset_checks():
    with pytest.raises(ValueError, match="one label per sample"):
        EmbeddedDataset(torch.zeros(3, 2), torch.zeros(4, dtype=torch.long), "t", "train")
    with pytest.raises(TypeError, match="floating point"):
        EmbeddedDataset(torch.zeros(3, 2, dtype=torch.uint8), torch.zeros(3), "t", "train")
    with pytest.raises(TypeError, match="torch.Tensor"):
        EmbeddedDataset(np.zeros((3, 2)), torch.zeros(3), "t", "train")
    with pytest.raises(ValueError, match="1-D"):
        EmbeddedDataset(torch.zeros(3, 2), torch.zeros(3, 1), "t", "train")
    ds = EmbeddedDataset(torch.zeros(3, 2, dtype=torch.float64), torch.zeros(3), "t", "train")
    assert ds.inputs.dtype == torch.float32 and ds.labels.dtype == torch.int64


def test_embedded_dataset_in_a_dataloader():
    ds = load_dataset("digits", "test")
    x, y = next(iter(DataLoader(ds, batch_size=16, shuffle=False)))
    assert x.shape == (16, 64) and y.shape == (16,) and y.dtype == torch.int64


# ------------------------------------------------------------------------------------------
# digits
# ------------------------------------------------------------------------------------------


def test_digits_splits():
    train = load_dataset("digits", "train")
    test = load_dataset("digits", "test")
    assert set(train.labels.tolist()) == {0, 1, 2, 3, 4}
    assert set(test.labels.tolist()) == {5, 6, 7, 8, 9}
    assert len(train) + len(test) == 1797
    assert (len(train), len(test)) == (901, 896)
    for ds in (train, test):
        assert ds.inputs.dtype == torch.float32 and ds.labels.dtype == torch.int64
        assert ds.inputs.shape[1:] == (64,)
        assert float(ds.inputs.min()) == 0.0 and float(ds.inputs.max()) == 1.0
        assert ds.class_names == [str(d) for d in range(10)]
        assert ds.name == "digits"
    assert train.split == "train" and test.split == "test"
    assert test.describe().startswith("digits/test: 896 samples, 5 classes, input shape (64,)")


def test_digits_as_images():
    flat = load_dataset("digits", "train")
    img = load_dataset("digits", "train", as_images=True)
    assert img.inputs.shape == (901, 1, 8, 8)
    assert torch.equal(img.inputs.reshape(901, 64), flat.inputs)
    with pytest.raises(TypeError, match="as_images"):
        load_dataset("digits", "train", as_images="yes")

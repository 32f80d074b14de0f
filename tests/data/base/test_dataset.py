"""Tests of dmlbook.data.base.dataset: ``EmbeddedDataset`` (a split held in memory) and ``ClassStats``.

Expected class statistics are counted by hand from the labels each test writes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from dmlbook.data import load_dataset
from dmlbook.data.base.dataset import EmbeddedDataset


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


def test_indexing_subsets_names_and_an_empty_split():
    x = torch.arange(10, dtype=torch.float32).reshape(5, 2)
    ds = EmbeddedDataset(x, np.array([4, 4, 0, 2, 0]), "toy", "test", class_names=range(5))
    assert ds.class_names == ["0", "1", "2", "3", "4"] and ds.labels.dtype == torch.int64
    xs, ys = ds[1:3]
    assert xs.tolist() == [[2.0, 3.0], [4.0, 5.0]] and ys.tolist() == [4, 0]
    sub = ds.subset(torch.tensor([False, True, False, True, True]))
    assert sub.inputs[:, 0].tolist() == [2.0, 6.0, 8.0] and sub.labels.tolist() == [4, 2, 0]
    assert sub.class_names == ds.class_names and (sub.name, sub.split) == ("toy", "test")
    assert ds.subset([]).describe() == "toy/test: 0 samples"
    with pytest.raises(ValueError, match=r"at least 2 dimensions, got shape \(5,\)"):
        EmbeddedDataset(torch.zeros(5), torch.zeros(5), "toy", "test")

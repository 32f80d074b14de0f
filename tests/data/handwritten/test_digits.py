"""Tests of dmlbook.data.handwritten.digits: scikit-learn's digits as a zero-shot split (0-4 train, 5-9 test).

The reference is ``sklearn.datasets.load_digits`` itself, read here directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dmlbook.data import load_dataset
from dmlbook.data.handwritten import digits


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


@pytest.mark.parametrize(("split", "classes"), [("train", range(5)), ("test", range(5, 10))])
def test_samples_are_sklearns_in_order_scaled_from_0_16(split, classes):
    from sklearn.datasets import load_digits

    bunch = load_digits()
    keep = np.isin(bunch.target, list(classes))
    ds = digits.load(split)
    np.testing.assert_array_equal(ds.inputs.numpy(), (bunch.data[keep] / 16).astype(np.float32))
    assert ds.labels.tolist() == bunch.target[keep].tolist()
    assert ds.class_names[int(ds.labels[0])] == str(int(bunch.target[keep][0]))
    with pytest.raises(ValueError, match="Valid splits: 'train', 'test'"):
        digits.load("all")

"""Tests of dmlbook.data.registry: names, splits and options of the data sets, and registering one.

``EmbeddedDataset`` is tested in ``test_dataset.py``, the digits in ``test_digits.py``.
"""

from __future__ import annotations

import pytest
import torch

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

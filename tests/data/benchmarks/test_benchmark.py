"""Tests of dmlbook.data.benchmarks.benchmark, the skeleton the four benchmark loaders share, and of their
registry entries, on tiny copies in the official layouts (``tests/data/official_layouts.py``).

Each loader's own reading is tested in its mirror file: ``test_cub.py``, ``test_cars.py``,
``test_sop.py``, ``test_inshop.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlbook.data import (
    ImageListDataset,
    IncompleteDatasetError,
    available_datasets,
    dataset_info,
    load_dataset,
)
from dmlbook.data.benchmarks import cars as cars_module
from dmlbook.data.benchmarks import cub as cub_module
from dmlbook.data.benchmarks import inshop as inshop_module
from dmlbook.data.benchmarks import sop as sop_module
from dmlbook.data.benchmarks.benchmark import check_split_size, keep_existing

# ------------------------------------------------------------------------------------------
# registry
# ------------------------------------------------------------------------------------------


def test_registered():
    assert {"cub", "cars", "sop", "inshop"} <= set(available_datasets())
    assert dataset_info("inshop").splits == ("train", "query", "gallery")
    assert dataset_info("cub").options() == {"root": None, "allow_partial": False}
    assert dataset_info("cars").options() == {
        "root": None,
        "layout": "auto",
        "allow_partial": False,
    }


def test_registry_forwards_options(cub_dir):
    ds = load_dataset("CUB", "test", root=cub_dir, allow_partial=True)
    assert isinstance(ds, ImageListDataset) and ds.split == "test"
    with pytest.raises(TypeError, match="allow_partial=False"):
        load_dataset("cub", "train", root=cub_dir, partial=True)
    with pytest.raises(ValueError, match="Valid splits: 'train', 'query', 'gallery'"):
        load_dataset("inshop", "test")


def test_data_root_from_environment(cub_dir, monkeypatch):
    monkeypatch.setenv("DMLBOOK_DATA", str(cub_dir.parent))
    ds = load_dataset("cub", "train", allow_partial=True)
    assert ds.root == cub_dir
    monkeypatch.delenv("DMLBOOK_DATA")
    with pytest.raises(ValueError, match="set DMLBOOK_DATA"):
        load_dataset("cub", "train")


# ------------------------------------------------------------------------------------------
# the shared skeleton (dmlbook.data.benchmarks.benchmark)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "splits"),
    [
        (cub_module, "'train', 'test'"),
        (cars_module, "'train', 'test'"),
        (sop_module, "'train', 'test'"),
        (inshop_module, "'train', 'query', 'gallery'"),
    ],
)
def test_every_loader_checks_its_split_the_same_way(module, splits, tmp_path):
    name = module.LAYOUT.dataset
    with pytest.raises(
        ValueError, match=rf"Unknown split 'val' for data set '{name}'\. Valid splits: {splits}\."
    ):
        module.load("val", root=tmp_path)
    with pytest.raises(FileNotFoundError, match=rf"not found under {tmp_path}"):
        module.load(module.LAYOUT.splits[0], root=tmp_path)


def test_copy_may_sit_under_its_folder_or_an_alias(inshop_dir, sop_dir, tmp_path):
    """``root`` may be the copy, its parent, or the parent of an alias folder (one search)."""
    assert inshop_module.LAYOUT.find(inshop_dir.parent) == inshop_dir
    moved = tmp_path / "shared" / "In-shop Clothes Retrieval Benchmark"
    moved.parent.mkdir()
    inshop_dir.rename(moved)
    ds = inshop_module.load("query", root=moved.parent, allow_partial=True)
    assert len(ds) == 3 and ds.root == moved / "Img"
    assert sop_module.LAYOUT.find(tmp_path / "nothing") is None


def test_missing_classes_are_named_by_label_without_names(sop_dir):
    with pytest.raises(IncompleteDatasetError) as e:
        sop_module.load("train", root=sop_dir)
    assert "Missing classes (11,315 of 11,318): label 3, label 4" in str(e.value)


# ------------------------------------------------------------------------------------------
# the skeleton's checks, called directly
# ------------------------------------------------------------------------------------------


def test_keep_existing_marks_the_listed_images_present_and_names_the_missing(tmp_path):
    for rel in ("a/1.jpg", "a/2.jpg", "b/3.jpg"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    listed = ["a/1.jpg", "a/gone.jpg", "b/3.jpg", "c/4.jpg"]
    args = {"dataset": "cub", "split": "train", "list_file": tmp_path / "images.txt"}
    with pytest.raises(FileNotFoundError, match=r"2 of the 4 images .*a/gone\.jpg.*allow_partial"):
        keep_existing(tmp_path, listed, allow_partial=False, **args)
    with pytest.warns(UserWarning, match="leaving out 2 of 4"):
        keep = keep_existing(tmp_path, listed, allow_partial=True, **args)
    assert keep.tolist() == [True, False, True, False]


def test_check_split_size_accepts_the_official_counts_and_names_the_missing_classes():
    labels = np.array([0, 0, 1, 1, 2, 2])
    args = {"dataset": "sop", "split": "test", "source": "Ebay_test.txt"}
    check_split_size(labels, expected_images=6, expected_classes=3, allow_partial=False, **args)
    with pytest.raises(IncompleteDatasetError, match=r"found 4 images of 2 classes .*bike, lamp"):
        check_split_size(labels[:4], expected_images=6, expected_classes=3, allow_partial=False,
                         expected_labels=[0, 1, 2, 3], class_names=["a", "b", "bike", "lamp"],
                         **args)  # fmt: skip
    check_split_size(labels[:4], expected_images=6, expected_classes=3, allow_partial=True, **args)
    with pytest.raises(IncompleteDatasetError, match="no images found"):
        check_split_size(labels[:0], expected_images=6, expected_classes=3, allow_partial=True,
                         **args)  # fmt: skip

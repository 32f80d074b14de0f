"""Tests of dmlbook.data.benchmarks.cars: Cars-196 read from tiny copies of both official layouts.

The Stanford release (``cars_annos.mat`` and ``car_ims/``, fixture ``cars_mat_dir``) and the
class-folder copy (``car_data/car_data/{train,test}/<class>/`` with ``names.csv`` and the
``anno_*.csv`` lists, fixture ``cars_folder_dir``), both from ``official_layouts.py``. Classes
1-98 are the train split, 99-196 the test split.
"""

from __future__ import annotations

import csv

import pytest

from dmlbook.data import IncompleteDatasetError
from dmlbook.data.benchmarks import cars as cars_module

from ..official_layouts import CARS_CLASSES, make_cars_folders


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("layout", ["mat", "folders"])
def test_cars_layouts(cars_mat_dir, cars_folder_dir, layout, split):
    root = cars_mat_dir if layout == "mat" else cars_folder_dir
    ds = cars_module.load(split, root=root, allow_partial=True)  # layout="auto"
    lo, hi = cars_module.CLASS_RANGES[split]
    want = {c - 1: n for c, n in CARS_CLASSES.items() if lo <= c <= hi}
    assert dict(zip(ds.classes.tolist(), ds.class_counts().tolist(), strict=True)) == want
    assert all(f.is_file() and not f.name.startswith("._") for f in ds.files)
    assert ds.metadata["bbox"].shape == (len(ds), 4)
    assert len(ds.class_names) == 196
    if layout == "mat":
        assert all(p.startswith("car_ims/") for p in ds.paths)
        assert ds.metadata["bbox"][0].tolist()[:2] == [1, 2]
    else:
        assert all(p.startswith("car_data/car_data/") for p in ds.paths)
        # the folder of each image names its class
        for path, label in zip(ds.paths, ds.labels.tolist(), strict=True):
            assert path.split("/")[3] == ds.class_names[label].replace("/", "-")


def test_cars_layouts_agree(cars_mat_dir, cars_folder_dir):
    a = cars_module.load("test", root=cars_mat_dir, layout="mat", allow_partial=True)
    b = cars_module.load("test", root=cars_folder_dir, layout="folders", allow_partial=True)
    assert sorted(a.labels.tolist()) == sorted(b.labels.tolist())


def test_cars_folders_without_csv(tmp_path):
    root = tmp_path / "cars"
    make_cars_folders(root, CARS_CLASSES, with_csv=False)
    ds = cars_module.load("train", root=root, allow_partial=True)
    want = {c - 1: n for c, n in CARS_CLASSES.items() if c <= 98}
    assert dict(zip(ds.classes.tolist(), ds.class_counts().tolist(), strict=True)) == want
    (root / "names.csv").unlink()
    with pytest.raises(FileNotFoundError, match="names.csv"):
        cars_module.load("train", root=root, allow_partial=True)


def test_cars_count_check_fires(cars_mat_dir, cars_folder_dir, monkeypatch):
    for root in (cars_mat_dir, cars_folder_dir):
        with pytest.raises(
            IncompleteDatasetError, match=r"expected 8,054 images of 98 classes"
        ) as e:
            cars_module.load("train", root=root)
        assert "8,041" not in str(e.value) and "Missing classes (" in str(e.value)
    monkeypatch.setattr(cars_module, "CLASSIFICATION_TEST", 5)  # the fixture's test split size
    for root in (cars_mat_dir, cars_folder_dir):
        with pytest.raises(IncompleteDatasetError, match=r"8,131.*classification test split"):
            cars_module.load("test", root=root)


def test_cars_strict_with_matching_counts(cars_mat_dir, monkeypatch):
    monkeypatch.setattr(cars_module, "EXPECTED", {"train": (7, 3), "test": (5, 2)})
    assert len(cars_module.load("train", root=cars_mat_dir)) == 7
    assert len(cars_module.load("test", root=cars_mat_dir)) == 5


def test_cars_missing(tmp_path, cars_mat_dir):
    with pytest.raises(FileNotFoundError, match=r"cars_annos.mat not found under .*class-folder"):
        cars_module.load("train", root=tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="cars_annos.mat"):
        cars_module.load("train", root=cars_mat_dir.parent / "nothing", layout="mat")
    with pytest.raises(ValueError, match="Unknown layout"):
        cars_module.load("train", root=cars_mat_dir, layout="kaggle")
    (cars_mat_dir / "car_ims" / "000002.jpg").unlink()
    with pytest.raises(FileNotFoundError, match="000002.jpg"):
        cars_module.load("train", root=cars_mat_dir)


def test_cars_csv_lists_missing_file(cars_folder_dir):
    with open(cars_folder_dir / "anno_train.csv", "a", newline="") as f:
        csv.writer(f).writerow(["99999.jpg", 1, 1, 2, 2, 1])
    with pytest.raises(FileNotFoundError, match="99999.jpg"):
        cars_module.load("train", root=cars_folder_dir)
    with pytest.warns(UserWarning, match="leaving out 1"):
        ds = cars_module.load("train", root=cars_folder_dir, allow_partial=True)
    assert len(ds) == 7

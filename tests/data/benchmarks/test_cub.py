"""Tests of dmlbook.data.benchmarks.cub: CUB-200-2011 read from a tiny copy in the official layout.

The copy (``official_layouts.make_cub``, fixture ``cub_dir``) holds 2-3 JPEGs of six classes,
``images.txt``, ``image_class_labels.txt``, ``classes.txt`` and macOS junk; classes 1-100 are the
train split, 101-200 the test split (the zero-shot protocol).
"""

from __future__ import annotations

import pytest
import torch

from dmlbook.data import IncompleteDatasetError
from dmlbook.data.benchmarks import cub as cub_module

from ..official_layouts import CUB_CLASSES


@pytest.mark.parametrize("split", ["train", "test"])
def test_cub_split(cub_dir, split):
    ds = cub_module.load(split, root=cub_dir, allow_partial=True)
    lo, hi = cub_module.CLASS_RANGES[split]
    want = {c - 1: n for c, n in CUB_CLASSES.items() if lo <= c <= hi}
    assert len(ds) == sum(want.values())
    assert dict(zip(ds.classes.tolist(), ds.class_counts().tolist(), strict=True)) == want
    assert ds.labels.dtype == torch.int64
    assert all(p.startswith("images/") and "._" not in p for p in ds.paths)
    assert all(f.is_file() for f in ds.files)
    assert len(ds.class_names) == 200
    assert (
        ds.class_names[int(ds.labels[0])]
        == f"{int(ds.labels[0]) + 1:03d}.Bird_{int(ds.labels[0]) + 1}"
    )
    counts = sorted(want.values())
    assert ds.describe() == (
        f"cub/{split}: {len(ds)} images, {len(want)} classes, {counts[0]}-{counts[-1]} per class"
    )
    assert str(cub_dir) in repr(ds)
    img, label = ds[0]
    assert img.dtype == torch.uint8 and img.shape == (3, 30, 40) and label == ds.labels[0]


def test_cub_root_may_be_the_parent(cub_dir):
    assert len(cub_module.load("train", root=cub_dir.parent, allow_partial=True)) == 7


def test_cub_count_check_fires(cub_dir, monkeypatch):
    with pytest.raises(
        IncompleteDatasetError, match=r"found 7 images of 3 classes.*expected 5,864"
    ) as e:
        cub_module.load("train", root=cub_dir)
    assert "allow_partial=True" in str(e.value) and "images.txt" in str(e.value)
    # the missing classes are named (fixture: classes 1, 2 and 100 of 1-100 are present)
    assert "Missing classes (97 of 100): 003.Bird_3, 004.Bird_4, 005.Bird_5" in str(e.value)
    assert "and 92 more" in str(e.value)
    # the note on the classification split only where the count is that split's size
    assert "5,794" not in str(e.value)
    monkeypatch.setattr(cub_module, "CLASSIFICATION_TEST", 7)
    with pytest.raises(IncompleteDatasetError, match=r"5,924 images.*classification test split"):
        cub_module.load("test", root=cub_dir)


def test_cub_strict_with_matching_counts(cub_dir, monkeypatch):
    monkeypatch.setattr(cub_module, "EXPECTED", {"train": (7, 3), "test": (7, 3)})
    assert len(cub_module.load("train", root=cub_dir)) == 7
    monkeypatch.setattr(cub_module, "EXPECTED", {"train": (7, 4), "test": (7, 3)})
    with pytest.raises(IncompleteDatasetError, match="of 4 classes"):
        cub_module.load("train", root=cub_dir)


def test_cub_missing_files(cub_dir, tmp_path):
    with pytest.raises(
        FileNotFoundError, match=r"CUB_200_2011/images.txt not found under .*CUB_200_2011.tgz"
    ):
        cub_module.load("train", root=tmp_path / "nothing")
    (cub_dir / "image_class_labels.txt").rename(cub_dir / "moved.txt")
    with pytest.raises(FileNotFoundError, match="image_class_labels.txt"):
        cub_module.load("train", root=cub_dir)


def test_cub_missing_image(cub_dir, monkeypatch):
    monkeypatch.setattr(cub_module, "EXPECTED", {"train": (7, 3), "test": (7, 3)})
    gone = cub_dir / "images" / "002.Bird_2" / "Bird_2_0001.jpg"
    gone.unlink()
    with pytest.raises(FileNotFoundError, match=r"1 of the 7 images listed .*Bird_2_0001.jpg"):
        cub_module.load("train", root=cub_dir)
    with pytest.warns(UserWarning, match="leaving out 1 of 7"):
        ds = cub_module.load("train", root=cub_dir, allow_partial=True)
    assert len(ds) == 6


def test_cub_inconsistent_lists(cub_dir):
    with open(cub_dir / "images.txt", "a") as f:
        f.write("999 001.Bird_1/extra.jpg\n")
    with pytest.raises(ValueError, match="image id 999"):
        cub_module.load("train", root=cub_dir, allow_partial=True)

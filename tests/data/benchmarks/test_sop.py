"""Tests of dmlbook.data.benchmarks.sop: Stanford Online Products read from a tiny copy in the official layout.

The copy (``official_layouts.make_sop``, fixture ``sop_dir``) holds ``Ebay_train.txt``,
``Ebay_test.txt`` (with their header line) and ``<super>_final/`` folders of JPEGs.
"""

from __future__ import annotations

import pytest

from dmlbook.data import IncompleteDatasetError
from dmlbook.data.benchmarks import sop as sop_module

from ..official_layouts import SOP_TEST, SOP_TRAIN


@pytest.mark.parametrize(("split", "classes"), [("train", SOP_TRAIN), ("test", SOP_TEST)])
def test_sop_split(sop_dir, split, classes):
    ds = sop_module.load(split, root=sop_dir, allow_partial=True)
    want = {c - 1: n for c, (_, n) in classes.items()}
    assert dict(zip(ds.classes.tolist(), ds.class_counts().tolist(), strict=True)) == want
    supers = {c - 1: s - 1 for c, (s, _) in classes.items()}
    assert ds.metadata["super_label"].tolist() == [supers[y] for y in ds.labels.tolist()]
    assert all(p.endswith(".JPG") for p in ds.paths) and all(f.is_file() for f in ds.files)
    assert ds.class_names is None


def test_sop_checks(sop_dir, tmp_path, monkeypatch):
    with pytest.raises(
        IncompleteDatasetError, match=r"found 7 images of 3 classes.*59,551 images of 11,318"
    ):
        sop_module.load("train", root=sop_dir)
    monkeypatch.setattr(sop_module, "EXPECTED", {"train": (7, 3), "test": (4, 2)})
    assert len(sop_module.load("test", root=sop_dir.parent)) == 4
    with pytest.raises(
        FileNotFoundError, match=r"Stanford_Online_Products/Ebay_test.txt not found"
    ):
        sop_module.load("test", root=tmp_path / "none")
    (sop_dir / "Ebay_test.txt").write_text("1 11319 1 bicycle_final/x.JPG\n")
    with pytest.raises(ValueError, match="header"):
        sop_module.load("test", root=sop_dir)

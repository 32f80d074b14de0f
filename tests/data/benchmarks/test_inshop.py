"""Tests of dmlbook.data.benchmarks.inshop: In-Shop Clothes Retrieval read from a tiny copy.

The copy (``official_layouts.make_inshop``, fixture ``inshop_dir``) holds
``Eval/list_eval_partition.txt`` (count line, header, ``image item status`` rows) and
``Img/img/...`` JPEGs: two train items, two items in both query and gallery.
"""

from __future__ import annotations

import warnings

import pytest

from dmlbook.data import IncompleteDatasetError
from dmlbook.data.benchmarks import inshop as inshop_module


def test_inshop_splits(inshop_dir):
    sizes = {"train": 5, "query": 3, "gallery": 3}
    loaded = {s: inshop_module.load(s, root=inshop_dir, allow_partial=True) for s in sizes}
    for split, ds in loaded.items():
        assert len(ds) == sizes[split] and ds.split == split
        assert all(f.is_file() for f in ds.files)
        assert all(p.startswith("img/") for p in ds.paths)
    assert loaded["train"].class_names == [f"id_0000000{i}" for i in range(1, 5)]
    q, g = loaded["query"], loaded["gallery"]
    assert set(q.labels.tolist()) == set(g.labels.tolist()) == {2, 3}
    assert not set(q.labels.tolist()) & set(loaded["train"].labels.tolist())
    assert q.class_names[int(q.labels[0])] == "id_00000003"


def test_inshop_checks(inshop_dir, tmp_path, monkeypatch):
    with pytest.raises(IncompleteDatasetError, match=r"lists 11 images.*52,712"):
        inshop_module.load("train", root=inshop_dir)
    monkeypatch.setattr(inshop_module, "TOTAL", 11)
    with pytest.raises(IncompleteDatasetError, match=r"expected 14,218 images"):
        inshop_module.load("query", root=inshop_dir)
    monkeypatch.setattr(
        inshop_module, "EXPECTED", {"train": (5, 2), "query": (3, None), "gallery": (3, None)}
    )
    assert len(inshop_module.load("gallery", root=inshop_dir)) == 3
    with pytest.raises(FileNotFoundError, match=r"Eval/list_eval_partition.txt not found"):
        inshop_module.load("train", root=tmp_path / "none")


def test_inshop_flat_layout(inshop_dir):
    """``list_eval_partition.txt`` and ``img/`` directly in the folder are accepted too."""
    (inshop_dir / "Eval" / "list_eval_partition.txt").rename(inshop_dir / "list_eval_partition.txt")
    (inshop_dir / "Img" / "img").rename(inshop_dir / "img")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = inshop_module.load("query", root=inshop_dir, allow_partial=True)
    assert len(ds) == 3 and ds.root == inshop_dir

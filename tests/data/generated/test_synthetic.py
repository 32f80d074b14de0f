"""Tests of dmlbook.data.generated.synthetic: loading a split, its option checks, the cache and the
chapters' configuration.

The classes are tested in ``test_synthetic_classes.py``, the rendering in
``test_synthetic_render.py``; the registry, ``EmbeddedDataset`` and digits in
``test_registry.py``, ``test_dataset.py`` and ``test_digits.py``.
"""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from dmlbook.data import load_dataset
from dmlbook.data.generated import synthetic

from ..synthetic_cases import SMALL, recall_at_1


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DMLBOOK_CACHE", str(folder))
    return folder


# ------------------------------------------------------------------------------------------
# synthetic: loading
# ------------------------------------------------------------------------------------------


def test_synthetic_shapes_ranges_and_splits():
    train = load_dataset("synthetic", "train", cache=False, **SMALL)
    test = load_dataset("synthetic", "test", cache=False, **SMALL)
    for ds in (train, test):
        assert len(ds) == 10 * 6
        assert ds.inputs.shape == (60, 3, 32, 32)
        assert ds.inputs.dtype == torch.float32 and ds.labels.dtype == torch.int64
        assert float(ds.inputs.min()) >= 0.0 and float(ds.inputs.max()) <= 1.0
        # stored as uint8: every value is a multiple of 1/255
        q = ds.inputs * 255
        assert torch.allclose(q, q.round(), atol=1e-4)
        assert ds.class_counts().tolist() == [6] * 10
        assert len(ds.class_names) == 20
    tr, te = set(train.labels.tolist()), set(test.labels.tolist())
    assert tr == set(range(10)) and te == set(range(10, 20))
    assert not tr & te and tr | te == set(range(20))
    assert train.class_names == test.class_names == synthetic.class_names(20)


@pytest.mark.parametrize(
    ("option", "value", "error", "match"),
    [
        ("difficulty", -0.1, ValueError, r"difficulty=-0\.1 is out of range.*\[0, 1\]"),
        ("difficulty", 1.5, ValueError, "out of range"),
        ("difficulty", float("nan"), ValueError, "out of range"),
        ("difficulty", "0.5", TypeError, "difficulty must be a number"),
        ("difficulty", True, TypeError, "difficulty must be a number"),
        ("num_classes", 21, ValueError, "must be even"),
        ("num_classes", 2, ValueError, "at least 4"),
        ("num_classes", synthetic.MAX_CLASSES + 2, ValueError, "at most 1536"),
        ("num_classes", 20.0, TypeError, "num_classes must be an int"),
        ("images_per_class", 1, ValueError, "at least 2 images"),
        ("image_size", 8, ValueError, "16 <= image_size"),
        ("seed", -1, ValueError, "non-negative"),
        ("cache", "yes", TypeError, "cache must be True or False"),
    ],
)
def test_synthetic_option_checks(option, value, error, match):
    opts = {**SMALL, "cache": False, option: value}
    with pytest.raises(error, match=match):
        load_dataset("synthetic", "train", **opts)


# ------------------------------------------------------------------------------------------
# synthetic: cache
# ------------------------------------------------------------------------------------------


def test_cache_round_trip(cache_dir, monkeypatch):
    opts = {**SMALL, "seed": 1}
    first = load_dataset("synthetic", "train", **opts)
    path = synthetic.cache_path("train", **opts)
    assert path.parent == cache_dir and path.is_file()
    assert path.name.startswith(f"synthetic-v{synthetic.GENERATOR_VERSION}-train-")
    assert [p.name for p in cache_dir.iterdir()] == [path.name]  # no temporary file left

    def fail(*args, **kwargs):
        raise AssertionError("generate() was called although the cache holds the data")

    monkeypatch.setattr(synthetic, "generate", fail)
    second = load_dataset("synthetic", "train", **opts)
    assert torch.equal(first.inputs, second.inputs) and torch.equal(first.labels, second.labels)
    # other options are another file
    assert synthetic.cache_path("train", **{**opts, "difficulty": 0.6}) != path
    assert synthetic.cache_path("test", **opts) != path


def test_cache_name_changes_with_the_generator(cache_dir, monkeypatch):
    path = synthetic.cache_path("train", **SMALL)
    version = synthetic.GENERATOR_VERSION
    monkeypatch.setattr(synthetic, "GENERATOR_VERSION", version + 1)
    assert synthetic.cache_path("train", **SMALL) != path
    monkeypatch.setattr(synthetic, "GENERATOR_VERSION", version)
    assert synthetic.cache_path("train", **SMALL) == path
    monkeypatch.setattr(synthetic, "_source_digest", lambda: "edited")
    assert synthetic.cache_path("train", **SMALL) != path


def test_cache_off_writes_nothing(cache_dir):
    load_dataset("synthetic", "train", cache=False, **SMALL)
    assert not cache_dir.exists() or not any(cache_dir.iterdir())


def test_cache_default_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("DMLBOOK_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert synthetic.cache_path("train", **SMALL).parent == tmp_path / ".cache" / "dmlbook"


@pytest.mark.parametrize("content", [b"", b"not a zip file at all", "truncate"])
def test_corrupt_cache_is_regenerated(cache_dir, content):
    fresh = load_dataset("synthetic", "test", cache=False, **SMALL)
    path = synthetic.cache_path("test", **SMALL)
    if content == "truncate":
        load_dataset("synthetic", "test", **SMALL)
        content = path.read_bytes()[:1000]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    with pytest.warns(UserWarning, match="regenerating"):
        again = load_dataset("synthetic", "test", **SMALL)
    assert torch.equal(again.inputs, fresh.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten file is valid
        assert torch.equal(load_dataset("synthetic", "test", **SMALL).inputs, fresh.inputs)


def test_cache_with_other_contents_is_regenerated(cache_dir):
    path = synthetic.cache_path("train", **SMALL)
    path.parent.mkdir(parents=True)
    np.savez(path, images=np.zeros((60, 3, 32, 32), np.uint8), key=np.array("other options"))
    with pytest.warns(UserWarning, match="regenerating"):
        ds = load_dataset("synthetic", "train", **SMALL)
    assert float(ds.inputs.std()) > 0


def test_cache_with_the_right_key_but_other_images_is_regenerated(cache_dir):
    """Issue 45: the file stores the sha256 of its images; images swapped under the same key
    and shape (here: reversed) no longer match it."""
    fresh = load_dataset("synthetic", "train", **SMALL)
    path = synthetic.cache_path("train", **SMALL)
    with np.load(path) as f:
        stored = dict(f)
    assert set(stored) == {"images", "key", "sha256"}
    np.savez(path, **{**stored, "images": stored["images"][::-1].copy()})
    with pytest.warns(UserWarning, match="its images are not the ones it was written with"):
        again = load_dataset("synthetic", "train", **SMALL)
    assert torch.equal(again.inputs, fresh.inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rewritten with the right images
        assert torch.equal(load_dataset("synthetic", "train", **SMALL).inputs, fresh.inputs)


def test_unwritable_cache_warns_and_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DMLBOOK_CACHE", str(blocker / "cache"))
    with pytest.warns(UserWarning, match="Could not write the data cache"):
        ds = load_dataset("synthetic", "train", **SMALL)
    assert len(ds) == 60


def test_concurrent_loads_share_one_valid_cache_file(cache_dir):
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: load_dataset("synthetic", "train", **SMALL), range(2)))
    assert torch.equal(results[0].inputs, results[1].inputs)
    assert sorted(p.name for p in cache_dir.iterdir()) == [
        synthetic.cache_path("train", **SMALL).name
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(load_dataset("synthetic", "train", **SMALL).inputs, results[0].inputs)


# ------------------------------------------------------------------------------------------
# synthetic: the default configuration (used by the chapters)
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_default_configuration_is_hard_but_above_chance():
    ds = load_dataset("synthetic", "test", cache=False)
    assert ds.inputs.shape == (3000, 3, 32, 32)
    assert ds.num_classes == 100 and ds.classes.tolist() == list(range(100, 200))
    assert len(ds.class_names) == 200
    assert ds.describe() == (
        "synthetic/test: 3,000 samples, 100 classes, input shape (3, 32, 32), 30-30 per class"
    )
    r1 = recall_at_1(ds.inputs, ds.labels)
    assert 0.05 < r1 < 0.3  # chance is about 1 %

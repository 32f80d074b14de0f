"""Tests of the synthetic data set: generation, classes, cache and the chapters' configuration.

The registry, ``EmbeddedDataset`` and digits are tested in ``tests/data/test_registry.py``.
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from dmlbook.data import (
    load_dataset,
    synthetic,
)

SMALL = {"num_classes": 20, "images_per_class": 6, "image_size": 32}


def recall_at_1(x: torch.Tensor, y: torch.Tensor) -> float:
    """Brute-force cosine Recall@1 (leave-one-out), independent of dmlbook.evaluate."""
    x = torch.nn.functional.normalize(x.reshape(len(x), -1).double(), dim=1)
    s = x @ x.T
    s.fill_diagonal_(-math.inf)
    return float((y[s.argmax(1)] == y).double().mean())


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DMLBOOK_CACHE", str(folder))
    return folder


# ------------------------------------------------------------------------------------------
# synthetic: generation
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


def test_synthetic_image_size_option():
    ds = load_dataset(
        "synthetic", "test", cache=False, num_classes=4, images_per_class=3, image_size=16
    )
    assert ds.inputs.shape == (6, 3, 16, 16)


def test_synthetic_is_deterministic():
    a = load_dataset("synthetic", "train", cache=False, seed=3, **SMALL)
    b = load_dataset("synthetic", "train", cache=False, seed=3, **SMALL)
    c = load_dataset("synthetic", "train", cache=False, seed=4, **SMALL)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.inputs, c.inputs)
    assert torch.equal(a.labels, c.labels)  # the seed changes the images, not the classes


def test_difficulty_zero_gives_identical_images_per_class():
    images, labels = synthetic.generate("train", difficulty=0.0, **SMALL)
    per_class = images.reshape(10, 6, -1)
    assert (per_class == per_class[:, :1]).all()
    # ... and distinct classes look different
    assert len({row.tobytes() for row in per_class[:, 0]}) == 10
    hard, _ = synthetic.generate("train", difficulty=0.5, **SMALL)
    assert not (hard.reshape(10, 6, -1) == hard.reshape(10, 6, -1)[:, :1]).all()


def test_difficulty_orders_raw_pixel_recall():
    opts = {"num_classes": 40, "images_per_class": 10, "cache": False}
    r = {}
    for d in (0.0, 0.5, 1.0):
        ds = load_dataset("synthetic", "test", difficulty=d, **opts)
        r[d] = recall_at_1(ds.inputs, ds.labels)
    assert r[0.0] == 1.0
    assert r[0.0] > r[0.5] > r[1.0]


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
# synthetic: classes
# ------------------------------------------------------------------------------------------


def test_attributes_of():
    a = synthetic.attributes_of(0)
    assert set(a) == {"shape", "palette", "pattern", "marker", "split", "name"}
    assert a["name"] == f"{a['shape']}/{a['palette']}/{a['pattern']}/{a['marker']}"
    assert a["shape"] in synthetic.SHAPES and a["palette"] in synthetic.PALETTES
    assert a["pattern"] in synthetic.PATTERNS and a["marker"] in synthetic.MARKERS
    assert a["split"] == "train" and synthetic.attributes_of(150)["split"] == "test"
    names = synthetic.class_names(200)
    assert all(synthetic.attributes_of(c)["name"] == names[c] for c in (0, 99, 100, 199))
    with pytest.raises(ValueError, match="out of range"):
        synthetic.attributes_of(200)
    with pytest.raises(TypeError, match="class_id must be an int"):
        synthetic.attributes_of(1.5)


def test_class_table_is_fine_grained_and_zero_shot():
    table = synthetic.class_attribute_table(200)
    assert table.shape == (200, 4)
    assert len({tuple(r) for r in table}) == 200  # test combinations are unseen in training
    sizes = [
        len(synthetic.SHAPES),
        len(synthetic.PALETTES),
        len(synthetic.PATTERNS),
        len(synthetic.MARKERS),
    ]
    for part in (table[:100], table[100:]):
        for a, n in enumerate(sizes):  # every attribute value occurs in both splits
            assert set(part[:, a].tolist()) == set(range(n))
        differ = (part[:, None, :] != part[None, :, :]).sum(-1)
        # fine-grained: most classes have a same-split neighbour that differs in one attribute
        assert ((differ == 1).sum(1) > 0).mean() > 0.5
    # the class list is fixed: independent of the instance seed and of earlier calls
    assert np.array_equal(table, synthetic.class_attribute_table(200))
    for c in (4, 6, synthetic.MAX_CLASSES):
        t = synthetic.class_attribute_table(c)
        assert len({tuple(r) for r in t}) == c


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

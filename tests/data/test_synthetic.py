"""Tests of dmlbook.data: the registry, EmbeddedDataset, digits and the synthetic data set."""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from dmlbook.data import (
    EmbeddedDataset,
    available_datasets,
    dataset_info,
    load_dataset,
    register_dataset,
    synthetic,
)
from dmlbook.data.registry import _REGISTRY

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


# ------------------------------------------------------------------------------------------
# EmbeddedDataset
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# digits
# ------------------------------------------------------------------------------------------


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
    assert synthetic.cache_dir() == tmp_path / ".cache" / "dmlbook"


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

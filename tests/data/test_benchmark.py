"""Tests of the benchmark loaders (CUB-200-2011, Cars-196, SOP, In-Shop) on tiny generated copies.

Each fixture writes a few small JPEGs per class in the official on-disk layout (list files with
their real formats, macOS ``._*`` junk included). The official image counts cannot hold for such
a copy, so tests either pass ``allow_partial=True``, or set the module's ``EXPECTED`` counts to
the fixture's to exercise the strict path, or check that the count check fires.
"""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from dmlbook.data import (
    ImageListDataset,
    IncompleteDatasetError,
    available_datasets,
    dataset_info,
    load_dataset,
)
from dmlbook.data import cars as cars_module
from dmlbook.data import cub as cub_module
from dmlbook.data import inshop as inshop_module
from dmlbook.data import sop as sop_module
from dmlbook.data.image_folder import is_junk, scan_images


def write_jpeg(path, seed: int, size: tuple[int, int] = (40, 30)) -> None:
    """A small random JPEG (``size`` = (width, height))."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).save(path, format="JPEG", quality=90)


def write_junk(path) -> None:
    """A macOS AppleDouble file (not an image)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00\x05\x16\x07junk")


# ------------------------------------------------------------------------------------------
# fixtures in the official layouts
# ------------------------------------------------------------------------------------------

CUB_CLASSES = {1: 3, 2: 2, 100: 2, 101: 3, 150: 2, 200: 2}  # class id -> images


@pytest.fixture
def cub_dir(tmp_path):
    root = tmp_path / "CUB_200_2011"
    images, labels, names = [], [], []
    image_id = 0
    for c in range(1, 201):
        names.append(f"{c} {c:03d}.Bird_{c}")
    for c, n in CUB_CLASSES.items():
        folder = f"{c:03d}.Bird_{c}"
        for j in range(n):
            image_id += 1
            rel = f"{folder}/Bird_{c}_{j:04d}.jpg"
            write_jpeg(root / "images" / rel, seed=image_id)
            images.append(f"{image_id} {rel}")
            labels.append(f"{image_id} {c}")
        write_junk(root / "images" / folder / f"._Bird_{c}_0000.jpg")
    (root / "images.txt").write_text("\n".join(images) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (root / "classes.txt").write_text("\n".join(names) + "\n")
    write_junk(root / "._images.txt")
    return root


def make_cars_mat(root, classes: dict[int, int]) -> None:
    from scipy.io import savemat

    dt = [
        (k, "O")
        for k in ("relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test")
    ]
    n = sum(classes.values())
    ann = np.zeros((1, n), dtype=dt)
    i = 0
    for c, count in classes.items():
        for j in range(count):
            rel = f"car_ims/{i + 1:06d}.jpg"
            write_jpeg(root / rel, seed=1000 + i)
            u16 = np.uint16
            ann[0, i] = (rel, u16(1), u16(2), u16(30 + j), u16(20), np.uint8(c), np.uint8(j % 2))
            i += 1
    names = np.empty((1, 196), dtype=object)
    names[0, :] = [f"Make{c} Model/{c} 2012" for c in range(1, 197)]
    savemat(root / "cars_annos.mat", {"annotations": ann, "class_names": names})
    write_junk(root / "car_ims" / "._000001.jpg")


CARS_CLASSES = {1: 2, 50: 3, 98: 2, 99: 2, 196: 3}


@pytest.fixture
def cars_mat_dir(tmp_path):
    root = tmp_path / "cars196"
    make_cars_mat(root, CARS_CLASSES)
    return root


def make_cars_folders(root, classes: dict[int, int], with_csv: bool = True) -> None:
    names = [
        f"Make{c} Model/{c} 2012" if c % 2 else f"Make{c} Model {c} 2012" for c in range(1, 197)
    ]
    base = root / "car_data" / "car_data"
    rows = {"train": [], "test": []}
    k = 0
    for c, count in classes.items():
        folder = names[c - 1].replace("/", "-")
        for j in range(count):
            k += 1
            subset = "train" if j % 2 == 0 else "test"
            fname = f"{k:05d}.jpg"
            write_jpeg(base / subset / folder / fname, seed=2000 + k)
            rows[subset].append([fname, 1, 2, 30, 20, c])
        write_junk(base / "train" / folder / "._00001.jpg")
    with open(root / "names.csv", "w", newline="") as f:
        f.write("\n".join(names) + "\n")
    if with_csv:
        for subset, r in rows.items():
            with open(root / f"anno_{subset}.csv", "w", newline="") as f:
                csv.writer(f).writerows(r)


@pytest.fixture
def cars_folder_dir(tmp_path):
    root = tmp_path / "cars_folders"
    make_cars_folders(root, CARS_CLASSES)
    return root


SOP_TRAIN = {1: (1, 2), 2: (1, 3), 3: (2, 2)}  # class id -> (super class id, images)
SOP_TEST = {11319: (1, 2), 11320: (3, 2)}
SUPERS = {1: "bicycle", 2: "cabinet", 3: "chair"}


@pytest.fixture
def sop_dir(tmp_path):
    root = tmp_path / "Stanford_Online_Products"
    image_id = 0
    for split, classes in (("train", SOP_TRAIN), ("test", SOP_TEST)):
        lines = ["image_id class_id super_class_id path"]
        for c, (s, n) in classes.items():
            for j in range(n):
                image_id += 1
                rel = f"{SUPERS[s]}_final/{100000 + c}_{j}.JPG"
                write_jpeg(root / rel, seed=3000 + image_id)
                lines.append(f"{image_id} {c} {s} {rel}")
        (root / f"Ebay_{split}.txt").write_text("\n".join(lines) + "\n")
    write_junk(root / "bicycle_final" / "._100001_0.JPG")
    return root


INSHOP = [  # (item, status, count)
    ("id_00000001", "train", 2),
    ("id_00000002", "train", 3),
    ("id_00000003", "query", 1),
    ("id_00000003", "gallery", 2),
    ("id_00000004", "query", 2),
    ("id_00000004", "gallery", 1),
]


@pytest.fixture
def inshop_dir(tmp_path):
    root = tmp_path / "InShop"
    lines = []
    k = 0
    for item, status, n in INSHOP:
        for _ in range(n):
            k += 1
            rel = f"img/WOMEN/Dresses/{item}/{k:02d}_1_front.jpg"
            write_jpeg(root / "Img" / rel, seed=4000 + k)
            lines.append(f"{rel}    {item}   {status}")
    (root / "Eval").mkdir(parents=True)
    text = f"{len(lines)}\nimage_name item_id evaluation_status\n" + "\n".join(lines) + "\n"
    (root / "Eval" / "list_eval_partition.txt").write_text(text)
    return root


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


def test_is_junk_and_scan(tmp_path):
    assert is_junk("a/._x.jpg") and is_junk("__MACOSX/a/x.jpg") and is_junk(".DS_Store")
    assert not is_junk("a/x.jpg") and not is_junk("a._b.jpg")
    write_jpeg(tmp_path / "a" / "x.jpg", 0)
    write_junk(tmp_path / "a" / "._x.jpg")
    write_jpeg(tmp_path / "__MACOSX" / "a" / "x.jpg", 1)
    (tmp_path / "a" / "notes.txt").write_text("-")
    assert scan_images(tmp_path) == ["a/x.jpg"]


# ------------------------------------------------------------------------------------------
# CUB-200-2011
# ------------------------------------------------------------------------------------------


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


def test_corrupt_image_named(cub_dir):
    ds = cub_module.load("train", root=cub_dir, allow_partial=True)
    ds.path(0).write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=str(ds.path(0)).replace("\\", "\\\\")):
        ds[0]


def test_subset_keeps_alignment(sop_dir):
    ds = sop_module.load("train", root=sop_dir, allow_partial=True)
    sub = ds.subset([4, 0])
    assert sub.paths == [ds.paths[4], ds.paths[0]]
    assert sub.labels.tolist() == [int(ds.labels[4]), int(ds.labels[0])]
    assert sub.metadata["super_label"].tolist() == [
        int(ds.metadata["super_label"][4]),
        int(ds.metadata["super_label"][0]),
    ]
    mask = ds.labels == ds.labels[0]
    assert len(ds.subset(mask)) == int(mask.sum())
    assert ds.subset(np.array([4, 0])).paths == sub.paths
    with pytest.raises(ValueError, match=f"a boolean mask needs {len(ds)} entries, got 3"):
        ds.subset(mask[:3])


# ------------------------------------------------------------------------------------------
# Cars-196
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# SOP
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# In-Shop
# ------------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------------------------------
# the shared skeleton (dmlbook.data.benchmark)
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

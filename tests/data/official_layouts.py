"""Tiny copies of CUB-200-2011, Cars-196, SOP and In-Shop in their official on-disk layouts.

Each writer puts a few small JPEGs per class where the real archive puts them, with the list
files in their real formats and macOS ``._*`` junk included. The official image counts cannot
hold for such a copy, so tests either pass ``allow_partial=True``, or set the module's
``EXPECTED`` counts to the copy's to exercise the strict path, or check that the count check
fires. The fixtures that call these writers are in ``tests/data/conftest.py``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image


def write_jpeg(path: Path, seed: int, size: tuple[int, int] = (40, 30)) -> None:
    """A small random JPEG (``size`` = (width, height))."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).save(path, format="JPEG", quality=90)


def write_junk(path: Path) -> None:
    """A macOS AppleDouble file (not an image)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00\x05\x16\x07junk")


CUB_CLASSES = {1: 3, 2: 2, 100: 2, 101: 3, 150: 2, 200: 2}  # class id -> images


def make_cub(root: Path) -> Path:
    """``CUB_200_2011/``: ``images.txt``, ``image_class_labels.txt``, ``classes.txt``, images."""
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


CARS_CLASSES = {1: 2, 50: 3, 98: 2, 99: 2, 196: 3}


def make_cars_mat(root: Path, classes: dict[int, int]) -> None:
    """The Stanford release: ``cars_annos.mat`` and ``car_ims/``."""
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


def make_cars_folders(root: Path, classes: dict[int, int], with_csv: bool = True) -> None:
    """The class-folder copy: ``car_data/car_data/{train,test}/<class>/``, ``names.csv`` and
    (``with_csv``) ``anno_{train,test}.csv``."""
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


SOP_TRAIN = {1: (1, 2), 2: (1, 3), 3: (2, 2)}  # class id -> (super class id, images)
SOP_TEST = {11319: (1, 2), 11320: (3, 2)}
SUPERS = {1: "bicycle", 2: "cabinet", 3: "chair"}


def make_sop(root: Path) -> Path:
    """``Stanford_Online_Products/``: ``Ebay_{train,test}.txt`` and ``<super>_final/`` images."""
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


def make_inshop(root: Path) -> Path:
    """In-Shop: ``Eval/list_eval_partition.txt`` and ``Img/img/...`` images."""
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

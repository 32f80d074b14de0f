"""DeepFashion In-Shop Clothes Retrieval (Liu et al. 2016) with its official partition.

Layout (the "In-shop Clothes Retrieval Benchmark" folder of DeepFashion)::

    InShop/
        Eval/list_eval_partition.txt   line 1: 52712; line 2: image_name item_id evaluation_status
                                       then: img/WOMEN/Dresses/id_00000002/02_1_front.jpg id_00000002 train
        Img/img/WOMEN/Dresses/id_00000002/02_1_front.jpg ...   (the extracted img.zip)

(``list_eval_partition.txt`` directly in the folder, and ``img/`` directly in the folder, are also
accepted.)

Splits (Liu et al. 2016, Sec. 5; the evaluation protocol of MS, Wang et al. 2019, Sec. 5.1):
``train`` 25,882 images of 3,997 items; ``query`` 14,218 and ``gallery`` 12,612 images of the other
3,985 items. Retrieval is evaluated with the query images against the gallery images (not
leave-one-out within one set), with Recall@{1, 10, 20, 30, 40, 50}.

Labels index the item ids sorted over the whole partition file, so query and gallery share them
and ``class_names[label]`` is the item id (``"id_00000002"``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..base.errors import ALLOW_PARTIAL, IncompleteDatasetError
from ..base.files import read_table
from .benchmark import Layout, finish_split
from .image_folder import ImageListDataset

__all__ = ["load", "FOLDER", "EXPECTED", "SPLITS", "LAYOUT"]

FOLDER = "InShop"
ALIASES: tuple[str, ...] = (
    "In-shop Clothes Retrieval Benchmark",
    "inshop",
    "Inshop_Clothes",
    "InShopClothes",
    "DeepFashion/In-shop Clothes Retrieval Benchmark",
)
SPLITS = ("train", "query", "gallery")
#: Official ``(images, classes)`` per split; ``None``: classes not checked.
EXPECTED: dict[str, tuple[int, int | None]] = {
    "train": (25882, 3997),
    "query": (14218, None),
    "gallery": (12612, None),
}
#: Number of entries the partition file announces in its first line.
TOTAL = 52712
#: Where the partition file may be, relative to the copy's folder.
LIST_FILES = ("Eval/list_eval_partition.txt", "list_eval_partition.txt")
LAYOUT = Layout(
    dataset="inshop",
    folder=FOLDER,
    splits=SPLITS,
    markers=LIST_FILES,
    missing="InShop/Eval/list_eval_partition.txt not found under {root}; expected the "
    "'In-shop Clothes Retrieval Benchmark' folder of DeepFashion with "
    "Eval/list_eval_partition.txt and the extracted img.zip under Img/ (Img/img/...). It has no "
    "direct download: see dmlbook.data.fetch.download for where to request it.",
    aliases=ALIASES,
)


def _image_root(folder: Path) -> Path:
    """The folder the listed paths (``img/...``) are relative to."""
    for base in (folder / "Img", folder):
        if (base / "img").is_dir():
            return base
    return folder / "Img"


def load(
    split: str = "train",
    *,
    root: str | os.PathLike[str] | None = None,
    allow_partial: bool = False,
) -> ImageListDataset:
    """Load the ``train``, ``query`` or ``gallery`` split of In-Shop.

    Parameters
    ----------
    split : {"train", "query", "gallery"}
    root : path, optional
        The In-Shop folder. Default ``$DMLBOOK_DATA/InShop`` (or ``In-shop Clothes Retrieval
        Benchmark``, ``Inshop_Clothes``).
    allow_partial : bool
        Load a copy whose image count differs from the official 25,882 / 14,218 / 12,612,
        leaving out listed images that are missing.

    Returns
    -------
    ImageListDataset
        Paths relative to the image folder (``img/...``); labels index the sorted item ids.

    Raises
    ------
    FileNotFoundError
        If the partition file is missing, or listed images are missing (without ``allow_partial``).
    IncompleteDatasetError
        If the split does not hold the official numbers (without ``allow_partial``).
    """
    LAYOUT.check_split(split)
    folder = LAYOUT.locate(root)
    list_file = next(folder / f for f in LIST_FILES if (folder / f).is_file())
    image_root = _image_root(folder)
    with open(list_file, encoding="utf-8") as f:
        first = f.readline().strip()
        header = f.readline().split()
    if not first.isdigit() or header[:2] != ["image_name", "item_id"]:
        raise ValueError(
            f"{list_file} should start with a count line ('52712') and the header 'image_name "
            f"item_id evaluation_status', got {first!r} and {' '.join(header)!r}."
        )
    rows = list(
        read_table(list_file, columns=3, what="'image_name item_id evaluation_status'", skip=2)
    )
    if not allow_partial and (int(first) != len(rows) or len(rows) != TOTAL):
        raise IncompleteDatasetError(
            f"{list_file} lists {len(rows):,} images (its first line says {int(first):,}); the "
            f"official partition has {TOTAL:,}. A truncated or partial copy? Pass "
            f"{ALLOW_PARTIAL} to load it anyway."
        )
    items = sorted({r[1] for r in rows})
    index = {item: i for i, item in enumerate(items)}
    chosen = [r for r in rows if r[2] == split]
    paths = [r[0].replace("\\", "/") for r in chosen]
    labels = np.asarray([index[r[1]] for r in chosen], dtype=np.int64)
    return finish_split(
        image_root,
        paths,
        labels,
        dataset="inshop",
        split=split,
        list_file=list_file,
        expected=EXPECTED[split],
        allow_partial=allow_partial,
        class_names=items,
    )

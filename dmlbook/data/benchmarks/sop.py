"""Stanford Online Products (SOP; Song et al. 2016) with its official zero-shot split.

Layout (the extracted ``Stanford_Online_Products.zip``, md5 ``7f73d41a2f44250d4779881525aea32e``)::

    Stanford_Online_Products/
        Ebay_train.txt    image_id class_id super_class_id path     (header line, then one per image)
        Ebay_test.txt
        bicycle_final/111085122871_0.JPG ...

Split (Song et al. 2016, Sec. 5): ``train`` = ``Ebay_train.txt``, 59,551 images of 11,318 products
(class ids 1-11,318); ``test`` = ``Ebay_test.txt``, 60,502 images of 11,316 products (11,319-22,634).

Labels are ``class_id - 1``; ``metadata["super_label"]`` is ``super_class_id - 1`` (12 product
categories: bicycle, cabinet, chair, ...). ``class_names`` is ``None`` (products have ids, not names).
"""

from __future__ import annotations

import os

import numpy as np

from ..base.errors import prepare_call
from ..base.files import read_table
from .benchmark import Layout, finish_split
from .image_folder import ImageListDataset

__all__ = ["load", "FOLDER", "EXPECTED", "ARCHIVE_MD5", "LIST_FILES", "LAYOUT"]

FOLDER = "Stanford_Online_Products"
ALIASES: tuple[str, ...] = ("SOP", "sop", "Stanford_Online_Products/Stanford_Online_Products")
ARCHIVE_MD5 = "7f73d41a2f44250d4779881525aea32e"
#: Official ``(images, classes)`` per split.
EXPECTED: dict[str, tuple[int, int]] = {"train": (59551, 11318), "test": (60502, 11316)}
LIST_FILES = {"train": "Ebay_train.txt", "test": "Ebay_test.txt"}
#: Labels (``class_id - 1``) of each split, as ``range`` arguments.
_CLASS_IDS = {"train": (0, 11318), "test": (11318, 22634)}
LAYOUT = Layout(
    dataset="sop",
    folder=FOLDER,
    splits=("train", "test"),
    markers=tuple(LIST_FILES.values()),
    missing="Stanford_Online_Products/{name} not found under {root}; expected the extracted "
    f"Stanford_Online_Products.zip (md5 {ARCHIVE_MD5}): Ebay_train.txt, Ebay_test.txt and the "
    "<category>_final/ image folders, in root or in root/Stanford_Online_Products. "
    f"{prepare_call('sop')} downloads and extracts it.",
    aliases=ALIASES,
)


def load(
    split: str = "train",
    *,
    root: str | os.PathLike[str] | None = None,
    allow_partial: bool = False,
) -> ImageListDataset:
    """Load the ``train`` (``Ebay_train.txt``) or ``test`` (``Ebay_test.txt``) split of SOP.

    Parameters
    ----------
    split : {"train", "test"}
    root : path, optional
        The ``Stanford_Online_Products`` folder (or its parent). Default
        ``$DMLBOOK_DATA/Stanford_Online_Products``.
    allow_partial : bool
        Load a copy whose image count differs from the official 59,551 / 60,502, leaving out
        listed images that are missing.

    Returns
    -------
    ImageListDataset
        Labels ``class_id - 1``; ``metadata["super_label"]`` the product category.

    Raises
    ------
    FileNotFoundError
        If the list file is missing, or listed images are missing (without ``allow_partial``).
    IncompleteDatasetError
        If the split does not hold the official numbers (without ``allow_partial``).
    """
    LAYOUT.check_split(split)
    folder = LAYOUT.locate(root, markers=(LIST_FILES[split],), name=LIST_FILES[split])
    list_file = folder / LIST_FILES[split]
    with open(list_file, encoding="utf-8") as f:
        header = f.readline().split()
    if header[:2] != ["image_id", "class_id"]:
        raise ValueError(
            f"{list_file} should start with the header 'image_id class_id super_class_id path', "
            f"got {' '.join(header)!r}."
        )
    rows = list(
        read_table(list_file, columns=4, what="'image_id class_id super_class_id path'", skip=1)
    )
    paths = [r[3].replace("\\", "/") for r in rows]
    labels = np.asarray([int(r[1]) - 1 for r in rows], dtype=np.int64)
    supers = np.asarray([int(r[2]) - 1 for r in rows], dtype=np.int64)
    return finish_split(
        folder,
        paths,
        labels,
        dataset="sop",
        split=split,
        list_file=list_file,
        expected=EXPECTED[split],
        allow_partial=allow_partial,
        metadata={"super_label": supers},
        expected_labels=range(*_CLASS_IDS[split]),
    )

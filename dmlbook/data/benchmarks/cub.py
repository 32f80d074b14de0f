"""CUB-200-2011 (Wah et al. 2011) with the zero-shot split of deep metric learning.

Layout (the extracted ``CUB_200_2011.tgz``, md5 ``97eceeb196236b17998738112f37df78``)::

    CUB_200_2011/
        images.txt               <image id> <relative path>
        image_class_labels.txt   <image id> <class id 1..200>
        classes.txt              <class id> <class name>         (optional: names)
        images/001.Black_footed_Albatross/Black_Footed_Albatross_0046_18.jpg ...

Split (Song et al. 2016, "Deep Metric Learning via Lifted Structured Feature Embedding", Sec. 5;
followed by MS, Wang et al. 2019, Sec. 5.1): ``train`` = classes 1-100 (5,864 images), ``test`` =
classes 101-200 (5,924 images); the classes are disjoint. The file ``train_test_split.txt`` defines
the *classification* split (5,994 / 5,794 images over all 200 classes), which deep metric learning
does not use: a test split of 5,794 images is the classification one.

Labels are ``class id - 1`` (0..199), so ``class_names[label]`` names the class in both splits.
"""

from __future__ import annotations

import os

import numpy as np

from ..base.errors import prepare_call
from ..base.files import read_table
from .benchmark import Layout, finish_split
from .image_folder import ImageListDataset

__all__ = ["load", "FOLDER", "EXPECTED", "CLASS_RANGES", "ARCHIVE_MD5", "LAYOUT"]

#: Folder under ``$DMLBOOK_DATA`` (what the archive extracts to).
FOLDER = "CUB_200_2011"
#: md5 of ``CUB_200_2011.tgz``.
ARCHIVE_MD5 = "97eceeb196236b17998738112f37df78"
#: Official ``(images, classes)`` per split (Song et al. 2016).
EXPECTED: dict[str, tuple[int, int]] = {"train": (5864, 100), "test": (5924, 100)}
#: 1-based class ids of each split, inclusive.
CLASS_RANGES: dict[str, tuple[int, int]] = {"train": (1, 100), "test": (101, 200)}
#: Size of the *classification* test split, the number a wrong split gives.
CLASSIFICATION_TEST = 5794
LAYOUT = Layout(
    dataset="cub",
    folder=FOLDER,
    splits=("train", "test"),
    markers=("images.txt",),
    missing="CUB_200_2011/images.txt not found under {root}; expected the extracted "
    f"CUB_200_2011.tgz (md5 {ARCHIVE_MD5}): images.txt, image_class_labels.txt, classes.txt and "
    "images/NNN.Name/*.jpg, in root or in root/CUB_200_2011. "
    f"{prepare_call('cub')} downloads and extracts it.",
)


def load(
    split: str = "train",
    *,
    root: str | os.PathLike[str] | None = None,
    allow_partial: bool = False,
) -> ImageListDataset:
    """Load the ``train`` (classes 1-100) or ``test`` (classes 101-200) split of CUB-200-2011.

    Parameters
    ----------
    split : {"train", "test"}
    root : path, optional
        The ``CUB_200_2011`` folder (or its parent). Default ``$DMLBOOK_DATA/CUB_200_2011``.
    allow_partial : bool
        Load a copy whose image count differs from the official 5,864 / 5,924 (e.g. a subset
        for a course) and leave out listed images that are missing.

    Returns
    -------
    ImageListDataset
        Paths ``images/...`` relative to the data folder, labels ``class id - 1``.

    Raises
    ------
    FileNotFoundError
        If ``images.txt`` or ``image_class_labels.txt`` is missing, or listed images are missing
        (without ``allow_partial``).
    IncompleteDatasetError
        If the split does not hold the official numbers (without ``allow_partial``).
    """
    LAYOUT.check_split(split)
    folder = LAYOUT.locate(root)
    labels_file = folder / "image_class_labels.txt"
    if not labels_file.is_file():
        raise FileNotFoundError(
            f"CUB_200_2011/image_class_labels.txt not found in {folder}; the extracted "
            "CUB_200_2011.tgz has it next to images.txt. Re-extract the archive."
        )
    class_of = {
        int(f[0]): int(f[1]) for f in read_table(labels_file, columns=2, what="'<id> <class>'")
    }
    names_file = folder / "classes.txt"
    names: list[str] | None = None
    if names_file.is_file():
        table = {int(f[0]): f[1] for f in read_table(names_file, columns=2, what="'<id> <name>'")}
        names = [table.get(c, str(c)) for c in range(1, 201)]

    lo, hi = CLASS_RANGES[split]
    paths: list[str] = []
    labels: list[int] = []
    images_file = folder / "images.txt"
    for fields in read_table(images_file, columns=2, what="'<id> <relative path>'"):
        image_id = int(fields[0])
        if image_id not in class_of:
            raise ValueError(
                f"image id {image_id} of {images_file} has no class in {labels_file}; the two "
                "files come from different copies. Re-extract the archive."
            )
        c = class_of[image_id]
        if lo <= c <= hi:
            paths.append("images/" + fields[1])
            labels.append(c - 1)
    return finish_split(
        folder,
        paths,
        np.asarray(labels, dtype=np.int64),
        dataset="cub",
        split=split,
        list_file=images_file,
        expected=EXPECTED[split],
        allow_partial=allow_partial,
        class_names=names,
        note=f"({CLASSIFICATION_TEST:,} is the size of the classification test split in "
        "train_test_split.txt, which deep metric learning does not use.)",
        note_when=CLASSIFICATION_TEST,
        expected_labels=range(lo - 1, hi),
    )

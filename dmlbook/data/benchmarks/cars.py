"""Cars-196 (Stanford Cars, Krause et al. 2013) with the zero-shot split of deep metric learning.

Two on-disk layouts are read (``layout="auto"`` picks the one present):

``"mat"`` (the original release; what MS, DRO and Proxy-Anchor read)::

    cars196/
        cars_annos.mat     annotations: relative_im_path, bbox_x1..bbox_y2, class (1..196), test
                           class_names: the 196 class names
        car_ims/000001.jpg ... 016185.jpg

    md5: car_ims.tgz d5c8f0aa497503f355e17dc7886c3f14, cars_annos.mat b407c6086d669747186bd1d764ff9dbc

``"folders"`` (the class-folder copy that circulates, e.g. on Kaggle; what pytorch-metric-learning
reads)::

    root/
        anno_train.csv, anno_test.csv   <file>,<x1>,<y1>,<x2>,<y2>,<class 1..196>  (no header)
        names.csv                       the 196 class names, one per line
        car_data/car_data/{train,test}/<class name>/<file>.jpg
                                        (also accepted: car_data/{train,test}, or {train,test})

    Without the ``anno_*.csv`` files the class of an image comes from its folder name, matched
    against ``names.csv`` (a ``/`` in a name is ``-`` in the folder name).

Split (Song et al. 2016, Sec. 5; MS, Wang et al. 2019, Sec. 5.1): ``train`` = classes 1-98 (8,054
images), ``test`` = classes 99-196 (8,131). Both layouts merge the release's own train/test halves,
which form the *classification* split (8,144 / 8,041 images over all 196 classes; the ``test`` flag
of ``cars_annos.mat``); a test split of 8,041 images is the classification one.

Labels are ``class id - 1`` (0..195); ``metadata["bbox"]`` holds the boxes ``(x1, y1, x2, y2)`` of
the annotation files (1-based pixels).
"""

from __future__ import annotations

import csv
import os
import warnings
from pathlib import Path

import numpy as np

from ..base.errors import ALLOW_PARTIAL, listed
from ..base.files import is_junk, scan_images
from .benchmark import Layout, finish_split
from .image_folder import ImageListDataset

__all__ = ["load", "FOLDER", "EXPECTED", "CLASS_RANGES", "LAYOUTS", "MD5", "LAYOUT"]

#: Folder under ``$DMLBOOK_DATA``; ``ALIASES`` are tried when it does not exist.
FOLDER = "cars196"
ALIASES: tuple[str, ...] = ("Cars196", "CARS196", "cars", "stanford_cars")
#: md5 of the files of the original release.
MD5 = {
    "car_ims.tgz": "d5c8f0aa497503f355e17dc7886c3f14",
    "cars_annos.mat": "b407c6086d669747186bd1d764ff9dbc",
}
#: Official ``(images, classes)`` per split.
EXPECTED: dict[str, tuple[int, int]] = {"train": (8054, 98), "test": (8131, 98)}
#: 1-based class ids of each split, inclusive.
CLASS_RANGES: dict[str, tuple[int, int]] = {"train": (1, 98), "test": (99, 196)}
LAYOUTS = ("auto", "mat", "folders")
#: Size of the *classification* test split, the number a wrong split gives.
CLASSIFICATION_TEST = 8041


#: Where the class-folder layout keeps its ``train``/``test`` folders, relative to the copy.
_FOLDER_BASES = ("car_data/car_data", "car_data", "")
LAYOUT = Layout(
    dataset="cars",
    folder=FOLDER,
    splits=("train", "test"),
    markers=(
        "cars_annos.mat",
        *(f"{b}/{s}".lstrip("/") for b in _FOLDER_BASES for s in ("train", "test")),
    ),
    missing="cars196/cars_annos.mat not found under {root}, nor a class-folder copy. Expected "
    f"either cars_annos.mat (md5 {MD5['cars_annos.mat']}) with the extracted car_ims.tgz "
    "(car_ims/000001.jpg ...), or the class-folder layout: car_data/car_data/{train,test}/"
    "<class name>/*.jpg with anno_train.csv, anno_test.csv and names.csv. See dmlbook.data.benchmarks.cars.",
    aliases=ALIASES,
)


def _folder_base(root: Path) -> Path | None:
    for rel in _FOLDER_BASES:
        base = root / rel if rel else root
        if (base / "train").is_dir() or (base / "test").is_dir():
            return base
    return None


def _layout_error(root: Path) -> FileNotFoundError:
    return FileNotFoundError(LAYOUT.missing.replace("{root}", str(root)))


def _load_mat(root: Path) -> tuple[list[str], np.ndarray, np.ndarray, list[str] | None, Path]:
    """Paths, classes (1-based), boxes and names from ``cars_annos.mat``."""
    from scipy.io import loadmat

    mat_file = root / "cars_annos.mat"
    try:
        mat = loadmat(mat_file, squeeze_me=True)
        ann = np.atleast_1d(mat["annotations"])
        paths = [str(p).replace("\\", "/") for p in np.atleast_1d(ann["relative_im_path"])]
        classes = np.asarray(np.atleast_1d(ann["class"]), dtype=np.int64)
        boxes = np.stack(
            [
                np.asarray(np.atleast_1d(ann[k]), dtype=np.int64)
                for k in ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2")
            ],
            axis=1,
        )
    except (KeyError, ValueError, TypeError, OSError) as err:
        raise ValueError(
            f"Cannot read the annotations of {mat_file} ({type(err).__name__}: {err}); expected "
            "the original cars_annos.mat (an 'annotations' struct array with fields "
            f"relative_im_path, bbox_x1..bbox_y2, class, test; md5 {MD5['cars_annos.mat']})."
        ) from err
    names = None
    if "class_names" in mat:
        names = [str(n) for n in np.atleast_1d(mat["class_names"])]
    return paths, classes, boxes, names, mat_file


def _norm(name: str) -> str:
    return " ".join(name.replace("/", "-").split()).lower()


_Rows = list[tuple[str, int, list[int]]]  # (file relative to the subset folder, class, box)


def _rows_from_anno(anno: Path, files: list[str], folder: Path) -> tuple[_Rows, list[str]]:
    """The ``anno_<subset>.csv`` rows found among ``files`` (``<class>/<file>``), and the missing.

    The csv names files without their class folder, so each file name must be unique.
    """
    where: dict[str, str] = {}
    for rel in files:
        fname = rel.split("/", 1)[1]
        if fname in where:
            raise ValueError(
                f"{folder} holds {fname} in two class folders ({where[fname]} and {rel}); {anno} "
                "names files without folders, so they must be unique."
            )
        where[fname] = rel
    rows: _Rows = []
    missing: list[str] = []
    with open(anno, encoding="utf-8", newline="") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if not row or not row[0].strip():
                continue
            if len(row) < 6 or not row[-1].strip().isdigit():
                if number == 1:  # a header line
                    continue
                raise ValueError(
                    f"{anno}, line {number}: expected '<file>,<x1>,<y1>,<x2>,<y2>,<class>', got "
                    f"{','.join(row)!r}."
                )
            fname = row[0].strip()
            if fname not in where:
                missing.append(f"{folder.name}/<class>/{fname}")
                continue
            rows.append((where[fname], int(row[-1]), [int(float(v)) for v in row[1:5]]))
    return rows, missing


def _rows_from_names(
    files: list[str], names: list[str] | None, names_file: Path | None, folder: Path, root: Path
) -> _Rows:
    """Classes from the class folders' names, numbered by ``names.csv`` (no boxes)."""
    if names is None:
        raise FileNotFoundError(
            f"Neither {root / f'anno_{folder.name}.csv'} nor {root / 'names.csv'} found: the "
            "class-folder layout of Cars-196 needs one of them to number the classes "
            "(folder names alone do not give the official class order)."
        )
    index = {_norm(n): i + 1 for i, n in enumerate(names)}
    rows: _Rows = []
    for rel in files:
        class_folder = rel.split("/", 1)[0]
        if _norm(class_folder) not in index:
            raise ValueError(
                f"class folder {folder / class_folder} matches no name of {names_file}; rename it "
                "to the class name (with '-' for '/')."
            )
        rows.append((rel, index[_norm(class_folder)], [0, 0, 0, 0]))
    return rows


def _load_folders(
    root: Path, base: Path, allow_partial: bool
) -> tuple[list[str], np.ndarray, np.ndarray, list[str] | None, Path]:
    """Paths (relative to ``root``), classes, boxes and names from the class-folder layout."""
    names: list[str] | None = None
    names_file = next((d / "names.csv" for d in (root, base) if (d / "names.csv").is_file()), None)
    if names_file is not None:
        with open(names_file, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip()]
    paths: list[str] = []
    classes: list[int] = []
    boxes: list[list[int]] = []
    missing: list[str] = []
    source = base
    prefix = base.relative_to(root).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    for subset in ("train", "test"):
        folder = base / subset
        if not folder.is_dir():
            continue
        files = [f for f in scan_images(folder) if f.count("/") == 1 and not is_junk(f)]
        csvs = (d / f"anno_{subset}.csv" for d in (root, base))
        anno = next((c for c in csvs if c.is_file()), None)
        if anno is not None:
            source = anno
            rows, lost = _rows_from_anno(anno, files, folder)
            missing += lost
        else:
            rows = _rows_from_names(files, names, names_file, folder, root)
        for rel, cls, box in rows:
            paths.append(f"{prefix}{subset}/{rel}")
            classes.append(cls)
            boxes.append(box)
    if missing and not allow_partial:
        raise FileNotFoundError(
            f"cars: {len(missing):,} images listed in anno_*.csv are missing under {base} "
            f"({listed(missing)}). Re-extract the archive, or pass {ALLOW_PARTIAL}."
        )
    if missing:
        warnings.warn(
            f"cars: leaving out {len(missing):,} images listed in anno_*.csv that are missing "
            f"under {base} ({listed(missing, 3)}); {ALLOW_PARTIAL}.",
            stacklevel=3,
        )
    box_array = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
    return paths, np.asarray(classes, dtype=np.int64), box_array, names, source


def load(
    split: str = "train",
    *,
    root: str | os.PathLike[str] | None = None,
    layout: str = "auto",
    allow_partial: bool = False,
) -> ImageListDataset:
    """Load the ``train`` (classes 1-98) or ``test`` (classes 99-196) split of Cars-196.

    Parameters
    ----------
    split : {"train", "test"}
    root : path, optional
        The data folder. Default ``$DMLBOOK_DATA/cars196`` (or ``Cars196``, ``stanford_cars``).
    layout : {"auto", "mat", "folders"}
        ``"mat"``: ``cars_annos.mat`` + ``car_ims/``; ``"folders"``: class folders + csv files;
        ``"auto"``: ``"mat"`` if ``cars_annos.mat`` exists, else ``"folders"``.
    allow_partial : bool
        Load a copy whose image count differs from the official 8,054 / 8,131, leaving out
        listed images that are missing.

    Returns
    -------
    ImageListDataset
        Labels ``class id - 1``; ``metadata["bbox"]`` the annotated boxes.

    Raises
    ------
    FileNotFoundError
        If no layout is found, or listed images are missing (without ``allow_partial``).
    IncompleteDatasetError
        If the split does not hold the official numbers (without ``allow_partial``).
    """
    LAYOUT.check_split(split)
    if layout not in LAYOUTS:
        raise ValueError(
            f"Unknown layout {layout!r} for Cars-196; use one of {', '.join(LAYOUTS)}."
        )
    folder = LAYOUT.locate(root)
    has_mat = (folder / "cars_annos.mat").is_file()
    base = _folder_base(folder)
    if layout == "auto":
        if not has_mat and base is None:
            raise _layout_error(folder)
        layout = "mat" if has_mat else "folders"
    if layout == "mat":
        if not has_mat:
            raise _layout_error(folder)
        paths, classes, boxes, names, source = _load_mat(folder)
    else:
        if base is None:
            raise _layout_error(folder)
        paths, classes, boxes, names, source = _load_folders(folder, base, allow_partial)

    lo, hi = CLASS_RANGES[split]
    in_split = (classes >= lo) & (classes <= hi)
    paths = [p for p, k in zip(paths, in_split, strict=True) if k]
    classes, boxes = classes[in_split], boxes[in_split]
    return finish_split(
        folder,
        paths,
        classes - 1,
        dataset="cars",
        split=split,
        list_file=source,
        expected=EXPECTED[split],
        allow_partial=allow_partial,
        class_names=names,
        metadata={"bbox": boxes},
        note=f"({CLASSIFICATION_TEST:,} is the size of the classification test split, the 'test' "
        "flag of cars_annos.mat, which deep metric learning does not use.)",
        note_when=CLASSIFICATION_TEST,
        expected_labels=range(lo - 1, hi),
        check_files=layout == "mat",  # the folder layout was listed from disk already
    )

"""``ImageListDataset``: a benchmark split as a list of image files with labels (not decoded).

The four benchmark loaders (:mod:`~dmlbook.data.cub`, :mod:`~dmlbook.data.cars`,
:mod:`~dmlbook.data.sop`, :mod:`~dmlbook.data.inshop`) read the official list files of a data set
and return an :class:`ImageListDataset`: file paths relative to ``root``, one label per image and
the split name. Nothing is decoded at load time; images are decoded

* one at a time by ``ds[i]`` (a ``uint8`` tensor ``(3, H, W)`` at the file's own size), or
* once for the whole split into a memory-mapped cache by :meth:`ImageListDataset.cached`, which
  returns a :class:`~dmlbook.data.image_cache.CachedImageDataset` of fixed-size ``uint8`` images,
  the input of the batched GPU augmentation in :mod:`dmlbook.data.augment`.

It follows the conventions of :class:`~dmlbook.data.EmbeddedDataset`: ``.labels`` (int64, the
*global* class ids, so the test split of a zero-shot protocol keeps its own ids), ``len(ds)``,
``classes`` / ``num_classes`` / ``class_counts()``, ``subset()`` and ``describe()``.

This module also holds what the loaders share: finding the data folder (``root`` option, else
``$DMLBOOK_DATA/<folder>``), checking image counts against the official numbers (with the
``allow_partial`` opt-in for a partial copy), and skipping macOS ``._*`` junk files.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.utils.data import Dataset

from ..validation import as_labels
from .dataset import ClassStats

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from .image_cache import CachedImageDataset

__all__ = [
    "ImageListDataset",
    "IncompleteDatasetError",
    "IMAGE_EXTENSIONS",
    "check_split_size",
    "finish_split",
    "data_root",
    "is_junk",
    "keep_existing",
    "read_table",
    "scan_images",
]

#: File name endings (lower case) treated as images when a folder is scanned.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")


class IncompleteDatasetError(ValueError):
    """A data set folder holds fewer (or other) images than the official split.

    Raised by the benchmark loaders when the number of images or classes of a split differs from
    the published one; pass ``allow_partial=True`` to load such a copy anyway.
    """


def is_junk(name: str) -> bool:
    """True for files that archives made on macOS carry and that are not images.

    ``._name`` AppleDouble resource forks, ``.DS_Store`` and anything under ``__MACOSX/``.
    """
    parts = name.replace("\\", "/").split("/")
    base = parts[-1]
    return base.startswith("._") or base == ".DS_Store" or "__MACOSX" in parts


def data_root(
    folder: str,
    root: str | os.PathLike[str] | None,
    *,
    dataset: str,
    aliases: Sequence[str] = (),
) -> Path:
    """The folder of a data set: ``root`` if given, else ``$DMLBOOK_DATA/<folder>``.

    Parameters
    ----------
    folder : str
        Conventional folder name under ``$DMLBOOK_DATA`` (e.g. ``"CUB_200_2011"``).
    root : path or None
        An explicit folder; used as given (it need not exist yet: the loader reports what is
        missing inside it).
    dataset : str
        Data set name for messages.
    aliases : sequence of str
        Other folder names tried under ``$DMLBOOK_DATA`` when ``folder`` does not exist.

    Raises
    ------
    ValueError
        If ``root`` is None and ``DMLBOOK_DATA`` is not set.
    """
    if root is not None:
        if not isinstance(root, str | os.PathLike):
            raise TypeError(f"root must be a path (str or os.PathLike), got {type(root).__name__}.")
        return Path(root).expanduser()
    base = os.environ.get("DMLBOOK_DATA", "").strip()
    if not base:
        raise ValueError(
            f"No folder for data set {dataset!r}: pass root='/path/to/{folder}' or set "
            f"DMLBOOK_DATA to the folder that holds {folder}/."
        )
    base_path = Path(base).expanduser()
    for name in (folder, *aliases):
        if (base_path / name).is_dir():
            return base_path / name
    return base_path / folder


def scan_images(folder: Path, *, recursive: bool = True) -> list[str]:
    """Image files under ``folder`` as sorted POSIX paths relative to it, junk files skipped.

    Files whose name ends with one of :data:`IMAGE_EXTENSIONS` (any case) count as images;
    :func:`is_junk` files (macOS ``._*``) and hidden files are left out.
    """
    out: list[str] = []
    folder = Path(folder)
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__MACOSX" and not d.startswith("."))
        if not recursive:
            dirnames[:] = []
        rel_dir = Path(dirpath).relative_to(folder).as_posix()
        for name in filenames:
            if name.startswith(".") or not name.lower().endswith(IMAGE_EXTENSIONS):
                continue
            out.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return sorted(out)


def _listed(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def keep_existing(
    root: Path,
    rel_paths: Sequence[str],
    *,
    dataset: str,
    split: str,
    list_file: Path,
    allow_partial: bool,
) -> np.ndarray:
    """Boolean mask of the listed images that exist under ``root``.

    Each folder is listed once (faster than a ``stat`` per file for 100k images).

    Raises
    ------
    FileNotFoundError
        If a listed image is missing and ``allow_partial`` is false (the message names the first
        missing files and their number). With ``allow_partial`` a warning says how many are left
        out.
    """
    by_dir: dict[str, set[str]] = {}
    keep = np.zeros(len(rel_paths), dtype=bool)
    for i, rel in enumerate(rel_paths):
        parent, _, name = rel.rpartition("/")
        if parent not in by_dir:
            try:
                by_dir[parent] = set(os.listdir(root / parent))
            except OSError:
                by_dir[parent] = set()
        keep[i] = name in by_dir[parent] and not is_junk(rel)
    missing = [rel_paths[i] for i in np.flatnonzero(~keep)]
    if missing and not allow_partial:
        raise FileNotFoundError(
            f"{dataset}/{split}: {len(missing):,} of the {len(rel_paths):,} images listed in "
            f"{list_file} are missing under {root} ({_listed(missing)}). Re-extract the archive, "
            "or pass allow_partial=True to load only the images present."
        )
    if missing:
        warnings.warn(
            f"{dataset}/{split}: leaving out {len(missing):,} of {len(rel_paths):,} listed images "
            f"that are missing under {root} ({_listed(missing, 3)}); allow_partial=True.",
            stacklevel=3,
        )
    return keep


def check_split_size(
    labels: np.ndarray,
    *,
    dataset: str,
    split: str,
    expected_images: int,
    expected_classes: int | None,
    source: str,
    allow_partial: bool,
    note: str = "",
) -> None:
    """Check a split against the official image (and class) count.

    Parameters
    ----------
    labels : ndarray of int
        Labels of the images found for the split.
    expected_images, expected_classes : int
        The published numbers (``expected_classes=None`` skips the class check).
    source : str
        What the images were read from (a list file), named in the message.
    allow_partial : bool
        Accept other counts (a partial copy, e.g. a course subset), as long as the split is not
        empty.
    note : str
        Extra text for the message (e.g. the classification split that is often confused).

    Raises
    ------
    IncompleteDatasetError
        If the counts differ and ``allow_partial`` is false, or the split is empty.
    """
    n = int(labels.size)
    classes = int(np.unique(labels).size)
    if n == 0:
        raise IncompleteDatasetError(
            f"{dataset}/{split}: no images found (read from {source}); expected "
            f"{expected_images:,}. Check root (and the layout described in dmlbook.data.{dataset})."
        )
    if allow_partial:
        return
    wrong_images = n != expected_images
    wrong_classes = expected_classes is not None and classes != expected_classes
    if wrong_images or wrong_classes:
        want = f"{expected_images:,} images" + (
            f" of {expected_classes:,} classes" if expected_classes is not None else ""
        )
        raise IncompleteDatasetError(
            f"{dataset}/{split}: found {n:,} images of {classes:,} classes in {source}, expected "
            f"{want} (the official zero-shot split). {note}A partial copy (e.g. a subset "
            "a course provides)? Pass allow_partial=True to load it anyway."
        )


@dataclass(eq=False, repr=False)
class ImageListDataset(ClassStats, Dataset):
    """A data split as image files: ``root / paths[i]`` is image ``i``, ``labels[i]`` its class.

    Parameters
    ----------
    root : Path
        Folder the paths are relative to.
    paths : list of str
        POSIX paths relative to ``root``, one per image.
    labels : Tensor of shape (N,), int64
        Class id of each image (global ids of the data set).
    name : str
        Data set name (``"cub"``, ``"cars"``, ``"sop"``, ``"inshop"``).
    split : str
        ``"train"`` or ``"test"`` (In-Shop: ``"train"``, ``"query"``, ``"gallery"``).
    class_names : list of str, optional
        Names indexed by class id, covering all classes of the data set.
    metadata : dict of str to Tensor
        Further per-image values, each with N rows (e.g. ``"super_label"`` for SOP, ``"bbox"`` for
        Cars-196); :meth:`subset` keeps them aligned.

    Raises
    ------
    ValueError
        If the numbers of paths, labels and metadata rows differ.
    """

    root: Path
    paths: list[str]
    labels: torch.Tensor
    name: str
    split: str
    class_names: list[str] | None = None
    metadata: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.paths = [str(p) for p in self.paths]
        self.labels = as_labels(self.labels)
        n = len(self.paths)
        if self.labels.shape[0] != n:
            raise ValueError(
                f"{len(self.paths)} paths but {self.labels.shape[0]} labels; pass one label per image."
            )
        for key, value in self.metadata.items():
            if not isinstance(value, torch.Tensor) or value.shape[0] != n:
                raise ValueError(f"metadata[{key!r}] must be a tensor with {n} rows.")
        if self.class_names is not None:
            self.class_names = [str(c) for c in self.class_names]

    def __len__(self) -> int:
        return len(self.paths)

    def path(self, index: int) -> Path:
        """Absolute path of image ``index``."""
        return self.root / self.paths[index]

    @property
    def files(self) -> list[Path]:
        """Absolute paths of all images, in order."""
        return [self.root / p for p in self.paths]

    def open_image(self, index: int) -> Image.Image:
        """Decode image ``index`` as an RGB ``PIL.Image`` (EXIF orientation is not applied).

        Raises
        ------
        ValueError
            If the file cannot be read or decoded; the message names the path.
        """
        from PIL import Image

        path = self.path(index)
        try:
            with Image.open(path) as img:
                return img.convert("RGB")
        except Exception as err:
            raise ValueError(
                f"Cannot decode image {path} ({type(err).__name__}: {err}); re-extract it or "
                "leave it out (allow_partial=True after deleting it)."
            ) from err

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(image, label)``: the decoded image as a ``uint8`` tensor ``(3, H, W)`` at its own size."""
        img = np.asarray(self.open_image(int(index)))
        return torch.from_numpy(img.copy()).permute(2, 0, 1), self.labels[index]

    def subset(self, indices: torch.Tensor | Sequence[int] | np.ndarray) -> ImageListDataset:
        """A new data set with the images at ``indices`` (LongTensor, index list or bool mask)."""
        idx = self._subset_index(indices)
        rows = idx.tolist()
        return ImageListDataset(
            root=self.root,
            paths=[self.paths[i] for i in rows],
            labels=self.labels[idx],
            name=self.name,
            split=self.split,
            class_names=self.class_names,
            metadata={k: v[idx] for k, v in self.metadata.items()},
        )

    def cached(
        self,
        size: int = 256,
        *,
        fit: str = "crop",
        cache_dir: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        draft: bool = True,
        progress: bool | None = None,
    ) -> CachedImageDataset:
        """Decode every image once into a memory-mapped ``uint8`` cache and return it as a data set.

        See :func:`dmlbook.data.image_cache.build_image_cache` for the parameters; the cache is
        reused while the file list (paths and byte sizes) and the options are unchanged.
        """
        from .image_cache import CachedImageDataset, build_image_cache

        cache = build_image_cache(
            self.files,
            size=size,
            fit=fit,
            cache_dir=cache_dir,
            workers=workers,
            draft=draft,
            progress=progress,
            name=f"{self.name}-{self.split}",
            root=self.root,
        )
        return CachedImageDataset(
            cache=cache,
            labels=self.labels,
            name=self.name,
            split=self.split,
            class_names=self.class_names,
            metadata=dict(self.metadata),
        )

    def describe(self) -> str:
        """One-line summary: name, split, size, classes and images per class.

        Examples
        --------
        ``cub/train: 5,864 images, 100 classes, 41-60 per class`` (the folder is in ``repr``).
        """
        n = len(self)
        if n == 0:
            return f"{self.name}/{self.split}: 0 images"
        counts = self.class_counts()
        return (
            f"{self.name}/{self.split}: {n:,} images, {self.num_classes:,} classes, "
            f"{int(counts.min())}-{int(counts.max())} per class"
        )

    def __repr__(self) -> str:
        return f"ImageListDataset({self.describe()}, files under {self.root})"


def read_table(path: Path, *, columns: int, what: str, skip: int = 0) -> Iterable[list[str]]:
    """Yield the whitespace-separated fields of each non-empty line of ``path`` after ``skip`` lines.

    Raises
    ------
    ValueError
        For a line with fewer than ``columns`` fields (the message names file and line).
    """
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if number <= skip or not line.strip():
                continue
            fields = line.split()
            if len(fields) < columns:
                raise ValueError(
                    f"{path}, line {number}: expected {what}, got {line.strip()!r}. Is the file "
                    "truncated or from another data set?"
                )
            yield fields


def finish_split(
    root: Path,
    paths: Sequence[str],
    labels: np.ndarray,
    *,
    dataset: str,
    split: str,
    list_file: Path,
    expected: tuple[int, int | None],
    allow_partial: bool,
    class_names: list[str] | None = None,
    metadata: dict[str, np.ndarray] | None = None,
    note: str = "",
    check_files: bool = True,
) -> ImageListDataset:
    """The last steps every benchmark loader shares.

    Drop listed images that are missing (:func:`keep_existing`, unless ``check_files`` is False
    because the caller listed the folder itself), check the split against its official
    ``expected = (images, classes)`` (:func:`check_split_size`), and build the data set.
    ``metadata`` rows are filtered together with the paths and labels.
    """
    metadata = dict(metadata or {})
    if check_files:
        keep = keep_existing(
            root,
            paths,
            dataset=dataset,
            split=split,
            list_file=list_file,
            allow_partial=allow_partial,
        )
        paths = [p for p, k in zip(paths, keep, strict=True) if k]
        labels = labels[keep]
        metadata = {key: value[keep] for key, value in metadata.items()}
    check_split_size(
        labels,
        dataset=dataset,
        split=split,
        expected_images=expected[0],
        expected_classes=expected[1],
        source=str(list_file),
        allow_partial=allow_partial,
        note=note,
    )
    return ImageListDataset(
        root=root,
        paths=list(paths),
        labels=torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64)),
        name=dataset,
        split=split,
        class_names=class_names,
        metadata={key: torch.from_numpy(np.ascontiguousarray(v)) for key, v in metadata.items()},
    )

"""The skeleton the four benchmark loaders share: find the copy, check it, build the split.

Each loader (:mod:`~dmlbook.data.benchmarks.cub`, :mod:`~dmlbook.data.benchmarks.cars`, :mod:`~dmlbook.data.benchmarks.sop`,
:mod:`~dmlbook.data.benchmarks.inshop`) keeps only what is particular to its data set, the reading of its
list files, and runs the same three steps:

1. :meth:`Layout.locate`: the folder of the copy. ``root=`` if given, else
   ``$DMLBOOK_DATA/<folder>`` (or an alias); in either, the copy may sit one level down
   (``root/CUB_200_2011/images.txt``). A folder counts as the copy when it holds one of the
   layout's *marker* files. :meth:`Layout.find` is the same search without an error, which
   :func:`dmlbook.data.fetch.download.prepare` uses to leave an extracted copy alone.
2. the loader reads its list files into paths and labels;
3. :func:`finish_split`: drop (or refuse) listed images that are missing, check the split against
   its official ``(images, classes)`` and name the missing classes, and build the
   :class:`~dmlbook.data.ImageListDataset`.

A partial copy (a course subset, a hand-extracted half) is refused with a message that names what
is missing and how to load it anyway (``allow_partial=True``; the ``dmlbook`` command spells it
``--allow-partial``). Tested in ``tests/data/benchmarks/test_benchmark.py``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base.errors import ALLOW_PARTIAL, IncompleteDatasetError, listed
from ..base.files import is_junk
from ..base.locations import datasets_folder
from .image_folder import ImageListDataset

__all__ = ["Layout", "check_split_size", "data_root", "finish_split", "keep_existing"]


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
    base_path = datasets_folder()
    if base_path is None:
        raise ValueError(
            f"No folder for data set {dataset!r}: pass root='/path/to/{folder}' or set "
            f"DMLBOOK_DATA to the folder that holds {folder}/."
        )
    for name in (folder, *aliases):
        if (base_path / name).is_dir():
            return base_path / name
    return base_path / folder


@dataclass(frozen=True)
class Layout:
    """Where a benchmark's copy is and how to recognise it.

    Attributes
    ----------
    dataset : str
        Registry name (``"cub"``).
    folder : str
        Conventional folder under ``$DMLBOOK_DATA`` (what the archive extracts to).
    splits : tuple of str
        Valid split names.
    markers : tuple of str
        Paths relative to the copy's folder; a folder holding any of them is the copy.
    missing : str
        The not-found message, with ``{root}`` for the folder searched (see :meth:`locate`).
    aliases : tuple of str
        Other folder names tried under ``$DMLBOOK_DATA`` and under ``root``.
    """

    dataset: str
    folder: str
    splits: tuple[str, ...]
    markers: tuple[str, ...]
    missing: str
    aliases: tuple[str, ...] = ()

    def check_split(self, split: str) -> None:
        """``ValueError`` naming the valid splits if ``split`` is not one of them."""
        if split not in self.splits:
            valid = ", ".join(repr(s) for s in self.splits)
            raise ValueError(
                f"Unknown split {split!r} for data set {self.dataset!r}. Valid splits: {valid}."
            )

    def find(self, base: Path, markers: Sequence[str] | None = None) -> Path | None:
        """The first of ``base``, ``base/<folder>`` and ``base/<alias>`` holding a marker, or None."""
        markers = self.markers if markers is None else markers
        for candidate in (base, *(base / name for name in (self.folder, *self.aliases))):
            if any((candidate / m).exists() for m in markers):
                return candidate
        return None

    def locate(
        self,
        root: str | os.PathLike[str] | None,
        markers: Sequence[str] | None = None,
        **fields: str,
    ) -> Path:
        """The copy's folder for a loader's ``root`` option (:func:`data_root`, then :meth:`find`).

        ``markers`` replaces the layout's own (e.g. the list file of one split); ``{key}`` in the
        ``missing`` message is replaced by ``fields[key]``, and ``{root}`` by the folder searched.

        Raises
        ------
        ValueError
            If ``root`` is None and ``DMLBOOK_DATA`` is not set.
        FileNotFoundError
            If no folder holds a marker; the message says what the copy should hold.
        """
        base = data_root(self.folder, root, dataset=self.dataset, aliases=self.aliases)
        found = self.find(base, markers)
        if found is None:
            message = self.missing
            for key, value in {"root": str(base), **fields}.items():
                message = message.replace("{" + key + "}", value)
            raise FileNotFoundError(message)
        return found


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
            f"{list_file} are missing under {root} ({listed(missing)}). Re-extract the archive, "
            f"or pass {ALLOW_PARTIAL} to load only the images present."
        )
    if missing:
        warnings.warn(
            f"{dataset}/{split}: leaving out {len(missing):,} of {len(rel_paths):,} listed images "
            f"that are missing under {root} ({listed(missing, 3)}); {ALLOW_PARTIAL}.",
            stacklevel=3,
        )
    return keep


def _missing_classes(
    labels: np.ndarray, expected_labels: Sequence[int] | None, class_names: Sequence[str] | None
) -> str:
    """`` Missing classes (3 of 100): 004.Groove_billed_Ani, ...`` or ``""``."""
    if expected_labels is None:
        return ""
    present = set(np.unique(labels).tolist())
    gone = [c for c in expected_labels if c not in present]
    if not gone:
        return ""
    shown = [class_names[c] if class_names is not None else f"label {c}" for c in gone]
    return f" Missing classes ({len(gone):,} of {len(expected_labels):,}): {listed(shown)}."


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
    note_when: int | None = None,
    expected_labels: Sequence[int] | None = None,
    class_names: Sequence[str] | None = None,
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
        Accept other counts (a partial copy, e.g. a subset a course provides), as long as the
        split is not empty.
    note : str
        Extra text for the message (e.g. the classification split that is often confused with
        the zero-shot one), shown only when ``note_when`` is None or equals the image count.
    expected_labels : sequence of int, optional
        The labels the split should hold; those absent are named in the message (with
        ``class_names`` where given).

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
        applies = note and (note_when is None or note_when == n)
        raise IncompleteDatasetError(
            f"{dataset}/{split}: found {n:,} images of {classes:,} classes in {source}, expected "
            f"{want} (the official zero-shot split)."
            + _missing_classes(labels, expected_labels, class_names)
            + (f" {note.strip()}" if applies else "")
            + f" A partial copy (e.g. a subset a course provides)? Pass {ALLOW_PARTIAL} to load "
            "it anyway."
        )


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
    note_when: int | None = None,
    expected_labels: Sequence[int] | None = None,
    check_files: bool = True,
) -> ImageListDataset:
    """The last steps every benchmark loader shares.

    Drop listed images that are missing (:func:`keep_existing`, unless ``check_files`` is False
    because the caller listed the folder itself), check the split against its official
    ``expected = (images, classes)`` (:func:`check_split_size`, which names the absent
    ``expected_labels``), and build the data set. ``metadata`` rows are filtered together with
    the paths and labels.
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
        note_when=note_when,
        expected_labels=expected_labels,
        class_names=class_names,
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

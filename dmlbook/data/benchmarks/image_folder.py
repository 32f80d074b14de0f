"""``ImageListDataset``: a benchmark split as a list of image files with labels (not decoded).

The four benchmark loaders (:mod:`~dmlbook.data.benchmarks.cub`, :mod:`~dmlbook.data.benchmarks.cars`,
:mod:`~dmlbook.data.benchmarks.sop`, :mod:`~dmlbook.data.benchmarks.inshop`) read the official list files of a data set
and return an :class:`ImageListDataset`: file paths relative to ``root``, one label per image and
the split name. Nothing is decoded at load time; images are decoded

* one at a time by ``ds[i]`` (a ``uint8`` tensor ``(3, H, W)`` at the file's own size), or
* once for the whole split into a memory-mapped cache by :meth:`ImageListDataset.cached`, which
  returns a :class:`~dmlbook.data.cache.image_cache.CachedImageDataset` of fixed-size ``uint8`` images,
  the input of the batched GPU augmentation in :mod:`dmlbook.data.batches.augment`.

It follows the conventions of :class:`~dmlbook.data.EmbeddedDataset`: ``.labels`` (int64, the
*global* class ids, so the test split of a zero-shot protocol keeps its own ids), ``len(ds)``,
``classes`` / ``num_classes`` / ``class_counts()``, ``subset()`` and ``describe()``.

What the loaders share (finding the copy, checking counts, naming what is missing) is in
:mod:`dmlbook.data.benchmarks.benchmark`; reading list files and skipping macOS junk in
:mod:`dmlbook.data.base.files`. Tested in ``tests/data/benchmarks/test_image_folder.py``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.utils.data import Dataset

from ...core.validation import as_labels
from ..base.dataset import ClassStats
from ..base.errors import ALLOW_PARTIAL, SKIP_BAD, IncompleteDatasetError, listed
from ..base.files import IMAGE_EXTENSIONS, is_junk, read_table, scan_images
from ..cache.image_cache import CachedImageDataset, build_image_cache

if TYPE_CHECKING:  # pragma: no cover
    from PIL import Image

    from ..cache.image_cache import CachedImageDataset

__all__ = [
    "ImageListDataset",
    "IncompleteDatasetError",
    "IMAGE_EXTENSIONS",
    "is_junk",
    "read_table",
    "scan_images",
]


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
                f"Cannot decode image {path} ({type(err).__name__}: {err}); re-extract it, or "
                f"delete it and pass {ALLOW_PARTIAL}, or cache the split with {SKIP_BAD}."
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
        skip_bad: bool = False,
    ) -> CachedImageDataset:
        """Decode every image once into a memory-mapped ``uint8`` cache and return it as a data set.

        See :func:`dmlbook.data.cache.image_cache.build_image_cache` for the parameters; the cache is
        reused while the file list (paths and byte sizes) and the options are unchanged. With
        ``skip_bad=True`` images that cannot be decoded are left out of the returned data set and
        listed in a warning (default: an error that lists them).
        """
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
            skip_bad=skip_bad,
        )
        dataset = CachedImageDataset(
            cache=cache,
            labels=self.labels,
            name=self.name,
            split=self.split,
            class_names=self.class_names,
            metadata=dict(self.metadata),
        )
        if not cache.bad:
            return dataset
        warnings.warn(
            f"{self.name}/{self.split}: leaving out {len(cache.bad):,} of {len(self):,} images "
            f"that cannot be decoded ({SKIP_BAD}): "
            + listed([f"{p} ({e})" for _, p, e in cache.bad], 10),
            stacklevel=2,
        )
        keep = np.ones(len(self), dtype=bool)
        keep[[i for i, _, _ in cache.bad]] = False
        return dataset.subset(keep)

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

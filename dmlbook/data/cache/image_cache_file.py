"""An image cache on disk: its handle, its manifest format, and opening and checking it.

A built cache (:mod:`dmlbook.data.cache.image_cache` builds it) is a ``(N, size, size, 3)`` ``uint8``
``.npy`` array next to a JSON manifest (format version :data:`CACHE_VERSION`, options, the image
paths with their byte sizes, original image sizes, undecodable images). This module opens such a
pair as an :class:`ImageCache` (a read-only memory map), after checking that the manifest
describes the array, and says what is wrong with a cache that holds undecodable images.
:mod:`dmlbook.data.cache.image_cache` re-exports every public name here. Tests:
``tests/data/cache/test_image_cache_file.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..base.errors import SKIP_BAD
from ..base.locations import cache_folder
from .image_decode import resized_geometry

__all__ = ["CACHE_VERSION", "ImageCache", "default_cache_dir", "open_image_cache"]


#: Format version; part of every cache digest, so a change rebuilds old caches.
CACHE_VERSION = 1


def default_cache_dir() -> Path:
    """``$DMLBOOK_CACHE/images`` if ``DMLBOOK_CACHE`` is set, else ``~/.cache/dmlbook/images``."""
    return cache_folder() / "images"


@dataclass(eq=False)
class ImageCache:
    """A built cache: ``images[i]`` is image ``i`` as a ``size x size x 3`` ``uint8`` array.

    Attributes
    ----------
    path : Path
        The ``.npy`` file (the manifest is ``path.with_suffix(".json")``).
    images : ndarray of shape (N, size, size, 3), uint8
        Read-only memory map.
    image_sizes : ndarray of shape (N, 2), int64
        ``(height, width)`` of each original file.
    regions : ndarray of shape (N, 4), int64
        ``(top, left, height, width)`` of the image pixels in each cell (the whole cell for
        ``fit="crop"``).
    manifest : dict
        The JSON manifest (version, size, fit, draft, digest, root, paths, file sizes).
    """

    path: Path
    images: np.ndarray
    image_sizes: np.ndarray
    regions: np.ndarray
    manifest: dict = field(repr=False)

    @property
    def size(self) -> int:
        """Side of a cell in pixels."""
        return int(self.manifest["size"])

    @property
    def fit(self) -> str:
        """``"crop"`` or ``"pad"``."""
        return str(self.manifest["fit"])

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def bad(self) -> list[tuple[int, str, str]]:
        """``(index, path, error)`` of the images that could not be decoded (``skip_bad``)."""
        return [(int(i), str(p), str(e)) for i, p, e in self.manifest.get("bad", [])]


def _regions(image_sizes: np.ndarray, size: int, fit: str) -> np.ndarray:
    if fit == "crop":  # the image fills every cell
        return np.tile(np.array([[0, 0, size, size]], dtype=np.int64), (len(image_sizes), 1))
    out = np.empty((len(image_sizes), 4), dtype=np.int64)
    for i, (h, w) in enumerate(image_sizes.tolist()):
        out[i] = resized_geometry(int(w), int(h), size, fit)[2]
    return out


def open_image_cache(path: str | os.PathLike[str]) -> ImageCache:
    """Open a complete cache from its ``.npy`` path (its manifest must be next to it).

    Raises
    ------
    FileNotFoundError
        If the array or its manifest is missing (an incomplete build).
    ValueError
        If the manifest does not describe the array (version, shape or count differ).
    """
    path = Path(path)
    manifest_path = path.with_suffix(".json")
    if not path.is_file() or not manifest_path.is_file():
        raise FileNotFoundError(
            f"No complete image cache at {path} (the array and its manifest {manifest_path.name} "
            "must both exist); build it with build_image_cache or ImageListDataset.cached()."
        )
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("version") != CACHE_VERSION:
        raise ValueError(
            f"{manifest_path} has cache format version {manifest.get('version')!r}, this dmlbook "
            f"reads version {CACHE_VERSION}; delete it to rebuild."
        )
    images = np.load(path, mmap_mode="r")
    size, n = int(manifest["size"]), int(manifest["count"])
    if images.shape != (n, size, size, 3) or images.dtype != np.uint8:
        raise ValueError(
            f"{path} holds an array of shape {images.shape} ({images.dtype}), but its manifest "
            f"describes ({n}, {size}, {size}, 3) uint8; delete both files to rebuild."
        )
    sizes = np.asarray(manifest["image_sizes"], dtype=np.int64).reshape(n, 2)
    return ImageCache(
        path=path,
        images=images,
        image_sizes=sizes,
        regions=_regions(sizes, size, str(manifest["fit"])),
        manifest=manifest,
    )


def _decode_error(errors: Sequence[Sequence], n: int, *, built: bool) -> ValueError:
    listed = "; ".join(f"{p} ({e})" for _, p, e in errors[:10])
    more = f"; and {len(errors) - 10} more" if len(errors) > 10 else ""
    state = (
        "the cache was built with blank cells for them, but this call does not skip them"
        if built
        else "so the cache was not built"
    )
    return ValueError(
        f"Cannot decode {len(errors):,} of {n:,} images, {state}: {listed}{more}. Replace these "
        f"files (re-extract the archive), or pass {SKIP_BAD} to leave them out."
    )


def _checked(cache: ImageCache, skip_bad: bool) -> ImageCache:
    """``cache``, unless it holds undecodable images and the caller is strict."""
    if cache.bad and not skip_bad:
        raise _decode_error(cache.bad, len(cache), built=True)
    return cache


def _try_open(final: Path, digest: str) -> ImageCache | None:
    try:
        cache = open_image_cache(final)
    except (FileNotFoundError, ValueError, KeyError, json.JSONDecodeError):
        return None
    return cache if cache.manifest.get("digest") == digest else None

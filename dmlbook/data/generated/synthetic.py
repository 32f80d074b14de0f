"""A procedurally generated *fine-grained* image data set that needs no download.

Each class is a combination of four attributes, drawn the way a bird species combines a body
shape, a plumage colour, a plumage pattern and a distinctive part:

========  ==========================================================================
shape     disc, ring, square, triangle, hexagon, star, cross, crescent
palette   teal, crimson, amber, violet, olive, navy, coral, slate (body, pattern and
          marker colours)
pattern   solid, stripes, checker, dots, rings, split (drawn on the body, in the
          object's own frame, so it turns and scales with the object)
marker    no-marker, dot-top, dot-bottom, bar-top (a small part beside the body)
========  ==========================================================================

so ``8 * 8 * 6 * 4 = 1536`` classes are possible, and two classes often differ in a single
attribute (``ring/teal/stripes/dot-top`` versus ``ring/teal/stripes/dot-bottom``). The class
list is a fixed, seeded choice of combinations: the first half of the classes is the ``train``
split and the second half the ``test`` split (the 100/100 protocol of CUB-200-2011). Both halves
are chosen to use every attribute value about equally often, yet no test *combination* occurs in
training: a model must generalise to unseen combinations of familiar parts (zero-shot retrieval).

Images vary within a class in pose (rotation), scale, position, colour (illumination gain), pixel
noise and background clutter (a coloured, textured background with distractor blobs and lines,
a few of them in front of the object). All of these grow with ``difficulty`` in ``[0, 1]``: at 0
every image of a class is the same picture, at 1 raw pixels are close to useless for retrieval.

Rendering is vectorised numpy on coordinate grids (signed distance functions for every part,
anti-aliased over one pixel), a few seconds for the default 6,000 images. Results are cached as
``uint8`` arrays in ``$DMLBOOK_CACHE`` (default ``~/.cache/dmlbook``) under a file name that
hashes every option and :data:`GENERATOR_VERSION`; the file also stores the sha256 of its
images, checked when it is read (a file whose images were replaced is regenerated, with a
warning).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ..base.atomic import atomic_write
from ..base.dataset import EmbeddedDataset
from ..base.locations import cache_folder
from .synthetic_classes import (
    _SPLITS,
    MARKERS,
    MAX_CLASSES,
    PALETTES,
    PATTERNS,
    SHAPES,
    _check_options,
    _split_classes,
    attributes_of,
    class_attribute_table,
    class_names,
)
from .synthetic_render import GENERATOR_VERSION, generate

__all__ = [
    "GENERATOR_VERSION",
    "SHAPES",
    "PALETTES",
    "PATTERNS",
    "MARKERS",
    "MAX_CLASSES",
    "attributes_of",
    "class_names",
    "class_attribute_table",
    "generate",
    "load",
    "cache_path",
]

#: The modules whose source the cache key hashes: any edit of the generator invalidates old files.
_GENERATOR_SOURCES = ("synthetic.py", "synthetic_classes.py", "synthetic_render.py")


# --------------------------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _source_digest() -> str:
    """Hash of the generator's source: any edit of it invalidates old cache files."""
    folder = Path(__file__).parent
    try:
        h = hashlib.sha256()
        for name in _GENERATOR_SOURCES:
            h.update((folder / name).read_bytes())
        return h.hexdigest()[:12]
    except OSError:  # pragma: no cover - e.g. a frozen install without source files
        return "unknown"


def _cache_key(split: str, **options: object) -> str:
    payload = {
        "generator_version": GENERATOR_VERSION,
        "source": _source_digest(),
        "split": split,
        **options,
    }
    return json.dumps(payload, sort_keys=True)


def cache_path(
    split: str = "train",
    *,
    num_classes: int = 200,
    images_per_class: int = 30,
    image_size: int = 32,
    difficulty: float = 0.5,
    seed: int = 0,
) -> Path:
    """Path of the cache file of these options (whether or not it exists)."""
    key = _cache_key(
        split,
        num_classes=int(num_classes),
        images_per_class=int(images_per_class),
        image_size=int(image_size),
        difficulty=float(difficulty),
        seed=int(seed),
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_folder() / f"synthetic-v{GENERATOR_VERSION}-{split}-{digest}.npz"


def _content_digest(images: np.ndarray) -> str:
    """sha256 of the images' bytes (25 ms for the 9 MB of a default split, 3,000 images of 32 x
    32, measured on a busy 2-core machine; generating them takes seconds)."""
    return hashlib.sha256(np.ascontiguousarray(images).data).hexdigest()


def _read_cache(path: Path, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The cached images, or ``None`` if the file is missing, corrupt or for other options.

    The file holds the key of its options and the sha256 of its images: a file of the right
    name and key whose images were replaced or damaged is regenerated, with a warning.
    """
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            stored_key = str(f["key"])
            images = f["images"]
            digest = str(f["sha256"]) if "sha256" in f.files else "none stored"
        if stored_key != key or images.shape != shape or images.dtype != np.uint8:
            raise ValueError("contents do not match the requested options")
        if digest != _content_digest(images):
            raise ValueError(
                "its images are not the ones it was written with (their sha256 differs from "
                "the one stored beside them)"
            )
        return images
    except Exception as err:  # any unreadable file is regenerated
        warnings.warn(
            f"Ignoring the cache file {path} ({type(err).__name__}: {err}); regenerating it.",
            stacklevel=3,
        )
        return None


def _write_cache(path: Path, key: str, images: np.ndarray) -> None:
    """Write atomically (:func:`~dmlbook.data.base.atomic.atomic_write`); a failure only warns."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = np.array(_content_digest(images))
        atomic_write(path, lambda f: np.savez(f, images=images, key=np.array(key), sha256=digest))
    except OSError as err:
        warnings.warn(
            f"Could not write the data cache {path} ({err}); set DMLBOOK_CACHE to a writable "
            "folder or pass cache=False.",
            stacklevel=3,
        )


def _cached_images(split: str, options: dict, cache: bool) -> np.ndarray:
    """The ``uint8`` images of ``split``: read from the cache, else generated (and cached)."""
    n = options["num_classes"] // 2 * options["images_per_class"]
    shape = (n, 3, options["image_size"], options["image_size"])
    images = None
    if cache:
        path = cache_path(split, **options)
        key = _cache_key(split, **options)
        images = _read_cache(path, key, shape)
    if images is None:
        images, _ = generate(split, **options)
        if cache:
            _write_cache(path, key, images)
    return images


def load(
    split: str = "train",
    *,
    num_classes: int = 200,
    images_per_class: int = 30,
    image_size: int = 32,
    difficulty: float = 0.5,
    seed: int = 0,
    cache: bool = True,
) -> EmbeddedDataset:
    """Load (generating and caching on first use) one split of the synthetic data set.

    Parameters
    ----------
    split : {"train", "test"}
        ``train``: classes ``0 .. num_classes/2 - 1``; ``test``: the other half (unseen
        attribute combinations).
    num_classes : int
        Total number of classes over both splits; even, ``4 <= num_classes <= 1536``.
    images_per_class : int
        At least 2.
    image_size : int
        Side of the square RGB images, ``16 .. 256``.
    difficulty : float
        In ``[0, 1]``; scales rotation (up to +-60 degrees), scale, translation, colour gain,
        pixel noise and background clutter.
    seed : int
        Seed of the image variations (the class list does not depend on it). The same options
        give bit-identical images.
    cache : bool
        Read and write the ``uint8`` cache in :func:`~dmlbook.data.base.locations.cache_folder`.

    Returns
    -------
    EmbeddedDataset
        ``inputs`` float32 in ``[0, 1]`` of shape ``(N, 3, image_size, image_size)``, ``labels``
        the global class ids, ``class_names`` for all ``num_classes`` classes.

    Raises
    ------
    ValueError
        For an unknown split or an option out of range.
    TypeError
        For an option of the wrong type.
    """
    if split not in _SPLITS:
        raise ValueError(
            f"Unknown split {split!r} for data set 'synthetic'. Valid splits: 'train', 'test'."
        )
    d = _check_options(num_classes, images_per_class, image_size, difficulty, seed)
    if not isinstance(cache, bool | np.bool_):
        raise TypeError(f"cache must be True or False, got {cache!r}.")
    options = {
        "num_classes": int(num_classes),
        "images_per_class": int(images_per_class),
        "image_size": int(image_size),
        "difficulty": d,
        "seed": int(seed),
    }
    images = _cached_images(split, options, cache)
    labels = np.repeat(
        np.asarray(_split_classes(split, options["num_classes"]), dtype=np.int64),
        options["images_per_class"],
    )
    inputs = torch.from_numpy(images).float().div_(255.0)
    return EmbeddedDataset(
        inputs=inputs,
        labels=torch.from_numpy(labels),
        name="synthetic",
        split=split,
        class_names=class_names(options["num_classes"]),
    )

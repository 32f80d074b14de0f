"""The classes of the synthetic data set: attribute values, the seeded class list, names, options.

A class is a combination of a shape, a palette, a pattern and a marker (the table in
:mod:`dmlbook.data.generated.synthetic`); :func:`class_attribute_table` fixes which combinations are the
``num_classes`` classes and in which order, independently of the image ``seed``. Rendering is in
:mod:`dmlbook.data.generated.synthetic_render`; tests in ``tests/data/generated/test_synthetic_classes.py``.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import torch

from ...core.validation import is_number

__all__ = [
    "MARKERS",
    "MAX_CLASSES",
    "PALETTES",
    "PATTERNS",
    "SHAPES",
    "attributes_of",
    "class_attribute_table",
    "class_names",
]

SHAPES: tuple[str, ...] = (
    "disc",
    "ring",
    "square",
    "triangle",
    "hexagon",
    "star",
    "cross",
    "crescent",
)
#: palette name -> (body, pattern, marker) RGB colours in [0, 1]
PALETTES: dict[str, tuple[tuple[float, float, float], ...]] = {
    "teal": ((0.05, 0.55, 0.55), (0.95, 0.95, 0.85), (0.95, 0.45, 0.10)),
    "crimson": ((0.75, 0.08, 0.15), (0.98, 0.85, 0.35), (0.15, 0.25, 0.70)),
    "amber": ((0.95, 0.68, 0.10), (0.35, 0.15, 0.05), (0.10, 0.45, 0.85)),
    "violet": ((0.50, 0.22, 0.72), (0.95, 0.90, 0.95), (0.95, 0.85, 0.10)),
    "olive": ((0.42, 0.50, 0.08), (0.92, 0.88, 0.60), (0.75, 0.10, 0.45)),
    "navy": ((0.10, 0.15, 0.50), (0.45, 0.80, 0.95), (0.98, 0.98, 0.98)),
    "coral": ((0.98, 0.50, 0.42), (0.30, 0.08, 0.30), (0.15, 0.60, 0.20)),
    "slate": ((0.42, 0.46, 0.52), (0.08, 0.08, 0.10), (0.90, 0.15, 0.15)),
}
PATTERNS: tuple[str, ...] = ("solid", "stripes", "checker", "dots", "rings", "split")
MARKERS: tuple[str, ...] = ("no-marker", "dot-top", "dot-bottom", "bar-top")
_ATTRIBUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shape", SHAPES),
    ("palette", tuple(PALETTES)),
    ("pattern", PATTERNS),
    ("marker", MARKERS),
)
#: Number of distinct attribute combinations, the largest valid ``num_classes``.
MAX_CLASSES = math.prod(len(values) for _, values in _ATTRIBUTES)

_TABLE_SEED = 20240611  # fixed: the class list never depends on the instance ``seed``
_SPLITS = ("train", "test")


def _balanced_pick(combos: np.ndarray, candidates: list[int], count: int) -> list[int]:
    """Take ``count`` of ``candidates`` (in order) so that each attribute value is used evenly."""
    sizes = [len(values) for _, values in _ATTRIBUTES]
    caps = [math.ceil(count / s) for s in sizes]
    used = [np.zeros(s, dtype=np.int64) for s in sizes]
    picked: list[int] = []
    taken: set[int] = set()
    for i in candidates:
        if len(picked) == count:
            break
        combo = combos[i]
        if all(used[a][combo[a]] < caps[a] for a in range(len(sizes))):
            picked.append(i)
            taken.add(i)
            for a in range(len(sizes)):
                used[a][combo[a]] += 1
    for i in candidates:  # fallback when the caps cannot be met (num_classes close to the maximum)
        if len(picked) == count:
            break
        if i not in taken:
            picked.append(i)
            taken.add(i)
    return picked


@lru_cache(maxsize=16)
def _class_table(num_classes: int) -> np.ndarray:
    sizes = [len(values) for _, values in _ATTRIBUTES]
    combos = np.array(list(itertools.product(*(range(s) for s in sizes))), dtype=np.int64)
    order = np.random.default_rng(_TABLE_SEED).permutation(len(combos)).tolist()
    half = num_classes // 2
    train = _balanced_pick(combos, order, half)
    chosen = set(train)
    test = _balanced_pick(combos, [i for i in order if i not in chosen], half)
    table = combos[train + test]
    table.setflags(write=False)
    return table


def class_attribute_table(num_classes: int = 200) -> np.ndarray:
    """Attribute indices of every class, shape ``(num_classes, 4)``.

    Columns are shape, palette, pattern and marker, indexing :data:`SHAPES`, :data:`PALETTES`,
    :data:`PATTERNS` and :data:`MARKERS`. Rows ``0 .. num_classes/2 - 1`` are the train classes.
    The table depends only on ``num_classes`` (not on the instance ``seed``).
    """
    _check_num_classes(num_classes)
    return _class_table(num_classes).copy()


def attributes_of(class_id: int, num_classes: int = 200) -> dict[str, str]:
    """The attributes of class ``class_id``, to explain what a class is.

    Parameters
    ----------
    class_id : int
        Global class id, ``0 <= class_id < num_classes``.
    num_classes : int
        The ``num_classes`` the data set was generated with.

    Returns
    -------
    dict
        ``{"shape", "palette", "pattern", "marker", "split", "name"}``, e.g.
        ``{"shape": "ring", "palette": "teal", ..., "split": "train",
        "name": "ring/teal/stripes/dot-top"}``.
    """
    _check_num_classes(num_classes)
    if isinstance(class_id, bool) or not isinstance(class_id, int | np.integer):
        if isinstance(class_id, torch.Tensor) and class_id.numel() == 1:
            class_id = int(class_id)
        else:
            raise TypeError(f"class_id must be an int, got {type(class_id).__name__}.")
    class_id = int(class_id)
    if not 0 <= class_id < num_classes:
        raise ValueError(
            f"class_id={class_id} is out of range for num_classes={num_classes}; "
            f"use 0 <= class_id < {num_classes}."
        )
    row = _class_table(num_classes)[class_id]
    out = {attr: values[row[a]] for a, (attr, values) in enumerate(_ATTRIBUTES)}
    out["split"] = "train" if class_id < num_classes // 2 else "test"
    out["name"] = "/".join(values[row[a]] for a, (_, values) in enumerate(_ATTRIBUTES))
    return out


def class_names(num_classes: int = 200) -> list[str]:
    """Names of all classes, indexed by class id, e.g. ``"ring/teal/stripes/dot-top"``."""
    table = class_attribute_table(num_classes)
    return ["/".join(values[row[a]] for a, (_, values) in enumerate(_ATTRIBUTES)) for row in table]


# --------------------------------------------------------------------------------------------
# option checks
# --------------------------------------------------------------------------------------------


def _is_int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def _check_num_classes(num_classes: object) -> None:
    if not _is_int(num_classes):
        raise TypeError(f"num_classes must be an int, got {num_classes!r}.")
    if num_classes < 4 or num_classes % 2 or num_classes > MAX_CLASSES:
        raise ValueError(
            f"num_classes={num_classes} is invalid: it must be even (half train, half test), "
            f"at least 4 and at most {MAX_CLASSES} (the number of attribute combinations)."
        )


def _check_options(
    num_classes: object,
    images_per_class: object,
    image_size: object,
    difficulty: object,
    seed: object,
) -> float:
    _check_num_classes(num_classes)
    if not _is_int(images_per_class):
        raise TypeError(f"images_per_class must be an int, got {images_per_class!r}.")
    if images_per_class < 2:
        raise ValueError(
            f"images_per_class={images_per_class} is too small: metric learning needs at least "
            "2 images per class to form a positive pair."
        )
    if not _is_int(image_size):
        raise TypeError(f"image_size must be an int, got {image_size!r}.")
    if not 16 <= image_size <= 256:
        raise ValueError(f"image_size={image_size} is out of range; use 16 <= image_size <= 256.")
    if not is_number(difficulty):
        raise TypeError(f"difficulty must be a number in [0, 1], got {difficulty!r}.")
    d = float(difficulty)
    if not (math.isfinite(d) and 0.0 <= d <= 1.0):
        raise ValueError(
            f"difficulty={difficulty!r} is out of range; use a number in [0, 1] "
            "(0: identical images per class, 1: strongest variation and clutter)."
        )
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}.")
    return d


def _split_classes(split: str, num_classes: int) -> range:
    half = num_classes // 2
    return range(0, half) if split == "train" else range(half, num_classes)

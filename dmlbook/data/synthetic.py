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
hashes every option and :data:`GENERATOR_VERSION`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .atomic import atomic_write
from .dataset import EmbeddedDataset

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
    "cache_dir",
    "cache_path",
]

#: Bump whenever a change alters the generated pixels; old cache files are then ignored.
#: (The cache key also hashes this module's source, so an edit never reuses stale images.)
GENERATOR_VERSION = 2

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

# Variation at difficulty 1 (it scales linearly with ``difficulty``). Lengths are in units of
# half the image side (the image spans [-1, 1] x [-1, 1]).
_BASE_RADIUS = 0.5  # object radius at difficulty 0: a quarter of the image side
_MAX_ROTATION = math.pi / 3  # +-60 degrees, so "top" markers stay on top
_LOG_SCALE = (-0.5, 0.15)  # object radius multiplied by exp(U(lo, hi) * difficulty)
_MAX_SHIFT = 0.28
_COLOUR_GAIN_SD = 0.12  # per channel, log scale
_BRIGHTNESS = 0.25  # common to all channels, log scale
_BACKGROUND_RANGE = 0.45  # background grey level 0.5 +- this
_BACKGROUND_TINT = 0.25
_TEXTURE_AMPLITUDE = 0.12
_NOISE_SD = 0.13
_DISTRACTOR_SLOTS = 8
_DISTRACTOR_RATE = 1.0  # each slot is used with probability rate * difficulty
_FRONT_FRACTION = 0.25  # share of distractors drawn in front of the object
_CHUNK = 1024  # images rendered at once (memory ~ 100 MB at 32x32)


# --------------------------------------------------------------------------------------------
# classes
# --------------------------------------------------------------------------------------------


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
    if isinstance(difficulty, bool) or not isinstance(difficulty, int | float | np.floating):
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


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------


def _instance_parameters(
    class_id: int, n: int, seed: int, d: float, size: int
) -> dict[str, np.ndarray]:
    """Every random number of the ``n`` images of one class, from a stream of its own."""
    rng = np.random.default_rng([GENERATOR_VERSION, seed, class_id])
    f32 = np.float32
    k = _DISTRACTOR_SLOTS
    p: dict[str, np.ndarray] = {}
    p["angle"] = (rng.uniform(-1, 1, n) * _MAX_ROTATION * d).astype(f32)
    p["radius"] = (_BASE_RADIUS * np.exp(rng.uniform(*_LOG_SCALE, n) * d)).astype(f32)
    p["centre"] = (rng.uniform(-1, 1, (n, 2)) * _MAX_SHIFT * d).astype(f32)
    gain = rng.normal(0, _COLOUR_GAIN_SD, (n, 3)) + rng.uniform(-_BRIGHTNESS, _BRIGHTNESS, (n, 1))
    p["gain"] = np.exp(gain * d).astype(f32)
    level = rng.uniform(-_BACKGROUND_RANGE, _BACKGROUND_RANGE, (n, 1))
    tint = rng.uniform(-_BACKGROUND_TINT, _BACKGROUND_TINT, (n, 3))
    p["background"] = (0.5 + (level + tint) * d).astype(f32)
    p["tex_amp"] = (rng.uniform(0.5, 1.0, (n, 2)) * _TEXTURE_AMPLITUDE * d).astype(f32)
    p["tex_freq"] = rng.uniform(0.5, 2.5, (n, 2)).astype(f32)  # cycles per half image
    p["tex_dir"] = rng.uniform(0, 2 * math.pi, (n, 2)).astype(f32)
    p["tex_phase"] = rng.uniform(0, 2 * math.pi, (n, 2)).astype(f32)
    p["dis_active"] = rng.random((n, k)) < _DISTRACTOR_RATE * d
    p["dis_front"] = rng.random((n, k)) < _FRONT_FRACTION
    p["dis_line"] = rng.random((n, k)) < 0.5
    p["dis_centre"] = rng.uniform(-1.1, 1.1, (n, k, 2)).astype(f32)
    p["dis_axes"] = rng.uniform(0.08, 0.3, (n, k, 2)).astype(f32)
    p["dis_len"] = rng.uniform(0.3, 0.9, (n, k)).astype(f32)
    p["dis_width"] = rng.uniform(0.03, 0.07, (n, k)).astype(f32)
    p["dis_angle"] = rng.uniform(0, math.pi, (n, k)).astype(f32)
    palette_colours = np.array([c for cols in PALETTES.values() for c in cols], dtype=f32)
    from_palette = palette_colours[rng.integers(0, len(palette_colours), (n, k))]
    random_colour = rng.random((n, k, 3)).astype(f32)
    use_palette = rng.random((n, k, 1)) < 0.6
    p["dis_colour"] = np.where(use_palette, from_palette, random_colour).astype(f32)
    p["noise"] = rng.standard_normal((n, 3, size, size), dtype=f32) * f32(_NOISE_SD * d)
    return p


def _coverage(sdf: np.ndarray, pixel: np.ndarray | float) -> np.ndarray:
    """Anti-aliased coverage of a signed distance field (negative inside) over one pixel."""
    return np.clip(0.5 - sdf / pixel, 0.0, 1.0)


def _box(u: np.ndarray, v: np.ndarray, hu: float, hv: float) -> np.ndarray:
    qu = np.abs(u) - hu
    qv = np.abs(v) - hv
    outside = np.sqrt(np.maximum(qu, 0) ** 2 + np.maximum(qv, 0) ** 2)
    return outside + np.minimum(np.maximum(qu, qv), 0)


_C30 = math.cos(math.pi / 6)


def _shape_sdf(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Signed distance (object units, radius about 1) of ``shape``; ``v`` points down."""
    if shape == "disc":
        return np.hypot(u, v) - 0.95
    if shape == "ring":
        return np.abs(np.hypot(u, v) - 0.7) - 0.28
    if shape == "square":
        return _box(u, v, 0.78, 0.78)
    if shape == "triangle":  # apex up, circumradius 1.1
        e = np.maximum(np.maximum(v, -_C30 * u - 0.5 * v), _C30 * u - 0.5 * v)
        return e - 0.55
    if shape == "hexagon":
        av = np.abs(v)
        return np.maximum(av, 0.5 * av + _C30 * np.abs(u)) - 0.86
    if shape == "star":  # five points, one pointing up
        r = np.hypot(u, v)
        t = (np.arctan2(v, u) + math.pi / 2) * (5 / (2 * math.pi))
        tri = np.abs((t - np.floor(t)) * 2 - 1)  # 1 at the tips, 0 between them
        return (r - (0.45 + 0.62 * (1 - tri))) * 0.6
    if shape == "cross":
        return np.minimum(_box(u, v, 0.92, 0.3), _box(u, v, 0.3, 0.92))
    if shape == "crescent":
        bite = np.hypot(u - 0.42, v + 0.28) - 0.72
        return np.maximum(np.hypot(u, v) - 0.95, -bite)
    raise AssertionError(shape)  # pragma: no cover


def _pattern_value(pattern: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Signed value (object units) of ``pattern``: positive where the pattern colour shows."""
    two_pi = 2 * math.pi
    if pattern == "solid":
        return np.full_like(u, -1.0)
    if pattern == "stripes":
        period = 0.62
        return (period / two_pi) * np.sin(u * (two_pi / period))
    if pattern == "checker":
        period = 0.8
        w = two_pi / period
        return (period / two_pi) * np.sin(u * w) * np.sin(v * w)
    if pattern == "dots":
        period = 0.8
        du = u - period * np.round(u / period)
        dv = v - period * np.round(v / period)
        return 0.22 - np.hypot(du, dv)
    if pattern == "rings":
        period = 0.55
        return (period / two_pi) * np.sin(np.hypot(u, v) * (two_pi / period))
    if pattern == "split":
        return u
    raise AssertionError(pattern)  # pragma: no cover


def _marker_sdf(marker: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    if marker == "no-marker":
        return np.full_like(u, 10.0)
    if marker == "dot-top":
        return np.hypot(u, v + 1.3) - 0.28
    if marker == "dot-bottom":
        return np.hypot(u, v - 1.3) - 0.28
    if marker == "bar-top":
        return _box(u, v + 1.28, 0.5, 0.14)
    raise AssertionError(marker)  # pragma: no cover


def _grouped(
    fn: Callable[[str, np.ndarray, np.ndarray], np.ndarray],
    names: tuple[str, ...],
    index: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
) -> np.ndarray:
    """Evaluate ``fn(names[index[b]], u[b], v[b])`` for every image ``b``, one call per name."""
    out = np.empty_like(u)
    for j, name in enumerate(names):
        sel = np.flatnonzero(index == j)
        if sel.size:
            out[sel] = fn(name, u[sel], v[sel])
    return out


def _composite(img: np.ndarray, cov: np.ndarray, colour: np.ndarray) -> None:
    """In place: ``img = img + cov * (colour - img)``; ``cov`` (B, H, W), ``colour`` (B, 3, ...)."""
    img += cov[:, None] * (colour - img)


def _render(attrs: np.ndarray, p: dict[str, np.ndarray], size: int) -> np.ndarray:
    """Render images with attribute rows ``attrs`` (B, 4) and parameters ``p`` -> uint8 (B, 3, S, S)."""
    f32 = np.float32
    b = attrs.shape[0]
    coords = ((np.arange(size, dtype=f32) + 0.5) / size * 2 - 1).astype(f32)
    x = coords[None, None, :]  # (1, 1, W)
    y = coords[None, :, None]  # (1, H, 1), pointing down
    pixel = f32(2.0 / size)

    # background: colour + two low-frequency sinusoids
    img = np.broadcast_to(p["background"][:, :, None, None], (b, 3, size, size)).astype(f32)
    tex = np.zeros((b, size, size), dtype=f32)
    for j in range(2):
        c = np.cos(p["tex_dir"][:, j])[:, None, None]
        s = np.sin(p["tex_dir"][:, j])[:, None, None]
        w = (2 * math.pi * p["tex_freq"][:, j])[:, None, None]
        tex += p["tex_amp"][:, j, None, None] * np.sin(
            w * (c * x + s * y) + p["tex_phase"][:, j, None, None]
        )
    img += tex[:, None]

    def distractors(front: bool) -> None:
        for k in range(_DISTRACTOR_SLOTS):
            on = p["dis_active"][:, k] & (p["dis_front"][:, k] == front)
            sel = np.flatnonzero(on)
            if sel.size == 0:
                continue
            dx = x - p["dis_centre"][sel, k, 0, None, None]
            dy = y - p["dis_centre"][sel, k, 1, None, None]
            ca = np.cos(p["dis_angle"][sel, k])[:, None, None]
            sa = np.sin(p["dis_angle"][sel, k])[:, None, None]
            pu = ca * dx + sa * dy
            pv = -sa * dx + ca * dy
            shrink = 0.6 if front else 1.0
            a = p["dis_axes"][sel, k, 0, None, None] * shrink
            bb = p["dis_axes"][sel, k, 1, None, None] * shrink
            blob = (np.sqrt((pu / a) ** 2 + (pv / bb) ** 2) - 1) * np.minimum(a, bb)
            half = p["dis_len"][sel, k, None, None] * shrink
            line = (
                np.hypot(np.maximum(np.abs(pu) - half, 0), pv) - p["dis_width"][sel, k, None, None]
            )
            sdf = np.where(p["dis_line"][sel, k, None, None], line, blob)
            sub = img[sel]
            _composite(sub, _coverage(sdf, pixel), p["dis_colour"][sel, k, :, None, None])
            img[sel] = sub

    distractors(front=False)

    # the object, in its own frame: u to the right, v down, radius 1
    radius = p["radius"][:, None, None]
    dx = x - p["centre"][:, 0, None, None]
    dy = y - p["centre"][:, 1, None, None]
    ca = np.cos(p["angle"])[:, None, None]
    sa = np.sin(p["angle"])[:, None, None]
    u = ((ca * dx + sa * dy) / radius).astype(f32)
    v = ((-sa * dx + ca * dy) / radius).astype(f32)
    local_pixel = pixel / radius
    palettes = np.array(list(PALETTES.values()), dtype=f32)[attrs[:, 1]]  # (B, 3 colours, 3)
    gain = p["gain"][:, :, None, None]

    body = _coverage(_grouped(_shape_sdf, SHAPES, attrs[:, 0], u, v), local_pixel)
    pattern = np.clip(
        0.5 + _grouped(_pattern_value, PATTERNS, attrs[:, 2], u, v) / local_pixel, 0, 1
    )
    body_colour = palettes[:, 0, :, None, None] + pattern[:, None] * (
        palettes[:, 1, :, None, None] - palettes[:, 0, :, None, None]
    )
    _composite(img, body, body_colour * gain)
    marker = _coverage(_grouped(_marker_sdf, MARKERS, attrs[:, 3], u, v), local_pixel)
    _composite(img, marker, palettes[:, 2, :, None, None] * gain)

    distractors(front=True)

    img += p["noise"]
    np.clip(img, 0.0, 1.0, out=img)
    return np.floor(img * 255 + 0.5).astype(np.uint8)


def _split_classes(split: str, num_classes: int) -> range:
    half = num_classes // 2
    return range(0, half) if split == "train" else range(half, num_classes)


def generate(
    split: str = "train",
    *,
    num_classes: int = 200,
    images_per_class: int = 30,
    image_size: int = 32,
    difficulty: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Render one split without touching the cache.

    Parameters are those of :func:`load`.

    Returns
    -------
    images : ndarray of shape (N, 3, image_size, image_size), uint8
        Ordered by class, ``images_per_class`` consecutive images per class.
    labels : ndarray of shape (N,), int64
        Global class ids (``num_classes // 2`` and up for the test split).
    """
    if split not in _SPLITS:
        raise ValueError(
            f"Unknown split {split!r} for data set 'synthetic'. Valid splits: 'train', 'test'."
        )
    d = _check_options(num_classes, images_per_class, image_size, difficulty, seed)
    classes = _split_classes(split, int(num_classes))
    table = _class_table(int(num_classes))
    n = int(images_per_class)
    labels = np.repeat(np.asarray(classes, dtype=np.int64), n)
    images = np.empty((labels.size, 3, image_size, image_size), dtype=np.uint8)
    per_chunk = max(1, _CHUNK // n)
    class_list = list(classes)
    for start in range(0, len(class_list), per_chunk):
        chunk = class_list[start : start + per_chunk]
        params = [_instance_parameters(c, n, int(seed), d, int(image_size)) for c in chunk]
        merged = {key: np.concatenate([q[key] for q in params]) for key in params[0]}
        attrs = np.repeat(table[chunk], n, axis=0)
        images[start * n : (start + len(chunk)) * n] = _render(attrs, merged, int(image_size))
    return images, labels


# --------------------------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Folder of cached data: ``$DMLBOOK_CACHE`` if set, else ``~/.cache/dmlbook``."""
    env = os.environ.get("DMLBOOK_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dmlbook"


@lru_cache(maxsize=1)
def _source_digest() -> str:
    """Hash of this module's source: any edit of the generator invalidates old cache files."""
    try:
        return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
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
    return cache_dir() / f"synthetic-v{GENERATOR_VERSION}-{split}-{digest}.npz"


def _read_cache(path: Path, key: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The cached images, or ``None`` if the file is missing, corrupt or for other options."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            stored_key = str(f["key"])
            images = f["images"]
        if stored_key != key or images.shape != shape or images.dtype != np.uint8:
            raise ValueError("contents do not match the requested options")
        return images
    except Exception as err:  # any unreadable file is regenerated
        warnings.warn(
            f"Ignoring unreadable cache file {path} ({type(err).__name__}: {err}); regenerating it.",
            stacklevel=3,
        )
        return None


def _write_cache(path: Path, key: str, images: np.ndarray) -> None:
    """Write atomically (:func:`~dmlbook.data.atomic.atomic_write`); a failure only warns."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: np.savez(f, images=images, key=np.array(key)))
    except OSError as err:
        warnings.warn(
            f"Could not write the data cache {path} ({err}); set DMLBOOK_CACHE to a writable "
            "folder or pass cache=False.",
            stacklevel=3,
        )


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
        Read and write the ``uint8`` cache in :func:`cache_dir`.

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

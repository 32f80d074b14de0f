"""Rendering the synthetic data set: per-image variation, signed distance functions, compositing.

:func:`generate` draws ``images_per_class`` variations (pose, scale, position, colour, noise and
clutter, all growing with ``difficulty``) of every class of a split, vectorised over coordinate
grids; the class list and the attribute values are in :mod:`dmlbook.data.generated.synthetic_classes`. The
data set (:func:`dmlbook.data.generated.synthetic.load`) caches what this renders. Tests in
``tests/data/generated/test_synthetic_render.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .synthetic_classes import (
    _SPLITS,
    MARKERS,
    PALETTES,
    PATTERNS,
    SHAPES,
    _check_options,
    _class_table,
    _split_classes,
)

__all__ = ["GENERATOR_VERSION", "generate"]

#: Bump whenever a change alters the generated pixels; old cache files are then ignored.
#: (The cache key also hashes this module's source, so an edit never reuses stale images.)
GENERATOR_VERSION = 2

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

"""Small image files of every kind a benchmark holds, and a PIL reference of a cache cell.

Shared by the tests of the decoded-image cache (``test_image_cache.py``, ``test_image_decode.py``,
``test_image_cache_file.py``, ``test_cached_dataset.py``); the ``images`` and ``cached`` fixtures
that use them are in ``tests/data/conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from dmlbook.data import ImageListDataset

SIZE = 32

#: Eight images: landscape, portrait, square, grey, CMYK, PNG, palette PNG; two classes of four.
SPECS = [
    ("a/0.jpg", (40, 30), "RGB", "JPEG"),
    ("a/1.jpg", (30, 40), "RGB", "JPEG"),
    ("a/2.jpg", (64, 64), "RGB", "JPEG"),
    ("a/3.jpg", (50, 33), "L", "JPEG"),
    ("b/4.jpg", (45, 60), "CMYK", "JPEG"),
    ("b/5.png", (70, 35), "RGB", "PNG"),
    ("b/6.png", (33, 33), "P", "PNG"),
    ("b/7.jpg", (100, 75), "RGB", "JPEG"),
]


def write_image(path: Path, seed: int, size=(40, 30), mode: str = "RGB", fmt: str = "JPEG") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).convert(mode).save(path, format=fmt)


def eight_images(folder: Path) -> ImageListDataset:
    """The :data:`SPECS` images written under ``folder``, as a split named ``toy/train``."""
    for i, (rel, size, mode, fmt) in enumerate(SPECS):
        write_image(folder / rel, i, size, mode, fmt)
    return ImageListDataset(
        root=folder,
        paths=[s[0] for s in SPECS],
        labels=torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]),
        name="toy",
        split="train",
    )


def reference_cell(path: Path, size: int) -> np.ndarray:
    """torchvision's Resize(size) -> CenterCrop(size), written out with PIL."""
    img = Image.open(path).convert("RGB")
    w, h = img.size
    if w <= h:
        new_w, new_h = size, int(size * h / w)
    else:
        new_w, new_h = int(size * w / h), size
    img = img.resize((new_w, new_h), Image.Resampling.BILINEAR)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    return np.asarray(img)[top : top + size, left : left + size]

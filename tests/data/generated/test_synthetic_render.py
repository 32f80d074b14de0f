"""Tests of dmlbook.data.generated.synthetic_render: the images of each class and how difficulty varies them.

Retrieval difficulty is measured with a brute-force raw-pixel Recall@1 (``synthetic_cases.py``),
independent of :mod:`dmlbook.evaluate`.
"""

from __future__ import annotations

import torch

from dmlbook.data import load_dataset
from dmlbook.data.generated.synthetic_render import generate

from ..synthetic_cases import SMALL, recall_at_1


def test_synthetic_image_size_option():
    ds = load_dataset(
        "synthetic", "test", cache=False, num_classes=4, images_per_class=3, image_size=16
    )
    assert ds.inputs.shape == (6, 3, 16, 16)


def test_synthetic_is_deterministic():
    a = load_dataset("synthetic", "train", cache=False, seed=3, **SMALL)
    b = load_dataset("synthetic", "train", cache=False, seed=3, **SMALL)
    c = load_dataset("synthetic", "train", cache=False, seed=4, **SMALL)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.inputs, c.inputs)
    assert torch.equal(a.labels, c.labels)  # the seed changes the images, not the classes


def test_difficulty_zero_gives_identical_images_per_class():
    images, labels = generate("train", difficulty=0.0, **SMALL)
    per_class = images.reshape(10, 6, -1)
    assert (per_class == per_class[:, :1]).all()
    # ... and distinct classes look different
    assert len({row.tobytes() for row in per_class[:, 0]}) == 10
    hard, _ = generate("train", difficulty=0.5, **SMALL)
    assert not (hard.reshape(10, 6, -1) == hard.reshape(10, 6, -1)[:, :1]).all()


def test_difficulty_orders_raw_pixel_recall():
    opts = {"num_classes": 40, "images_per_class": 10, "cache": False}
    r = {}
    for d in (0.0, 0.5, 1.0):
        ds = load_dataset("synthetic", "test", difficulty=d, **opts)
        r[d] = recall_at_1(ds.inputs, ds.labels)
    assert r[0.0] == 1.0
    assert r[0.0] > r[0.5] > r[1.0]

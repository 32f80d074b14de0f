"""What the synthetic data set's tests share: a small configuration and a raw-pixel Recall@1."""

from __future__ import annotations

import math

import torch

SMALL = {"num_classes": 20, "images_per_class": 6, "image_size": 32}


def recall_at_1(x: torch.Tensor, y: torch.Tensor) -> float:
    """Brute-force cosine Recall@1 (leave-one-out), independent of dmlbook.evaluate."""
    x = torch.nn.functional.normalize(x.reshape(len(x), -1).double(), dim=1)
    s = x @ x.T
    s.fill_diagonal_(-math.inf)
    return float((y[s.argmax(1)] == y).double().mean())

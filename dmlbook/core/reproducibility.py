"""Seeding, so that a chapter prints the same numbers every time it runs."""

from __future__ import annotations

import numbers
import os
import random

import numpy as np
import torch

__all__ = ["seed_everything"]


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch, and return a fresh ``torch.Generator`` seeded with ``seed``.

    Passing the returned generator explicitly (to samplers, ``torch.randn`` ...) keeps random
    streams independent of how many other random draws happened before.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**64:
        raise ValueError(
            f"seed must be an int in [0, 2**64) (torch's generators take 64-bit seeds), got "
            f"{seed!r}."
        )
    seed = int(seed)  # a numpy integer too (random.seed refuses numpy's)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    return torch.Generator().manual_seed(seed)

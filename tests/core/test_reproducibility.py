"""Tests of dmlbook.core.reproducibility: one seed fixes Python's, NumPy's and torch's streams, the
returned generator is its own stream, and a seed torch cannot take is refused by name."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from dmlbook.core.reproducibility import seed_everything


def _draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_the_same_seed_gives_the_same_draws_in_every_library():
    seed_everything(7)
    first = _draws()
    seed_everything(7)
    assert _draws() == first
    seed_everything(8)
    assert all(a != b for a, b in zip(_draws(), first, strict=True))


def test_each_library_is_seeded_with_the_seed_itself():
    seed_everything(123)
    python, numpy, torch_ = _draws()
    assert python == random.Random(123).random()
    assert numpy == float(np.random.RandomState(123).rand())
    assert torch_ == torch.rand(3, generator=torch.Generator().manual_seed(123)).tolist()


def test_the_returned_generator_does_not_depend_on_earlier_draws():
    gen = seed_everything(5)
    torch.rand(10)  # draws from the global stream
    assert torch.equal(
        torch.rand(4, generator=gen), torch.rand(4, generator=torch.Generator().manual_seed(5))
    )


def test_a_64_bit_seed_is_folded_for_numpy():
    big = 2**40 + 3
    gen = seed_everything(big)
    assert gen.initial_seed() == big
    assert float(np.random.rand()) == float(np.random.RandomState(big % 2**32).rand())


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, "3", True, None])
def test_a_seed_outside_torchs_range_is_refused(bad):
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*64\)"):
        seed_everything(bad)


@pytest.mark.parametrize("kind", [np.int64, np.uint64, np.int32])
def test_a_numpy_integer_seed_is_the_same_seed(kind):
    """Issue 38: ``seed_everything(np.int64(7))`` seeds as ``seed_everything(7)`` does (Python's
    random.seed refuses a numpy integer; the seed is converted)."""
    seed_everything(7)
    want = (random.random(), float(np.random.rand()), float(torch.rand(())))
    seed_everything(kind(7))
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == want

"""Shared cases of the loss tests: hypothesis strategies, small batches, the loss variants.

Imported by ``tests/losses/*`` and ``tests/core/test_pairs.py`` as ``loss_cases`` (``tests/`` is on
``sys.path`` through ``tests/conftest.py``).
"""

from __future__ import annotations

import hypothesis.strategies as st
import torch
from hypothesis import settings

from dmlbook.core.similarity import cosine_similarity

FAST = settings(max_examples=30, deadline=None)


@st.composite
def batches(draw, max_b: int = 7, n_classes: int = 3, symmetric: bool = True):
    """A label vector (singletons, single class and B = 1 included) and a similarity matrix."""
    B = draw(st.integers(1, max_b))
    labels = draw(st.lists(st.integers(0, n_classes - 1), min_size=B, max_size=B))
    vals = draw(
        st.lists(
            st.one_of(st.floats(-1.0, 1.0), st.sampled_from([-1.0, 1.0, 0.0])),
            min_size=B * B,
            max_size=B * B,
        )
    )
    S = torch.tensor(vals, dtype=torch.float64).reshape(B, B)
    if symmetric:
        S = (S + S.T) / 2
        S.fill_diagonal_(1.0)
    return S, torch.tensor(labels)


def grad_of(fn, S):
    S = S.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(S), S)
    return g


def pk_batch(seed: int = 0, classes: int = 3, per: int = 3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(classes * per, 5, generator=g, dtype=torch.float64)
    y = torch.arange(classes).repeat_interleave(per)
    return cosine_similarity(x), y


def masks(y):
    same = y[:, None] == y[None, :]
    eye = torch.eye(len(y), dtype=torch.bool)
    return same & ~eye, ~same


def rand_S(B: int, seed: int = 0, dtype=torch.float64, d: int = 5) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return cosine_similarity(torch.randn(B, d, generator=g, dtype=dtype))


FORMS = ("similarity", "distance", "squared_distance")

#: Every registered loss, with hyper-parameters that stress it (beta = 50 where it has one).
ALL_LOSSES = {
    "contrastive": {},
    "contrastive_distance": {"variant": "squared_hinge"},
    "triplet": {"form": "distance", "mining": "batch_hard"},
    "lifted": {},
    "lifted_structure": {},
    "lifted_star": {"beta": 50.0},
    "binomial": {"beta": 50.0},
    "binlifted": {"beta": 50.0},
    "npair": {"sampling": "all"},
}

VARIANTS = [
    ("triplet", {}),
    ("triplet", {"form": "squared_distance", "mining": "semihard", "reduction": "mean_nonzero"}),
    ("triplet", {"form": "distance"}),
    ("contrastive_distance", {}),
    ("contrastive_distance", {"variant": "squared_distance", "neg_margin": 2.0}),
    ("lifted", {"form": "distance"}),
    ("lifted_structure", {"form": "similarity", "joint_negatives": False}),
    ("npair", {}),
    ("npair", {"form": "distance"}),
    *ALL_LOSSES.items(),
]


@st.composite
def cosine_batches(draw, max_b: int = 9, n_classes: int = 3):
    """Labels (singletons, one class, B = 1 included) and the cosine similarities of random
    embeddings (:func:`rand_S`)."""
    B = draw(st.integers(1, max_b))
    labels = draw(st.lists(st.integers(0, n_classes - 1), min_size=B, max_size=B))
    seed = draw(st.integers(0, 10_000))
    return rand_S(B, seed), torch.tensor(labels)


@st.composite
def unit_sphere_batches(draw, max_b: int = 8, n_classes: int = 3):
    """Labels and the cosine similarities of random unit vectors in 3-d, so that Liu et al.'s
    distances ``D = sqrt(2 - 2 S)`` are those of real points (singletons and ``B = 1`` included)."""
    B = draw(st.integers(1, max_b))
    y = draw(st.lists(st.integers(0, n_classes - 1), min_size=B, max_size=B))
    seed = draw(st.integers(0, 2**16))
    x = torch.randn(B, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return cosine_similarity(x), torch.tensor(y)


def random_narrowing(B: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A miner's masks as keyword arguments: about 30 % of the pairs dropped from each, possibly
    leaving an anchor without positives or negatives."""
    g = torch.Generator().manual_seed(seed + B)
    return {"pos_mask": torch.rand(B, B, generator=g) < 0.7,
            "neg_mask": torch.rand(B, B, generator=g) < 0.7}  # fmt: skip

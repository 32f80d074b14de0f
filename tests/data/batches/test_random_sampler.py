"""Tests of dmlbook.data.batches.random_sampler (Liu et al.'s random sampler) and fit(sampler=...)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.data import PKSampler, RandomBatchSampler


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 60), st.integers(1, 10), st.integers(0, 1000))
def test_an_epoch_is_one_pass_without_repeats(n, batch_size, seed):
    if batch_size > n:
        return
    labels = np.arange(n) % 3
    sampler = RandomBatchSampler(labels, batch_size, seed=seed)
    batches = list(sampler)
    assert len(batches) == len(sampler) == n // batch_size
    seen = torch.cat(batches).tolist()
    assert all(len(b) == batch_size for b in batches)
    assert len(set(seen)) == len(seen)  # no sample twice within a pass
    assert set(seen) <= set(range(n))


def test_batches_per_epoch_continues_into_a_new_pass():
    sampler = RandomBatchSampler(list(range(10)), 4, seed=0, batches_per_epoch=5)
    batches = [b.tolist() for b in sampler]
    assert len(batches) == 5
    # two batches per pass of 10 (the last 2 samples are dropped), then a new permutation
    assert len(set(batches[0] + batches[1])) == 8 and len(set(batches[2] + batches[3])) == 8


def test_epochs_are_reproducible_and_differ():
    labels = torch.arange(100) % 10
    a = RandomBatchSampler(labels, 20, seed=3)
    b = RandomBatchSampler(labels, 20, seed=3)
    a.set_epoch(2)
    b.set_epoch(2)
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    b.set_epoch(3)
    assert [x.tolist() for x in a] != [x.tolist() for x in b]


def test_classes_are_not_balanced_as_pk_batches_are():
    labels = torch.arange(2720) // 20  # Omniglot's training split: 136 characters x 20
    rand = RandomBatchSampler(labels, 80, seed=0, batches_per_epoch=200)
    pk = PKSampler(labels, 80, 5, seed=0, batches_per_epoch=200)

    def positives_per_anchor(sampler):
        counts = []
        for idx in sampler:
            y = labels[idx]
            counts.append(((y[:, None] == y[None, :]).sum(1) - 1).double().mean())
        return float(torch.stack(counts).mean())

    # random: 79 others drawn from 2,719, of which 19 share the anchor's class
    assert abs(positives_per_anchor(rand) - 79 * 19 / 2719) < 0.05
    assert positives_per_anchor(pk) == 4.0


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((list(range(5)), 6), {}, "larger than the 5 samples"),
        ((list(range(5)), 0), {}, "batch_size must be a positive int"),
        ((list(range(5)), 2), {"seed": -1}, "seed must be a non-negative int"),
        ((list(range(5)), 2), {"batches_per_epoch": 0}, "batches_per_epoch must be"),
    ],
)
def test_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        RandomBatchSampler(*args, **kwargs)


def test_fit_trains_with_random_batches_and_rejects_unknown_samplers():
    from dmlbook.losses import get_loss
    from dmlbook.models import EmbeddingMLP
    from dmlbook.training import fit

    g = torch.Generator().manual_seed(0)
    x = torch.randn(60, 6, generator=g)
    y = torch.arange(12).repeat_interleave(5)
    torch.manual_seed(0)
    model = EmbeddingMLP(6, (8,), 4)
    history = fit(
        model, get_loss("multi_similarity"), (x, y), (x, y), epochs=2, batch_size=20,
        sampler="random", progress=False,
    )  # fmt: skip
    assert history.attrs["sampler"] == "random" and np.isfinite(history["R@1"]).all()
    with pytest.raises(ValueError, match="sampler must be one of 'pk', 'random'"):
        fit(model, get_loss("contrastive"), (x, y), epochs=1, sampler="uniform", progress=False)

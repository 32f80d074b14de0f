"""Tests of dmlbook.data.PKSampler: batch structure, determinism, coverage and errors."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, TensorDataset

from dmlbook.data import EmbeddedDataset, PKSampler
from dmlbook.data.batches.sampler import DistributedPKSampler

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def pk_setups(draw, min_class_size: int | None = None):
    """Random (labels, batch_size, k, seed, batches_per_epoch) with shuffled, non-contiguous ids.

    Class sizes are at least ``k`` unless ``min_class_size`` says otherwise.
    """
    k = draw(st.integers(2, 5))
    n_classes = draw(st.integers(1, 12))
    p = draw(st.integers(1, n_classes))
    low = k if min_class_size is None else min_class_size
    sizes = draw(st.lists(st.integers(low, 12), min_size=n_classes, max_size=n_classes))
    ids = draw(
        st.lists(st.integers(-50, 10_000), min_size=n_classes, max_size=n_classes, unique=True)
    )
    order_seed = draw(st.integers(0, 2**32 - 1))
    labels = np.random.default_rng(order_seed).permutation(np.repeat(ids, sizes))
    seed = draw(st.integers(0, 2**31))
    bpe = draw(st.none() | st.integers(1, 25))
    return torch.from_numpy(labels), p * k, k, seed, bpe


def batches_of(sampler: PKSampler) -> list[torch.Tensor]:
    return list(sampler)


def check_batch(batch: torch.Tensor, labels: torch.Tensor, batch_size: int, k: int) -> None:
    assert isinstance(batch, torch.Tensor) and batch.dtype == torch.int64
    assert batch.shape == (batch_size,)
    assert int(batch.min()) >= 0 and int(batch.max()) < len(labels)
    counts = Counter(labels[batch].tolist())
    assert len(counts) == batch_size // k
    assert set(counts.values()) == {k}


# ------------------------------------------------------------------------------------------
# properties
# ------------------------------------------------------------------------------------------


@SETTINGS
@given(pk_setups())
def test_every_batch_is_p_classes_times_k(setup):
    labels, batch_size, k, seed, bpe = setup
    sampler = PKSampler(labels, batch_size, k, seed=seed, batches_per_epoch=bpe)
    batches = batches_of(sampler)
    expected = bpe if bpe is not None else max(1, len(labels) // batch_size)
    assert len(sampler) == len(batches) == expected
    for batch in batches:
        check_batch(batch, labels, batch_size, k)
        # classes with >= k images never repeat an index inside a batch
        assert len(set(batch.tolist())) == batch_size


@SETTINGS
@given(pk_setups(min_class_size=2))
def test_small_classes_are_sampled_with_replacement(setup):
    labels, batch_size, k, seed, bpe = setup
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = PKSampler(labels, batch_size, k, seed=seed, batches_per_epoch=bpe)
    sizes = Counter(labels.tolist())
    for batch in sampler:
        check_batch(batch, labels, batch_size, k)
        for c in set(labels[batch].tolist()):
            picked = batch[labels[batch] == c].tolist()
            # every image of a small class is in the batch; large classes have no repeats
            assert len(set(picked)) == min(k, sizes[c])


@SETTINGS
@given(pk_setups(), st.integers(0, 1000))
def test_epochs_are_deterministic(setup, epoch):
    labels, batch_size, k, seed, bpe = setup
    a = PKSampler(labels, batch_size, k, seed=seed, batches_per_epoch=bpe)
    first = batches_of(a)
    assert all(torch.equal(x, y) for x, y in zip(first, batches_of(a), strict=True))
    a.set_epoch(epoch)
    b = PKSampler(labels, batch_size, k, seed=seed, batches_per_epoch=bpe)
    b.set_epoch(epoch)
    assert all(torch.equal(x, y) for x, y in zip(batches_of(a), batches_of(b), strict=True))
    a.set_epoch(0)  # resuming at epoch 0 replays epoch 0
    assert all(torch.equal(x, y) for x, y in zip(first, batches_of(a), strict=True))


@SETTINGS
@given(pk_setups())
def test_classes_are_visited_evenly(setup):
    labels, batch_size, k, seed, _ = setup
    n_classes = len(set(labels.tolist()))
    p = batch_size // k
    cycle = math.ceil(n_classes / p)
    for bpe in (cycle, 2 * cycle + 1):
        sampler = PKSampler(labels, batch_size, k, seed=seed, batches_per_epoch=bpe)
        visits = Counter()
        for batch in sampler:
            visits.update(set(labels[batch].tolist()))
        # ceil(C / P) batches already show every class; visit counts differ by at most one
        assert set(visits) == set(labels.tolist())
        assert max(visits.values()) - min(visits.values()) <= 1


@SETTINGS
@given(pk_setups(), st.integers(1, 3))
def test_images_within_a_class_are_covered_evenly(setup, epochs):
    labels, batch_size, k, seed, bpe = setup
    sampler = PKSampler(labels, batch_size, k, seed=seed, batches_per_epoch=bpe)
    total = Counter()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        seen = Counter()
        for batch in sampler:
            seen.update(batch.tolist())
        total.update(seen)
        for c in set(labels[torch.tensor(list(seen))].tolist()):
            members = torch.nonzero(labels == c).flatten().tolist()
            counts = [seen[i] for i in members]
            assert max(counts) - min(counts) <= 1  # a queue without replacement per class
    for c in set(labels.tolist()):
        counts = [total[i] for i in torch.nonzero(labels == c).flatten().tolist()]
        assert max(counts) - min(counts) <= epochs


# ------------------------------------------------------------------------------------------
# examples
# ------------------------------------------------------------------------------------------


def test_an_even_epoch_shows_every_image_once():
    labels = torch.arange(10).repeat_interleave(8)  # 10 classes x 8 images
    sampler = PKSampler(labels, batch_size=20, k=4, seed=5)
    assert len(sampler) == 4  # "an epoch shows about N images"
    seen = torch.cat(list(sampler)).sort().values
    assert torch.equal(seen, torch.arange(80))


def test_epochs_differ_and_seeds_differ():
    labels = torch.arange(20).repeat_interleave(6)
    a = PKSampler(labels, 16, 4, seed=0)
    e0 = torch.cat(list(a))
    a.set_epoch(1)
    assert not torch.equal(e0, torch.cat(list(a)))
    assert not torch.equal(e0, torch.cat(list(PKSampler(labels, 16, 4, seed=1))))


def test_accepts_numpy_and_lists():
    labels = [0, 0, 1, 1, 2, 2]
    for given_labels in (labels, np.array(labels)):
        batches = list(PKSampler(given_labels, 4, 2, batches_per_epoch=3))
        assert len(batches) == 3 and all(b.shape == (4,) for b in batches)


def test_small_classes_warn_once():
    labels = torch.tensor([0] * 6 + [1] * 6 + [2] * 2 + [3] * 3 + [4] * 5)
    with pytest.warns(
        UserWarning, match=r"2 class\(es\) have fewer than k=4 images \(classes 2, 3\)"
    ) as rec:
        sampler = PKSampler(labels, 8, 4, batches_per_epoch=20)
    assert len(rec) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # iterating does not warn again
        for batch in sampler:
            check_batch(batch, labels, 8, 4)


def test_drop_singletons():
    labels = torch.tensor([0, 0, 0, 1, 2, 2, 3, 4, 4])
    with pytest.warns(
        UserWarning, match=r"leaves out 2 class\(es\) with a single image \(classes 1, 3\)"
    ) as rec:
        sampler = PKSampler(labels, 4, 2, drop_singletons=True, batches_per_epoch=10)
    assert len(rec) == 1
    assert sampler.classes.tolist() == [0, 2, 4]
    used = torch.cat(list(sampler))
    assert not set(used.tolist()) & {3, 6}


def test_works_as_dataloader_batch_sampler():
    ds = EmbeddedDataset(
        torch.randn(40, 3, generator=torch.Generator().manual_seed(0)),
        torch.arange(8).repeat_interleave(5),
        "toy",
        "train",
    )
    sampler = PKSampler(ds.labels, 12, 3, seed=2)
    loader = DataLoader(ds, batch_sampler=sampler)
    assert len(loader) == len(sampler) == 3
    for (x, y), idx in zip(loader, sampler, strict=True):
        assert x.shape == (12, 3)
        assert torch.equal(x, ds.inputs[idx]) and torch.equal(y, ds.labels[idx])
    tensors = TensorDataset(ds.inputs, ds.labels)
    x, y = next(iter(DataLoader(tensors, batch_sampler=sampler)))
    assert sorted(Counter(y.tolist()).values()) == [3, 3, 3, 3]


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------

LABELS = torch.arange(10).repeat_interleave(4)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"batch_size": 50, "k": 4},
            ValueError,
            r"batch_size=50 is not a multiple of k=4; use e\.g\. 48 or 52",
        ),
        ({"batch_size": 8, "k": 1}, ValueError, r"k=1 is too small.*k >= 2"),
        ({"batch_size": 3, "k": 4}, ValueError, r"batch_size=3 is smaller than k=4"),
        (
            {"batch_size": 44, "k": 4},
            ValueError,
            r"needs P=11 distinct classes.*only 10.*at most 40",
        ),
        ({"batch_size": 8, "k": 4.0}, TypeError, "k must be an int"),
        ({"batch_size": "8", "k": 4}, TypeError, "batch_size must be an int"),
        ({"batch_size": 8, "k": 4, "seed": -1}, ValueError, "seed must be a non-negative int"),
        (
            {"batch_size": 8, "k": 4, "batches_per_epoch": 0},
            ValueError,
            "batches_per_epoch must be a positive int",
        ),
    ],
)
def test_argument_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        PKSampler(LABELS, **kwargs)


def test_singleton_class_error():
    labels = torch.tensor([0, 0, 7, 3, 3])
    with pytest.raises(
        ValueError,
        match=r"class 7 has a single image, so it cannot form a positive pair; drop singleton classes",
    ):
        PKSampler(labels, 4, 2)


def test_too_few_classes_after_dropping_singletons():
    labels = torch.tensor([0, 0, 1, 2, 3])
    with pytest.raises(ValueError, match="only 1 usable classes"), pytest.warns(UserWarning):
        PKSampler(labels, 4, 2, drop_singletons=True)


def test_labels_must_be_1d_and_integer():
    with pytest.raises(ValueError, match="1-D"):
        PKSampler(LABELS.reshape(4, 10), 8, 4)
    with pytest.raises(ValueError, match="integer"):
        PKSampler(torch.tensor([0.5, 0.5, 1.0, 1.0]), 4, 2)
    with pytest.raises(ValueError, match="empty"):
        PKSampler(torch.tensor([], dtype=torch.long), 4, 2)


def test_set_epoch_checks():
    sampler = PKSampler(LABELS, 8, 4)
    with pytest.raises(ValueError, match="epoch must be a non-negative int"):
        sampler.set_epoch(-1)
    with pytest.raises(ValueError, match="epoch must be a non-negative int"):
        sampler.set_epoch(1.0)


# ------------------------------------------------------------------------------------------
# DistributedPKSampler: each process's share of the global batch (issue 16)
# ------------------------------------------------------------------------------------------


@given(pk_setups(), st.integers(1, 4), st.integers(0, 5))
@SETTINGS
def test_distributed_shares_are_the_global_batch_split_by_class(setup, world, epoch):
    labels, batch_size, k, seed, bpe = setup
    p = batch_size // k
    world = math.gcd(world, p)  # a world size that divides P
    kw = {"seed": seed, "batches_per_epoch": bpe}
    whole = PKSampler(labels, batch_size, k, **kw)
    shares = [
        DistributedPKSampler(labels, batch_size, k, rank=r, world_size=world, **kw)
        for r in range(world)
    ]
    for s in [whole, *shares]:
        s.set_epoch(epoch)
    assert all(len(s) == len(whole) for s in shares)
    for batch, *parts in zip(whole, *shares, strict=True):
        # Concatenated in rank order, the shares are the one-process batch.
        assert torch.equal(torch.cat(parts), batch)
        classes = [set(labels[part].tolist()) for part in parts]
        for part, cls in zip(parts, classes, strict=True):
            assert part.numel() == batch_size // world and len(cls) == p // world
            assert Counter(labels[part].tolist()) == dict.fromkeys(cls, k)
        # Distinct classes on every process.
        assert sum(len(c) for c in classes) == len(set().union(*classes)) == p


def test_distributed_sampler_errors():
    labels = torch.arange(12).repeat_interleave(4)
    with pytest.raises(
        ValueError, match=r"P=6 classes per batch, which do not split evenly over 4"
    ):
        DistributedPKSampler(labels, 24, 4, rank=0, world_size=4)
    with pytest.raises(ValueError, match=r"e.g. batch_size=16 or 32"):
        DistributedPKSampler(labels, 24, 4, rank=0, world_size=4)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 2\)"):
        DistributedPKSampler(labels, 24, 4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        DistributedPKSampler(labels, 24, 4, rank=0, world_size=0)

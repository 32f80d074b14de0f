"""Triplet loss (Wang et al. 2019, Eq. 5; Liu et al., Eq. 12, 37) against loops and its GPW weight.

Implementation: :mod:`dmlbook.losses.triplet`; chapter ``book/04_triplet.ipynb``; the miners are
tested in ``tests/test_mining.py``.
"""

from __future__ import annotations

import contextlib

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import (
    FAST,
    FORMS,
    batches,
    grad_of,
    masks,
    pk_batch,
    rand_S,
)

from dmlbook.losses import triplet as triplet_module
from dmlbook.losses import (
    triplet_loss,
)
from dmlbook.pairs import dissimilarity
from dmlbook.reference.classic import triplet_loss_reference as ref_triplet
from dmlbook.similarity import cosine_similarity


@FAST
@given(batches(), st.sampled_from(FORMS), st.sampled_from(["mean", "mean_nonzero", "sum"]))
def test_triplet_matches_loops(batch, form, reduction):
    S, y = batch
    got = triplet_loss(S, y, 0.3, form=form, reduction=reduction)
    want = ref_triplet(S.tolist(), y.tolist(), 0.3, form, reduction)
    assert float(got) == pytest.approx(want, abs=1e-7)


def test_squared_distance_triplet_is_similarity_triplet_with_half_margin():
    """Liu et al. Eq. 37 on unit vectors = 2 x Wang et al. Eq. 5 with margin m / 2."""
    g = torch.Generator().manual_seed(0)
    S = cosine_similarity(torch.randn(9, 4, generator=g, dtype=torch.float64))
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    a = triplet_loss(S, y, 0.4, form="squared_distance", reduction="sum")
    b = triplet_loss(S, y, 0.2, form="similarity", reduction="sum")
    assert float(a) == pytest.approx(2 * float(b), rel=1e-12)


def test_triplet_weight_counts_violated_triplets():
    S, y = pk_batch(4)
    lam = 0.2
    g = grad_of(lambda s: triplet_loss(s, y, lam, reduction="sum"), S)
    pos, neg = masks(y)
    viol = pos[:, :, None] & neg[:, None, :] & (S[:, None, :] - S[:, :, None] + lam > 0)
    torch.testing.assert_close(g, viol.sum(1).double() - viol.sum(2).double())


def _dense_triplet(S, y, margin, form, reduction):
    """The (B, B, B) form, written out with autograd (the loss before its O(B^2) path)."""
    pos, neg = masks(y)
    d = dissimilarity(S, form)
    valid = pos[:, :, None] & neg[:, None, :]
    per = torch.relu(d[:, :, None] - d[:, None, :] + margin)[valid]
    if reduction == "mean_nonzero":
        per = per[per > 0]
    if reduction == "sum":
        return per.sum()
    return per.sum() / max(per.numel(), 1)


@FAST
@given(
    batches(max_b=9),
    st.sampled_from(FORMS),
    st.sampled_from(["mean", "mean_nonzero", "sum"]),
    st.sampled_from([1, 5, 10**6]),
)
def test_all_triplets_in_blocks_matches_loops_and_dense_gradient(batch, form, reduction, block):
    """Any block size (one pair at a time, a few, all at once) gives the loop's value and the
    gradient of the dense (B, B, B) form."""
    S, y = batch
    with triplet_block(block * S.shape[0]):
        got = triplet_loss(S, y, 0.3, form=form, reduction=reduction)
        g = grad_of(lambda s: triplet_loss(s, y, 0.3, form=form, reduction=reduction), S)
    want = ref_triplet(S.tolist(), y.tolist(), 0.3, form, reduction)
    assert float(got) == pytest.approx(want, abs=1e-9)
    g_dense = grad_of(lambda s: _dense_triplet(s, y, 0.3, form, reduction), S)
    torch.testing.assert_close(g, g_dense, rtol=1e-9, atol=1e-12)


@contextlib.contextmanager
def triplet_block(value: int):
    """Run with ``dmlbook.losses.triplet.TRIPLET_BLOCK = value``."""
    saved, triplet_module.TRIPLET_BLOCK = triplet_module.TRIPLET_BLOCK, value
    try:
        yield
    finally:
        triplet_module.TRIPLET_BLOCK = saved


def test_all_triplets_never_builds_a_b_cubed_tensor():
    """B = 400: one (B, B, B) float tensor is 256 MB (the dense form allocates several); no
    operator allocates an eighth of that (the profiler sums each operator's allocations)."""
    S, y = rand_S(400, dtype=torch.float32, d=16).requires_grad_(True), torch.arange(400) // 5
    with torch.profiler.profile(profile_memory=True) as prof:
        triplet_loss(S, y, 0.2, form="distance", reduction="mean_nonzero").backward()
    largest = max(e.cpu_memory_usage for e in prof.key_averages())
    assert 0 < largest < 4 * 400**3 / 8

"""Triplet loss (Wang et al. 2019, Eq. 5; Liu et al., Eq. 12, 37) against loops and its GPW weight.

Implementation: :mod:`dmlbook.losses.triplet`; chapter ``book/04_triplet.ipynb``; the miners are
tested in ``tests/test_mining.py``.
"""

from __future__ import annotations

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
)

from dmlbook.losses import (
    triplet_loss,
)
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

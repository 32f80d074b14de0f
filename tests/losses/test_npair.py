"""N-pair loss (Sohn; Liu et al., Eq. 13) against loops and its GPW weight.

Implementation: :mod:`dmlbook.losses.npair`; chapter ``book/07_npair.ipynb``.
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
    pk_batch,
)

from dmlbook.losses import (
    npair_loss,
)
from dmlbook.reference.classic import npair_loss_reference as ref_npair


@FAST
@given(batches(), st.sampled_from(FORMS), st.sampled_from(["npair", "all"]))
def test_npair_matches_loops(batch, form, sampling):
    S, y = batch
    got = npair_loss(S, y, form=form, sampling=sampling)
    assert float(got) == pytest.approx(ref_npair(S.tolist(), y.tolist(), form, sampling), abs=1e-7)


def test_npair_negative_weight_has_the_positive_in_its_denominator():
    S, y = pk_batch(3, classes=4, per=2)  # pairs (0,1), (2,3), (4,5), (6,7)
    g = grad_of(lambda s: npair_loss(s, y, reduction="sum"), S)
    a, p, negs = 0, 1, [3, 5, 7]
    denom = S[a, p].exp() + S[a, negs].exp().sum()
    torch.testing.assert_close(g[a, negs], S[a, negs].exp() / denom, rtol=1e-10, atol=1e-12)
    assert float(g[a, p]) == pytest.approx(-float(S[a, negs].exp().sum() / denom), rel=1e-10)
    # the anchors' own negatives that are not other classes' positives get no weight
    assert float(g[a, [2, 4, 6]].abs().sum()) == 0.0

"""The pair algebra (:mod:`dmlbook.core.pairs`): masked log-sum-exp and the safe square root."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import (
    FAST,
    batches,
)

from dmlbook.core.pairs import (
    dissimilarity,
    masked_logsumexp,
    safe_distance,
)


@FAST
@given(batches(max_b=6, symmetric=False), st.floats(1.0, 200.0))
def test_masked_logsumexp_matches_torch_and_survives_empty_rows(batch, scale):
    S, y = batch
    x = (S * scale).requires_grad_(True)
    mask = y[:, None] == y[None, :]
    mask[0] = False  # an empty row
    value, nonempty = masked_logsumexp(x, mask, dim=1)
    rows = mask.any(1)
    want = torch.logsumexp(torch.where(mask, x, -math.inf), dim=1)
    torch.testing.assert_close(value[rows], want[rows])
    assert value[0].item() == 0.0 and not nonempty[0]
    value.sum().backward()
    assert bool(torch.isfinite(x.grad).all()) and float(x.grad[0].abs().sum()) == 0.0
    one, _ = masked_logsumexp(x.detach(), mask, dim=1, add_one=True)
    padded = torch.cat([torch.where(mask, x, -math.inf), torch.zeros(len(y), 1, dtype=x.dtype)], 1)
    want1 = torch.logsumexp(padded, 1)
    torch.testing.assert_close(one, want1.detach())


def test_safe_distance_has_finite_gradient_at_zero():
    S = torch.tensor([1.0, 1.0 - 1e-9, 0.5, -1.0], dtype=torch.float64, requires_grad=True)
    D = dissimilarity(S, "distance")
    D.sum().backward()
    assert D[0].item() == 0.0 and bool(torch.isfinite(S.grad).all())
    assert D[3].item() == pytest.approx(2.0)
    assert safe_distance(torch.tensor([-1e-7])).item() == 0.0

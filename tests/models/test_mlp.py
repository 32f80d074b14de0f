"""Tests of dmlbook.models.mlp: the embedding MLP's shapes, unit norm and defaults (its bad
arguments and inputs are checked beside SmallCNN's, in tests/models/test_small_cnn.py)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.models import EmbeddingMLP


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 9),
    in_features=st.integers(1, 20),
    hidden=st.lists(st.integers(1, 16), max_size=2),
    dim=st.integers(1, 12),
)
def test_mlp_shapes_and_unit_norm(n, in_features, hidden, dim):
    torch.manual_seed(0)
    model = EmbeddingMLP(in_features, tuple(hidden), dim)
    out = model(torch.randn(n, in_features))
    assert out.shape == (n, dim)
    norms = out.norm(dim=1)
    # A row can be exactly zero only if the head output is zero; otherwise it is unit length.
    assert torch.allclose(norms[norms > 0], torch.ones_like(norms[norms > 0]), atol=1e-5)


def test_mlp_default_matches_digits():
    model = EmbeddingMLP()
    assert model(torch.rand(4, 64)).shape == (4, 32)
    assert model.dim == 32 and model.in_features == 64


def test_a_numpy_integer_hidden_width_is_one_layer():
    """Issue 38: hidden=numpy.int64(8) is one hidden layer of 8, as hidden=8 is."""
    import numpy as np

    assert EmbeddingMLP(4, np.int64(8), 2).hidden == (8,) == EmbeddingMLP(4, 8, 2).hidden

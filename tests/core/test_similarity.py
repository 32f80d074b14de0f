import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.core.similarity import (
    cosine_similarity,
    euclidean_distances,
    l2_normalize,
    pair_masks,
    squared_distance_from_similarity,
)
from dmlbook.core.validation import as_embeddings, as_labels, check_same_length

labels_st = st.lists(st.integers(0, 4), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(labels_st)
def test_pair_masks_match_definition(labels):
    y = torch.tensor(labels)
    pos, neg = pair_masks(y)
    n = len(labels)
    for i in range(n):
        for j in range(n):
            assert bool(pos[i, j]) == (labels[i] == labels[j] and i != j)
            assert bool(neg[i, j]) == (labels[i] != labels[j])
    assert not bool((pos & neg).any())
    assert not bool(pos.diagonal().any())


def test_duplicates_are_positives_by_index():
    # Two identical embeddings with one label: a positive pair (excluded only on the diagonal).
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    pos, _ = pair_masks(torch.tensor([3, 3, 4]))
    assert pos[0, 1] and pos[1, 0] and not pos[0, 0]
    assert cosine_similarity(x)[0, 1] == 1.0


def test_cross_masks_keep_diagonal():
    pos, neg = pair_masks(torch.tensor([0, 1]), torch.tensor([0, 1, 1]))
    assert pos.tolist() == [[True, False, False], [False, True, True]]
    assert neg.tolist() == [[False, True, True], [True, False, False]]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 6), st.integers(0, 10_000))
def test_unit_sphere_identity(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = l2_normalize(torch.randn(n, d, generator=g, dtype=torch.float64))
    S = cosine_similarity(x, normalize=False)
    D2 = euclidean_distances(x, squared=True)
    assert torch.allclose(D2, squared_distance_from_similarity(S), atol=1e-12)
    assert torch.allclose(x.norm(dim=1), torch.ones(n, dtype=torch.float64))


def test_euclidean_matches_cdist_and_has_finite_gradient_at_zero():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    y = torch.randn(4, 3, generator=g, dtype=torch.float64)
    assert torch.allclose(euclidean_distances(x, y), torch.cdist(x, y), atol=1e-10)
    z = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    euclidean_distances(z).sum().backward()
    assert torch.isfinite(z.grad).all()


def test_cosine_of_zero_vector_is_finite():
    S = cosine_similarity(torch.zeros(2, 3))
    assert torch.isfinite(S).all()
    assert math.isclose(
        float(cosine_similarity(torch.tensor([[3.0, 4.0]]))[0, 0]), 1.0, rel_tol=1e-6
    )


def test_validation_messages():
    with pytest.raises(ValueError, match="NaN or infinite values in rows 1"):
        as_embeddings(torch.tensor([[0.0, 1.0], [float("nan"), 1.0]]))
    with pytest.raises(ValueError, match="2-D array"):
        as_embeddings(torch.zeros(3))
    with pytest.raises(ValueError, match="one label per embedding"):
        check_same_length(torch.zeros(3, 2), torch.zeros(2))
    with pytest.raises(ValueError, match="integer class ids"):
        as_labels(torch.tensor([0.5, 1.0]))
    with pytest.raises(TypeError, match="torch.Tensor"):
        as_embeddings("not an array")
    assert as_labels([1, 2]).dtype == torch.int64


def test_cosine_similarity_passes_gradcheck_and_gradgradcheck():
    """Plain autograd through the normalisation and the product: first and second derivatives."""
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    for fn, inputs in (
        (lambda t: cosine_similarity(t), (x,)),
        (lambda t: cosine_similarity(t, normalize=False), (x,)),
        (lambda t, u: cosine_similarity(t, u), (x, y)),
    ):
        assert torch.autograd.gradcheck(fn, inputs)
        assert torch.autograd.gradgradcheck(fn, inputs)
    u = l2_normalize(x.detach())
    assert torch.equal(cosine_similarity(x.detach()), u @ u.T)

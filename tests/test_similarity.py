import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dmlbook.similarity import (
    cosine_similarity,
    euclidean_distances,
    l2_normalize,
    pair_masks,
    squared_distance_from_similarity,
)
from dmlbook.validation import as_embeddings, as_labels, check_same_length

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


# --- cosine_similarity(x): the batch against itself, with a one-product backward ---------------


def _plain_self_similarity(x: torch.Tensor, normalize: bool) -> torch.Tensor:
    """The textbook path the fused function replaces: autograd through normalise and ``mm``."""
    u = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12) if normalize else x
    return u @ u.T


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 7),
    st.booleans(),
    st.booleans(),
    st.integers(0, 10_000),
)
def test_self_similarity_matches_autograd(n, d, normalize, zero_row, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    if zero_row:
        x[0] = 0.0  # a clamped norm: the gradient is dL/dU / eps there, as autograd gives
    weights = torch.randn(n, n, generator=g, dtype=torch.float64)  # a non-symmetric dL/dS
    grads = []
    for fast in (True, False):
        leaf = x.clone().requires_grad_(True)
        S = (
            cosine_similarity(leaf, normalize=normalize)
            if fast
            else _plain_self_similarity(leaf, normalize)
        )
        (S * weights).sum().backward()
        grads.append((S.detach(), leaf.grad))
    (S_fast, g_fast), (S_plain, g_plain) = grads
    assert torch.equal(S_fast, S_plain)
    scale = max(g_plain.abs().max().item(), 1.0)  # about 1/eps on a zero row
    assert torch.allclose(g_fast, g_plain, rtol=1e-12, atol=1e-12 * scale)


def test_self_similarity_values_are_bit_identical_in_float32():
    x = torch.randn(64, 33, generator=torch.Generator().manual_seed(1))
    assert torch.equal(cosine_similarity(x), l2_normalize(x) @ l2_normalize(x).T)


def test_self_similarity_passes_gradcheck():
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: cosine_similarity(t), (x,))
    assert torch.autograd.gradcheck(lambda t: cosine_similarity(t, normalize=False), (x,))


def test_self_similarity_refuses_double_backward():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(cosine_similarity(x).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|double backward|twice"):
        grad.sum().backward()


def test_self_similarity_under_autocast_matches_autograd():
    # bf16 autocast on CPU: the product runs in bf16 both ways; the gradients agree to bf16 rounding.
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(2))
    w = torch.randn(32, 32, generator=torch.Generator().manual_seed(3))
    out = []
    for fast in (True, False):
        leaf = x.clone().requires_grad_(True)
        with torch.autocast("cpu", torch.bfloat16):
            S = cosine_similarity(leaf) if fast else _plain_self_similarity(leaf, True)
        assert S.dtype == torch.bfloat16
        (S.float() * w).sum().backward()
        assert leaf.grad.dtype == torch.float32
        out.append(leaf.grad)
    assert torch.allclose(out[0], out[1], rtol=0.05, atol=0.05 * out[1].abs().max().item())


def test_twice_differentiable_path_gives_a_second_derivative():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    S = cosine_similarity(x, twice_differentiable=True)
    assert torch.equal(S.detach(), cosine_similarity(x.detach()))
    (grad,) = torch.autograd.grad(S.pow(2).sum(), x, create_graph=True)
    grad.sum().backward()  # no error: plain autograd all the way
    assert torch.autograd.gradgradcheck(
        lambda t: cosine_similarity(t, twice_differentiable=True), (x.detach().requires_grad_(),)
    )

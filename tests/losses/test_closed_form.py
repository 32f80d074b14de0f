"""What the closed forms share (``dmlbook/losses/closed_form.py``): a core's value and weights,
reduced as :func:`dmlbook.pairs.reduce` reduces, give autograd's value and gradient, on a plain
``S`` and straight through ``S = cosine_similarity(x)`` to the embeddings."""

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.losses import available_losses, get_loss
from dmlbook.losses.closed_form import (
    WithGradient,
    attach,
    closed_form_loss,
    fold_reduction,
    run_core,
)
from dmlbook.pairs import REDUCTIONS, reduce
from dmlbook.similarity import cosine_similarity, l2_normalize, self_similarity_parts


def _core(s: torch.Tensor, shape: str) -> tuple[torch.Tensor, ...]:
    """``1/2 S_ij^2`` summed, per anchor or per pair, with ``W = S`` (an independent check:
    ``d/dS_ij`` of ``1/2 S_ij^2`` is ``S_ij``); per anchor, the rows whose sum exceeds 1 count."""
    assert s.dtype in (torch.float32, torch.float64)  # half precision computes in float32
    half_squares = s * s / 2
    if shape == "sum":
        return half_squares.sum(), s.clone()
    if shape == "rows":
        rows = half_squares.sum(dim=1)
        return rows, rows > 1.0, s.clone()
    return half_squares, s.clone()


def _autograd(S: torch.Tensor, shape: str, reduction: str | None) -> torch.Tensor:
    x = S.float() if S.dtype == torch.bfloat16 else S
    half_squares = x * x / 2
    if shape == "sum":
        return half_squares.sum()
    if shape == "rows":
        rows = half_squares.sum(dim=1)
        return reduce(rows, reduction, rows.detach() > 1.0)
    return half_squares


CASES = [("sum", None), ("pairs", None), *[("rows", r) for r in REDUCTIONS]]


@pytest.mark.parametrize(("shape", "reduction"), CASES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("through", ["S", "x"])
def test_closed_form_loss_gives_autograds_value_and_gradient(shape, reduction, dtype, through):
    """On a leaf ``S`` and on ``S = cosine_similarity(x)`` (where it hangs on ``x``)."""
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(7, 5, generator=g, dtype=torch.float64)
    grads, values = [], []
    for fast in (True, False):
        x = x0.clone().requires_grad_(True)
        if through == "x":
            S = cosine_similarity(x) if fast else l2_normalize(x) @ l2_normalize(x).T
            S = S if dtype == torch.float64 else S.to(dtype)  # bf16: S is not cosine's output
            leaf = x
        else:
            S = leaf = (x0 @ x0.T).to(dtype).requires_grad_(True)
        value = closed_form_loss(S, _core, shape, reduction=reduction) if fast else None
        if not fast:
            value = _autograd(S, shape, reduction)
        upstream = torch.linspace(-1, 2, value.numel(), dtype=value.dtype).reshape(value.shape)
        (value * upstream).sum().backward()
        grads.append(leaf.grad.double())
        values.append(value.detach().double())
        assert leaf.grad.dtype == leaf.dtype
    tol = 1e-12 if dtype == torch.float64 else 1e-2
    torch.testing.assert_close(values[0], values[1], rtol=tol, atol=tol)
    torch.testing.assert_close(grads[0], grads[1], rtol=tol, atol=tol)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 9),
    reduction=st.sampled_from(REDUCTIONS),
    with_valid=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_fold_reduction_is_reduce_bit_for_bit(n, reduction, with_valid, seed):
    """Value and gradient of ``reduce`` through autograd, the same bits (float32)."""
    g = torch.Generator().manual_seed(seed)
    per = torch.randn(n, generator=g)
    W = torch.randn(n, n, generator=g)
    valid = torch.rand(n, generator=g) > 0.4 if with_valid else None
    leaf = per.clone().requires_grad_(True)
    want = reduce(leaf, reduction, valid)
    (want * torch.linspace(0.5, 1.5, want.numel()).reshape(want.shape)).sum().backward()
    value, W_folded = fold_reduction(per.clone(), W.clone(), reduction, valid)
    assert torch.equal(value, want.detach())
    # W's rows times d value / d per_i: what the per-anchor backward would multiply in
    upstream = torch.linspace(0.5, 1.5, value.numel()).reshape(value.shape)
    got = W_folded * (upstream[:, None] if value.ndim else upstream)
    assert torch.equal(got, W * leaf.grad[:, None])


def test_attach_goes_straight_to_x_only_for_cosine_similaritys_own_output():
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    S = cosine_similarity(x)
    assert self_similarity_parts(S)[0] is x
    for other in (S[:, :], S * 1, S.detach(), cosine_similarity(x, twice_differentiable=True)):
        assert self_similarity_parts(other) is None
    assert self_similarity_parts(cosine_similarity(x.detach())) is None  # no graph at all
    value = attach(S, (S * S / 2).sum().detach(), S.detach().clone())
    assert type(value.grad_fn).__name__ == "_ThroughSimilarityBackward"
    assert (
        type(attach(S * 1, value.detach(), S.detach()).grad_fn).__name__ == "WithGradientBackward"
    )


def test_attached_and_other_uses_of_S_add_up():
    """A loss hung on ``x`` and another use of the same ``S``: both gradients reach ``x``."""
    x0 = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    grads = []
    for fast in (True, False):
        x = x0.clone().requires_grad_(True)
        S = cosine_similarity(x) if fast else l2_normalize(x) @ l2_normalize(x).T
        loss = closed_form_loss(S, _core, "sum") if fast else _autograd(S, "sum", None)
        (loss + (S**3).sum()).backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("through", ["S", "x"])
def test_a_second_derivative_is_refused(through):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    S = cosine_similarity(x) if through == "x" else (x @ x.T).detach().requires_grad_(True)
    value = closed_form_loss(S, _core, "sum")
    (grad,) = torch.autograd.grad(value, x if through == "x" else S, create_graph=True)
    with pytest.raises(RuntimeError):  # G carries no graph: no second derivative
        grad.sum().backward()


def test_run_core_computes_half_precision_in_float32_outside_autocast():
    S = torch.randn(4, 4).to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value, W = run_core(S, lambda s: (s @ s, s))
    assert value.dtype == W.dtype == torch.float32


def test_with_gradient_attaches_a_precomputed_gradient():
    # value_i = 1/2 sum_j S_ij^2 per anchor, computed without a graph; G = dvalue_i/dS_i. = S
    S = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    leaf = S.clone().requires_grad_(True)
    value = WithGradient.apply(leaf, (S * S / 2).sum(dim=1), S.clone())
    upstream = torch.arange(5, dtype=torch.float64)
    (grad,) = torch.autograd.grad((value * upstream).sum(), leaf)
    assert torch.allclose(grad, S * upstream[:, None], rtol=1e-15, atol=0)


# gradient surgery has no loss on S (its module designs the gradient of the embeddings)
ON_S = [name for name in available_losses() if name != "gradient_surgery"]


@pytest.mark.parametrize("name", ON_S)
def test_every_module_hung_on_the_embeddings_matches_its_loss_on_a_plain_S(name):
    """A module's call (where a closed form goes straight to ``x``) against the same loss on an
    ``S`` built by plain autograd (where it hangs on ``S``): value and gradient, float64."""
    g = torch.Generator().manual_seed(7)
    x0 = torch.randn(14, 6, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 4, 4, 4])  # 3: a singleton
    out = []
    for through_x in (True, False):
        x = x0.clone().requires_grad_(True)
        loss = get_loss(name)  # a fresh module: the sampled DRO-KL draws the same pairs twice
        if through_x:
            value = loss(x, y)
        else:
            value = loss.loss_on_similarity(cosine_similarity(x, twice_differentiable=True), y)
        value.backward()
        out.append((value.detach(), x.grad))
    torch.testing.assert_close(out[0][0], out[1][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out[0][1], out[1][1], rtol=1e-10, atol=1e-12)

"""The shared wrapper of the closed forms (``dmlbook/losses/closed_form.py``): a core's value and
weights give autograd's gradient for a scalar, a per-anchor and a per-pair value, in S's dtype."""

import pytest
import torch

from dmlbook.losses.closed_form import WithGradient, forward_with_weights, weights_backward


def _core(s: torch.Tensor, reduction: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``L = 1/2 sum S_ij^2`` reduced three ways, with ``W = dL/dS = S`` (an independent check)."""
    assert s.dtype in (torch.float32, torch.float64)  # half precision computes in float32
    half_squares = s * s / 2
    if reduction == "sum":
        return half_squares.sum(), s.clone()
    if reduction == "rows":
        return half_squares.sum(dim=1), s.clone()
    return half_squares, s.clone()


class _Squares(torch.autograd.Function):
    @staticmethod
    def forward(ctx, S, reduction):  # type: ignore[override]
        (value,) = forward_with_weights(ctx, S, _core, reduction)
        return value.to(S.dtype)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return weights_backward(ctx, grad), None


@pytest.mark.parametrize("reduction", ["sum", "rows", "pairs"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_gradient_is_autograds_for_every_shape_of_value(reduction, dtype):
    g = torch.Generator().manual_seed(0)
    S0 = torch.randn(6, 6, generator=g, dtype=torch.float64).to(dtype)
    upstream = {"sum": torch.tensor(1.7), "rows": torch.randn(6, generator=g)}.get(
        reduction, torch.randn(6, 6, generator=g)
    )
    grads = []
    for fast in (True, False):
        S = S0.clone().requires_grad_(True)
        computed = S if dtype == torch.float64 else S.float()  # half precision: in float32
        value = _Squares.apply(S, reduction) if fast else _core(computed, reduction)[0].to(dtype)
        (value * upstream.to(value.dtype)).sum().backward()
        assert S.grad.dtype == dtype
        grads.append(S.grad.double())
    tol = 1e-12 if dtype == torch.float64 else 1e-2
    assert torch.allclose(grads[0], grads[1], rtol=tol, atol=tol)


def test_with_gradient_attaches_a_precomputed_gradient():
    # value_i = 1/2 sum_j S_ij^2 per anchor, computed without a graph; G = dvalue_i/dS_i. = S
    S = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    leaf = S.clone().requires_grad_(True)
    value = WithGradient.apply(leaf, (S * S / 2).sum(dim=1), S.clone())
    upstream = torch.arange(5, dtype=torch.float64)
    (grad,) = torch.autograd.grad((value * upstream).sum(), leaf, create_graph=True)
    assert torch.allclose(grad, S * upstream[:, None], rtol=1e-15, atol=0)
    with pytest.raises(RuntimeError):  # G carries no graph: no second derivative
        grad.sum().backward()

"""Symbolic weights against autograd, and a finite-difference witness.

``check_against_autograd`` is how a chapter shows that the loss dmlbook *implements* has the
gradient the paper *derives*: autograd's ``dL/dS`` of the implementation on a real batch versus
the symbolic weights evaluated on the same ``S``, in float64. ``gradcheck_witness`` adds a third,
independent opinion: central finite differences (``torch.autograd.gradcheck``).
Tests: ``tests/symbolic/test_autograd_check.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..core.gpw import GradientCheck, compare_gradients, gpw_weights
from ..core.validation import as_labels
from .torch_bridge import batch_weights

__all__ = ["check_against_autograd", "gradcheck_witness"]

LossOnS = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
AnchorFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def _float64_batch(S: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(S, torch.Tensor) or S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError("S must be a square (B, B) tensor of similarities.")
    y = as_labels(labels)
    if y.shape[0] != S.shape[0]:
        raise ValueError(f"S has {S.shape[0]} rows but labels has {y.shape[0]} entries.")
    return S.detach().to(torch.float64), y.to(S.device)


def check_against_autograd(
    loss_on_S: LossOnS,
    weights: torch.Tensor | AnchorFn,
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    scale: float = 1.0,
    tol: float = 1e-10,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> GradientCheck:
    """Compare autograd's ``dL/dS`` of an implemented loss with symbolic weights, in float64.

    Parameters
    ----------
    loss_on_S : callable
        ``loss_on_S(S, labels) -> scalar``: the implementation under test (hyper-parameters
        bound, e.g. ``lambda S, y: contrastive_loss(S, y, margin=0.5)``).
    weights : Tensor of shape (B, B) or callable
        The symbolic prediction of ``dL/dS``: a full matrix (e.g. a whole-batch symbolic loss
        through ``to_torch``), or a per-anchor function ``(s_pos, s_neg) -> (w_pos, w_neg)``
        such as :func:`weights_from_loss`, assembled with :func:`batch_weights`.
    S : Tensor of shape (B, B)
        A real batch's similarity matrix (cast to float64). Keep every hinge argument away from
        its kink: there the derivative is a convention, not a fact.
    labels : Tensor of shape (B,)
    scale : float
        The loss's batch reduction, applied to ``weights``. A per-anchor symbolic loss describes
        ``sum_i L_i``; an implementation that averages over ``m`` anchors needs ``scale=1/m``,
        and ``dmlbook.losses.contrastive_loss``, a mean over the ordered pairs ``i != j``, needs
        ``scale=1/n_pairs``.
    tol : float
        Tolerance of :class:`~dmlbook.core.gpw.GradientCheck` (absolute up to gradients of order one,
        relative beyond).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Mined pairs, passed to :func:`batch_weights` (bind them into ``loss_on_S`` as well).

    Returns
    -------
    GradientCheck
        ``max_abs_err``, ``max_rel_err`` and ``passed``; ``assert_passed()`` raises on failure.
    """
    S64, y = _float64_batch(S, labels)
    expected = gpw_weights(loss_on_S, S64, y).grad
    if callable(weights) and not isinstance(weights, torch.Tensor):
        W = batch_weights(weights, S64, y, pos_mask=pos_mask, neg_mask=neg_mask)
    else:
        W = torch.as_tensor(weights, dtype=torch.float64)
        if W.shape != S64.shape:
            raise ValueError(f"weights has shape {tuple(W.shape)}, S has {tuple(S64.shape)}.")
    return compare_gradients(scale * W, expected, tol)


def gradcheck_witness(
    loss_on_S: LossOnS,
    S: torch.Tensor,
    labels: torch.Tensor,
    *,
    eps: float = 1e-6,
    atol: float = 1e-7,
    rtol: float = 1e-5,
) -> bool:
    """Central finite differences agree with autograd's ``dL/dS`` (``torch.autograd.gradcheck``).

    An independent witness: it knows nothing of the symbolic derivation. It perturbs each entry
    of ``S`` by ``eps``, so every hinge argument must be farther than ``eps`` from its kink.

    Returns
    -------
    bool
        ``True`` when ``gradcheck`` passes (it never raises here).
    """
    S64, y = _float64_batch(S, labels)
    leaf = S64.clone().requires_grad_(True)
    return bool(
        torch.autograd.gradcheck(
            lambda s: loss_on_S(s, y), (leaf,), eps=eps, atol=atol, rtol=rtol, raise_exception=False
        )
    )

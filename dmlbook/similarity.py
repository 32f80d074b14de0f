"""Similarities, distances and pair masks: the objects every pair-based loss is written on.

On the unit sphere the squared Euclidean distance and the cosine similarity are tied by
``D^2 = 2 - 2 S`` (Liu et al., Sec. III), so a loss written on ``S`` can always be read as a
loss on distances and vice versa.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

#: The default lower bound on a norm (:func:`l2_normalize`, :func:`cosine_similarity`).
NORM_EPS = 1e-12

__all__ = [
    "l2_normalize",
    "l2_normalize_backward",
    "cosine_similarity",
    "self_similarity_backward",
    "self_similarity_parts",
    "euclidean_distances",
    "squared_distance_from_similarity",
    "pair_masks",
]


def l2_normalize(x: torch.Tensor, eps: float = NORM_EPS) -> torch.Tensor:
    """Scale every row of ``x`` to unit Euclidean norm.

    Parameters
    ----------
    x : Tensor of shape (N, d)
    eps : float
        Lower bound on the norm, so that a zero row stays finite.
    """
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


def cosine_similarity(
    x: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    normalize: bool = True,
    twice_differentiable: bool = False,
) -> torch.Tensor:
    """Cosine similarity matrix ``S_ij = <x_i, y_j> / (|x_i| |y_j|)`` (Wang et al. 2019, Sec. 3).

    Parameters
    ----------
    x : Tensor of shape (N, d)
    y : Tensor of shape (M, d), optional
        Defaults to ``x`` (the batch against itself).
    normalize : bool
        Normalise the rows first. Pass ``False`` when the inputs are already unit vectors.
    twice_differentiable : bool
        The batch against itself (``y`` omitted) is by default one autograd Function whose
        backward takes one product where autograd's takes two (``S`` is symmetric); it refuses a
        second derivative. ``True`` builds ``S`` with plain autograd instead (two products in
        the backward; double backward works, e.g. for a gradient penalty).

    Returns
    -------
    Tensor of shape (N, M)
    """
    if y is None:
        if not twice_differentiable:
            return _SelfSimilarity.apply(x, normalize)
        u = l2_normalize(x) if normalize else x
        return u @ u.T
    if normalize:
        x, y = l2_normalize(x), l2_normalize(y)
    return x @ y.T


class _SelfSimilarity(torch.autograd.Function):
    """``S = U U^T`` with ``U = l2_normalize(X)`` (or ``U = X``), whose backward is **one** product.

    ``S`` is symmetric, so ``dL/dU = (G + G^T) U`` where ``G = dL/dS``: one ``(B, B) x (B, d)``
    product where autograd's ``mm`` backward takes two (``G U`` and ``G^T U``). The normalisation's
    backward is written out too: ``dL/dX = (dL/dU - U <dL/dU, U>) / |X|`` per row (the projection
    off ``U``), and ``dL/dU / eps`` for a row whose norm is clamped at ``eps``, as autograd gives.
    Values are bit-identical to ``l2_normalize(x) @ l2_normalize(x).T``; gradients agree to
    rounding. Under autocast the product runs in the autocast dtype, and its backward in the
    dtype of ``G``, as autograd's would. Double backward is refused (``once_differentiable``).
    Tests: ``tests/test_similarity.py``.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, normalize: bool) -> torch.Tensor:
        norm = None
        if normalize:
            norm = x.norm(dim=-1, keepdim=True)
            u = x / norm.clamp_min(NORM_EPS)
        else:
            u = x
        S = u @ u.T
        ctx.save_for_backward(u, norm)
        ctx.source = x  # for self_similarity_parts: a closed form can go straight back to x
        return S

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        u, norm = ctx.saved_tensors
        return self_similarity_backward(grad, u, norm), None


def self_similarity_parts(
    S: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None:
    """``(x, u, |x|)`` when ``S`` is the output of ``cosine_similarity(x)`` (the batch against
    itself, one-product backward), else ``None``; ``|x|`` is ``None`` for ``normalize=False``.

    A loss whose gradient ``G = dL/dS`` is known in closed form uses it to send
    :func:`self_similarity_backward` of ``G`` straight to ``x``, without ``S``'s own autograd
    node (:func:`dmlbook.losses.closed_form.attach`): fewer calls per loss, which is what a
    small batch pays for. Only ``S`` as returned qualifies (a view or an op on it has another
    ``grad_fn``).
    """
    node = S.grad_fn
    x = getattr(node, "source", None) if isinstance(node, _SelfSimilarity._backward_cls) else None
    if x is None:
        return None
    u, norm = node.saved_tensors
    return x, u, norm


def self_similarity_backward(
    grad: torch.Tensor, u: torch.Tensor, norm: torch.Tensor | None
) -> torch.Tensor:
    """``dL/dx`` from ``G = dL/dS`` for ``S = U U^T``, ``U = x / |x|`` (or ``U = x`` when ``norm``
    is ``None``): ``(G + G^T) U`` (one product), then :func:`l2_normalize_backward`."""
    g_u = ((grad + grad.T) @ u.to(grad.dtype)).to(u.dtype)
    return g_u if norm is None else l2_normalize_backward(g_u, u, norm)


def l2_normalize_backward(
    grad_u: torch.Tensor, u: torch.Tensor, norm: torch.Tensor, eps: float = NORM_EPS
) -> torch.Tensor:
    """``dL/dx`` from ``dL/du`` for ``u = x / max(|x|, eps)`` (:func:`l2_normalize`), per row.

    The projection of ``dL/du`` off ``u``, over ``|x|``; a row whose norm is clamped at ``eps`` is
    only scaled, as autograd gives. Overwrites ``grad_u`` (pass a fresh tensor). Used by the
    closed forms that normalise inside their own autograd Function (:func:`cosine_similarity`,
    :class:`dmlbook.losses.npair_closed_form.NPairClosedForm`).

    Parameters
    ----------
    grad_u : Tensor (N, d)
        ``dL/du``.
    u : Tensor (N, d)
        The normalised rows.
    norm : Tensor (N, 1)
        ``|x|`` per row, before the clamp.
    """
    radial = (grad_u * u).sum(-1, keepdim=True) * (norm > eps)
    return grad_u.sub_(u * radial).div_(norm.clamp_min(eps))


def euclidean_distances(
    x: torch.Tensor, y: torch.Tensor | None = None, *, squared: bool = False, eps: float = 1e-12
) -> torch.Tensor:
    """Pairwise Euclidean distances ``D_ij = |x_i - y_j|``.

    Computed as ``|x|^2 + |y|^2 - 2 x y^T`` clamped at 0. The square root is taken of
    ``max(D^2, eps)`` so that the gradient at coincident points stays finite, and zero
    distances are then restored exactly.

    Parameters
    ----------
    x : Tensor of shape (N, d)
    y : Tensor of shape (M, d), optional
    squared : bool
        Return ``D^2`` instead of ``D``.
    """
    y_ = x if y is None else y
    sq = (x * x).sum(1, keepdim=True) + (y_ * y_).sum(1)[None, :] - 2.0 * (x @ y_.T)
    sq = sq.clamp_min(0.0)
    if squared:
        return sq
    zero = sq <= eps
    return torch.where(zero, torch.zeros_like(sq), sq.clamp_min(eps).sqrt())


def squared_distance_from_similarity(S: torch.Tensor) -> torch.Tensor:
    """Squared Euclidean distance between unit vectors: ``D^2 = 2 - 2 S``."""
    return 2.0 - 2.0 * S


def pair_masks(
    labels: torch.Tensor, other_labels: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks of positive and negative pairs.

    Parameters
    ----------
    labels : Tensor of shape (N,)
        Class id of each row of ``S``.
    other_labels : Tensor of shape (M,), optional
        Class id of each column. When omitted the columns are the same samples as the rows,
        and the diagonal (a sample paired with itself) is excluded from the positives *by index*,
        so that two identical images with the same label still form a positive pair.

    Returns
    -------
    pos, neg : Tensor of shape (N, M), dtype bool
        ``pos[i, j]`` iff ``i`` and ``j`` share a label (and ``i != j`` within one batch);
        ``neg[i, j]`` iff their labels differ.
    """
    cols = labels if other_labels is None else other_labels
    same = labels[:, None] == cols[None, :]
    neg = ~same
    if other_labels is None:
        same = same & ~torch.eye(labels.shape[0], dtype=torch.bool, device=labels.device)
    return same, neg

"""General Pair Weighting: any loss on ``S`` read as a weighting of its pairs (Wang et al. 2019, Sec. 3).

For a loss ``L(S, y)`` the parameter gradient factors through the similarity matrix (Eq. 1)::

    dL/dtheta = sum_ij  dL/dS_ij * dS_ij/dtheta

so the surrogate ``F = sum_ij w_ij S_ij`` with the numbers ``w_ij = dL/dS_ij`` held fixed (Eq. 2)
has exactly the same parameter gradient. The GPW sign convention (Eq. 3) is that a positive pair
has ``dL/dS_ij <= 0`` (raising its similarity lowers the loss: it is *pulled*) and a negative pair
``dL/dS_ij >= 0`` (it is *pushed*); the weight is ``w_ij = |dL/dS_ij|``. In the distance form of
Liu et al. (Eq. 3-5) the signs flip, because a distance falls as a similarity rises.

Everything here uses autograd on ``S`` and works for any loss written as ``loss_on_S(S, labels)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .similarity import l2_normalize, pair_masks
from .validation import as_embeddings, as_labels, check_same_length

__all__ = [
    "GPWWeights",
    "GradientCheck",
    "compare_gradients",
    "distance_loss_on_similarity",
    "embedding_gradient",
    "check_embedding_chain",
    "gpw_distance_weights",
    "gpw_pair_form",
    "gpw_surrogate",
    "gpw_weights",
    "similarity_to_distance_weights",
]

LossOnS = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class GradientCheck:
    """How far a gradient is from a reference (autograd), in float64.

    Attributes
    ----------
    max_abs_err : float
        ``max |expected - actual|`` over all entries.
    max_rel_err : float
        ``max_abs_err / max |expected|``: the error relative to the largest reference entry
        (``max_abs_err`` itself when the reference is all zero).
    tol : float
        The tolerance the check was run with.
    passed : bool
        ``max_abs_err <= tol * max(1, max |expected|)``: an absolute test for gradients of
        order one or below, a relative one for larger gradients.
    """

    max_abs_err: float
    max_rel_err: float
    tol: float
    passed: bool

    def assert_passed(self) -> None:
        """Raise ``AssertionError`` with the errors when the check failed."""
        if not self.passed:
            raise AssertionError(
                f"gradients differ: max abs err {self.max_abs_err:.3e}, "
                f"max rel err {self.max_rel_err:.3e}, tolerance {self.tol:.0e}"
            )

    def __bool__(self) -> bool:
        return self.passed


def compare_gradients(
    actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-10
) -> GradientCheck:
    """Compare a gradient with a reference entry by entry in float64 (see :class:`GradientCheck`)."""
    a = torch.as_tensor(actual).detach().to(torch.float64)
    e = torch.as_tensor(expected).detach().to(torch.float64)
    if a.shape != e.shape:
        raise ValueError(f"gradient shapes differ: {tuple(a.shape)} vs reference {tuple(e.shape)}.")
    if not bool(torch.isfinite(a).all()):
        return GradientCheck(float("inf"), float("inf"), tol, False)
    abs_err = float((a - e).abs().max()) if a.numel() else 0.0
    scale = float(e.abs().max()) if e.numel() else 0.0
    rel_err = abs_err / scale if scale > 0 else abs_err
    return GradientCheck(abs_err, rel_err, tol, abs_err <= tol * max(1.0, scale))


def _similarity_grad(loss_on_S: LossOnS, S: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    leaf = S.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        loss = loss_on_S(leaf, labels)
        if loss.ndim != 0:
            raise ValueError(f"loss_on_S must return a scalar, got shape {tuple(loss.shape)}.")
        if not loss.requires_grad:  # a loss with no pair at all: the gradient is zero
            return torch.zeros_like(leaf)
        (grad,) = torch.autograd.grad(loss, leaf, allow_unused=True)
    return torch.zeros_like(leaf) if grad is None else grad


def _check_S(S: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if not isinstance(S, torch.Tensor) or S.ndim != 2 or S.shape[0] != S.shape[1]:
        shape = tuple(S.shape) if isinstance(S, torch.Tensor) else type(S).__name__
        raise ValueError(f"S must be a square (B, B) similarity tensor, got {shape}.")
    y = as_labels(labels)
    if y.shape[0] != S.shape[0]:
        raise ValueError(
            f"S has {S.shape[0]} rows but labels has {y.shape[0]} entries; pass one label per row."
        )
    return y.to(S.device)


@dataclass(frozen=True)
class GPWWeights:
    """The GPW reading of one batch: signed gradients, weights and pair types.

    Attributes
    ----------
    grad : Tensor of shape (B, B)
        ``dL/dS_ij`` from autograd (Wang et al. 2019, Eq. 1), or ``dL/dD_ij`` in the distance form.
    pos, neg : bool Tensor of shape (B, B)
        Positive pairs (same label, ``i != j``) and negative pairs.
    form : str
        ``"similarity"`` (pull = negative gradient) or ``"distance"`` (pull = positive gradient).
    """

    grad: torch.Tensor
    pos: torch.Tensor
    neg: torch.Tensor
    form: str = "similarity"

    @property
    def weights(self) -> torch.Tensor:
        """``w_ij = |dL/dS_ij|`` (Eq. 3)."""
        return self.grad.abs()

    @property
    def positive(self) -> torch.Tensor:
        """The weights of the positive pairs, in pair order (flattened)."""
        return self.weights[self.pos]

    @property
    def negative(self) -> torch.Tensor:
        """The weights of the negative pairs, in pair order (flattened)."""
        return self.weights[self.neg]

    def sign_violations(self) -> tuple[int, int]:
        """Numbers of (positive pairs pushed apart, negative pairs pulled together).

        In the similarity form a positive pair is pushed when ``dL/dS_ij > 0`` and a negative
        pair pulled when ``dL/dS_ij < 0``; in the distance form the inequalities flip
        (Liu et al., footnote 2).
        """
        pull = -self.grad if self.form == "similarity" else self.grad
        return int((pull[self.pos] < 0).sum()), int((pull[self.neg] > 0).sum())

    def follows_sign_convention(self) -> bool:
        """Every positive pair is pulled (or ignored) and every negative pair pushed (or ignored)."""
        return self.sign_violations() == (0, 0)

    def off_pair_mass(self) -> float:
        """``sum |grad|`` over entries that are no pair (the diagonal): 0 for a proper pair loss."""
        other = ~(self.pos | self.neg)
        return float(self.grad[other].abs().sum())


def gpw_weights(loss_on_S: LossOnS, S: torch.Tensor, labels: torch.Tensor) -> GPWWeights:
    """The GPW weights of a loss on one batch, by autograd (Wang et al. 2019, Eq. 1-3).

    Parameters
    ----------
    loss_on_S : callable
        ``loss_on_S(S, labels) -> scalar``, e.g. ``dmlbook.losses.contrastive_loss`` (with any
        hyper-parameters bound by a lambda).
    S : Tensor of shape (B, B)
        The similarity matrix; it is detached, so the model is not touched.
    labels : Tensor of shape (B,)

    Returns
    -------
    GPWWeights
        ``grad`` is ``dL/dS`` with every entry of ``S`` an independent variable.
    """
    y = _check_S(S, labels)
    grad = _similarity_grad(loss_on_S, S, y)
    pos, neg = pair_masks(y)
    return GPWWeights(grad=grad, pos=pos, neg=neg, form="similarity")


def gpw_distance_weights(loss_on_D: LossOnS, D: torch.Tensor, labels: torch.Tensor) -> GPWWeights:
    """The weights of a loss written on distances, by autograd (Liu et al., Eq. 3-5).

    Liu et al. weight distances: ``w_ij = dL/dD_ij`` (Eq. 4) with ``dL/dD_ij >= 0`` for positive
    pairs and ``<= 0`` for negatives (footnote 2), so Eq. 5 reads
    ``sum_pos w_ij D_ij + sum_neg w_ij (-D_ij)`` with ``w_ij >= 0``.

    Parameters
    ----------
    loss_on_D : callable
        ``loss_on_D(D, labels) -> scalar``.
    D : Tensor of shape (B, B)
        Pairwise distances.
    labels : Tensor of shape (B,)

    Returns
    -------
    GPWWeights
        With ``form="distance"``, so that :meth:`GPWWeights.sign_violations` uses Liu's signs.
    """
    y = _check_S(D, labels)
    grad = _similarity_grad(loss_on_D, D, y)
    pos, neg = pair_masks(y)
    return GPWWeights(grad=grad, pos=pos, neg=neg, form="distance")


def gpw_surrogate(loss_on_S: LossOnS, S: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The GPW surrogate ``F = sum_ij w_ij S_ij`` with ``w = dL/dS`` detached (Wang et al. 2019, Eq. 2).

    ``F``'s value is not the loss's, but its gradient with respect to everything ``S`` depends
    on (the model parameters) equals the loss's gradient exactly, by Eq. 1.

    Parameters
    ----------
    loss_on_S : callable
        ``loss_on_S(S, labels) -> scalar``.
    S : Tensor of shape (B, B)
        The similarity matrix *with* its graph to the model.
    labels : Tensor of shape (B,)

    Returns
    -------
    Tensor
        A scalar whose backward pass gives the loss's parameter gradient.
    """
    y = _check_S(S, labels)
    w = _similarity_grad(loss_on_S, S, y)
    return (w.to(S.dtype) * S).sum()


def gpw_pair_form(weights: GPWWeights, S: torch.Tensor) -> torch.Tensor:
    """The right-hand side of Wang et al. 2019, Eq. 3: ``sum_neg w_ij S_ij - sum_pos w_ij S_ij``.

    It equals the surrogate ``F`` of Eq. 2 exactly when the loss follows the sign convention
    and puts no gradient on non-pairs; otherwise the two differ, which is how a violation shows.
    """
    w = weights.weights.to(S.dtype)
    return (w * S)[weights.neg].sum() - (w * S)[weights.pos].sum()


def similarity_to_distance_weights(
    grad_S: torch.Tensor, S: torch.Tensor, *, squared: bool = False
) -> torch.Tensor:
    """Change of variable from ``dL/dS_ij`` to ``dL/dD_ij`` on the unit sphere.

    With ``D_ij^2 = 2 - 2 S_ij``: ``dL/d(D^2) = -dL/dS / 2`` (a uniform rescaling) and
    ``dL/dD = -D dL/dS`` (a per-pair rescaling by the distance). Both flip the sign, which is why
    Liu et al.'s distance form (Eq. 5, footnote 2) pulls positives with ``dL/dD >= 0``.

    Parameters
    ----------
    grad_S : Tensor of shape (B, B)
    S : Tensor of shape (B, B)
    squared : bool
        Return ``dL/d(D^2)`` instead of ``dL/dD``.
    """
    if squared:
        return -0.5 * grad_S
    D = (2.0 - 2.0 * S).clamp_min(0.0).sqrt()
    return -D * grad_S


def distance_loss_on_similarity(
    loss_on_D: LossOnS, *, squared: bool = False, eps: float = 1e-12
) -> LossOnS:
    """Turn a loss written on distances (Liu et al., Eq. 11-15) into a loss on ``S``.

    The distance of unit vectors is ``D = sqrt(2 - 2 S)`` (or ``D^2 = 2 - 2 S`` when
    ``squared``). On the diagonal, ``D_ii = 0`` is put in directly, so that the square root's
    infinite slope at ``S = 1`` never reaches the gradient of the pairs.

    Parameters
    ----------
    loss_on_D : callable
        ``loss_on_D(D, labels) -> scalar``.
    squared : bool
        Pass ``D^2`` instead of ``D``.
    eps : float
        Lower clamp of ``D^2`` off the diagonal (coincident points of different indices).
    """

    def loss_on_S(S: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        sq = 2.0 - 2.0 * S
        eye = torch.eye(S.shape[0], dtype=torch.bool, device=S.device)
        if squared:
            D = torch.where(eye, torch.zeros_like(sq), sq)
        else:
            D = torch.where(eye, torch.zeros_like(sq), sq.clamp_min(eps).sqrt())
        return loss_on_D(D, labels)

    return loss_on_S


def embedding_gradient(grad_S: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Chain ``dL/dS`` through ``S = Z Z^T``, ``z_i = x_i / |x_i|`` to ``dL/dx``.

    For the normalisation the Jacobian is ``dz/dx = (I - z z^T) / |x|``, so::

        dL/dx_i = (I - z_i z_i^T) / |x_i|  *  sum_j (dL/dS_ij + dL/dS_ji) z_j

    Both ``S_ij`` and ``S_ji`` contain ``z_i``; hence the symmetrised weights. The projection
    removes the radial part: a gradient on raw embeddings is tangent to the sphere.

    Parameters
    ----------
    grad_S : Tensor of shape (B, B)
    x : Tensor of shape (B, d)
        The raw (unnormalised) embeddings.

    Returns
    -------
    Tensor of shape (B, d)
    """
    x = as_embeddings(x, "x")
    if grad_S.shape != (x.shape[0], x.shape[0]):
        raise ValueError(
            f"grad_S must have shape ({x.shape[0]}, {x.shape[0]}) for {x.shape[0]} embeddings, "
            f"got {tuple(grad_S.shape)}."
        )
    z = l2_normalize(x)
    g = grad_S.to(x.dtype)
    gz = (g + g.T) @ z
    radial = (gz * z).sum(dim=1, keepdim=True)
    return (gz - radial * z) / x.norm(dim=1, keepdim=True)


def check_embedding_chain(
    loss_on_S: LossOnS, x: torch.Tensor, labels: torch.Tensor, tol: float = 1e-10
) -> GradientCheck:
    """Compare :func:`embedding_gradient` of the GPW weights with autograd's ``dL/dx``, in float64.

    Autograd differentiates ``loss_on_S(cosine_similarity(x), labels)`` end to end; the closed
    form multiplies the autograd ``dL/dS`` by the normalisation Jacobian.
    """
    x64 = as_embeddings(x, "x").detach().to(torch.float64)
    y = as_labels(labels)
    check_same_length(x64, y, "x")
    leaf = x64.clone().requires_grad_(True)
    with torch.enable_grad():
        z = l2_normalize(leaf)
        loss = loss_on_S(z @ z.T, y)
        (expected,) = torch.autograd.grad(loss, leaf)
    S = l2_normalize(x64) @ l2_normalize(x64).T
    actual = embedding_gradient(gpw_weights(loss_on_S, S, y).grad, x64)
    return compare_gradients(actual, expected, tol)

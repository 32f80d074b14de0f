"""A designed gradient: direction x pair weight x triplet weight (Xuan & Pless, Sec. 3 and 4).

:class:`SurgerySpec` names the parts (and declares every default once); :func:`designed_gradient`
builds ``dL/df`` for a batch of unit features from them; :class:`SurgeryFunction` is the
``torch.autograd.Function`` whose backward hands that gradient to autograd in place of the
gradient of its forward value, as the paper's PyTorch implementation does (Sec. 4).

For each easy-positive / hard-negative triplet ``(a, p, n)``
(:func:`dmlbook.surgery.triplets.ephn_triplets`) with weights ``W+ = scale * T * sel(P+)`` and
``W- = scale * T * P-``, the gradient adds ``W+ e_p`` to ``f_p``, ``W- e_n`` to ``f_n`` and
``W+ e_ap + W- e_an`` to ``f_a``; the sum is divided by the number of triplets (a mean, as the
losses' ``reduction="mean"``). The weights are read at the current features and are not
differentiated (a designed gradient is a field, not a loss).

The forward value is the mean similarity gap ``S_an - S_ap`` of the triplets: a number to log
(below 0 when the average triplet is ordered; with hard negatives it need not fall steadily).
Its autograd gradient is *not* what backward returns.

Chapter: ``book/13_gradient_surgery.ipynb``. Tests: ``tests/surgery/test_gradient.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..core.declaration import check_argument
from ..core.validation import Real, Scale
from .directions import DIRECTIONS, unit_directions
from .triplets import Triplets, ephn_triplets, relative_sets
from .weights import (
    PAIR_WEIGHTS,
    PRINTED_CIRCLE_MARGIN,
    SELECTIONS,
    TRIPLET_WEIGHTS,
    pair_weights,
    relative_means,
    select,
    sig_ms_weights,
    triplet_weight,
)

__all__ = ["SurgeryFunction", "SurgerySpec", "designed_gradient"]


def _choice(value: Any, allowed: tuple[str, ...], name: str) -> str:
    key = str(value).strip().lower().replace("-", "_") if isinstance(value, str) else value
    if key not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}.")
    return key


def _finite(value: Any, name: str, *, positive: bool = False) -> float:
    """A scale (``positive``) or a margin, with the losses' ranges (:mod:`dmlbook.core.validation`)."""
    return check_argument(name, value, Scale if positive else Real)


@dataclass(frozen=True)
class SurgerySpec:
    """The parts of a designed gradient and their hyper-parameters, declared once.

    Parameters
    ----------
    direction : {"euc", "cos", "euc_orth", "cos_orth"}
        Unit direction (Eq. 5-7). ``"-"`` may be written for ``"_"`` (``"cos-orth"``).
    pair_weight : {"con", "euc", "lin", "sig", "sig_ms", "lin_ms"}
        Pair weight (Eq. 8-14).
    triplet_weight : {"con", "cos", "cir"}
        Triplet weight (Eq. 15-17).
    selection : {"none", "sc1", "sc2"}
        Masking of the positive pair weight (Eq. 18; Eq. 19 corrected).
    alpha, beta, lam : float
        Of the sigmoid weights (Eq. 11, 13); defaults of the MS re-implementation the paper's
        appendix uses (2, 10, 0.5).
    epsilon : float
        Of the relative sets (Eq. 12).
    tau : float
        Scale of ``T^cos`` and ``T^cir`` (Eq. 16-17; Fig. 3 uses 1).
    circle_margin : float
        Circle loss's ``m`` in ``T^cir``; ``1/sqrt(2)`` gives Eq. 17 as printed.
    scale : float
        Multiplies the whole gradient (the constants the paper leaves out, e.g. 4 for the
        Euclidean triplet with ``T^con = 0.5``, ``tau`` for Eq. 6).
    """

    direction: str = "cos"
    pair_weight: str = "con"
    triplet_weight: str = "con"
    selection: str = "none"
    alpha: float = 2.0
    beta: float = 10.0
    lam: float = 0.5
    epsilon: float = 0.1
    tau: float = 1.0
    circle_margin: float = PRINTED_CIRCLE_MARGIN
    scale: float = 1.0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Validate and normalise the values (``ValueError`` names the valid choices)."""
        put = object.__setattr__
        put(self, "direction", _choice(self.direction, DIRECTIONS, "direction"))
        put(self, "pair_weight", _choice(self.pair_weight, PAIR_WEIGHTS, "pair_weight"))
        put(self, "triplet_weight", _choice(self.triplet_weight, TRIPLET_WEIGHTS, "triplet_weight"))
        put(self, "selection", _choice(self.selection, SELECTIONS, "selection"))
        for name in ("alpha", "beta", "tau", "scale"):
            put(self, name, _finite(getattr(self, name), name, positive=True))
        for name in ("lam", "epsilon", "circle_margin"):
            put(self, name, _finite(getattr(self, name), name))

    @property
    def parts(self) -> str:
        """A short label, e.g. ``"cos / lin / cir & sc1"``."""
        sel = "" if self.selection == "none" else f" & {self.selection}"
        return f"{self.direction} / {self.pair_weight} / {self.triplet_weight}{sel}"


def _check_weights(p_plus: torch.Tensor, p_minus: torch.Tensor, spec: SurgerySpec) -> None:
    """``ValueError`` with the fix if a pair weight left the dtype's range."""
    if bool(torch.isfinite(p_plus).all() and torch.isfinite(p_minus).all()):
        return
    top = math.log(torch.finfo(p_plus.dtype).max)
    raise ValueError(
        f"pair_weight={spec.pair_weight!r} gives weights beyond {p_plus.dtype} for this batch "
        f"(with beta={spec.beta:g} and lam={spec.lam:g} they reach exp(beta * (1 - lam)) = "
        f"exp({spec.beta * (1 - spec.lam):g}); {p_plus.dtype} ends at exp({top:.1f})). Lower beta "
        f"(or alpha) so that beta * (1 - lam) < {top:.0f}, or compute in float64."
    )


def designed_gradient(
    f: torch.Tensor, labels: torch.Tensor, spec: SurgerySpec
) -> tuple[torch.Tensor, torch.Tensor]:
    """The designed gradient ``dL/df`` of a batch and the forward value (module docstring).

    Parameters
    ----------
    f : Tensor of shape (B, d)
        Unit-norm features (the paper's ``f``, after the L2 normalisation layer).
    labels : Tensor of shape (B,)
    spec : SurgerySpec

    Returns
    -------
    (grad, value) : Tensor of shape (B, d), scalar Tensor
        Zero and 0 when no anchor has both a positive and a negative.
    """
    f = f.detach()
    S = f @ f.T
    t = ephn_triplets(S, labels)
    grad = torch.zeros_like(f)
    if len(t) == 0:
        return grad, torch.zeros((), dtype=f.dtype, device=f.device)
    if spec.pair_weight == "sig_ms":  # Eq. 13
        in_P, in_N = relative_sets(S, labels, t, spec.epsilon)
        p_plus, p_minus = sig_ms_weights(
            S[t.a], t.s_ap, t.s_an, in_P, in_N, alpha=spec.alpha, beta=spec.beta, lam=spec.lam
        )
    else:
        m_plus = m_minus = None
        if spec.pair_weight == "lin_ms":
            in_P, in_N = relative_sets(S, labels, t, spec.epsilon)
            m_plus, m_minus = relative_means(
                S[t.a], t.s_ap, t.s_an, in_P, in_N, "lin", spec.alpha, spec.beta
            )
        p_plus, p_minus = pair_weights(
            spec.pair_weight, t.s_ap, t.s_an, alpha=spec.alpha, beta=spec.beta, lam=spec.lam,
            m_plus=m_plus, m_minus=m_minus,
        )  # fmt: skip
    _check_weights(p_plus, p_minus, spec)
    p_plus = select(spec.selection, p_plus, t.s_ap, t.s_an)
    T = triplet_weight(
        spec.triplet_weight, t.s_ap, t.s_an, tau=spec.tau, circle_margin=spec.circle_margin
    )
    c = spec.scale / len(t)
    w_pos, w_neg = c * T * p_plus, c * T * p_minus
    gap = (t.s_an - t.s_ap).mean()
    if spec.direction == "cos":  # the directions are the features: the sum is one product
        return _cosine_field(f, t, w_pos, w_neg), gap
    e = unit_directions(f[t.a], f[t.p], f[t.n], spec.direction)
    w_pos, w_neg = w_pos[:, None], w_neg[:, None]
    to = torch.cat([t.p, t.n, t.a, t.a])  # f_p gets W+ e_p, f_n W- e_n, f_a W+ e_ap + W- e_an
    grad.index_add_(
        0, to, torch.cat([w_pos * e.e_p, w_neg * e.e_n, w_pos * e.e_ap, w_neg * e.e_an])
    )
    return grad, gap


def _cosine_field(
    f: torch.Tensor, t: Triplets, w_pos: torch.Tensor, w_neg: torch.Tensor
) -> torch.Tensor:
    """The designed gradient for ``e^cos`` (Eq. 6) as ``(M + M^T) f``.

    ``e_p = -f_a``, ``e_n = f_a``, ``e_ap = -f_p``, ``e_an = f_n``: triplet ``(a, p, n)`` adds
    ``-W+ f_p + W- f_n`` to ``f_a``, ``-W+ f_a`` to ``f_p`` and ``W- f_a`` to ``f_n``, which is
    row ``a`` of ``M f`` and rows ``p``, ``n`` of ``M^T f`` for ``M[a, p] = -W+``,
    ``M[a, n] = W-`` (one triplet per anchor, so no entry is written twice).
    """
    M = f.new_zeros(f.shape[0], f.shape[0])
    M[t.a, t.p] = -w_pos
    M[t.a, t.n] = w_neg
    return (M + M.T) @ f


class SurgeryFunction(torch.autograd.Function):
    """``SurgeryFunction.apply(f, labels, spec)``: forward gives the mean gap ``S_an - S_ap``,
    backward gives ``grad_output *`` :func:`designed_gradient` (Xuan & Pless, Sec. 4)."""

    @staticmethod
    def forward(ctx: Any, f: torch.Tensor, labels: torch.Tensor, spec: SurgerySpec) -> torch.Tensor:
        grad, value = designed_gradient(f, labels, spec)
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None

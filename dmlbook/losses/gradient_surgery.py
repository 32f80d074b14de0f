"""The trainable designed-gradient loss of Xuan & Pless: any (direction, pair weight, triplet
weight, selection) through a custom backward.

``get_loss("gradient_surgery", direction="cos_orth", pair_weight="lin_ms",
triplet_weight="cos", selection="sc1")`` builds it; configs name it the same way
(``loss: {name: gradient_surgery, params: {...}}``). The forward L2-normalises the embeddings
(with autograd, the paper's normalisation layer) and applies
:class:`dmlbook.surgery.SurgeryFunction`, whose backward is the designed gradient of
:func:`dmlbook.surgery.designed_gradient` and whose value (logged by ``fit`` and the engine) is
the mean similarity gap ``S_an - S_ap`` of the easy-positive / hard-negative triplets.

The hyper-parameters are those of :class:`dmlbook.surgery.SurgerySpec`, declared there once.

It lives among the losses, on the parts of :mod:`dmlbook.surgery` that it trains (it is a
designed gradient, not the gradient of a loss), and registers itself, so ``dmlbook.losses.get_loss`` finds it.

Chapter: ``book/13_gradient_surgery.ipynb`` (13.6-13.8). Tests: ``tests/losses/test_gradient_surgery.py``.
"""

from __future__ import annotations

import torch

from ..core.pairs import check_batch, compute_dtype
from ..core.similarity import l2_normalize
from ..surgery.gradient import SurgeryFunction, SurgerySpec
from .base import PairLoss
from .first_order import first_order_only, second_derivative_refusal
from .registry import register_loss

__all__ = ["GradientSurgeryLoss"]


class GradientSurgeryLoss(PairLoss):
    """A designed gradient as a loss module (Xuan & Pless, Sec. 3-4; module docstring).

    Parameters
    ----------
    direction, pair_weight, triplet_weight, selection, alpha, beta, lam, epsilon, tau, circle_margin, scale
        See :class:`dmlbook.surgery.SurgerySpec`.
    """

    hyper = SurgerySpec

    @property
    def spec(self) -> SurgerySpec:
        """The module's settings as a :class:`~dmlbook.surgery.SurgerySpec`, the one checked at
        construction or at the last assignment of a setting (not rebuilt at each call)."""
        return self._hyper_spec

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if pos_mask is not None or neg_mask is not None:
            raise ValueError(
                "gradient_surgery selects its own easy-positive / hard-negative triplets; "
                "call it without pos_mask/neg_mask."
            )
        x, y = check_batch(embeddings, labels)
        x = x.to(compute_dtype(x))  # half precision (bf16 autocast): computed in float32
        with torch.autocast(x.device.type, enabled=False):
            f = first_order_only(l2_normalize(x), second_derivative_refusal(self))
            return SurgeryFunction.apply(f, y, self.spec)

    def loss_on_similarity(self, S: torch.Tensor, labels: torch.Tensor, **masks: object) -> None:
        raise TypeError(
            "gradient_surgery acts on embeddings, not on S (its orthogonal directions are no "
            "weights on S); call the module as loss(embeddings, labels)."
        )


register_loss("gradient_surgery", GradientSurgeryLoss, aliases=("surgery",))

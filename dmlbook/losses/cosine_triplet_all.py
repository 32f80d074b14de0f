"""The cosine (NCA) triplet loss on every triplet (Xuan & Pless, Eq. 4, Eq. 6) in ``O(B^2)``
memory: anchors in blocks, positives as index lists, the gradient in closed form.

Every valid triplet ``(a, p, n)`` (``p`` a positive, ``n`` a negative of ``a``) adds
``softplus(tau (S_an - S_ap))``, and its gradient is Eq. 6's triplet weight
``T = sigmoid(tau (S_an - S_ap))`` on the two pairs:

    dL/dS_an = tau sum_{p in P_a} T_apn,    dL/dS_ap = -tau sum_{n in N_a} T_apn.

The ``B x K x B`` tensor of gaps (``K`` the most positives any anchor has: ``k - 1`` in a P x K
batch, never ``B``) is formed a block of anchors at a time within a fixed budget of elements, and
each block adds its terms to the value and its triplet weights to one ``B x B`` matrix ``W``
(``dL/dS``), which the backward multiplies by the incoming gradient
(:func:`dmlbook.losses.closed_form.closed_form_loss`). Memory: ``W``, the positive
index lists and one block; the ``B x B x B`` tensor of the autograd form is never built.

Tests: ``tests/surgery/test_losses.py`` (against Eq. 4 written out on all ``B^3`` triplets with
autograd, and the loop of :mod:`dmlbook.reference.gradient_surgery`).
"""

from __future__ import annotations

import torch

from ..pair_lists import positive_lists
from ..pairs import softplus

__all__ = ["BLOCK_ELEMENTS", "cosine_triplet_all_core"]

#: Elements of one block of triplet gaps (anchors x positives x candidates): 16 MB in float32.
BLOCK_ELEMENTS = 1 << 22


def cosine_triplet_all_core(
    s: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, tau: float, mean: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 4 summed over every triplet of the masks, divided by their number if ``mean`` (0 with
    gradient 0 without a triplet), and ``dL/dS``, on detached ``s``."""
    index, real = positive_lists(pos)
    B, K = index.shape
    count = int((real.sum(dim=1) * neg.sum(dim=1)).sum())
    W = torch.zeros_like(s)
    total = s.new_zeros(())
    if count == 0:
        return total, W
    s_pos = s.gather(1, index)  # (B, K): S_ap of each anchor's positives
    real_f, neg_f = real.to(s.dtype), neg.to(s.dtype)
    w_pos = torch.zeros_like(s_pos)
    step = max(1, BLOCK_ELEMENTS // (K * B))
    for a in range(0, B, step):
        block = slice(a, a + step)
        gap = (s[block, None, :] - s_pos[block, :, None]).mul_(tau)  # (b, K, B)
        valid = real_f[block, :, None] * neg_f[block, None, :]
        total += (softplus(gap) * valid).sum()
        T = gap.sigmoid_().mul_(valid)  # Eq. 6's triplet weight, 0 off the triplets
        W[block] = T.sum(dim=1)
        w_pos[block] = T.sum(dim=2)
    W.scatter_add_(1, index, w_pos.neg_())  # padded slots add 0
    W.mul_(tau / count if mean else tau)
    return (total / count if mean else total), W

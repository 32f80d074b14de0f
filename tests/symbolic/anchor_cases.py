"""Hyper-parameter symbols and losses of one anchor, written on
:func:`dmlbook.symbolic.anchor_similarities`, that several tests of ``dmlbook.symbolic`` share
(symbols, differentiation, proofs, the torch bridge, the autograd check), and a small float64
batch to evaluate them on.

Every form is written here from the paper's equation, independently of the code under test.
"""

from __future__ import annotations

import sympy as sp
import torch

from dmlbook import symbolic as sy
from dmlbook.core.similarity import cosine_similarity

ALPHA, BETA, LAM = sy.hyperparameters("alpha beta lambda")
MS_VALUES = {ALPHA: 2.0, BETA: 10.0, LAM: 0.5}


def ms_anchor(a: sy.AnchorSimilarities) -> sp.Expr:
    """One anchor's MS loss, Wang et al. 2019, Eq. 15 (without the 1/m of the batch mean)."""
    pos = sy.log1p_sum_exp([-ALPHA * (s - LAM) for s in a.pos]) / ALPHA
    return pos + sy.log1p_sum_exp([BETA * (s - LAM) for s in a.neg]) / BETA


def ms_closed_form(a: sy.AnchorSimilarities) -> tuple[list[sp.Expr], list[sp.Expr]]:
    """Wang et al. 2019, Eq. 14 (positives) and Eq. 13 first line (negatives)."""
    w_pos = [
        1 / (sp.exp(-ALPHA * (LAM - s)) + sum(sp.exp(-ALPHA * (t - s)) for t in a.pos))
        for s in a.pos
    ]
    w_neg = [
        1 / (sp.exp(BETA * (LAM - s)) + sum(sp.exp(BETA * (t - s)) for t in a.neg)) for s in a.neg
    ]
    return w_pos, w_neg


def contrastive_anchor(margin: sp.Expr):
    """One anchor's share of Wang et al. 2019, Eq. 4."""

    def build(a: sy.AnchorSimilarities) -> sp.Expr:
        return sum((-s for s in a.pos), sp.S.Zero) + sum(
            (sy.hinge(s - margin) for s in a.neg), sp.S.Zero
        )

    return build


def batch(seed: int = 0, B: int = 8, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine similarities of ``B`` seeded random ``d``-dim embeddings, labels ``i mod 3``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, d, generator=g, dtype=torch.float64)
    labels = torch.arange(B) % 3
    return cosine_similarity(x), labels

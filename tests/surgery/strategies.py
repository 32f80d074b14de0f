"""Hypothesis batches for the gradient-surgery tests: unit features in float64, PK-style labels."""

from __future__ import annotations

import hypothesis.strategies as st
import torch


@st.composite
def unit_batches(draw, max_classes: int = 4, max_k: int = 4, max_d: int = 5):
    """``(f, labels)``: 2-``max_classes`` classes of 2-``max_k`` samples, unit rows in float64."""
    n_classes = draw(st.integers(2, max_classes))
    sizes = [draw(st.integers(2, max_k)) for _ in range(n_classes)]
    d = draw(st.integers(2, max_d))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    labels = torch.cat([torch.full((k,), c) for c, k in enumerate(sizes)])
    x = torch.randn(len(labels), d, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True), labels


def ephn_loop(f: torch.Tensor, labels: torch.Tensor) -> list[tuple[int, int, int]]:
    """Easy-positive / hard-negative triplets by a plain loop (independent of the package)."""
    S = (f @ f.T).tolist()
    y = labels.tolist()
    out = []
    for a in range(len(y)):
        pos = [j for j in range(len(y)) if j != a and y[j] == y[a]]
        neg = [j for j in range(len(y)) if y[j] != y[a]]
        if pos and neg:
            p = max(pos, key=lambda j: (S[a][j], -j))
            n = max(neg, key=lambda j: (S[a][j], -j))
            out.append((a, p, n))
    return out

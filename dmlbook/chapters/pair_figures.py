"""Figures of one anchor's pairs: the three similarities, and mining on a similarity or distance axis.

Chapters 8, 10 and 11 draw these (Figures 8.1, 10.1 and 11.1); their drawing code lives here so
that the page shows one call. Each function returns the :class:`~matplotlib.figure.Figure` and
calls no ``plt.show()``. Colour is never the only cue: positives are circles and negatives
squares, kept pairs filled and left-out pairs hollow (:mod:`dmlbook.chapters.palette`).

* :func:`plot_three_similarities`: Wang et al. (2019), Sec. 4.1 and Fig. 2: points on the unit
  circle, one panel per similarity, each moving one thing and listing ``S_ij``, ``S_ij - S_ip``
  and ``S_ij - max_k S_ik`` before and after, computed from the drawn points.
* :func:`plot_mining_window`: MS mining (Wang et al., Eq. 11-12) on one anchor's similarity axis.
* :func:`plot_threshold_mining`: Liu et al.'s threshold mining (Eq. 16-17) on distances.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..core.similarity import cosine_similarity
from .palette import PALETTE, series_style

__all__ = ["plot_three_similarities", "plot_mining_window", "plot_threshold_mining"]

#: Anchor, positive, the negative x_j, two other negatives: their angles on the circle (degrees).
DEFAULT_ANGLES = (0.0, 40.0, 75.0, 300.0, 330.0)
#: One panel per similarity: its title, and the new angle of each point it moves.
DEFAULT_MOVES = {
    "Similarity-S: the negative comes closer": {2: 45.0},
    "Similarity-P: the positive drifts away": {1: 100.0},
    "Similarity-N: the other negatives leave": {3: 200.0, 4: 230.0},
}
_ROLES = {"anchor": [0], "positive": [1], "negative $x_j$": [2], "other negatives": [3, 4]}
_QUANTITIES = ("$S_{ij}$", "$S_{ij} - S_{ip}$", r"$S_{ij} - \max_k S_{ik}$")


def _points(angles: Sequence[float]) -> torch.Tensor:
    rad = torch.deg2rad(torch.tensor(list(angles), dtype=torch.float64))
    return torch.stack([rad.cos(), rad.sin()], 1)


def three_similarities(angles: Sequence[float]) -> tuple[float, float, float]:
    """``(S_ij, S_ij - S_ip, S_ij - max_k S_ik)`` of the points at ``angles`` (degrees), in the
    order anchor ``i``, positive ``p``, negative ``j``, then the other negatives ``k``."""
    if len(angles) < 4:
        raise ValueError(
            f"angles must hold an anchor, a positive, the negative x_j and at least one other "
            f"negative (4 or more angles), got {len(angles)}."
        )
    S = cosine_similarity(_points(angles))
    return float(S[0, 2]), float(S[0, 2] - S[0, 1]), float(S[0, 2] - S[0, 3:].max())


def plot_three_similarities(
    angles: Sequence[float] = DEFAULT_ANGLES,
    moves: Mapping[str, Mapping[int, float]] | None = None,
) -> Figure:
    """Figure 8.1: each panel moves one point (faded before, solid after) and lists the three
    similarities of the negative pair ``(x_i, x_j)`` before and after (Wang et al. 2019, Fig. 2).

    ``angles`` are the five points' angles in degrees (anchor, positive, negative ``x_j``, two
    other negatives); ``moves`` maps each panel's title to ``{point index: new angle}``.
    """
    moves = DEFAULT_MOVES if moves is None else moves
    if len(angles) != 5:
        raise ValueError(
            f"angles must hold 5 angles (anchor, positive, x_j, 2 others), got {len(angles)}."
        )
    bad = [i for move in moves.values() for i in move if not 0 <= i < 5]
    if bad:
        raise ValueError(f"moves name points {bad}; the points are indexed 0-4.")
    fig, axes = plt.subplots(1, len(moves), figsize=(4 * len(moves), 4.4), squeeze=False)
    for ax, (title, move) in zip(axes[0], moves.items(), strict=True):
        ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="0.8"))
        after = [move.get(i, a) for i, a in enumerate(angles)]
        for alpha, deg in ((0.3, angles), (1.0, after)):
            x = _points(deg)
            for n, (name, rows) in enumerate(_ROLES.items()):
                st = series_style(n)
                label = name if alpha == 1.0 else None
                ax.plot(*x[rows].T, st["marker"], color=st["color"], ms=11, alpha=alpha,
                        mec="k", ls="", label=label)  # fmt: skip
        found = zip(_QUANTITIES, three_similarities(angles), three_similarities(after), strict=True)
        ax.set_xlabel("\n".join(f"{q}: {a:.2f} → {b:.2f}" for q, a, b in found))
        ax.set(
            aspect="equal", xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), xticks=[], yticks=[], title=title
        )
    axes[0, 0].legend(loc="lower left", fontsize="small")
    return fig


def _as_1d(values: object, name: str, dtype: torch.dtype) -> torch.Tensor:
    t = torch.as_tensor(values)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one entry per pair), got shape {tuple(t.shape)}.")
    return t.to(dtype)


def plot_mining_window(
    s_pos: object,
    s_neg: object,
    keep_pos: object,
    keep_neg: object,
    epsilon: float,
    anchor: int | None = None,
) -> Figure:
    """Figure 10.1: MS mining (Wang et al. 2019, Eq. 11-12) on one anchor's similarity axis.

    ``s_pos``, ``s_neg`` are the anchor's similarities to its positives and negatives, ``keep_pos``,
    ``keep_neg`` whether mining keeps each (filled) or leaves it out (hollow). The shaded windows
    are where each rule keeps pairs: negatives above ``min(s_pos) - epsilon`` (Eq. 11), positives
    below ``max(s_neg) + epsilon`` (Eq. 12).
    """
    s_pos, s_neg = (_as_1d(v, n, torch.float64) for v, n in ((s_pos, "s_pos"), (s_neg, "s_neg")))
    keep_pos, keep_neg = (
        _as_1d(v, n, torch.bool) for v, n in ((keep_pos, "keep_pos"), (keep_neg, "keep_neg"))
    )
    if len(s_pos) == 0 or len(s_neg) == 0:
        raise ValueError("s_pos and s_neg must be non-empty: an anchor without positives or "
                         "negatives mines nothing (Eq. 11-12 have no threshold).")  # fmt: skip
    if keep_pos.shape != s_pos.shape or keep_neg.shape != s_neg.shape:
        raise ValueError(
            "keep_pos and keep_neg must have one entry per similarity of s_pos, s_neg."
        )
    if not math.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be a finite margin >= 0, got {epsilon!r}.")
    lo, hi = float(s_pos.min()) - epsilon, float(s_neg.max()) + epsilon
    fig, ax = plt.subplots(figsize=(10, 2.8))
    ax.axvspan(
        lo, 1, ymin=0, ymax=0.5, color=PALETTE[1], alpha=0.15, label="Eq. 11: negatives kept"
    )
    ax.axvspan(
        -1, hi, ymin=0.5, ymax=1, color=PALETTE[0], alpha=0.15, label="Eq. 12: positives kept"
    )
    for y, s, kept, colour, marker, name in (
        (1, s_pos, keep_pos, PALETTE[0], "o", "positive"),
        (-1, s_neg, keep_neg, PALETTE[1], "s", "negative"),
    ):
        ax.scatter(s[kept], torch.full((int(kept.sum()),), y), color=colour, marker=marker,
                   label=f"{name}, mined")  # fmt: skip
        ax.scatter(s[~kept], torch.full((int((~kept).sum()),), y), facecolors="none",
                   edgecolors=colour, marker=marker, label=f"{name}, left out")  # fmt: skip
    ax.axvline(lo, color=PALETTE[1], ls="--")
    ax.axvline(hi, color=PALETTE[0], ls=":")
    ax.text(lo, 1.6, r" $\min S^+ - \epsilon$", color=PALETTE[1])
    ax.text(hi, -1.8, r" $\max S^- + \epsilon$", color=PALETTE[0])
    ax.axhline(0, color="0.5", lw=0.8)
    who = "the anchor" if anchor is None else f"anchor {anchor}"
    left = min(float(s_pos.min()), float(s_neg.min()), lo) - 0.1
    ax.set(xlim=(left, 1), ylim=(-2.2, 2.2), yticks=[], xlabel=f"similarity $S_{{ij}}$ to {who}")
    ax.legend(fontsize="small", ncols=3, loc="lower left", bbox_to_anchor=(0, 1.02))
    return fig


def plot_threshold_mining(
    D: object, labels: object, pos_mask: object, neg_mask: object, neg_margin: float
) -> Figure:
    """Figure 11.1: Liu et al.'s threshold mining (Eq. 16-17) on a distance axis, one row per anchor.

    ``D`` is the ``(B, B)`` distance matrix, ``labels`` the ``B`` labels, ``pos_mask``,
    ``neg_mask`` the kept pairs (``threshold_pair_masks``); a dashed line marks ``neg_margin``
    (``m_2``). Positives are circles just above a row's line, negatives squares just below it.
    """
    D = torch.as_tensor(D, dtype=torch.float64)
    labels = torch.as_tensor(labels)
    pos_mask, neg_mask = (
        torch.as_tensor(pos_mask, dtype=torch.bool),
        torch.as_tensor(neg_mask, dtype=torch.bool),
    )
    B = len(labels)
    if (
        labels.ndim != 1
        or D.shape != (B, B)
        or pos_mask.shape != (B, B)
        or neg_mask.shape != (B, B)
    ):
        raise ValueError(f"D, pos_mask and neg_mask must be (B, B) for the B = {len(labels)} labels; "
                         f"got {tuple(D.shape)}, {tuple(pos_mask.shape)}, {tuple(neg_mask.shape)}.")  # fmt: skip
    fig, ax = plt.subplots(figsize=(8, 3.2))
    for a in range(B):
        for b in range(B):
            if a == b:
                continue
            positive = bool(labels[a] == labels[b])
            kept = bool((pos_mask if positive else neg_mask)[a, b])
            colour = PALETTE[0] if positive else PALETTE[1]
            ax.plot(D[a, b], a - 0.15 if positive else a + 0.15, "o" if positive else "s", ms=9,
                    color=colour, mfc=colour if kept else "none", ls="")  # fmt: skip
    ax.axvline(neg_margin, color=PALETTE[1], ls="--")
    ax.text(
        neg_margin + 0.01,
        -0.6,
        f"$m_2 = {neg_margin:g}$: negatives kept to the left",
        color=PALETTE[1],
    )
    ax.set(yticks=range(B), ylim=(B - 0.5, -0.9), xlabel="distance $D_{ij}$", ylabel="anchor $i$")
    ax.plot([], [], "o", color=PALETTE[0], label="positive, kept")
    ax.plot([], [], "o", color=PALETTE[0], mfc="none", label="positive, left out")
    ax.plot([], [], "s", color=PALETTE[1], label="negative, kept")
    ax.plot([], [], "s", color=PALETTE[1], mfc="none", label="negative, left out")
    ax.legend(fontsize="small", loc="lower right")
    return fig

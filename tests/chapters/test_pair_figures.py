"""Tests of dmlbook.chapters.pair_figures: each figure draws what the mining rules and the points say.

Expected values come from plain Python (``math.cos`` of the angles, loops over the pairs written
from Eq. 11-12 and 16-17), not from the module. Cost: three small figures, well under a second.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dmlbook.chapters.pair_figures import (  # noqa: E402
    plot_mining_window,
    plot_three_similarities,
    plot_threshold_mining,
    three_similarities,
)


def _by_hand(angles):
    s = [math.cos(math.radians(a - angles[0])) for a in angles]  # unit vectors: S = cos
    return s[2], s[2] - s[1], s[2] - max(s[3:])


def test_three_similarities_are_the_cosines_of_the_angles():
    angles = (0.0, 40.0, 75.0, 300.0, 330.0)
    assert np.allclose(three_similarities(angles), _by_hand(angles), atol=1e-12)
    with pytest.raises(ValueError, match="4 or more angles"):
        three_similarities((0.0, 10.0, 20.0))


def test_each_panel_lists_the_similarities_before_and_after_its_move():
    fig = plot_three_similarities()
    angles = [0.0, 40.0, 75.0, 300.0, 330.0]
    moved = [{2: 45.0}, {1: 100.0}, {3: 200.0, 4: 230.0}]
    for ax, move in zip(fig.axes, moved, strict=True):
        after = [move.get(i, a) for i, a in enumerate(angles)]
        lines = ax.get_xlabel().splitlines()
        for line, b, a in zip(lines, _by_hand(angles), _by_hand(after), strict=True):
            assert line.endswith(f"{b:.2f} → {a:.2f}")
    # the S panel moves S_ij; the P panel leaves S_ij alone and raises S_ij - S_ip
    s, p = fig.axes[0].get_xlabel().splitlines(), fig.axes[1].get_xlabel().splitlines()
    assert s[0].split(": ")[1].split(" → ")[0] != s[0].split(" → ")[1]
    assert p[0].split(": ")[1].split(" → ")[0] == p[0].split(" → ")[1]
    with pytest.raises(ValueError, match="indexed 0-4"):
        plot_three_similarities(moves={"x": {7: 10.0}})


def test_the_mining_window_fills_exactly_the_mined_pairs_and_draws_eq_11_12():
    s_pos = torch.tensor([0.3, 0.5, 0.6], dtype=torch.float64)
    s_neg = torch.tensor([0.1, 0.25, 0.45, -0.2], dtype=torch.float64)
    eps = 0.1
    keep_neg = [s > min(s_pos.tolist()) - eps for s in s_neg.tolist()]  # Eq. 11, a loop
    keep_pos = [s < max(s_neg.tolist()) + eps for s in s_pos.tolist()]  # Eq. 12
    fig = plot_mining_window(s_pos, s_neg, keep_pos, keep_neg, eps, anchor=3)
    ax = fig.axes[0]
    counts = {
        c.get_label(): len(c.get_offsets()) for c in ax.collections if c.get_label()[0] != "_"
    }
    assert counts["positive, mined"] == sum(keep_pos) and counts["negative, mined"] == sum(keep_neg)
    assert counts["negative, left out"] == len(keep_neg) - sum(keep_neg)
    lines = sorted(
        line.get_xdata()[0] for line in ax.lines if line.get_xdata()[0] == line.get_xdata()[1]
    )
    assert np.allclose(lines, sorted([0.3 - eps, 0.45 + eps]))
    assert "anchor 3" in ax.get_xlabel()
    with pytest.raises(ValueError, match="one entry per similarity"):
        plot_mining_window(s_pos, s_neg, keep_pos[:2], keep_neg, eps)
    with pytest.raises(ValueError, match="non-empty"):
        plot_mining_window(s_pos[:0], s_neg, [], keep_neg, eps)
    with pytest.raises(ValueError, match="epsilon"):
        plot_mining_window(s_pos, s_neg, keep_pos, keep_neg, -0.1)


def test_threshold_mining_draws_every_pair_filled_when_kept():
    angles = [0.0, 25.0, 50.0, 80.0, 150.0]
    labels = [0, 0, 1, 1, 2]
    D = [[2 * abs(math.sin(math.radians(a - b) / 2)) for b in angles] for a in angles]
    pos = [[labels[a] == labels[b] and a != b for b in range(5)] for a in range(5)]  # m1 = 0
    neg = [[labels[a] != labels[b] and D[a][b] <= 0.8 for b in range(5)] for a in range(5)]
    fig = plot_threshold_mining(D, labels, pos, neg, 0.8)
    drawn = [line for line in fig.axes[0].lines if len(line.get_xdata()) == 1]
    assert len(drawn) == 5 * 4  # every ordered pair once
    filled = [line for line in drawn if line.get_markerfacecolor() != "none"]
    assert len(filled) == sum(map(sum, pos)) + sum(map(sum, neg))
    kept_at = sorted(float(line.get_xdata()[0]) for line in filled if line.get_marker() == "s")
    expected = sorted(D[a][b] for a in range(5) for b in range(5) if neg[a][b])
    assert np.allclose(kept_at, expected)
    with pytest.raises(ValueError, match=r"\(B, B\)"):
        plot_threshold_mining(D, labels[:4], pos, neg, 0.8)

"""Tests of dmlbook.chapters.palette: the book's colours stay apart under deuteranopia, and no two series
share colour, marker and line style."""

from __future__ import annotations

import itertools

import matplotlib
import numpy as np
import pytest
from colorspacious import cspace_convert
from matplotlib.colors import to_rgb

from dmlbook.chapters.palette import HATCHES, LINESTYLES, MARKERS, PALETTE, book_rc, series_style

# Okabe & Ito (2008), "Color Universal Design", the eight colours as they print them (R, G, B)
OKABE_ITO_RGB = {
    (0, 0, 0),
    (230, 159, 0),
    (86, 180, 233),
    (0, 158, 115),
    (240, 228, 66),
    (0, 114, 178),
    (213, 94, 0),
    (204, 121, 167),
}


def test_palette_is_okabe_and_itos_eight_colours():
    assert {tuple(round(255 * v) for v in to_rgb(c)) for c in PALETTE} == OKABE_ITO_RGB
    assert len(PALETTE) == len(MARKERS) == len(LINESTYLES) == len(HATCHES) == 8


@pytest.mark.parametrize("cvd", ["deuteranomaly", "protanomaly", "tritanomaly"])
def test_every_pair_of_colours_stays_apart_under_simulated_colour_blindness(cvd):
    rgb = np.array([to_rgb(c) for c in PALETTE])
    seen = cspace_convert(
        np.clip(
            cspace_convert(rgb, {"name": "sRGB1+CVD", "cvd_type": cvd, "severity": 100}, "sRGB1"),
            0,
            1,
        ),
        "sRGB1",
        "CAM02-UCS",
    )
    closest = min(np.linalg.norm(seen[i] - seen[j]) for i, j in itertools.combinations(range(8), 2))
    assert closest > 8.0  # tab10's red and green: 5.2 under deuteranopia


def test_series_styles_are_distinct_beyond_the_palette():
    styles = [series_style(n) for n in range(64)]
    keys = {(s["color"], s["marker"]) for s in styles}
    assert len(keys) == 64
    first = styles[:8]
    assert len({s["marker"] for s in first}) == len({str(s["linestyle"]) for s in first}) == 8
    with pytest.raises(ValueError, match="non-negative int"):
        series_style(-1)


def test_book_rc_makes_the_palette_matplotlibs_default_cycle():
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(book_rc()):
        fig, ax = plt.subplots()
        lines = [ax.plot([0, 1], [0, n])[0] for n in range(3)]
        plt.close(fig)
    for n, line in enumerate(lines):
        assert line.get_color() == PALETTE[n]
    assert [ln.get_linestyle() for ln in lines] == ["-", "--", "-."]


@pytest.mark.parametrize("kind", [np.int64, np.uint8])
def test_a_numpy_integer_is_a_series_index(kind):
    assert series_style(kind(9)) == series_style(9)
    with pytest.raises(ValueError, match="non-negative int"):
        series_style(np.bool_(True))

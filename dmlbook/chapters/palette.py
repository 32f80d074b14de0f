"""The book's colours, markers and line styles: a figure readable without colour.

Okabe and Ito's eight colours (:data:`PALETTE`) stay apart under the common colour-vision
deficiencies; beside its colour the ``n``-th series of a figure takes the ``n``-th marker and line
style (:func:`series_style`; bars, which have no marker, the ``n``-th hatch), so that no figure
relies on colour alone. :func:`book_rc` makes colour and line style matplotlib's default cycle
(``dmlbook.setup()`` applies it), so a plain ``ax.plot`` in a chapter follows the rule. ``dmlbook.chapters.plots`` re-exports
all of it. ``tests/test_book_figures.py`` renders every stored figure under a simulated
deuteranopia and fails when two colours that a reader with normal colour vision tells apart merge.

Reference: M. Okabe and K. Ito, "Color Universal Design (CUD): how to make figures and
presentations that are friendly to colorblind people" (2008).
"""

from __future__ import annotations

import numbers

__all__ = ["PALETTE", "MARKERS", "LINESTYLES", "HATCHES", "series_style", "book_rc"]

#: Okabe & Ito's colour-blind-safe palette (blue, vermillion, bluish green, orange, sky blue,
#: reddish purple, black, yellow), in the order a figure's series take it; yellow is last because
#: it is faint on white.
PALETTE = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#E69F00",
    "#56B4E9",
    "#CC79A7",
    "#000000",
    "#F0E442",
)
#: One marker per series, beside its colour.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: One hatch per bar series (bars have no marker), beside its colour.
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")
#: One line style per series, beside its colour and marker.
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2)))


def series_style(n: int) -> dict:
    """Colour, marker and line style of a figure's ``n``-th series (keyword arguments of ``plot``).

    Series ``n`` and ``n + 8`` share a colour; the marker and line style still tell them apart
    up to 8 * 8 series.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"n must be a non-negative int (the series' index), got {n!r}.")
    n = int(n)  # a numpy integer too
    k = len(PALETTE)
    return {
        "color": PALETTE[n % k],
        "marker": MARKERS[(n + n // k) % len(MARKERS)],
        "linestyle": LINESTYLES[n % len(LINESTYLES)],
    }


def book_rc() -> dict:
    """Matplotlib settings of the book's figures (``dmlbook.setup()`` applies them).

    The default property cycle walks :data:`PALETTE` and :data:`LINESTYLES` together, so a plain
    ``ax.plot`` of a second series is dashed as well as vermillion. Markers are not in the cycle:
    matplotlib cannot thin them out on a dense curve without hiding the marker of a one-point
    line (``markevery`` as a fraction draws nothing for a single point), so a figure adds them
    where they help, with :func:`series_style`'s marker and a ``markevery``.
    """
    from cycler import cycler

    styles = [series_style(n) for n in range(len(PALETTE))]
    cycle = cycler(color=[s["color"] for s in styles], linestyle=[s["linestyle"] for s in styles])
    return {"axes.prop_cycle": cycle, "lines.markersize": 4.5, "image.cmap": "cividis"}

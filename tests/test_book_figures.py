"""Every stored figure of the book is numbered, captioned, described, and readable without colour.

Two rules, checked on the notebooks as committed (no chapter is executed here):

- **Captions and alternative text.** An image output is a figure only through its cell's MyST-NB
  metadata, ``"mystnb": {"figure": {"caption": ..., "name": ...}, "image": {"alt": ...}}``: the
  rendered page then shows the caption under the image and gives a screen reader the alternative
  text (without it, it reads ``<Figure size 720x304 with 2 Axes>``). Captions open with the
  figure's number within its chapter, ``Figure 4.2.``, in the order of the cells; names are
  ``fig-04-...``, unique in the book, so that prose can link to a figure with ``{numref}``.
- **Colour is never the only cue.** Each stored PNG is read back, its colours are gathered (the
  exact colours that fill a visible area: lines, markers, bars; anti-aliased edges are too rare to
  count), and the colours are simulated as a reader with deuteranopia sees them
  (``colorspacious``, Machado et al. 2009, severity 100). Two colours that a reader with normal
  colour vision tells apart (CAM02-UCS distance >= 15) must stay apart (>= 8) after the
  simulation. Okabe and Ito's palette (``dmlbook.chapters.palette``) keeps every pair of its colours
  >= 14.8 apart; matplotlib's default ``tab10`` puts red and green 5.2 apart, which is what the
  last test shows this check catches.

Cost: reading the 17 notebooks and decoding their PNGs, about 3 s.
"""

from __future__ import annotations

import base64
import io
import itertools
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from colorspacious import cspace_convert
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
NAME = re.compile(r"^fig-(\d\d)-[a-z0-9]+(-[a-z0-9]+)*$")
SEEN_APART = 15.0  # CAM02-UCS distance from which two flat colours are clearly different
STAY_APART = 8.0  # ... and the least distance they must keep under simulated deuteranopia
DEUTERANOPIA = {"name": "sRGB1+CVD", "cvd_type": "deuteranomaly", "severity": 100}


def figure_cells(path: Path) -> list[tuple[int, nbformat.NotebookNode, list[str]]]:
    """(cell index, cell, its PNG outputs) of every code cell with an image or figure metadata."""
    nb = nbformat.read(path, as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        pngs = [
            o["data"]["image/png"]
            for o in cell.get("outputs", [])
            if "image/png" in o.get("data", {})
        ]
        if pngs or "figure" in cell.metadata.get("mystnb", {}):
            found.append((i, cell, pngs))
    return found


def chapter_number(path: Path) -> int:
    return int(path.name[:2])


def caption_problems(path: Path) -> list[str]:
    """Why the figures of one chapter are not numbered, captioned and described (empty if fine)."""
    number = chapter_number(path)
    problems = []
    for k, (i, cell, pngs) in enumerate(figure_cells(path), 1):
        where = f"{path.name} cell {i}"
        mystnb = cell.metadata.get("mystnb", {})
        figure, image = mystnb.get("figure", {}), mystnb.get("image", {})
        caption = str(figure.get("caption", ""))
        name = str(figure.get("name", ""))
        alt = str(image.get("alt", ""))
        if len(pngs) != 1:
            problems.append(f"{where}: {len(pngs)} images; a figure cell stores exactly one")
        if not caption.startswith(f"Figure {number}.{k}. ") or len(caption) < 40:
            problems.append(
                f"{where}: caption {caption[:40]!r} must open 'Figure {number}.{k}. ' and say "
                "what the figure shows (mystnb.figure.caption)"
            )
        match = NAME.match(name)
        if not match or int(match[1]) != number:
            problems.append(f"{where}: name {name!r} must look like 'fig-{number:02d}-what'")
        if len(alt) < 60 or alt.startswith("<Figure"):
            problems.append(
                f"{where}: alternative text {alt[:30]!r} must describe the figure for a "
                "reader who cannot see it, in 60 characters or more (mystnb.image.alt)"
            )
    return problems


def _pixels(png: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB"))


def flat_colours(png: str, min_pixels: int = 25, min_share: float = 4e-4) -> np.ndarray:
    """The chromatic colours (sRGB in [0, 1]) that fill an area of the image, one per hue group.

    A colour counts when at least ``max(min_pixels, min_share * pixels)`` pixels have exactly it
    and its CAM02 chroma is >= 12 (greys, black and white tell series apart by lightness, which
    deuteranopia keeps). Colours closer than 10 to a more frequent one (shades of one series
    where markers overlap), or that are a more frequent one mixed with black or white (a marker's
    black edge or the white background blended in by anti-aliasing, a translucent fill), are
    merged into it.
    """
    rgb = _pixels(png).reshape(-1, 3).astype(np.int64)
    packed = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
    values, counts = np.unique(packed, return_counts=True)
    keep = counts >= max(min_pixels, min_share * len(packed))
    values, counts = values[keep], counts[keep]
    colours = np.stack([(values >> 16) & 255, (values >> 8) & 255, values & 255], 1) / 255.0
    if len(colours) == 0:
        return colours
    chromatic = cspace_convert(colours, "sRGB1", "JCh")[:, 1] >= 12
    colours, counts = colours[chromatic], counts[chromatic]
    ucs = cspace_convert(colours, "sRGB1", "CAM02-UCS") if len(colours) else colours
    kept: list[int] = []
    for i in np.argsort(-counts, kind="stable"):
        if all(np.linalg.norm(ucs[i] - ucs[j]) >= 10 for j in kept) and not any(
            _is_blend(colours[i], colours[j]) for j in kept
        ):
            kept.append(i)
    return colours[kept]


def _is_blend(colour: np.ndarray, series: np.ndarray, tol: float = 0.02) -> bool:
    """Whether ``colour`` is ``series`` mixed with black or white (anti-aliasing against an edge
    or the background, a translucent fill): a shade of one series, not a series of its own."""
    for ink in (np.zeros(3), np.ones(3)):
        d = series - ink
        t = float(np.clip(np.dot(colour - ink, d) / max(np.dot(d, d), 1e-12), 0, 1))
        if np.abs(ink + t * d - colour).max() <= tol:
            return True
    return False


def merged_under_deuteranopia(png: str) -> list[str]:
    """Pairs of colours clearly apart for normal vision that merge under deuteranopia."""
    colours = flat_colours(png)
    if len(colours) < 2:
        return []
    seen = cspace_convert(colours, "sRGB1", "CAM02-UCS")
    simulated = np.clip(cspace_convert(colours, DEUTERANOPIA, "sRGB1"), 0, 1)
    simulated = cspace_convert(simulated, "sRGB1", "CAM02-UCS")
    merged = []
    for i, j in itertools.combinations(range(len(colours)), 2):
        apart = np.linalg.norm(simulated[i] - simulated[j])
        if np.linalg.norm(seen[i] - seen[j]) >= SEEN_APART and apart < STAY_APART:
            hexes = ["#" + "".join(f"{round(255 * v):02x}" for v in colours[k]) for k in (i, j)]
            merged.append(f"{hexes[0]} and {hexes[1]} ({apart:.1f} apart under deuteranopia)")
    return merged


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_is_numbered_captioned_and_described(path):
    assert caption_problems(path) == []


#: The chapters that derive a loss: each shows its weights and its training as pictures.
LOSS_CHAPTERS = ("02", "03", "04", "05", "06", "07", "08", "10", "11", "12", "13", "15")


def test_every_loss_chapter_has_at_least_two_figures_and_the_book_45():
    counts = {p.name[:2]: sum(len(pngs) for _, _, pngs in figure_cells(p)) for p in CHAPTERS}
    assert {c: n for c, n in counts.items() if c in LOSS_CHAPTERS and n < 2} == {}
    assert sum(counts.values()) >= 45


def test_figure_names_are_unique_in_the_book():
    names = [
        cell.metadata["mystnb"]["figure"].get("name")
        for path in CHAPTERS
        for _, cell, _ in figure_cells(path)
        if "figure" in cell.metadata.get("mystnb", {})
    ]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_stored_figures_stay_readable_under_deuteranopia(path):
    found = {
        f"{path.name} cell {i}": merged
        for i, _, pngs in figure_cells(path)
        for png in pngs
        if (merged := merged_under_deuteranopia(png))
    }
    assert found == {}, (
        "use dmlbook.chapters.palette's colours (dmlbook.setup() makes them the default)"
    )


def _png_of(colours: list[str]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3), dpi=80)
    for n, colour in enumerate(colours):
        ax.plot([0, 1], [n, n + 1], color=colour, lw=3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def test_the_checks_fail_on_what_they_guard_against():
    import matplotlib.pyplot as plt

    from dmlbook.chapters.palette import PALETTE

    tab10 = [plt.get_cmap("tab10")(i) for i in (2, 3)]  # tab:green and tab:red
    assert len(merged_under_deuteranopia(_png_of(tab10))) == 1
    assert merged_under_deuteranopia(_png_of(list(PALETTE))) == []
    assert len(flat_colours(_png_of(list(PALETTE)))) == 7  # black is not chromatic

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", {"image/png": _png_of(["#000000"])})]
    nb.cells = [cell]
    path = Path(pytest.importorskip("tempfile").mkdtemp()) / "04_x.ipynb"
    nbformat.write(nb, path)
    assert len(caption_problems(path)) == 3  # no caption, no name, no alternative text
    cell.metadata["mystnb"] = {
        "figure": {"caption": "Figure 4.1. Three lines that rise from left to right.", "name": ""},
        "image": {"alt": "A plot of one black line rising from the lower left to the upper right."},
    }
    cell.metadata["mystnb"]["figure"]["name"] = "fig-04-lines"
    nbformat.write(nb, path)
    assert caption_problems(path) == []
    cell.metadata["mystnb"]["figure"]["caption"] = "Figure 4.2. " + "x" * 40  # out of order
    nbformat.write(nb, path)
    assert len(caption_problems(path)) == 1

"""The weight explorer without a kernel: precomputed weights and sliders in one HTML block.

In JupyterLab ``weight_explorer`` (``dmlbook.chapters.explorer_widget``) recomputes a loss's pair weights on
every move of a slider. The rendered book has no kernel, so :func:`offline_explorer` computes them
beforehand, for every combination of a small grid of hyper-parameter values, on the same batch
(:func:`dmlbook.chapters.explorer.default_batch`), and writes one self-contained HTML block: the numbers as
JSON, a slider per hyper-parameter and a short script that redraws, from those numbers, the same
three panels as the widget: the pair weights ``|w_ij|`` against ``S_ij`` (positives and negatives
with their own colour and marker, hollow where a pair gets no gradient), the map of the weight of
every pair, and which of Wang et al.'s three similarities the weights move with beside Table 1's
row. Nothing is fetched: no library, no font, no network (``tools/book_check.py`` checks the
page). ``tests/chapters/test_explorer_html.py`` moves a slider in headless Chromium and compares the drawn
weights with :func:`dmlbook.chapters.explorer.batch_weights` at that setting.
"""

from __future__ import annotations

import html
import itertools
import json
from collections.abc import Mapping, Sequence

import torch

from .explorer import (
    batch_weights,
    default_batch,
    dependence_line,
    similarity_dependence,
    tunable_parameters,
)
from .palette import PALETTE

__all__ = ["explorer_grid", "offline_explorer", "OfflineExplorer"]

MAX_SETTINGS = 64  # the grid's size: every setting's weights travel in the page


def explorer_grid(
    loss: str,
    grid: Mapping[str, Sequence[float]],
    batch: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict:
    """Every setting of ``grid`` and the pair weights of ``loss`` there, as plain data.

    Parameters
    ----------
    loss : str
        A registered loss name.
    grid : mapping of str to sequence of float
        The values each slider takes, for hyper-parameters of
        :func:`dmlbook.chapters.explorer.tunable_parameters` (the others stay at their defaults); at most
        :data:`MAX_SETTINGS` combinations in all.
    batch : (S, labels), optional
        Default :func:`dmlbook.chapters.explorer.default_batch`.

    Returns
    -------
    dict
        ``names``, ``values`` (the grid), ``S``, ``i``, ``j``, ``pos`` (the batch's pairs
        ``i != j``), ``n`` (batch size) and ``settings``: one entry per combination, in
        ``itertools.product`` order, with ``w`` (``|dL/dS_ij|`` of every pair), ``summary``
        and ``dependence`` (the widget's two lines of text).
    """
    known = tunable_parameters(loss)
    unknown = sorted(set(grid) - set(known))
    if unknown or not grid:
        raise ValueError(
            f"grid must give values for some of {', '.join(known)} (the tunable parameters of "
            f"{loss!r}); got {', '.join(unknown) or 'none'}."
        )
    values = [[float(v) for v in grid[k]] for k in grid]
    if any(len(v) == 0 for v in values):
        raise ValueError("every hyper-parameter of grid needs at least one value.")
    count = 1
    for v in values:
        count *= len(v)
    if count > MAX_SETTINGS:
        raise ValueError(f"grid has {count} settings; at most {MAX_SETTINGS} travel in a page.")
    S, labels = default_batch() if batch is None else batch
    n = S.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    i, j = off.nonzero(as_tuple=True)
    settings = []
    for combo in itertools.product(*values):
        params = known | dict(zip(grid, combo, strict=True))
        w = batch_weights(loss, params, S, labels)
        ours = None if w.error else similarity_dependence(loss, params)
        settings.append(
            {
                "w": [float(f"{v:.6g}") for v in w.grad.abs()[i, j].tolist()],
                "summary": w.summary(),
                "dependence": "" if ours is None else dependence_line(loss, ours),
            }
        )
    return {
        "loss": loss,
        "names": list(grid),
        "values": values,
        "n": n,
        "i": i.tolist(),
        "j": j.tolist(),
        "S": [round(v, 5) for v in S[i, j].tolist()],
        "pos": (labels[i] == labels[j]).tolist(),
        "settings": settings,
    }


class OfflineExplorer:
    """The HTML block of :func:`offline_explorer`; a notebook stores it as ``text/html``."""

    def __init__(self, markup: str, data: dict) -> None:
        self.html, self.data = markup, data

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:  # the stored text/plain: the same on every machine, no address
        sizes = " x ".join(str(len(v)) for v in self.data["values"])
        return f"<weight explorer: {self.data['loss']}, {sizes} settings of {', '.join(self.data['names'])}>"


def offline_explorer(
    loss: str,
    grid: Mapping[str, Sequence[float]],
    start: Mapping[str, float] | None = None,
    batch: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> OfflineExplorer:
    """The weight explorer for a page without a kernel: sliders over ``grid``, three panels.

    ``start`` gives each slider's first position (a value of its grid; default its first value).
    """
    data = explorer_grid(loss, grid, batch)
    start = dict(start or {})
    first = []
    for name, values in zip(data["names"], data["values"], strict=True):
        value = float(start.pop(name, values[0]))
        if value not in values:
            raise ValueError(f"start[{name!r}] = {value} is not one of the grid's {values}.")
        first.append(values.index(value))
    if start:
        raise ValueError(f"start names {', '.join(start)}, which grid does not move.")
    sliders = "".join(
        f'<label style="margin-right:1.5em">{html.escape(name)} '
        f'<input type="range" min="0" max="{len(values) - 1}" step="1" value="{k}" '
        f'data-param="{html.escape(name)}" aria-label="{html.escape(name)}"> '
        f'<output class="value">{values[k]:g}</output></label>'
        for name, values, k in zip(data["names"], data["values"], first, strict=True)
    )
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    colours = json.dumps({"pos": PALETTE[0], "neg": PALETTE[1]})
    markup = (
        f'<div class="dmlbook-explorer-offline" data-loss="{html.escape(loss)}">'
        f'<div class="sliders">{sliders}</div><p class="summary"></p>'
        '<svg class="scatter" width="460" height="300" role="img" '
        'aria-label="pair weights against similarity"></svg>'
        '<svg class="map" width="300" height="300" role="img" '
        'aria-label="map of the weight of every pair"></svg>'
        '<p class="dependence"></p>'
        f'<script type="application/json" class="explorer-data">{payload}</script>'
        f"<script>{_SCRIPT.replace('COLOURS', colours)}</script></div>"
    )
    return OfflineExplorer(markup, data)


# Draws the three panels from the JSON block of its own <div>; one function per panel.
_SCRIPT = r"""(function () {
var root = document.currentScript.parentElement, C = COLOURS;
var d = JSON.parse(root.querySelector(".explorer-data").textContent);
var NS = "http://www.w3.org/2000/svg", sc = root.querySelector(".scatter"),
    mp = root.querySelector(".map"), sliders = root.querySelectorAll("input[type=range]");
function el(parent, tag, attrs) { var e = document.createElementNS(NS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]); parent.appendChild(e); return e; }
var lo = Math.min.apply(null, d.S), hi = Math.max.apply(null, d.S);
var X = function (s) { return 50 + 390 * (s - lo) / (hi - lo || 1); };
el(sc, "line", {x1: 50, y1: 270, x2: 440, y2: 270, stroke: "#555"});
el(sc, "line", {x1: 50, y1: 20, x2: 50, y2: 270, stroke: "#555"});
var xl = el(sc, "text", {x: 245, y: 295, "text-anchor": "middle", "font-size": 12});
xl.textContent = "S_ij from " + lo.toFixed(2) + " to " + hi.toFixed(2);
var top = el(sc, "text", {x: 4, y: 24, "font-size": 11}), marks = [], cells = [];
d.S.forEach(function (s, k) {
  var c = C[d.pos[k] ? "pos" : "neg"];
  marks.push(d.pos[k] ? el(sc, "circle", {cx: X(s), r: 3, stroke: c, "class": "pair"})
    : el(sc, "rect", {x: X(s) - 2.5, width: 5, height: 5, stroke: c, "class": "pair"}));
  cells.push(el(mp, "rect", {x: 300 * d.j[k] / d.n, y: 300 * d.i[k] / d.n,
    width: 300 / d.n, height: 300 / d.n}));
});
function shade(t) { var a = [0, 34, 78], b = [253, 231, 55];  // dark blue to yellow
  return "rgb(" + a.map(function (v, n) { return Math.round(v + t * (b[n] - v)); }) + ")"; }
function draw() {
  var idx = 0;
  sliders.forEach(function (s, n) { idx = idx * d.values[n].length + Number(s.value);
    s.parentElement.querySelector("output").textContent = d.values[n][Number(s.value)]; });
  var set = d.settings[idx], m = Math.max.apply(null, set.w) || 1;
  top.textContent = "max " + m.toPrecision(3);
  root.setAttribute("data-setting", idx);
  set.w.forEach(function (w, k) {
    var y = 270 - 250 * w / m, on = w > 0, c = C[d.pos[k] ? "pos" : "neg"];
    marks[k].setAttribute("data-w", w); marks[k].setAttribute("fill", on ? c : "none");
    marks[k].setAttribute(d.pos[k] ? "cy" : "y", d.pos[k] ? y : y - 2.5);
    cells[k].setAttribute("fill", shade(w / m)); cells[k].setAttribute("data-w", w);
  });
  root.querySelector(".summary").textContent = set.summary;
  root.querySelector(".dependence").textContent = set.dependence;
}
sliders.forEach(function (s) { s.addEventListener("input", draw); });
draw();
})();"""

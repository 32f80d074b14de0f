"""The weight explorer: pick a loss, move its hyper-parameters, watch its pair weights (JupyterLab).

``weight_explorer("multi_similarity")`` in a chapter shows a loss chooser (every registered loss),
a slider or check box per numeric hyper-parameter (declared defaults, ``loss_parameters``), and
redraws on every change what :mod:`dmlbook.chapters.explorer` computes on a real batch: the pair weights
``w+``/``w-`` against ``S``, the map of which pairs get how much gradient, and which of Wang et
al.'s three similarities the weights move with, beside Table 1's row for that loss.

Where no kernel runs (the rendered book, a notebook opened before its cells run) the output is a
fixed rendering at the settings the cell gave (the chapter's prose says that it is interactive in
JupyterLab): the widget's display carries the figure as ``image/png``, and ``tools/book.py`` drops
the live view from stored chapters. One output only, so that a chapter's figure caption
(MyST-NB cell metadata) wraps the figure and nothing else; ``dmlbook.chapters.explorer_html`` is the
explorer that stays interactive on the web page. Needs ipywidgets (the ``book`` extra). Tested in-process in
``tests/chapters/test_explorer_widget.py`` and by driving it in JupyterLab in headless Chromium
(``tests/test_lab.py``).
"""

from __future__ import annotations

import base64
from typing import Any

import torch

from ..core.validation import is_integer
from ..losses import available_losses
from .explorer import (
    batch_weights,
    default_batch,
    dependence_line,
    explorer_figure,
    paper_row,
    similarity_dependence,
    tunable_parameters,
)

__all__ = ["weight_explorer"]


def _widgets() -> Any:
    try:
        import ipywidgets
    except ImportError as err:  # a library-only install
        raise ImportError(
            "the weight explorer needs ipywidgets: pip install ipywidgets (make install has it)"
        ) from err
    return ipywidgets


def _control(w: Any, key: str, value: float | int | bool) -> Any:
    """A check box, an integer slider or a float slider from 0 to four times the default."""
    style = {"description_width": "initial"}
    if isinstance(value, bool):
        return w.Checkbox(value=value, description=key, style=style)
    top = max(4 * abs(value), 1)
    if is_integer(value):
        return w.IntSlider(value=int(value), min=0, max=int(top), description=key, style=style,
                           continuous_update=False)  # fmt: skip
    return w.FloatSlider(value=value, min=0.0, max=float(top), step=top / 200, description=key,
                         readout_format=".3g", style=style, continuous_update=False)  # fmt: skip


def _dependence_html(name: str, ours: dict[str, bool] | None) -> str:
    """Table 1's row for this loss: dmlbook's probe beside the paper's column, where it has one."""
    if ours is None:
        return ""
    paper = paper_row(name)
    mark = {True: "&#10003;", False: "&ndash;"}
    head = "<tr><th></th>" + "".join(f"<th>Similarity-{s}</th>" for s in ours) + "</tr>"
    rows = (
        "<tr><td>dmlbook (autograd probe)</td>"
        + "".join(f"<td>{mark[v]}</td>" for v in ours.values())
        + "</tr>"
    )
    if paper is not None:
        column, flags = paper
        rows += (
            f"<tr><td>Wang et al., Table 1 ({column})</td>"
            + "".join(f"<td>{mark[v]}</td>" for v in flags.values())
            + "</tr>"
        )
    return f"<table class='dmlbook-explorer-table'>{head}{rows}</table>"


def weight_explorer(
    loss: str = "multi_similarity",
    batch: tuple[torch.Tensor, torch.Tensor] | None = None,
    **params: Any,
) -> Any:
    """An ipywidgets box exploring ``loss`` (hyper-parameters ``params``) on ``batch``.

    Parameters
    ----------
    loss : str
        A registered loss name; the chooser offers every one.
    batch : (S, labels), optional
        A similarity matrix and its labels; default :func:`dmlbook.chapters.explorer.default_batch`
        (8 Omniglot characters x 4 drawings).
    **params
        Starting values of the loss's hyper-parameters (others at their defaults): those of
        :func:`dmlbook.chapters.explorer.tunable_parameters`, or ``ValueError`` naming them.
    """
    w = _widgets()
    unknown = sorted(set(params) - set(tunable_parameters(loss)))
    if unknown:
        raise ValueError(
            f"weight_explorer({loss!r}) moves {', '.join(tunable_parameters(loss))}; "
            f"not {', '.join(unknown)}."
        )
    S, labels = default_batch() if batch is None else batch
    chooser = w.Dropdown(options=available_losses(), value=loss, description="loss")
    knobs = w.VBox()
    summary = w.HTML().add_class("dmlbook-explorer-summary")
    table = w.HTML().add_class("dmlbook-explorer-similarities")
    picture = w.Image(format="png").add_class("dmlbook-explorer-figure")
    box = _explorer_class()([chooser, knobs, summary, table, picture])
    state: dict[str, Any] = {"controls": {}}

    def redraw(_: object = None) -> None:
        values = {k: c.value for k, c in state["controls"].items()}
        weights = batch_weights(chooser.value, values, S, labels)
        ours = None if weights.error else similarity_dependence(chooser.value, values)
        caption = "" if ours is None else dependence_line(chooser.value, ours)
        picture.value = explorer_figure(weights, caption)
        box.static = (weights.settings(), picture.value)
        table.value = _dependence_html(chooser.value, ours)
        summary.value = f"<b>{weights.summary()}</b>"  # last: once it shows, the rest is drawn

    def choose(_: object = None, start: dict[str, Any] | None = None) -> None:
        defaults = tunable_parameters(chooser.value) | (start or {})
        state["controls"] = {k: _control(w, k, v) for k, v in defaults.items()}
        for control in state["controls"].values():
            control.observe(redraw, names="value")
        knobs.children = tuple(state["controls"].values())
        redraw()

    chooser.observe(choose, names="value")
    choose(start=params)
    return box


def _explorer_class() -> type:
    w = _widgets()

    class Explorer(w.VBox):
        """The explorer's box; displayed without a kernel as its figure (``image/png``)."""

        static: tuple[str, bytes] = ("", b"")

        def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
            data = super()._repr_mimebundle_(**kwargs) or {}
            settings, png = self.static
            data["text/plain"] = f"weight explorer: {settings}"
            data["image/png"] = base64.b64encode(png).decode()
            return data

    return Explorer

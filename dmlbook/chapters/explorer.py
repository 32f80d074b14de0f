"""What a loss does to a batch: its pair weights by autograd, which pairs it mines, Table 1's row.

The computations behind the weight explorer (:mod:`dmlbook.chapters.explorer_widget`, Chapters 2 and 10),
usable without JupyterLab. A loss is named as the registry names it and built with
:func:`dmlbook.losses.get_loss`, so every registered loss, with any of its hyper-parameters, can
be explored; nothing here knows a loss's formula. Its weights are General Pair Weighting's
``w_ij = dL/dS_ij`` (Wang et al. 2019, Eq. 1-3), taken by autograd through the module's
``loss_on_similarity`` on a batch's similarity matrix ``S`` in float64. Following Chapter 2's
convention, a positive pair's weight is reported as ``w+ = -dL/dS_ij`` and a negative pair's as
``w- = dL/dS_ij``: both are >= 0 for the losses of the book, and a pair with weight 0 gets no
gradient, which is what "not mined" means here (a hinge that is closed, a miner that dropped it).

The three similarities of Wang et al.'s Table 1 (self, negative-relative, positive-relative) come
from the same probe as Chapter 8 (:func:`dmlbook.studies.three_similarities.probe_loss`), run on
the loss with the chosen hyper-parameters. Tests: ``tests/chapters/test_explorer.py`` (values),
``tests/test_lab.py`` (the widget driven in JupyterLab).
"""

from __future__ import annotations

import inspect
import io
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..data import load_dataset
from ..losses import get_loss, loss_parameters
from ..studies.three_similarities import (
    PAPER_TABLE_1,
    SIMILARITIES,
    ProbeSpec,
    default_probes,
    probe_loss,
)
from .palette import PALETTE

__all__ = [
    "BatchWeights",
    "batch_weights",
    "default_batch",
    "dependence_line",
    "explorer_figure",
    "paper_row",
    "pair_weights",
    "similarity_dependence",
    "tunable_parameters",
]

#: Hyper-parameters that choose code paths or output shapes, not a weighting: not offered.
FIXED = ("reduction", "backward", "seed")


def default_batch(classes: int = 8, per_class: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """A real batch: ``classes`` Omniglot test characters x ``per_class`` drawings, its ``S``.

    The embeddings are the images' own pixels scaled to unit length, a space no training has
    shaped yet: positives and negatives overlap (similarities about 0.05 to 0.6), as in the
    first steps of training. Returns ``(S, labels)``, ``S`` in float64 of shape ``(B, B)``.
    """
    data = load_dataset("omniglot", "test")
    keep = torch.cat(
        [torch.nonzero(data.labels == c).flatten()[:per_class] for c in data.classes[:classes]]
    )
    x = data.inputs[keep].flatten(1).to(torch.float64)
    x = torch.nn.functional.normalize(x, dim=1)
    return x @ x.T, data.labels[keep]


def tunable_parameters(name: str) -> dict[str, float | int | bool]:
    """The hyper-parameters of loss ``name`` a slider or a check box can move, with defaults."""
    return {
        key: value
        for key, value in loss_parameters(name).items()
        if key not in FIXED
        and value is not inspect.Parameter.empty
        and isinstance(value, int | float | bool)
    }


def pair_weights(name: str, params: dict[str, Any], S: torch.Tensor, labels: torch.Tensor):
    """``dL/dS`` of loss ``name`` (built by ``get_loss(name, **params)``) at ``S``, by autograd."""
    S = S.detach().to(torch.float64).clone().requires_grad_(True)
    loss = get_loss(name, **params).loss_on_similarity(S, labels)
    (grad,) = torch.autograd.grad(loss, S, allow_unused=True)
    return torch.zeros_like(S) if grad is None else grad.detach()


@dataclass
class BatchWeights:
    """A loss's weights on one batch: ``S``, ``dL/dS`` and the pair masks (diagonal left out)."""

    name: str
    params: dict[str, Any]
    S: torch.Tensor
    grad: torch.Tensor
    pos: torch.Tensor
    neg: torch.Tensor
    error: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def mined(self) -> torch.Tensor:
        """Pairs that get a gradient (``dL/dS_ij != 0``)."""
        return self.grad != 0

    def settings(self) -> str:
        """``name(key=value, ...)``."""
        values = (
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items()
        )
        return f"{self.name}({', '.join(values)})"

    def summary(self) -> str:
        """One line: which pairs get gradient, and the negatives' share of it."""
        head = self.settings()
        if self.error:
            return f"{head}: cannot be evaluated on this batch: {self.error}"
        c = self.counts
        total = self.grad.abs().sum()
        share = float(self.grad[self.neg].abs().sum() / total) if total > 0 else 0.0
        return (
            f"{head}: {c['pos_mined']} of {c['pos']} positive and {c['neg_mined']} of {c['neg']} "
            f"negative pairs get gradient; the negatives carry {100 * share:.1f} % of it"
        )


def batch_weights(
    name: str, params: dict[str, Any], S: torch.Tensor, labels: torch.Tensor
) -> BatchWeights:
    """:func:`pair_weights` with the batch's pair masks and counts; a loss that cannot run on
    this batch (one that needs another batch layout) is reported in ``error``, not raised."""
    same = labels[:, None] == labels[None, :]
    off = ~torch.eye(len(labels), dtype=torch.bool)
    pos, neg = same & off, ~same
    try:
        grad = pair_weights(name, params, S, labels)
        error = ""
    except (ValueError, TypeError, NotImplementedError, RuntimeError) as err:
        reason = str(err).split("\n")[0] or "no loss of S (no loss_on_similarity)"
        grad, error = torch.zeros_like(S, dtype=torch.float64), f"{type(err).__name__}: {reason}"
    out = BatchWeights(name, dict(params), S.detach().to(torch.float64), grad, pos, neg, error)
    out.counts = {
        "pos": int(pos.sum()),
        "neg": int(neg.sum()),
        "pos_mined": int((out.mined & pos).sum()),
        "neg_mined": int((out.mined & neg).sum()),
    }
    return out


def similarity_dependence(name: str, params: dict[str, Any], tol: float = 1e-9) -> dict[str, bool]:
    """Which of Wang et al.'s three similarities a negative pair's weight moves with (Table 1).

    Chapter 8's probe (:func:`~dmlbook.studies.three_similarities.probe_loss`) on the loss with
    these hyper-parameters: ``{"S": ..., "P": ..., "N": ...}``.
    """
    change = probe_loss(ProbeSpec(name, name, params).build(), n_configs=4, n_steps=11)
    return {s: change[s] > tol for s in SIMILARITIES}


def dependence_line(name: str, ours: dict[str, bool]) -> str:
    """Table 1's row in words: the probe's marks (:func:`similarity_dependence`), the paper's."""
    mark = {True: "yes", False: "no"}
    line = "weights move with Similarity-S, -P, -N: " + ", ".join(mark[v] for v in ours.values())
    paper = paper_row(name)
    if paper is not None:
        line += (
            f" (Wang et al., Table 1, {paper[0]}: "
            + ", ".join(mark[v] for v in paper[1].values())
            + ")"
        )
    return line


def paper_row(name: str) -> tuple[str, dict[str, bool]] | None:
    """Wang et al.'s Table 1 column for loss ``name`` (as Chapter 8 matches them), or None."""
    for spec in default_probes():
        if spec.loss == name and spec.paper_column in PAPER_TABLE_1:
            flags = PAPER_TABLE_1[spec.paper_column]
            return spec.paper_column, dict(zip(SIMILARITIES, flags, strict=True))
    return None


def explorer_figure(weights: BatchWeights, caption: str = "", dpi: int = 80) -> bytes:
    """PNG: the weights against ``S`` (left) and the batch's weight map (right).

    The title is :meth:`BatchWeights.summary`, then ``caption`` (e.g. Table 1's row). Drawn on a
    bare :class:`~matplotlib.figure.Figure`, never through pyplot: switching pyplot's backend
    here (to Agg) silenced every later ``plt.show()`` of the notebook that called it.
    """
    from matplotlib.figure import Figure

    w, S = weights.grad.abs().numpy(), weights.S.numpy()
    pos, neg, mined = weights.pos.numpy(), weights.neg.numpy(), weights.mined.numpy()
    fig = Figure(figsize=(9.6, 3.6), dpi=dpi)
    left, right = fig.subplots(1, 2, width_ratios=(1.5, 1))
    for mask, label, color, marker in (
        (pos, "w+ (positive)", PALETTE[0], "o"),
        (neg, "w- (negative)", PALETTE[1], "s"),
    ):
        got, idle = mask & mined, mask & ~mined
        left.scatter(
            S[got], w[got], s=10, color=color, marker=marker, label=f"{label}: {int(got.sum())}"
        )
        left.scatter(
            S[idle], w[idle], s=10, facecolors="none", edgecolors=color, alpha=0.35,
            marker=marker, label=f"no gradient: {int(idle.sum())}",
        )  # fmt: skip
    left.set_xlabel("$S_{ij}$")
    left.set_ylabel("$|\\partial L / \\partial S_{ij}|$")
    left.set_title("pair weights against similarity", fontsize=10)
    left.legend(fontsize=7, loc="upper left")
    shown = np.where(pos | neg, w, np.nan)
    image = right.imshow(shown, cmap="cividis", interpolation="nearest")
    right.contour(pos.astype(float), levels=[0.5], colors="white", linewidths=0.6)
    right.set_title("gradient per pair (white: same class)", fontsize=10)
    right.set_xlabel("j")
    right.set_ylabel("i")
    fig.colorbar(image, ax=right, fraction=0.046, pad=0.04)
    title = "\n".join(filter(None, (textwrap.fill(weights.summary(), 120), caption)))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()

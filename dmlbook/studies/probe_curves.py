"""Curves of one negative pair's weight along the S-, P- and N-probes, for the chapter's figure.

:func:`weight_curves` sweeps each similarity of Wang et al. 2019 (Sec. 4.1) from one readable
base configuration (:func:`example_similarities`) with the sweeps of
:mod:`dmlbook.studies.similarity_probe`, and :func:`plot_weight_curves` draws them as small
multiples. Re-exported by :mod:`dmlbook.studies.three_similarities`; chapter
``book/08_three_similarities.ipynb``; tests ``tests/studies/test_probe_curves.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from .similarity_probe import (
    PROBE_LAYOUT,
    SIMILARITIES,
    ProbeSpec,
    _sweeps,
    default_probes,
    negative_pair_weight,
)

__all__ = ["example_similarities", "plot_weight_curves", "weight_curves"]


def example_similarities(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A fixed, readable similarity matrix on the :data:`PROBE_LAYOUT` batch (7 x 7).

    Anchor 0's row: positives ``S_01 = 0.25`` (the one the P-probe moves; the hardest positive)
    and ``S_02 = 0.5``; negatives ``S_03 = -0.3``, ``S_04 = 0.2`` (the probed pair; the hardest
    negative), ``S_05 = -0.1`` and ``S_06 = 0.0`` (the one the N-probe moves). For triplet
    margins in (0.05, 0.3) the probed pair violates the margin against ``S_01`` only, and a
    shift of the row carries ``S_04`` from -0.5 to 0.7, across the contrastive and binomial
    margin 0.5. The other rows are a fixed random symmetric fill.
    """
    g = torch.Generator().manual_seed(7)
    B = len(PROBE_LAYOUT["labels"])
    A = (torch.rand(B, B, generator=g, dtype=dtype) * 1.2 - 0.6).triu(1)
    S = A + A.T + torch.eye(B, dtype=dtype)
    row = torch.tensor([1.0, 0.25, 0.5, -0.3, 0.2, -0.1, 0.0], dtype=dtype)
    S[0, :] = row
    S[:, 0] = row
    return S


def weight_curves(
    probes: Sequence[ProbeSpec] | None = None,
    *,
    base: torch.Tensor | None = None,
    n_steps: int = 81,
) -> pd.DataFrame:
    """The negative-pair weight ``w_ij`` along the three probes, from one base configuration.

    Parameters
    ----------
    probes : sequence of ProbeSpec, optional
        Default :func:`default_probes`.
    base : Tensor, optional
        The base ``S`` (on the :data:`PROBE_LAYOUT` labels); default
        :func:`example_similarities`.
    n_steps : int
        Points per sweep.

    Returns
    -------
    DataFrame
        Tidy, columns ``label``, ``probe`` (``"S"``, ``"P"``, ``"N"``), ``x`` (the moved
        similarity: ``S_ij`` after shifting the anchor's row, ``S_ip``, or ``S_ik``), ``w`` and
        ``w_rel`` (``w`` divided by the largest ``|w|`` of that label over all three sweeps, or
        0 where it is 0 throughout).
    """
    if n_steps < 2:
        raise ValueError(f"n_steps must be at least 2, got {n_steps}.")
    S = example_similarities() if base is None else base.detach().to(torch.float64)
    if S.shape != (len(PROBE_LAYOUT["labels"]),) * 2:
        raise ValueError(
            f"base must be a {len(PROBE_LAYOUT['labels'])} x {len(PROBE_LAYOUT['labels'])} matrix on PROBE_LAYOUT's labels, got shape {tuple(S.shape)}."
        )
    labels = torch.tensor(PROBE_LAYOUT["labels"])
    i, j = PROBE_LAYOUT["anchor"], PROBE_LAYOUT["negative"]
    xs = {
        "S": lambda T: float(T[i, j]),
        "P": lambda T: float(T[i, PROBE_LAYOUT["positive"]]),
        "N": lambda T: float(T[i, PROBE_LAYOUT["other_negative"]]),
    }
    rows = []
    for spec in default_probes() if probes is None else probes:
        fn = spec.build()
        part = []
        for name, mats in _sweeps(S, "relative", n_steps).items():
            for T in mats:
                w = negative_pair_weight(fn, T, labels, i, j)
                part.append({"label": spec.label, "probe": name, "x": xs[name](T), "w": w})
        top = max(abs(r["w"]) for r in part)
        for r in part:
            r["w_rel"] = r["w"] / top if top > 0 else 0.0
        rows.extend(part)
    return pd.DataFrame(rows)


def plot_weight_curves(curves: pd.DataFrame, *, size: float = 1.6) -> Any:
    """Small multiples of :func:`weight_curves`: one row per loss, one column per probe.

    A flat line means that the weight does not depend on that similarity. Each row shares one
    y axis (``w_rel``, so 1 is that loss's largest weight over the three sweeps); a dotted
    line marks the base configuration.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    needed = {"label", "probe", "x", "w_rel"}
    if not isinstance(curves, pd.DataFrame) or not needed <= set(curves.columns):
        raise ValueError("curves must be the DataFrame returned by weight_curves().")
    labels = list(dict.fromkeys(curves["label"]))
    titles = {
        "S": "S: shift the row",
        "P": "P: move a positive",
        "N": "N: move another negative",
    }
    xlabels = {"S": r"$S_{ij}$ (row shifted)", "P": r"$S_{ip}$", "N": r"$S_{ik}$"}
    base = example_similarities()
    i = PROBE_LAYOUT["anchor"]
    marks = {
        "S": float(base[i, PROBE_LAYOUT["negative"]]),
        "P": float(base[i, PROBE_LAYOUT["positive"]]),
        "N": float(base[i, PROBE_LAYOUT["other_negative"]]),
    }
    fig, axes = plt.subplots(
        len(labels),
        3,
        figsize=(3 * size * 1.5, len(labels) * size * 0.62),
        sharex="col",
        sharey="row",
        squeeze=False,
    )
    for r, label in enumerate(labels):
        for c, probe in enumerate(SIMILARITIES):
            ax = axes[r, c]
            part = curves[(curves["label"] == label) & (curves["probe"] == probe)]
            ax.plot(part["x"], part["w_rel"], lw=1.4)
            ax.axvline(marks[probe], color="0.7", lw=0.8, ls=":")
            ax.set_ylim(-0.08, 1.12)
            ax.set_yticks([0, 1])
            ax.tick_params(labelsize=7)
            if r == 0:
                ax.set_title(titles[probe], fontsize=8)
            if r == len(labels) - 1:
                ax.set_xlabel(xlabels[probe], fontsize=8)
            if c == 0:
                ax.set_ylabel(label, fontsize=7, rotation=0, ha="right", va="center")
    fig.tight_layout(pad=0.3, h_pad=0.2, w_pad=0.4)
    return fig

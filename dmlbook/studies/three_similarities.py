"""Which similarities does a loss weight its negative pairs by? Wang et al. 2019, Table 1, regenerated.

Wang et al. (Sec. 4.1) describe a negative pair ``(i, j)`` of anchor ``i`` by three similarities:

* **Similarity-S**, its own cosine similarity ``S_ij``;
* **Similarity-P**, its similarity relative to the anchor's positive pairs, ``S_ij - S_ip``;
* **Similarity-N**, its similarity relative to the anchor's other negative pairs, ``S_ij - S_ik``;

and Table 1 marks, for each pair-based loss, which of the three its GPW weight
``w_ij = dL/dS_ij`` (Eq. 1-3) depends on.

This module answers the same question by experiment, for any loss in the registry: it computes
``w_ij`` by autograd on ``S`` and records whether it changes when one similarity moves while the
other two stay fixed. Since any function of ``S_ij``, ``S_ip``, ``S_ik`` is a function of
``(S_ij, S_ij - S_ip, S_ij - S_ik)``, "the other two stay fixed" means (``mode="relative"``,
the default):

* S-probe: shift the anchor's whole row ``S_i.`` by the same amount (self similarity moves, every
  difference stays);
* P-probe: move one positive ``S_ip`` alone (only Similarity-P changes);
* N-probe: move one other negative ``S_ik`` alone (only Similarity-N changes).

``mode="entries"`` instead moves ``S_ij`` alone for the S-probe, which also changes its P and N
similarities; it is the literal reading "perturb the pair's own similarity" and shows why the
relative reading is needed (every soft-max weight would otherwise count as Similarity-S).

Each probe sweeps the moved quantity over the whole feasible range (entries stay in [-1, 1]) in
several random configurations, because the weights of hinge losses depend on a similarity only
through a gate (the weight jumps when a hinge or a mining rule switches), which a small
perturbation would miss; the paper counts such gates (contrastive: S, triplet: P).

Gates are only seen where the configurations can open and close them. One that cannot: the hinge
of Wang et al.'s Eq. 6 never closes on cosine similarities at ``lambda = 1`` once an anchor has
``|P_i| |N_i| >= 3`` (see :func:`dmlbook.losses.lifted_loss`), which the probe layout (2
positives, 4 negatives) satisfies; with one positive and one negative the hinge could close and
would make the lifted weight depend on Similarity-P as a gate.

The triplet rows use ``reduction="sum"`` (Eq. 5 summed over triplets): a mean over the *selected*
triplets divides every weight by a count that moves with the other triplets' selection, a
batch-level normalisation that would show up as a (small) Similarity-N dependence of the mined
variants and is no part of Eq. 5. The other losses' normalisers (pair counts, ``1/P_i``,
``1/N_i``) do not depend on the values of ``S``.

The parts: the probe batch, the rows and the autograd sweeps are
:mod:`dmlbook.studies.similarity_probe`; the same question answered symbolically is
:mod:`dmlbook.studies.similarity_symbolic`; the weight curves of the chapter's figure are
:mod:`dmlbook.studies.probe_curves`. This module holds Table 1 itself, builds the regenerated
table and the comparison with the paper, and re-exports every public name of the three.
Chapter: ``book/08_three_similarities.ipynb`` (and ``book/10_multi_similarity.ipynb``); tests:
``tests/studies/test_three_similarities.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .probe_curves import example_similarities, plot_weight_curves, weight_curves
from .similarity_probe import (
    DEFAULT_PROBES,
    PROBE_LAYOUT,
    SIMILARITIES,
    ProbeSpec,
    default_probes,
    negative_pair_weight,
    probe_loss,
)
from .similarity_probe import (
    LossOnS as LossOnS,  # re-exported: the type of ProbeSpec.build()
)
from .similarity_symbolic import symbolic_dependence

__all__ = [
    "PAPER_TABLE_1",
    "PROBE_LAYOUT",
    "ProbeSpec",
    "DEFAULT_PROBES",
    "compare_with_paper",
    "default_probes",
    "example_similarities",
    "negative_pair_weight",
    "paper_table_1",
    "plot_weight_curves",
    "probe_loss",
    "symbolic_dependence",
    "three_similarities_table",
    "weight_curves",
]

#: Wang et al. 2019, Table 1: for each method, whether its negative-pair weight depends on
#: (Similarity-S, Similarity-P, Similarity-N).
PAPER_TABLE_1: dict[str, tuple[bool, bool, bool]] = {
    "Contrastive": (True, False, False),
    "Binomial": (True, False, False),
    "Triplet": (False, True, False),
    "Histogram": (False, True, False),
    "N-pairs": (False, False, True),
    "Lifted Structure": (False, False, True),
    "BinLifted": (True, False, True),
    "NCA": (False, True, True),
    "MS": (True, True, True),
}


def paper_table_1() -> pd.DataFrame:
    """Wang et al. 2019, Table 1, as data: rows Similarity-S/-P/-N, one bool column per method."""
    return pd.DataFrame(
        {method: list(flags) for method, flags in PAPER_TABLE_1.items()},
        index=[f"Similarity-{s}" for s in SIMILARITIES],
    )


def three_similarities_table(
    probes: Sequence[ProbeSpec] | None = None,
    *,
    mode: str = "relative",
    n_configs: int = 6,
    n_steps: int = 21,
    seed: int = 0,
    tol: float = 1e-9,
) -> pd.DataFrame:
    """Regenerate Table 1 from dmlbook's autograd weights.

    Parameters
    ----------
    probes : sequence of ProbeSpec, optional
        Rows to compute; :func:`default_probes` when omitted.
    mode, n_configs, n_steps, seed, tol
        Passed to :func:`probe_loss`.

    Returns
    -------
    DataFrame
        One row per probe (index: its label) with columns ``loss`` (registry name),
        ``paper_column``, ``S``, ``P``, ``N`` (bool: the weight depends on that similarity) and
        ``dS``, ``dP``, ``dN`` (the largest relative change of the weight along each sweep).
    """
    rows = []
    for spec in default_probes() if probes is None else probes:
        change = probe_loss(
            spec.build(), mode=mode, n_configs=n_configs, n_steps=n_steps, seed=seed, tol=tol
        )
        rows.append(
            {
                "label": spec.label,
                "loss": spec.loss,
                "paper_column": spec.paper_column,
                **{s: change[s] > tol for s in SIMILARITIES},
                **{f"d{s}": change[s] for s in SIMILARITIES},
            }
        )
    return pd.DataFrame(rows).set_index("label")


def _mark(flag: Any) -> str:
    if flag is None or (isinstance(flag, float) and pd.isna(flag)):
        return "-"
    return "✓" if bool(flag) else "✗"


def compare_with_paper(
    table: pd.DataFrame | None = None,
    probes: Sequence[ProbeSpec] | None = None,
    *,
    marks: bool = False,
) -> pd.DataFrame:
    """The regenerated table beside Wang et al.'s Table 1.

    Parameters
    ----------
    table : DataFrame, optional
        Output of :func:`three_similarities_table` (computed with defaults when omitted).
    probes : sequence of ProbeSpec, optional
        The specs behind ``table`` (for the notes); :func:`default_probes` when omitted.
    marks : bool
        Show ✓/✗ (and ``-`` for "no dmlbook row") instead of booleans.

    Returns
    -------
    DataFrame
        One row per dmlbook probe, then one per Table 1 method that none of the probes covers
        (labelled ``"<method> (not probed)"``). Columns: ``paper_column``, ``S (paper)``, ``S (dmlbook)``, ``P (paper)``,
        ``P (dmlbook)``, ``N (paper)``, ``N (dmlbook)``, ``agrees``, ``note``.
    """
    specs = list(default_probes() if probes is None else probes)
    if table is None:
        table = three_similarities_table(specs)
    notes = {spec.label: spec.note for spec in specs}
    rows = []
    for label, row in table.iterrows():
        column = row["paper_column"]
        paper = PAPER_TABLE_1.get(column) if column is not None else None
        entry: dict[str, Any] = {"label": label, "paper_column": column}
        for s, flag in zip(SIMILARITIES, paper or (None, None, None), strict=True):
            entry[f"{s} (paper)"] = flag
            entry[f"{s} (dmlbook)"] = bool(row[s])
        entry["agrees"] = (
            None
            if paper is None
            else all(bool(row[s]) == f for s, f in zip(SIMILARITIES, paper, strict=True))
        )
        entry["note"] = notes.get(label, "")
        rows.append(entry)
    covered = set(table["paper_column"].dropna())
    for column, flags in PAPER_TABLE_1.items():
        if column in covered:
            continue
        entry = {"label": f"{column} (not probed)", "paper_column": column}
        for s, flag in zip(SIMILARITIES, flags, strict=True):
            entry[f"{s} (paper)"] = flag
            entry[f"{s} (dmlbook)"] = None
        entry["agrees"] = None
        entry["note"] = ""
        rows.append(entry)
    out = pd.DataFrame(rows).set_index("label")
    if marks:
        for col in out.columns:
            if col.endswith("(paper)") or col.endswith("(dmlbook)") or col == "agrees":
                out[col] = out[col].map(_mark)
    return out

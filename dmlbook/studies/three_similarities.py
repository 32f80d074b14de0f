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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import sympy as sp
import torch

from .. import symbolic as sy
from ..losses.registry import available_losses, get_loss
from ..symbolic import HingeActive

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

SIMILARITIES: tuple[str, ...] = ("S", "P", "N")

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

#: The probe batch: labels, and which entries of anchor 0's row are probed. Anchor 0 has the
#: positives 1, 2 and the negatives 3-6; the probed negative pair is (0, 4), the positive moved by
#: the P-probe is (0, 1) and the other negative moved by the N-probe is (0, 6). Samples 4 and 6
#: are the positives of classes 1 and 2 in the N-pair construction, so they are anchor 0's
#: negatives there as well.
PROBE_LAYOUT: dict[str, Any] = {
    "labels": (0, 0, 0, 1, 1, 2, 2),
    "anchor": 0,
    "negative": 4,
    "positive": 1,
    "other_negative": 6,
}

LossOnS = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ProbeSpec:
    """One row of the regenerated table.

    Attributes
    ----------
    label : str
        Row name, with the equation it implements.
    loss : str
        Registry name (:func:`dmlbook.losses.get_loss`).
    hparams : mapping
        Hyper-parameters for :func:`~dmlbook.losses.get_loss`.
    paper_column : str or None
        The column of Table 1 this row is compared with (a key of :data:`PAPER_TABLE_1`).
    note : str
        Why the row differs from the paper's column, where it does (empty where it agrees).
        :func:`compare_with_paper` prints it; the tests check that rows with an empty note agree.
    """

    label: str
    loss: str
    hparams: Mapping[str, Any] = field(default_factory=dict)
    paper_column: str | None = None
    note: str = ""

    def build(self) -> LossOnS:
        """The loss as a function ``(S, labels) -> scalar``."""
        module = get_loss(self.loss, **dict(self.hparams))
        return module.loss_on_similarity


_NOTE_TRIPLET_DISTANCE = (
    "S: on D = sqrt(2 - 2S) the hinge [D_ap - D_an + m]_+ is not invariant to shifting all of the "
    "anchor's similarities, and dL/dS_an = 1/D_an (chain rule) grows with S_an; only the "
    "similarity form (Eq. 5) and the squared-distance form (Eq. 37, = 2 [S_an - S_ap + m/2]_+) "
    "depend on differences alone."
)
_NOTE_BATCH_HARD = (
    "N: batch-hard mining keeps only the anchor's most similar negative, so w_ij drops to 0 when "
    "another negative becomes more similar: a Similarity-N gate that the all-triplets loss of "
    "Eq. 5 does not have."
)
_NOTE_NPAIR = (
    "P: the N-pair weight of a negative is e^{S_ik} / (e^{S_ip} + sum_N e^{S_il}); the positive "
    "sits in the soft-max denominator (the '1 +' of log(1 + sum)), as in NCA, which Table 1 "
    "marks with P. The supplement analyses N-pairs 'as the lifted structure loss', whose Eq. 8 "
    "normalises over negatives only."
)
_NOTE_LIFTED_PAIRWISE = (
    "S, P: Song et al.'s pairwise form works on distances D (chain-rule factor 1/D_ik, not "
    "shift-invariant in S) and squares the hinge, so a negative's weight is scaled by [J_ip]_+, "
    "which contains the positive pair's own distance D_ip. Eq. 6 (per anchor, plain hinge on "
    "similarities) is the form Wang et al. analyse."
)


DEFAULT_PROBES: tuple[ProbeSpec, ...] = (
    ProbeSpec("Contrastive (Wang Eq. 4)", "contrastive", {"margin": 0.5}, "Contrastive"),
    ProbeSpec(
        "Contrastive, distance (Liu Eq. 11)",
        "contrastive_distance",
        {"pos_margin": 0.0, "neg_margin": 1.0},
        "Contrastive",
    ),
    ProbeSpec("Binomial (Wang Eq. 9)", "binomial", {}, "Binomial"),
    ProbeSpec("Triplet (Wang Eq. 5)", "triplet", {"margin": 0.1, "reduction": "sum"}, "Triplet"),
    ProbeSpec(
        "Triplet, distance (Liu Eq. 12)",
        "triplet",
        {"margin": 0.2, "form": "distance", "reduction": "sum"},
        "Triplet",
        _NOTE_TRIPLET_DISTANCE,
    ),
    ProbeSpec(
        "Triplet, squared distance (Liu Eq. 37)",
        "triplet",
        {"margin": 0.2, "form": "squared_distance", "reduction": "sum"},
        "Triplet",
    ),
    ProbeSpec(
        "Triplet, batch-hard (Eq. 5)",
        "triplet",
        {"margin": 0.1, "mining": "batch_hard", "reduction": "sum"},
        "Triplet",
        _NOTE_BATCH_HARD,
    ),
    ProbeSpec(
        "Triplet, semi-hard (Eq. 5)",
        "triplet",
        {"margin": 0.1, "mining": "semihard", "reduction": "sum"},
        "Triplet",
    ),
    ProbeSpec("N-pair (Liu Eq. 13)", "npair", {}, "N-pairs", _NOTE_NPAIR),
    ProbeSpec("Lifted (Wang Eq. 6)", "lifted", {"margin": 1.0}, "Lifted Structure"),
    ProbeSpec(
        "Lifted, pairwise (Liu Eq. 14, Song et al.)",
        "lifted_structure",
        {"margin": 1.0},
        "Lifted Structure",
        _NOTE_LIFTED_PAIRWISE,
    ),
    ProbeSpec("LiftedStruct* (Wang Eq. 16)", "lifted_star", {}, "Lifted Structure"),
    ProbeSpec("BinLifted (Wang suppl. Eq. 10)", "binlifted", {}, "BinLifted"),
)

#: Losses that a later issue adds, with the Table 1 column they are compared with. They join
#: :func:`default_probes` as soon as their name is registered (``register_loss``).
_LATER: tuple[ProbeSpec, ...] = (
    ProbeSpec("MS (Wang Eq. 15)", "multi_similarity", {}, "MS"),
    ProbeSpec("NCA (Wang suppl. Eq. 1)", "nca", {}, "NCA"),
    ProbeSpec("Histogram (Wang suppl. Eq. 3)", "histogram", {}, "Histogram"),
)


def default_probes() -> tuple[ProbeSpec, ...]:
    """:data:`DEFAULT_PROBES` plus the later losses (MS, NCA, histogram) that are registered."""
    registered = set(available_losses())
    return DEFAULT_PROBES + tuple(spec for spec in _LATER if spec.loss in registered)


def paper_table_1() -> pd.DataFrame:
    """Wang et al. 2019, Table 1, as data: rows Similarity-S/-P/-N, one bool column per method."""
    return pd.DataFrame(
        {method: list(flags) for method, flags in PAPER_TABLE_1.items()},
        index=[f"Similarity-{s}" for s in SIMILARITIES],
    )


def negative_pair_weight(
    loss_on_S: LossOnS, S: torch.Tensor, labels: torch.Tensor, anchor: int, negative: int
) -> float:
    """GPW weight ``w_ij = dL/dS_ij`` of one entry of ``S``, by autograd (Wang et al., Eq. 1-3).

    ``S`` is treated as a matrix of independent entries (rows are anchors), so this is the weight
    of the ordered pair (anchor ``i``, negative ``j``).
    """
    S = S.detach().clone().requires_grad_(True)
    loss = loss_on_S(S, labels)
    (grad,) = torch.autograd.grad(loss, S, allow_unused=True)
    if grad is None:
        return 0.0
    return float(grad[anchor, negative])


def _base_configs(n_configs: int, seed: int, dtype: torch.dtype) -> list[torch.Tensor]:
    """Symmetric similarity matrices with unit diagonal, alternately random and "ordered".

    Random: off-diagonal entries uniform in [-0.8, 0.8]. Ordered: in the anchor's row the probed
    negative (in [0.1, 0.3]) is the hardest negative (the others in [-0.8, 0]) and lies above the
    probed positive (in [-0.3, 0.1]) but below the other positives (in [0.4, 0.8]), so that the
    gates of mined and hinged losses (batch-hard, triplet hinges) are open at the base point and
    close somewhere along the P- and N-sweeps.
    """
    g = torch.Generator().manual_seed(seed)
    B = len(PROBE_LAYOUT["labels"])
    i, j, p = PROBE_LAYOUT["anchor"], PROBE_LAYOUT["negative"], PROBE_LAYOUT["positive"]
    labels = torch.tensor(PROBE_LAYOUT["labels"])
    out = []
    for c in range(n_configs):
        A = (torch.rand(B, B, generator=g, dtype=dtype) * 1.6 - 0.8).triu(1)
        S = A + A.T + torch.eye(B, dtype=dtype)
        if c % 2 == 1:
            u = torch.rand(B, generator=g, dtype=dtype)
            row = torch.where(labels == labels[i], 0.4 + 0.4 * u, -0.8 + 0.8 * u)
            row[p] = -0.3 + 0.4 * u[p]
            row[j] = 0.1 + 0.2 * u[j]
            row[i] = 1.0
            S[i, :] = row
            S[:, i] = row
        out.append(S)
    return out


def _sweeps(S: torch.Tensor, mode: str, n_steps: int) -> dict[str, list[torch.Tensor]]:
    """The perturbed matrices of each probe for one base configuration."""
    i = PROBE_LAYOUT["anchor"]
    j = PROBE_LAYOUT["negative"]
    p = PROBE_LAYOUT["positive"]
    k = PROBE_LAYOUT["other_negative"]
    values = torch.linspace(-1.0, 1.0, n_steps, dtype=S.dtype)
    off = torch.ones(S.shape[0], dtype=torch.bool)
    off[i] = False
    out: dict[str, list[torch.Tensor]] = {"S": [], "P": [], "N": []}
    if mode == "relative":
        row = S[i, off]
        lo, hi = float(-1.0 - row.min()), float(1.0 - row.max())
        for delta in torch.linspace(lo, hi, n_steps, dtype=S.dtype):
            T = S.clone()
            T[i, off] = T[i, off] + delta
            out["S"].append(T)
    for name, col in (("S", j), ("P", p), ("N", k)):
        if name == "S" and mode == "relative":
            continue
        for v in values:
            T = S.clone()
            T[i, col] = v
            out[name].append(T)
    return out


def probe_loss(
    loss_on_S: LossOnS,
    *,
    mode: str = "relative",
    n_configs: int = 6,
    n_steps: int = 21,
    seed: int = 0,
    tol: float = 1e-9,
    dtype: torch.dtype = torch.float64,
) -> dict[str, float]:
    """How much a loss's negative-pair weight moves with each of the three similarities.

    Parameters
    ----------
    loss_on_S : callable
        ``(S, labels) -> scalar``, e.g. ``get_loss("binomial").loss_on_similarity``.
    mode : {"relative", "entries"}
        How the S-probe moves the pair's own similarity (see the module docstring).
    n_configs : int
        Base configurations, from ``seed``: symmetric ``S`` with unit diagonal, alternately with
        random off-diagonal entries (uniform in [-0.8, 0.8]) and with an ordered anchor row in
        which the probed pair is the hardest negative (see ``_base_configs``).
    n_steps : int
        Points of each sweep.
    seed : int
    tol : float
        A change counts when ``|w - w_base| > tol * max(1, max |w|)``: float64 round-off in a
        shift-invariant soft-max is far below it.
    dtype : torch.dtype

    Returns
    -------
    dict
        ``{"S": ..., "P": ..., "N": ...}``: the largest change of ``w_ij`` along each sweep, over
        all configurations, relative to ``max(1, max |w|)``; a similarity counts as used when
        its entry exceeds ``tol`` (see :func:`three_similarities_table`).
    """
    if mode not in ("relative", "entries"):
        raise ValueError(f"mode must be 'relative' or 'entries', got {mode!r}.")
    if n_configs < 1 or n_steps < 2:
        raise ValueError(f"need n_configs >= 1 and n_steps >= 2, got {n_configs} and {n_steps}.")
    labels = torch.tensor(PROBE_LAYOUT["labels"])
    i, j = PROBE_LAYOUT["anchor"], PROBE_LAYOUT["negative"]
    change = dict.fromkeys(SIMILARITIES, 0.0)
    for S in _base_configs(n_configs, seed, dtype):
        for name, mats in _sweeps(S, mode, n_steps).items():
            w = torch.tensor([negative_pair_weight(loss_on_S, T, labels, i, j) for T in mats])
            scale = max(1.0, float(w.abs().max()))
            change[name] = max(change[name], float((w - w[0]).abs().max()) / scale)
    return change


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


# --------------------------------------------------------------------------------------------
# The same question, symbolically


def _vanishes(expr: Any, free: Sequence[Any]) -> bool:
    """Whether ``expr`` is identically 0: numeric witness first, then an exact proof.

    A nonzero value at a random point (all hinges taken active) shows dependence at once; an
    expression that is 0 at every sampled point must then be *proved* 0 by
    :func:`dmlbook.symbolic.prove_equal`, else a ``RuntimeError`` says the question is open.
    """
    expr = sp.sympify(expr)
    if expr == 0:
        return True
    numeric = sy.hinge_branch(expr, True)
    if not sy.spot_check_equal(numeric, sp.S.Zero, n=16, seed=1):
        return False
    if sy.prove_equal(expr, sp.S.Zero, verbose=False):
        return True
    raise RuntimeError(
        f"could not decide whether {sp.sstr(expr)} vanishes: it is 0 at every sampled point but "
        "SymPy found no proof. Simplify the weight first, or use the autograd probe."
    )


def _directional(expr: Any, anchor: Any, pair: Any) -> dict[str, bool]:
    """Does ``expr`` move along the S, P and N directions of the negative pair ``pair``?"""
    import sympy as sp

    free = list(anchor.all)
    shift = sp.Add(*[sp.diff(expr, s) for s in anchor.all])  # d/dc of expr(s + c)
    others = [s for s in anchor.neg if s != pair]
    return {
        "S": not _vanishes(shift, free),
        "P": not all(_vanishes(sp.diff(expr, s), free) for s in anchor.pos),
        "N": not all(_vanishes(sp.diff(expr, s), free) for s in others),
    }


def symbolic_dependence(weight: Any, anchor: Any, pair: Any) -> dict[str, str]:
    """Which of the three similarities a symbolic negative-pair weight depends on, and how.

    Write the weight ``w`` of the negative pair ``s_j`` (``pair``) of one anchor as a function
    of the coordinates ``(s_j, s_j - s_p, s_j - s_k)``: Similarity-S, -P and -N (Wang et al.
    2019, Sec. 4.1). Its derivative along each coordinate, the others held fixed, is

    * S: ``sum_l dw/ds_l`` over *all* the anchor's similarities (shift the whole row);
    * P: ``dw/ds_p`` for each positive ``s_p``;
    * N: ``dw/ds_k`` for each other negative ``s_k``.

    A dependence is found either in the value of the weight (these derivatives, with every
    hinge indicator ``1[x > 0]`` held fixed) or in a *gate*: an indicator whose argument ``x``
    moves along that direction (the hinge or the mining rule can switch the pair on or off).

    Parameters
    ----------
    weight : sympy.Expr
        ``dL/ds_j`` from :func:`dmlbook.symbolic.pair_weights` (or a closed form such as
        BinLifted's supplement Eq. 10).
    anchor : AnchorSimilarities
        The anchor's symbols (:func:`dmlbook.symbolic.anchor_similarities`).
    pair : sympy.Symbol
        The negative pair whose weight this is (one of ``anchor.neg``).

    Returns
    -------
    dict
        ``{"S": ..., "P": ..., "N": ...}``, each ``""`` (no dependence), ``"weight"``,
        ``"gate"`` or ``"weight, gate"``.

    Notes
    -----
    "No dependence" is an exact proof (:func:`dmlbook.symbolic.prove_equal` of a zero
    derivative); "dependence" is witnessed by a nonzero value at a random point, with every
    gate open. A gate counts whatever its argument depends on, even where the gate can never
    close in practice (the hinge of Eq. 6 at ``lambda = 1``; see the module docstring).
    """
    if pair not in anchor.neg:
        raise ValueError(
            f"pair must be one of the anchor's negative symbols {anchor.neg}, got {pair}."
        )
    weight = sp.sympify(weight)
    value = _directional(weight, anchor, pair)
    gates = {s: False for s in SIMILARITIES}
    for gate in weight.atoms(HingeActive):
        for s, moves in _directional(gate.args[0], anchor, pair).items():
            gates[s] = gates[s] or moves
    out = {}
    for s in SIMILARITIES:
        kinds = [name for name, flag in (("weight", value[s]), ("gate", gates[s])) if flag]
        out[s] = ", ".join(kinds)
    return out


# --------------------------------------------------------------------------------------------
# Weight curves for figures


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

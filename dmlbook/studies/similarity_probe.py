"""The autograd probe behind Wang et al. 2019, Table 1: which similarities a weight moves with.

The probe batch (:data:`PROBE_LAYOUT`), the rows to probe (:class:`ProbeSpec`,
:data:`DEFAULT_PROBES`, :func:`default_probes`), the GPW weight of one negative pair by autograd
(:func:`negative_pair_weight`, Wang et al. 2019, Eq. 1-3) and the S-, P- and N-sweeps that move
one similarity while the other two stay fixed (:func:`probe_loss`). Why the sweeps are built this
way (relative vs. entry-wise S-probe, gates, the triplet rows' ``reduction="sum"``) is told in
:mod:`dmlbook.studies.three_similarities`, which builds Table 1 from these pieces and re-exports
every name here. Chapter: ``book/08_three_similarities.ipynb``; tests:
``tests/studies/test_similarity_probe.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..losses.registry import available_losses, get_loss

__all__ = [
    "DEFAULT_PROBES",
    "PROBE_LAYOUT",
    "SIMILARITIES",
    "LossOnS",
    "ProbeSpec",
    "default_probes",
    "negative_pair_weight",
    "probe_loss",
]

SIMILARITIES: tuple[str, ...] = ("S", "P", "N")

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
        The column of Table 1 this row is compared with (a key of
        :data:`~dmlbook.studies.three_similarities.PAPER_TABLE_1`).
    note : str
        Why the row differs from the paper's column, where it does (empty where it agrees).
        :func:`~dmlbook.studies.three_similarities.compare_with_paper` prints it; the tests check
        that rows with an empty note agree.
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

_NOTE_HISTOGRAM = (
    "S: a negative's weight is h^+ at the node above S_ij (supplement Eq. 9), the positive pairs "
    "of the whole batch near it; shifting the anchor's row moves S_ij against the other anchors' "
    "positive pairs, which stay, so the per-anchor S-probe sees a change (Similarity-P against "
    "the batch, not the anchor). R = 21 nodes (Delta = 0.1, the sweeps' step) so that the "
    "P-probe's positive passes the negative's nodes; N is exact: dL/dh^- contains no h^-."
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
    ProbeSpec(
        "Histogram (Wang suppl. Eq. 3)",
        "histogram",
        {"R": 21},
        "Histogram",
        _NOTE_HISTOGRAM,
    ),
)

#: Losses that a later issue adds, with the Table 1 column they are compared with. They join
#: :func:`default_probes` as soon as their name is registered (``register_loss``).
_LATER: tuple[ProbeSpec, ...] = (
    ProbeSpec("MS (Wang Eq. 15)", "multi_similarity", {}, "MS"),
    ProbeSpec("NCA (Wang suppl. Eq. 1)", "nca", {}, "NCA"),
)


def default_probes() -> tuple[ProbeSpec, ...]:
    """:data:`DEFAULT_PROBES` plus the later losses (MS, NCA) that are registered."""
    registered = set(available_losses())
    return DEFAULT_PROBES + tuple(spec for spec in _LATER if spec.loss in registered)


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
        How the S-probe moves the pair's own similarity (see
        :mod:`dmlbook.studies.three_similarities`).
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
        its entry exceeds ``tol`` (see
        :func:`~dmlbook.studies.three_similarities.three_similarities_table`).
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

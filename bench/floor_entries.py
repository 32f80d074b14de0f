"""The rows of ``bench/bench_floor.py``: each loss, its pytorch-metric-learning equivalent and the
parameter mapping between the two (imported by the script, not a test).

A new loss family joins the table with one :class:`Entry` in :data:`ENTRIES`, or simply by being
registered (:func:`dmlbook.losses.register_loss`): :func:`registry_entries` adds every registered
loss that no entry names, built with its defaults, if it runs on a default batch. The mappings
are those of ``tests/losses/test_pml_crosscheck.py``, where they are tested in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import reducers as pml_reducers

from dmlbook.core.similarity import pair_masks
from dmlbook.losses import (
    CircleLoss,
    ContrastiveLoss,
    LiftedLoss,
    LiftedStructureLoss,
    MultiSimilarityLoss,
    NPairLoss,
    TripletLoss,
    ablation_loss,
    available_losses,
    get_loss,
    table_2_names,
)

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _same(value: float, labels: torch.Tensor) -> float:
    return value


@dataclass(frozen=True)
class Entry:
    """One row of the table.

    Attributes
    ----------
    name : str
    ours : callable
        Builds dmlbook's ``loss(embeddings, labels)``.
    pml : callable, optional
        Builds pytorch-metric-learning's equivalent ``loss(embeddings, labels)``.
    mapping : str
        The parameter mapping, in words (printed under the table).
    to_pml_value : callable
        Maps dmlbook's value to PML's (identity unless the reductions differ by a known formula).
    registry : tuple of str
        The registered names this row stands for (so that no automatic row repeats it).
    max_batch, pml_max_batch : int
        Largest B to run dmlbook's loss, PML's (a loss whose time or memory grows too fast).
    memory : bool
        Measure its peak memory (and PML's) at the largest B.
    """

    name: str
    ours: Callable[[], LossFn]
    pml: Callable[[], LossFn] | None = None
    mapping: str = ""
    to_pml_value: Callable[[float, torch.Tensor], float] = _same
    registry: tuple[str, ...] = ()
    max_batch: int = 10**9
    pml_max_batch: int = 10**9
    memory: bool = False


def _with_miner(loss: object, miner: object) -> LossFn:
    return lambda x, y: loss(x, y, miner(x, y))


def _contrastive_to_pml(value: float, labels: torch.Tensor) -> float:
    """PML's cosine + SumReducer contrastive is ``n_pairs * Eq. 4 mean + |P|``."""
    pos, neg = pair_masks(labels)
    return int((pos | neg).sum()) * value + int(pos.sum())


M = 0.2  # triplet margin, on distances
ENTRIES: list[Entry] = [
    Entry(
        "MS + mining",
        lambda: MultiSimilarityLoss(2.0, 50.0, 0.5, 0.1),
        lambda: _with_miner(
            pml_losses.MultiSimilarityLoss(2.0, 50.0, 0.5), pml_miners.MultiSimilarityMiner(0.1)
        ),
        "MultiSimilarityLoss(2, 50, 0.5, 0.1) = MultiSimilarityLoss(alpha=2, beta=50, base=0.5) "
        "with MultiSimilarityMiner(epsilon=0.1)",
        registry=("multi_similarity",),
    ),
    Entry(
        "MS weighting (no mining)",
        lambda: MultiSimilarityLoss(2.0, 50.0, 0.5, mining=False),
        lambda: pml_losses.MultiSimilarityLoss(2.0, 50.0, 0.5),
        "MultiSimilarityLoss(2, 50, 0.5, mining=False) = MultiSimilarityLoss(2, 50, 0.5), no miner",
    ),
    Entry(
        "contrastive (Eq. 4)",
        lambda: ContrastiveLoss(0.5),
        lambda: pml_losses.ContrastiveLoss(
            pos_margin=1.0,
            neg_margin=0.5,
            distance=pml_distances.CosineSimilarity(),
            reducer=pml_reducers.SumReducer(),
        ),
        "ContrastiveLoss(0.5) = ContrastiveLoss(pos_margin=1, neg_margin=0.5, CosineSimilarity(), "
        "SumReducer()); PML's value is n_pairs * dmlbook's + |P|",
        _contrastive_to_pml,
        registry=("contrastive",),
    ),
    Entry(
        "contrastive, distance (Eq. 11)",
        lambda: get_loss("contrastive_distance"),
        registry=("contrastive_distance",),
    ),
    Entry(
        "triplet batch-hard",
        lambda: TripletLoss(M, form="distance", mining="batch_hard", reduction="mean_nonzero"),
        lambda: _with_miner(pml_losses.TripletMarginLoss(margin=M), pml_miners.BatchHardMiner()),
        f"TripletLoss({M}, form='distance', mining='batch_hard', reduction='mean_nonzero') = "
        f"TripletMarginLoss(margin={M}) with BatchHardMiner()",
        registry=("triplet",),
    ),
    Entry(
        "triplet, all triplets",
        lambda: TripletLoss(M, form="distance", reduction="mean_nonzero"),
        lambda: pml_losses.TripletMarginLoss(margin=M),
        f"TripletLoss({M}, form='distance', reduction='mean_nonzero') = "
        f"TripletMarginLoss(margin={M}) (all triplets, AvgNonZeroReducer)",
        memory=True,
    ),
    Entry(
        "generalised lifted (Eq. 6)",
        lambda: LiftedLoss(1.0, form="distance"),
        lambda: pml_losses.GeneralizedLiftedStructureLoss(neg_margin=1.0, pos_margin=0.0),
        "LiftedLoss(1.0, form='distance') = GeneralizedLiftedStructureLoss(neg_margin=1, "
        "pos_margin=0) (the same on batches where every anchor has a positive)",
        registry=("lifted",),
    ),
    Entry(
        "lifted structure (Song et al.)",
        lambda: LiftedStructureLoss(1.0),
        lambda: pml_losses.LiftedStructureLoss(neg_margin=1.0, pos_margin=0.0),
        "LiftedStructureLoss(1.0) = LiftedStructureLoss(neg_margin=1, pos_margin=0)",
        registry=("lifted_structure",),
        pml_max_batch=80,  # PML loops over the positive pairs: 4 s per call at B = 320
    ),
    Entry(
        "Circle",
        lambda: CircleLoss(80.0, 0.4),
        lambda: pml_losses.CircleLoss(m=0.4, gamma=80.0),
        "CircleLoss(gamma=80, margin=0.4) = CircleLoss(m=0.4, gamma=80) (weighting factors "
        "detached in both; PML averages over the anchors with a non-zero term, dmlbook over the "
        "anchors with a positive and a negative: the same anchors on these batches)",
        registry=("circle",),
    ),
    Entry(
        "N-pair",
        lambda: NPairLoss(),
        lambda: pml_losses.NPairsLoss(),
        "NPairLoss() = NPairsLoss() (cosine, one pair per class)",
        registry=("npair",),
    ),
    *[
        Entry(
            f"Table 2: {name}",
            lambda name=name: ablation_loss(name),
            registry={
                "Binomial": ("binomial",),
                "LiftedStruct*": ("lifted_star",),
                "BinLifted": ("binlifted",),
                "MS mining": ("ms_mining",),
            }.get(name, ()),
        )
        for name in table_2_names()
        if name not in ("MS", "MS weighting")  # the two MS rows above
    ],
]


def registry_entries(
    covered: list[Entry], example: tuple[torch.Tensor, torch.Tensor]
) -> list[Entry]:
    """A row for every registered loss no entry stands for, if its defaults run on ``example``."""
    named = {n for e in covered for n in e.registry}
    out = []
    for name in available_losses():
        if name in named:
            continue
        try:
            loss = get_loss(name)
            loss(*example).backward()
        except Exception as err:  # noqa: BLE001 (a loss that needs more than a default batch)
            print(f"registry loss {name!r} left out: {type(err).__name__}: {err}")
            continue
        out.append(
            Entry(f"{name} (registry defaults)", lambda n=name: get_loss(n), registry=(name,))
        )
    return out

"""Pair-based losses, each a pure function of the similarity matrix S plus a thin module.

Each module below holds one family: its equation, its declared hyper-parameters (a frozen
dataclass, :class:`~dmlbook.losses.base.HyperParameters`) and its thin ``nn.Module``; each opens
with where its chapter section, its proof and its tests are.

* Wang et al. Eq. 4: ``contrastive_loss`` / ``ContrastiveLoss``
* Liu et al. Eq. 11, 35, 36: ``contrastive_distance_loss`` / ``ContrastiveDistanceLoss``
* Wang et al. Eq. 5; Liu et al. Eq. 12, 37: ``triplet_loss`` / ``TripletLoss``
* Wang et al. Eq. 6-8: ``lifted_loss`` / ``LiftedLoss``
* Liu et al. Eq. 14 (Song et al.): ``lifted_structure_loss`` / ``LiftedStructureLoss``
* Wang et al. Eq. 16 (LiftedStruct*): ``lifted_star_loss`` / ``LiftedStarLoss``
* Wang et al. Eq. 9-10: ``binomial_deviance_loss`` / ``BinomialDevianceLoss``
* Wang et al. supplement Eq. 10 (BinLifted): ``binlifted_loss`` / ``BinLiftedLoss``
* Liu et al. Eq. 13 (Sohn's N-pair): ``npair_loss`` / ``NPairLoss``
* Wang et al. Eq. 11-15 (MS): ``multi_similarity_loss`` / ``MultiSimilarityLoss``, and the
  "MS mining" row of Table 2, ``ms_mining_loss`` / ``MSMiningLoss``
* Sun et al. 2020 (Xuan & Pless, Table 1): ``circle_loss`` / ``CircleLoss``
* Xuan & Pless, Eq. 4: ``cosine_triplet_loss`` / ``CosineTripletLoss``
* Xuan & Pless, Sec. 3-4 (designed gradient, custom backward): ``GradientSurgeryLoss``
* Wang et al. 2019, supplement Eq. 3-5 (Ustinova & Lempitsky's histogram loss):
  ``histogram_loss`` / ``HistogramLoss``, the histograms ``histograms``
* Wang et al. Table 2 rows: ``ablation_loss`` (:mod:`dmlbook.losses.ablation`)
* Liu et al. Eq. 18, 21, 24-34 (Pair-P, Pair-E, Triplet-P, Triplet-E):
  :mod:`dmlbook.losses.liu_weighting` and :mod:`dmlbook.losses.liu_triplet`; MS v1/v2 on distances (Eq. 39):
  ``ms_distance_loss`` / ``MSDistanceLoss`` (:mod:`dmlbook.losses.ms_distance`)
* DRO paper Eq. 1 (max, top-K, TopK-PN, KL, chi-square; KL sampling): ``dro_loss`` / ``DROLoss``,
  ``dro_kl_sampled_loss`` / ``DROSampledLoss``; Eq. 7 (DRO-KL-G, pseudo pairs):
  ``dro_kl_grouped_loss`` / ``DROGroupedLoss``; supplement Eq. 30-32: ``hap2s_e_loss`` /
  ``HAP2SLoss``; per-pair base losses in :mod:`dmlbook.losses.pair_losses`

``get_loss(name, **hparams)`` builds any module by name (see :mod:`dmlbook.losses.registry`).
The layers below: the miners that produce ``pos_mask``/``neg_mask`` (and triplet masks) are in
:mod:`dmlbook.mining`, the pair algebra in :mod:`dmlbook.pairs`. The paper-literal loops are in
:mod:`dmlbook.reference`, the studies (Table 1, Table 2) in :mod:`dmlbook.studies`.
"""

import importlib
import warnings
from typing import Any

from .ablation import TABLE_2, MinedPairLoss, ablation_loss, table_2_names
from .base import HyperParameters, PairLoss, prepare_batch, resolve_masks
from .binomial import BinLiftedLoss, BinomialDevianceLoss, binlifted_loss, binomial_deviance_loss
from .circle import CircleLoss, circle_loss
from .contrastive import (
    ContrastiveDistanceLoss,
    ContrastiveLoss,
    contrastive_distance_loss,
    contrastive_loss,
)
from .cosine_triplet import CosineTripletLoss, cosine_triplet_loss
from .dro import DROLoss, DROSampledLoss, dro_kl_sampled_loss, dro_loss, dro_weights
from .dro_grouped import (
    DROGroupedLoss,
    HAP2SLoss,
    dro_kl_grouped_loss,
    dro_kl_grouped_weights,
    hap2s_e_loss,
)
from .gradient_surgery import GradientSurgeryLoss
from .histogram import HistogramLoss, histogram_loss, histograms
from .lifted import (
    LiftedLoss,
    LiftedStarLoss,
    LiftedStructureLoss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
)
from .liu_triplet import (
    TripletExponentialLoss,
    TripletPowerLoss,
    triplet_exponential_loss,
    triplet_power_loss,
    triplet_weighted_loss,
)
from .liu_weighting import (
    PairExponentialLoss,
    PairPowerLoss,
    pair_exponential_loss,
    pair_power_loss,
    pair_weighted_loss,
)
from .ms_distance import MSDistanceLoss, ms_distance_loss
from .multi_similarity import (
    MSMiningLoss,
    MultiSimilarityLoss,
    ms_anchor_weights,
    ms_case_weights,
    ms_mining_loss,
    ms_weights,
    multi_similarity_loss,
)
from .npair import NPairLoss, npair_loss
from .registry import available_losses, describe_loss, get_loss, loss_parameters, register_loss
from .triplet import TripletLoss, triplet_loss

__all__ = [
    "HyperParameters",
    "PairLoss",
    "prepare_batch",
    "resolve_masks",
    "ContrastiveLoss",
    "contrastive_loss",
    "ContrastiveDistanceLoss",
    "contrastive_distance_loss",
    "TripletLoss",
    "triplet_loss",
    "LiftedLoss",
    "lifted_loss",
    "LiftedStructureLoss",
    "lifted_structure_loss",
    "LiftedStarLoss",
    "lifted_star_loss",
    "BinomialDevianceLoss",
    "binomial_deviance_loss",
    "BinLiftedLoss",
    "binlifted_loss",
    "NPairLoss",
    "npair_loss",
    "MultiSimilarityLoss",
    "multi_similarity_loss",
    "MSMiningLoss",
    "ms_mining_loss",
    "ms_weights",
    "ms_anchor_weights",
    "ms_case_weights",
    "CircleLoss",
    "circle_loss",
    "CosineTripletLoss",
    "cosine_triplet_loss",
    "GradientSurgeryLoss",
    "HistogramLoss",
    "histogram_loss",
    "histograms",
    "PairPowerLoss",
    "pair_power_loss",
    "PairExponentialLoss",
    "pair_exponential_loss",
    "pair_weighted_loss",
    "TripletPowerLoss",
    "triplet_power_loss",
    "TripletExponentialLoss",
    "triplet_exponential_loss",
    "triplet_weighted_loss",
    "MSDistanceLoss",
    "ms_distance_loss",
    "DROLoss",
    "dro_loss",
    "dro_weights",
    "DROSampledLoss",
    "dro_kl_sampled_loss",
    "DROGroupedLoss",
    "dro_kl_grouped_loss",
    "dro_kl_grouped_weights",
    "HAP2SLoss",
    "hap2s_e_loss",
    "MinedPairLoss",
    "TABLE_2",
    "ablation_loss",
    "table_2_names",
    "available_losses",
    "describe_loss",
    "get_loss",
    "loss_parameters",
    "register_loss",
]

#: Names that used to be importable from here, and the module that holds each now. Studies,
#: reference loops and miners are no losses; the old spelling warns and forwards.
_MOVED = {
    "ms_mining_masks": "dmlbook.mining",
    "multi_similarity_loss_reference": "dmlbook.reference",
    "PAPER_TABLE_2": "dmlbook.studies.ms_ablation",
    "paper_table_2": "dmlbook.studies.ms_ablation",
    "read_ablation_csv": "dmlbook.studies.ms_ablation",
    "summarize_ablation": "dmlbook.studies.ms_ablation",
}


def __getattr__(name: str) -> Any:
    """Deprecation path for :data:`_MOVED`: warn, then forward to the new home."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"dmlbook.losses.{name} moved: import it from {_MOVED[name]}.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_MOVED[name]), name)

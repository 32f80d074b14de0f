"""Pair-based losses, each a pure function of the similarity matrix S plus a thin module.

* Wang et al. Eq. 4: ``contrastive_loss`` / ``ContrastiveLoss``
* Liu et al. Eq. 11, 35, 36: ``contrastive_distance_loss`` / ``ContrastiveDistanceLoss``
* Wang et al. Eq. 5; Liu et al. Eq. 12, 37: ``triplet_loss`` / ``TripletLoss``
* Wang et al. Eq. 6-8: ``lifted_loss`` / ``LiftedLoss``
* Liu et al. Eq. 14 (Song et al.): ``lifted_structure_loss`` / ``LiftedStructureLoss``
* Wang et al. Eq. 16 (LiftedStruct*): ``lifted_star_loss`` / ``LiftedStarLoss``
* Wang et al. Eq. 9-10: ``binomial_deviance_loss`` / ``BinomialDevianceLoss``
* Wang et al. supplement Eq. 10 (BinLifted): ``binlifted_loss`` / ``BinLiftedLoss``
* Liu et al. Eq. 13 (Sohn's N-pair): ``npair_loss`` / ``NPairLoss``

``get_loss(name, **hparams)`` builds any module by name (see :mod:`dmlbook.losses.registry`);
the miners that produce ``pos_mask``/``neg_mask`` (and triplet masks) are in :mod:`dmlbook.mining`.
"""

from .base import PairLoss, prepare_batch, resolve_masks
from .binomial import BinLiftedLoss, BinomialDevianceLoss, binlifted_loss, binomial_deviance_loss
from .contrastive import (
    ContrastiveDistanceLoss,
    ContrastiveLoss,
    contrastive_distance_loss,
    contrastive_loss,
)
from .lifted import (
    LiftedLoss,
    LiftedStarLoss,
    LiftedStructureLoss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
)
from .npair import NPairLoss, npair_loss
from .registry import available_losses, describe_loss, get_loss, loss_parameters, register_loss
from .triplet import TripletLoss, triplet_loss

__all__ = [
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
    "available_losses",
    "describe_loss",
    "get_loss",
    "loss_parameters",
    "register_loss",
]

# --- Multi-Similarity loss (Wang et al. 2019, Eq. 11-15) and the Table 2 ablation family ---------
from .ms_ablation import (  # noqa: E402
    PAPER_TABLE_2,
    TABLE_2,
    MinedPairLoss,
    ablation_loss,
    paper_table_2,
    read_ablation_csv,
    summarize_ablation,
    table_2_names,
)
from .ms_reference import multi_similarity_loss_reference  # noqa: E402
from .multi_similarity import (  # noqa: E402
    MSMiningLoss,
    MultiSimilarityLoss,
    ms_anchor_weights,
    ms_case_weights,
    ms_mining_loss,
    ms_mining_masks,
    ms_weights,
    multi_similarity_loss,
)

__all__ += [
    "MultiSimilarityLoss",
    "multi_similarity_loss",
    "MSMiningLoss",
    "ms_mining_loss",
    "ms_mining_masks",
    "ms_weights",
    "ms_anchor_weights",
    "ms_case_weights",
    "multi_similarity_loss_reference",
    "MinedPairLoss",
    "PAPER_TABLE_2",
    "TABLE_2",
    "ablation_loss",
    "paper_table_2",
    "read_ablation_csv",
    "summarize_ablation",
    "table_2_names",
]

register_loss("multi_similarity", MultiSimilarityLoss, aliases=("ms",))
register_loss("ms_mining", MSMiningLoss)

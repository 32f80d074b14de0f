"""Pair-based losses, each a pure function of the similarity matrix S plus a thin module.

Each module below holds one family: its equation written as readable PyTorch (the code the
chapters print is the code that trains: autograd differentiates it), the paper's printed weights
``w_ij = dL/dS_ij`` as a separately named function where the paper prints them (the tests and
chapters hold them equal to autograd: the General Pair Weighting view made concrete), its
hyper-parameters, declared by the function's signature (literal defaults and ranges,
:func:`dmlbook.core.declaration.declared`), and its thin ``nn.Module`` built from that signature;
each opens with where its chapter section, its proof and its tests are. Which pairs a loss sees is decided once, by the miners of :mod:`dmlbook.mining`.

Which module holds which loss, with its equations, its weights function, its proof, its
reference loop, its tests and its chapter section: the loss table of ``MAP.md`` (a test keeps
it complete). Xuan & Pless's designed gradient, ``GradientSurgeryLoss``, lives in
:mod:`dmlbook.losses.gradient_surgery` and registers itself as ``gradient_surgery``.

Every loss function takes ``S``, the (B, B) similarity matrix of a batch, and ``labels``, its (B,)
class ids, and the keywords ``pos_mask`` and ``neg_mask``: optional bool (B, B) pairs from a
miner, which narrow the label masks (:func:`dmlbook.core.pairs.pair_sets`). A docstring documents
them only where its function reads them differently. A family that reuses another's
hyper-parameters says so once, ``@declared(like=...)`` (:func:`dmlbook.core.declaration.declared`).

``get_loss(name, **hparams)`` builds any module by name (see :mod:`dmlbook.losses.registry`).
The layers below: the miners that produce ``pos_mask``/``neg_mask`` (and triplet masks) are in
:mod:`dmlbook.mining`, the pair algebra in :mod:`dmlbook.core.pairs`. The paper-literal loops are in
:mod:`dmlbook.reference`, the studies (Table 1, Table 2) in :mod:`dmlbook.studies`.
"""

from .ablation import TABLE_2, MinedPairLoss, ablation_loss, table_2_names
from .base import PairLoss, pair_sets, prepare_batch, resolve_masks
from .binomial import (
    BinLiftedLoss,
    BinomialDevianceLoss,
    binlifted_loss,
    binlifted_weights,
    binomial_deviance_loss,
    binomial_weights,
)
from .circle import CircleLoss, circle_loss
from .contrastive import (
    ContrastiveDistanceLoss,
    ContrastiveLoss,
    contrastive_distance_loss,
    contrastive_loss,
)
from .dro import DROLoss, dro_loss, dro_weights
from .dro_grouped import (
    DROGroupedLoss,
    DROSampledLoss,
    HAP2SLoss,
    dro_kl_grouped_loss,
    dro_kl_grouped_weights,
    dro_kl_sampled_loss,
    hap2s_e_loss,
)
from .histogram import HistogramLoss, histogram_loss, histograms
from .lifted import (
    LiftedLoss,
    LiftedStarLoss,
    LiftedStructureLoss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
    lifted_weights,
)
from .liu_triplet import (
    TripletExponentialLoss,
    TripletPowerLoss,
    triplet_exponential_loss,
    triplet_power_loss,
    triplet_weighted_loss,
    triplet_weights,
)
from .liu_weighting import (
    MSDistanceLoss,
    PairExponentialLoss,
    PairPowerLoss,
    ms_distance_loss,
    ms_distance_weights,
    pair_exponential_loss,
    pair_power_loss,
    pair_weighted_loss,
    pair_weights,
)
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
from .triplet import CosineTripletLoss, TripletLoss, cosine_triplet_loss, triplet_loss

__all__ = [
    "PairLoss",
    "pair_sets",
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
    "lifted_weights",
    "LiftedStructureLoss",
    "lifted_structure_loss",
    "LiftedStarLoss",
    "lifted_star_loss",
    "BinomialDevianceLoss",
    "binomial_deviance_loss",
    "binomial_weights",
    "BinLiftedLoss",
    "binlifted_loss",
    "binlifted_weights",
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
    "HistogramLoss",
    "histogram_loss",
    "histograms",
    "PairPowerLoss",
    "pair_power_loss",
    "PairExponentialLoss",
    "pair_exponential_loss",
    "pair_weighted_loss",
    "pair_weights",
    "TripletPowerLoss",
    "triplet_power_loss",
    "TripletExponentialLoss",
    "triplet_exponential_loss",
    "triplet_weighted_loss",
    "triplet_weights",
    "MSDistanceLoss",
    "ms_distance_loss",
    "ms_distance_weights",
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

# Last: the designed-gradient module (gradient_surgery.py, built on dmlbook.surgery) registers itself on import.
from . import gradient_surgery as _surgery_loss  # noqa: E402, F401

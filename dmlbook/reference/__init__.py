"""Paper-literal reference implementations: slow loops that follow the papers' equations.

They are what the vectorised code of :mod:`dmlbook.losses` and :mod:`dmlbook.mining` is tested
against (``tests/losses/``, ``tests/reference/``) and what the chapters compare with:

* :mod:`dmlbook.reference.classic`: contrastive, triplet, lifted, binomial, LiftedStruct*,
  BinLifted, N-pair losses as Python-float loops (Wang et al. 2019; Liu et al.);
* :mod:`dmlbook.reference.multi_similarity`: the MS loss (Wang et al. 2019, Eq. 11-15) and its
  mining, one anchor at a time, with autograd;
* :mod:`dmlbook.reference.liu_weighting`: Algorithm 1 of Liu et al. (Eq. 16-34) and their MS
  v1/v2 on distances, one anchor at a time;
* :mod:`dmlbook.reference.gradient_surgery`: Xuan & Pless's designed gradient one triplet at a
  time, Circle loss and the cosine triplet loss (Eq. 4).
"""

from .gradient_surgery import (
    circle_loss_reference,
    cosine_triplet_loss_reference,
    designed_gradient_reference,
)
from .liu_weighting import (
    ms_distance_loss_reference,
    pair_weighted_loss_reference,
    triplet_weighted_loss_reference,
)
from .multi_similarity import ms_mining_reference, multi_similarity_loss_reference

__all__ = [
    "circle_loss_reference",
    "cosine_triplet_loss_reference",
    "designed_gradient_reference",
    "ms_distance_loss_reference",
    "ms_mining_reference",
    "multi_similarity_loss_reference",
    "pair_weighted_loss_reference",
    "triplet_weighted_loss_reference",
]

"""Gradient surgery (Xuan & Pless): a metric-learning gradient composed from three parts.

* :mod:`~dmlbook.surgery.directions`: the unit directions ``e^euc``, ``e^cos``, ``e^euc-orth``,
  ``e^cos-orth`` (Eq. 5-7);
* :mod:`~dmlbook.surgery.weights`: the pair weights (Eq. 8-14), triplet weights (Eq. 15-17) and
  selections (Eq. 18-19);
* :mod:`~dmlbook.surgery.triplets`: the easy-positive / hard-negative triplets and the relative
  sets of Eq. 12;
* :mod:`~dmlbook.surgery.gradient`: :class:`SurgerySpec`, :func:`designed_gradient` and the
  custom-backward :class:`SurgeryFunction`.

The trainable module is :class:`dmlbook.losses.gradient_surgery.GradientSurgeryLoss` (registered as
``"gradient_surgery"``). Chapter: ``book/13_gradient_surgery.ipynb``; tests: ``tests/surgery/``;
proofs: :mod:`dmlbook.symbolic.gradient_surgery`.
"""

from .directions import DIRECTIONS, Directions, unit_directions
from .gradient import SurgeryFunction, SurgerySpec, designed_gradient
from .triplets import Triplets, ephn_triplets, relative_sets
from .weights import (
    PAIR_WEIGHTS,
    PRINTED_CIRCLE_MARGIN,
    SELECTIONS,
    TRIPLET_WEIGHTS,
    pair_weights,
    relative_means,
    select,
    triplet_weight,
)

__all__ = [
    "DIRECTIONS",
    "PAIR_WEIGHTS",
    "PRINTED_CIRCLE_MARGIN",
    "SELECTIONS",
    "TRIPLET_WEIGHTS",
    "Directions",
    "SurgeryFunction",
    "SurgerySpec",
    "Triplets",
    "designed_gradient",
    "ephn_triplets",
    "pair_weights",
    "relative_means",
    "relative_sets",
    "select",
    "triplet_weight",
    "unit_directions",
]

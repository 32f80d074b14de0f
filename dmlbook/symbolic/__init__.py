"""Symbolic derivation and verification: no gradient in the book is taken on faith.

Four steps take a loss chapter from a paper's equation to a checked implementation:

1. write the loss of one anchor on :func:`anchor_similarities` (``P`` positives, ``N``
   negatives) or, for every batch size at once, on :func:`indexed_anchor`;
2. take its pair weights ``w_ij = dL/dS_ij`` with :func:`pair_weights`;
3. :func:`prove_equal` them to the paper's closed form, each side passed as written
   (``lambda: closed_form``, built from symbols; the weights as
   ``derived(pair_weights, lambda: loss, a)``, which carries the loss's conditions; a value
   built earlier only as the explicit, unchecked :func:`prebuilt`) (``True`` only for an exact proof;
   ``False`` only means "not proved": :func:`counterexample` gives the point where two forms
   differ, the evidence for a rejection; :func:`spot_check_equal` is numeric evidence, never
   a proof). A statement that divides by a quantity that may vanish is proved only with its
   condition (``where=``; :func:`as_written` keeps SymPy from cancelling the factor first), and
   hyper-parameter symbols carry only the domain every value the book uses lies in
   (:data:`HYPERPARAMETER_DOMAINS`);
4. evaluate them on a real batch (:func:`weights_from_loss`, :func:`to_torch`,
   :func:`batch_weights`) and compare with autograd of the dmlbook loss
   (:func:`check_against_autograd`), with :func:`gradcheck_witness` as an independent
   finite-difference witness.
"""

from .autograd_check import check_against_autograd, gradcheck_witness
from .conditions import as_written, divisors, unguarded
from .counterexample import Counterexample, counterexample
from .differentiate import pair_weights
from .embeddings import (
    embedding_gradient_closed_form,
    embedding_symbols,
    nonzero_rows,
    normalization_jacobian,
    normalization_jacobian_closed_form,
    similarity_from_embeddings,
    unit_rows,
    weight_symbols,
)
from .hinge import Hinge, HingeActive, hinge, hinge_branch, hinge_conditions
from .proofs import define, derived, gpw_identity, prebuilt, prove_equal, residual
from .spot_check import SpotCheck, spot_check_equal
from .symbols import (
    HYPERPARAMETER_DOMAINS,
    AnchorSimilarities,
    IndexedAnchor,
    anchor_similarities,
    batch_similarities,
    distance_symbols,
    distinct_points,
    hyperparameters,
    indexed_anchor,
    log1p_sum_exp,
    log_sum_exp,
    unit_sphere_distance,
    unit_sphere_similarity,
)
from .torch_bridge import (
    AnchorWeightFunction,
    batch_weights,
    to_torch,
    weights_from_closed_form,
    weights_from_loss,
)

__all__ = [
    "HYPERPARAMETER_DOMAINS",
    "AnchorSimilarities",
    "AnchorWeightFunction",
    "Counterexample",
    "Hinge",
    "HingeActive",
    "IndexedAnchor",
    "SpotCheck",
    "anchor_similarities",
    "as_written",
    "batch_similarities",
    "batch_weights",
    "check_against_autograd",
    "counterexample",
    "distance_symbols",
    "distinct_points",
    "divisors",
    "embedding_gradient_closed_form",
    "embedding_symbols",
    "define",
    "derived",
    "gpw_identity",
    "gradcheck_witness",
    "hinge",
    "hinge_branch",
    "hinge_conditions",
    "hyperparameters",
    "indexed_anchor",
    "log1p_sum_exp",
    "log_sum_exp",
    "nonzero_rows",
    "normalization_jacobian",
    "normalization_jacobian_closed_form",
    "pair_weights",
    "prebuilt",
    "prove_equal",
    "residual",
    "similarity_from_embeddings",
    "spot_check_equal",
    "to_torch",
    "unguarded",
    "unit_rows",
    "unit_sphere_distance",
    "unit_sphere_similarity",
    "weight_symbols",
    "weights_from_closed_form",
    "weights_from_loss",
]

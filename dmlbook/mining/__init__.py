"""Mining: which pairs (or triplets) of a batch a loss is allowed to see, as boolean masks.

Every miner of dmlbook is in this package, one module per family of rules, and it imports only
the pair algebra (:mod:`dmlbook.core.pairs`), so the losses can import it without a cycle:
:mod:`~dmlbook.mining.triplets` (all, batch-hard, easy-positive, semi-hard, margin-violating),
:mod:`~dmlbook.mining.npair` (Sohn's N-pair batch), :mod:`~dmlbook.mining.multi_similarity`
(Wang et al.'s Eq. 11-12 on similarities) and :mod:`~dmlbook.mining.distance` (Liu et al.'s
Eq. 16-17 and 22-23 on distances). Chapters:
``book/04_triplet.ipynb``, 4.3 "Mining: which triplets enter"; ``book/07_npair.ipynb``, 7.4 "The
N-pair batch"; ``book/10_multi_similarity.ipynb``, 10.1 "Mining with Similarity-P (Eq. 11-12)".
Tests: ``tests/mining/`` (one file per module); the per-anchor MS mining loop is
:func:`dmlbook.reference.ms_mining_reference` (``tests/reference/test_ms_equivalence.py``).

Every miner here returns masks, never index lists, so that its output composes with the
losses of :mod:`dmlbook.losses` (which take ``pos_mask``/``neg_mask``) by logical and.

Pair masks, shape (B, B), are enough for every selection that is made *per pair* or *per anchor*:
all pairs, batch-hard (one hardest positive and one hardest negative per anchor, Hermans et al.
as implemented by pytorch-metric-learning's ``BatchHardMiner``), easy-positive / hard-negative
(Xuan & Pless, Sec. 4), the N-pair construction
(Liu et al., Eq. 13) and MS mining with *Similarity-P* (Wang et al. 2019, Eq. 11-12). A triplet loss fed pair masks uses every triplet ``(a, p, n)`` with
``pos[a, p]`` and ``neg[a, n]``.

Selections that depend on the *triplet* (semi-hard negatives: ``d_ap < d_an < d_ap + m``; the
margin-violating triplets of Wang et al.'s Eq. 5 discussion) cannot be written as pair masks: a
negative can be semi-hard for one positive of its anchor and not for another. For those this
package returns a (B, B, B) bool *triplet mask* ``T[a, p, n]``, which
:func:`dmlbook.losses.triplet_loss` accepts as ``triplet_mask``. Its memory grows as ``B^3``
(16 M entries, 16 MB, at B = 256), the same as the all-triplets loss itself.

Miners never carry gradients: they read ``S`` detached.
"""

from __future__ import annotations

from .distance import ms_distance_mining_masks, threshold_pair_masks
from .multi_similarity import ms_mining_masks
from .npair import npair_masks, npair_negatives, npair_pairs
from .triplets import (
    TRIPLET_KINDS,
    all_pair_masks,
    all_triplet_mask,
    batch_hard_masks,
    easy_positive_masks,
    margin_triplet_mask,
    semihard_triplet_mask,
)

__all__ = [
    "TRIPLET_KINDS",
    "all_pair_masks",
    "all_triplet_mask",
    "batch_hard_masks",
    "easy_positive_masks",
    "margin_triplet_mask",
    "ms_distance_mining_masks",
    "ms_mining_masks",
    "npair_masks",
    "npair_negatives",
    "npair_pairs",
    "threshold_pair_masks",
    "semihard_triplet_mask",
]

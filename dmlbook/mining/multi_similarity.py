"""MS mining with *Similarity-P*, Wang et al. 2019, Eq. 11-12: thresholds on cosine similarity.

Chapter: ``book/10_multi_similarity.ipynb``, 10.1 "Mining with Similarity-P (Eq. 11-12)". Tests:
``tests/mining/test_multi_similarity.py``; the per-anchor loop is
:func:`dmlbook.reference.ms_mining_reference` (``tests/reference/test_ms_equivalence.py``).
"""

from __future__ import annotations

from typing import Annotated

import torch

from ..core.declaration import declared
from ..core.pairs import pair_sets
from ..core.validation import Number

#: The mining margin ``epsilon`` of Eq. 11-12 (and of Liu et al.'s Eq. 22-23 on distances).
Epsilon = Annotated[float, Number(0.0, 1e6, "a mining margin; both papers use 0.1")]


def hardest(
    s: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: the least similar positive (``+inf`` if none), the most similar negative (``-inf``)."""
    inf = torch.full((), float("inf"), dtype=s.dtype, device=s.device)
    min_pos = torch.where(pos, s, inf).amin(dim=1)
    max_neg = torch.where(neg, s, -inf).amax(dim=1)
    return min_pos, max_neg


@declared
def ms_mining_masks(
    S, labels, epsilon: Epsilon = 0.1, *, pos_mask, neg_mask
) -> tuple[torch.Tensor, torch.Tensor]:
    """MS pair mining with *Similarity-P*, Wang et al. 2019, Eq. 11-12.

    For anchor ``i`` a negative pair is kept when it is more similar than the anchor's hardest
    positive minus ``epsilon`` (Eq. 11), a positive pair when it is less similar than the
    anchor's hardest negative plus ``epsilon`` (Eq. 12)::

        S_ij^- > min_{y_k = y_i} S_ik - epsilon,        S_ij^+ < max_{y_k != y_i} S_ik + epsilon.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities (read detached: mining carries no gradient).
    labels : Tensor of shape (B,)
    epsilon : float
        The margin ``epsilon`` of Eq. 11-12 (>= 0; the paper uses 0.1).
    pos_mask, neg_mask : bool Tensor of shape (B, B), optional
        Candidate pairs. They narrow the label masks *before* mining, so the thresholds are
        taken over the candidates.

    Returns
    -------
    pos, neg : bool Tensor of shape (B, B)
        ``pos[i, j]`` iff ``j`` is a positive of ``i`` with ``S_ij < max_{N} S_ik + epsilon``
        (Eq. 12); ``neg[i, j]`` iff ``j`` is a negative of ``i`` with
        ``S_ij > min_{P} S_ik - epsilon`` (Eq. 11). The thresholds come from the unmined sets;
        the diagonal is never a pair. An anchor gets mined positives and negatives, or neither
        (see the "Semantics" of :mod:`dmlbook.losses.multi_similarity`): in particular an
        anchor with no positive (a singleton class) or no negative (a one-class batch) gets an
        empty row in both.

    Examples
    --------
    >>> S = torch.tensor([[1.0, 0.5, 0.45, -0.2], [0.5, 1.0, 0.1, 0.0],
    ...                   [0.45, 0.1, 1.0, 0.3], [-0.2, 0.0, 0.3, 1.0]])
    >>> pos, neg = ms_mining_masks(S, torch.tensor([0, 0, 1, 1]))
    >>> pos[0].tolist(), neg[0].tolist()
    ([False, True, False, False], [False, False, True, False])
    """
    S, pos, neg = pair_sets(S, labels, pos_mask, neg_mask)
    s = S.detach()
    min_pos, max_neg = hardest(s, pos, neg)  # thresholds from the unmined sets
    mined_pos = pos & (s < (max_neg + epsilon)[:, None])  # Eq. 12
    mined_neg = neg & (s > (min_pos - epsilon)[:, None])  # Eq. 11
    return mined_pos, mined_neg

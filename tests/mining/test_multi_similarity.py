"""MS mining with *Similarity-P* (Wang et al. 2019, Eq. 11-12), :mod:`dmlbook.mining.multi_similarity`,
against loops written here from the equations; the per-anchor reference loop is compared in
``tests/reference/test_ms_equivalence.py``. Chapter: ``book/10_multi_similarity.ipynb``, 10.1.
"""

from __future__ import annotations

import math

import hypothesis.strategies as st
import torch
from hypothesis import given, settings
from loss_cases import cosine_batches, rand_S

from dmlbook.core.similarity import cosine_similarity, pair_masks
from dmlbook.mining import ms_mining_masks

FAST = settings(max_examples=40, deadline=None)


def test_mining_on_the_shared_fixture():
    """The mined sets listed in the notes for PML's fixture (eps = 0.1)."""
    a = torch.tensor([0.0, 20.0, 40.0, 60.0, 80.0], dtype=torch.float64) * math.pi / 180
    x = torch.stack([2 * torch.cos(a), 0.5 * torch.sin(a)], dim=1)
    pos, neg = ms_mining_masks(cosine_similarity(x), torch.tensor([0, 0, 1, 1, 2]), 0.1)
    assert sorted(map(tuple, pos.nonzero().tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]
    assert sorted(map(tuple, neg.nonzero().tolist())) == [
        (0, 2), (0, 3), (1, 2), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1),
    ]  # fmt: skip
    assert not pos[4].any() and not neg[4].any()  # the singleton anchor gets nothing


@FAST
@given(cosine_batches(), st.sampled_from([0.0, 0.05, 0.1, 0.5]))
def test_mining_follows_eq_11_12_and_gives_both_sets_or_neither(batch, eps):
    S, y = batch
    pos, neg = ms_mining_masks(S, y, eps)
    lp, ln = pair_masks(y)
    assert not (pos & ~lp).any() and not (neg & ~ln).any()
    for i in range(len(y)):
        P = [k for k in range(len(y)) if lp[i, k]]
        N = [k for k in range(len(y)) if ln[i, k]]
        for j in N:  # Eq. 11, threshold over all positives
            assert bool(neg[i, j]) == (bool(P) and float(S[i, j]) + eps > min(S[i, P]).item())
        for j in P:  # Eq. 12, threshold over all negatives
            assert bool(pos[i, j]) == (bool(N) and float(S[i, j]) - eps < max(S[i, N]).item())
        assert bool(pos[i].any()) == bool(neg[i].any())


def test_mining_edges():
    S = rand_S(6)
    for y in (torch.zeros(6, dtype=torch.long), torch.arange(6)):  # one class / all singletons
        pos, neg = ms_mining_masks(S, y)
        assert not pos.any() and not neg.any()
    pos, neg = ms_mining_masks(torch.ones(1, 1), torch.tensor([3]))
    assert pos.shape == (1, 1) and not pos.any() and not neg.any()
    # a huge epsilon mines every pair of every anchor that has both kinds
    pos, neg = ms_mining_masks(S, torch.tensor([0, 0, 1, 1, 2, 2]), 10.0)
    lp, ln = pair_masks(torch.tensor([0, 0, 1, 1, 2, 2]))
    assert torch.equal(pos, lp) and torch.equal(neg, ln)


def test_mining_reads_S_detached_and_candidate_masks_narrow_the_thresholds():
    S = rand_S(8, 3).requires_grad_(True)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2])
    pos, neg = ms_mining_masks(S, y)
    assert pos.dtype == torch.bool and not pos.requires_grad
    keep = torch.ones(8, 8, dtype=torch.bool)
    keep[:, 1] = False  # drop column 1 from the candidates: thresholds are then taken without it
    p2, n2 = ms_mining_masks(S.detach(), y, pos_mask=keep, neg_mask=keep)
    assert not p2[:, 1].any() and not n2[:, 1].any()
    lp, ln = pair_masks(y)
    expected, _ = ms_mining_masks(S.detach(), y, pos_mask=lp & keep)
    assert torch.equal(p2, expected & keep)

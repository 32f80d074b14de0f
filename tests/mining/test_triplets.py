"""The miners of :mod:`dmlbook.mining.triplets` (all, batch-hard, semi-hard, margin-based) return
boolean masks that agree with per-anchor loops written here; the last tests hold for every miner
of the package."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import TripletLoss, triplet_loss
from dmlbook.losses.base import dissimilarity
from dmlbook.mining import (
    TRIPLET_KINDS,
    all_pair_masks,
    all_triplet_mask,
    batch_hard_masks,
    easy_positive_masks,
    margin_triplet_mask,
    npair_masks,
    semihard_triplet_mask,
)

FAST = settings(max_examples=40, deadline=None)


@st.composite
def batches(draw, max_b: int = 8):
    B = draw(st.integers(1, max_b))
    labels = draw(st.lists(st.integers(0, 3), min_size=B, max_size=B))
    seed = draw(st.integers(0, 2**31 - 1))
    x = torch.randn(B, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return cosine_similarity(x), torch.tensor(labels)


def loops(y):
    B = len(y)
    P = [[k for k in range(B) if k != i and y[k] == y[i]] for i in range(B)]
    N = [[k for k in range(B) if y[k] != y[i]] for i in range(B)]
    return P, N


def batch_hard_reference(S, y):
    """Batch-hard pair masks by a plain loop, independent of ``dmlbook.mining``.

    Per anchor with a positive and a negative: its least similar positive and most similar
    negative (``min``/``max`` return the first, lowest-index, of equal values).
    """
    P, N = loops(y.tolist())
    pos = torch.zeros(len(y), len(y), dtype=torch.bool)
    neg = torch.zeros_like(pos)
    for a in range(len(y)):
        if P[a] and N[a]:
            pos[a, min(P[a], key=lambda k: float(S[a, k]))] = True
            neg[a, max(N[a], key=lambda k: float(S[a, k]))] = True
    return pos, neg


def semihard_reference(S, y, margin):
    """Semi-hard triplets ``0 < S_ap - S_an <= margin`` by a plain loop (similarity form)."""
    P, N = loops(y.tolist())
    T = torch.zeros(len(y), len(y), len(y), dtype=torch.bool)
    for a in range(len(y)):
        for p in P[a]:
            for n in N[a]:
                T[a, p, n] = 0 < float(S[a, p] - S[a, n]) <= margin
    return T


@FAST
@given(batches())
def test_all_pairs_and_triplets(batch):
    S, y = batch
    P, N = loops(y.tolist())
    pos, neg = all_pair_masks(y)
    T = all_triplet_mask(y)
    assert T.dtype == torch.bool and T.shape == (len(y),) * 3
    for a in range(len(y)):
        assert pos[a].nonzero().flatten().tolist() == P[a]
        assert neg[a].nonzero().flatten().tolist() == N[a]
        for p in range(len(y)):
            assert T[a, p].nonzero().flatten().tolist() == (N[a] if p in P[a] else [])


@FAST
@given(batches())
def test_batch_hard_picks_hardest_positive_and_negative(batch):
    S, y = batch
    P, N = loops(y.tolist())
    pos, neg = batch_hard_masks(S, y)
    assert pos.dtype == torch.bool and neg.dtype == torch.bool
    for a in range(len(y)):
        if P[a] and N[a]:
            hp = min(P[a], key=lambda k: float(S[a, k]))
            hn = max(N[a], key=lambda k: float(S[a, k]))
            assert pos[a].nonzero().flatten().tolist() == [hp]
            assert neg[a].nonzero().flatten().tolist() == [hn]
        else:  # an anchor without a positive or a negative gets nothing at all
            assert not pos[a].any() and not neg[a].any()


def test_batch_hard_respects_candidate_masks_and_breaks_ties_low():
    S = torch.zeros(4, 4, dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    pos, neg = batch_hard_masks(S, y)
    assert neg[0].nonzero().flatten().tolist() == [2]  # tie between 2 and 3: lowest index
    allowed = torch.ones(4, 4, dtype=torch.bool)
    allowed[0, 2] = False
    _, neg = batch_hard_masks(S, y, neg_mask=allowed)
    assert neg[0].nonzero().flatten().tolist() == [3]


def test_batch_hard_is_one_triplet_per_anchor_and_matches_the_dense_path():
    g = torch.Generator().manual_seed(0)
    S = cosine_similarity(torch.randn(12, 4, generator=g, dtype=torch.float64))
    y = torch.arange(4).repeat_interleave(3)
    pos, neg = batch_hard_reference(S, y)  # expected masks: a loop, not the miner under test
    assert all(map(torch.equal, batch_hard_masks(S, y), (pos, neg)))
    everything = torch.ones(12, 12, 12, dtype=torch.bool)
    for form in ("similarity", "distance", "squared_distance"):
        fast = triplet_loss(S, y, 0.3, form=form, pos_mask=pos, neg_mask=neg)
        dense = triplet_loss(
            S, y, 0.3, form=form, pos_mask=pos, neg_mask=neg, triplet_mask=everything
        )
        assert float(fast) == pytest.approx(float(dense), rel=1e-12)
        d = dissimilarity(S, form)
        same = y[:, None] == y[None, :]
        not_pos = ~same | torch.eye(12, dtype=torch.bool)
        hardest_pos = d.masked_fill(not_pos, -9).amax(1)  # largest dissimilarity among positives
        hardest_neg = d.masked_fill(same, 9).amin(1)  # smallest among negatives
        want = torch.relu(hardest_pos - hardest_neg + 0.3).mean()
        assert float(fast) == pytest.approx(float(want), rel=1e-12)
    module = TripletLoss(0.3, mining="batch_hard")
    assert float(module.loss_on_similarity(S, y)) == pytest.approx(
        float(triplet_loss(S, y, 0.3, pos_mask=pos, neg_mask=neg)), rel=1e-12
    )


@FAST
@given(
    batches(), st.floats(0.0, 0.8), st.sampled_from(["similarity", "distance", "squared_distance"])
)
def test_margin_kinds_partition_the_valid_triplets(batch, margin, form):
    S, y = batch
    valid = all_triplet_mask(y)
    m = {k: margin_triplet_mask(S, y, margin, k, form=form) for k in TRIPLET_KINDS}
    assert torch.equal(m["violating"] | m["easy"], valid)
    assert not (m["violating"] & m["easy"]).any()
    assert torch.equal(m["hard"] | m["semihard"], m["violating"])
    assert not (m["hard"] & m["semihard"]).any()
    assert torch.equal(semihard_triplet_mask(S, y, margin, form=form), m["semihard"])


@FAST
@given(batches(), st.floats(0.01, 0.5))
def test_semihard_matches_a_loop(batch, margin):
    S, y = batch
    P, N = loops(y.tolist())
    T = semihard_triplet_mask(S, y, margin, form="distance")
    D = (2 - 2 * S).clamp_min(0).sqrt()
    for a in range(len(y)):
        for p in range(len(y)):
            for n in range(len(y)):
                t = float(D[a, n] - D[a, p])
                want = p in P[a] and n in N[a] and 0 < t <= margin
                assert bool(T[a, p, n]) == want


def test_semihard_loss_uses_only_semihard_triplets():
    g = torch.Generator().manual_seed(1)
    S = cosine_similarity(torch.randn(10, 3, generator=g, dtype=torch.float64))
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    T = semihard_reference(S, y, 0.2)  # expected triplets: a loop, not the miner under test
    assert torch.equal(semihard_triplet_mask(S, y, 0.2), T) and bool(T.any())
    per = triplet_loss(S, y, 0.2, reduction="none", triplet_mask=T)
    assert bool((per[~T] == 0).all()) and bool((per[T] > 0).all())
    module = TripletLoss(0.2, mining="semihard")
    assert float(module.loss_on_similarity(S, y)) == pytest.approx(float(per[T].mean()))


def test_miners_do_not_track_gradients():
    S = cosine_similarity(torch.randn(6, 3, dtype=torch.float64)).requires_grad_(True)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    for m in (*batch_hard_masks(S, y), margin_triplet_mask(S, y, 0.1), *npair_masks(y)):
        assert m.dtype == torch.bool and not m.requires_grad


def test_miner_input_errors():
    S = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="kind must be one of"):
        margin_triplet_mask(S, torch.tensor([0, 0, 1]), 0.1, "medium")
    with pytest.raises(ValueError, match="one label per row"):
        batch_hard_masks(S, torch.tensor([0, 1]))


# ---- mutation testing (tools/mutation.py): exact ties, narrowed candidates, easy positives


def easy_positive_reference(S, y, pos_mask=None, neg_mask=None):
    """Per anchor with both: its most similar positive and most similar negative (a loop)."""
    P, N = loops(y.tolist())
    pos = torch.zeros(len(y), len(y), dtype=torch.bool)
    neg = torch.zeros_like(pos)
    for a in range(len(y)):
        p_ok = [k for k in P[a] if pos_mask is None or pos_mask[a, k]]
        n_ok = [k for k in N[a] if neg_mask is None or neg_mask[a, k]]
        if p_ok and n_ok:
            pos[a, max(p_ok, key=lambda k: float(S[a, k]))] = True
            neg[a, max(n_ok, key=lambda k: float(S[a, k]))] = True
    return pos, neg


@FAST
@given(batches(), st.integers(0, 2**31 - 1))
def test_easy_positive_mining_matches_a_loop_with_and_without_candidates(batch, seed):
    S, y = batch
    assert all(torch.equal(a, b) for a, b in zip(easy_positive_masks(S, y),
                                                 easy_positive_reference(S, y), strict=True))  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    pm, nm = (torch.rand(len(y), len(y), generator=g) < 0.6 for _ in range(2))
    got = easy_positive_masks(S, y, pos_mask=pm, neg_mask=nm)
    ref = easy_positive_reference(S, y, pm, nm)
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])
    hard = batch_hard_masks(S, y, pos_mask=pm, neg_mask=nm)
    assert not (hard[0] & ~pm).any() and not (hard[1] & ~nm).any()


def test_an_anchor_without_a_negative_gets_no_triplet():
    S = torch.tensor([[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    nm = torch.tensor([[False, False, True], [False, False, False], [True, True, False]])
    for miner in (batch_hard_masks, easy_positive_masks):
        pos, neg = miner(S, y, neg_mask=nm)
        assert pos[0, 1] and neg[0, 2] and not pos[1].any() and not neg[1].any()


def test_margin_kinds_at_exact_ties():
    """t = S_ap - S_an (similarity form) exactly 0 or exactly the margin: each kind's inequality
    as documented (violating t <= m, hard t <= 0, semihard 0 < t <= m, easy t > m)."""
    S = torch.tensor([[1.0, 0.75, 0.5, 0.75], [0.75, 1.0, 0.0, 0.0], [0.5, 0.0, 1.0, 0.0],
                      [0.75, 0.0, 0.0, 1.0]], dtype=torch.float64)  # fmt: skip
    y = torch.tensor([0, 0, 1, 2])  # anchor 0: p = 1; n = 2 (t = 0.25), n = 3 (t = 0)
    got = {k: margin_triplet_mask(S, y, 0.25, k) for k in TRIPLET_KINDS}
    assert got["violating"][0, 1, 2] and got["violating"][0, 1, 3]
    assert got["semihard"][0, 1, 2] and not got["semihard"][0, 1, 3]
    assert got["hard"][0, 1, 3] and not got["hard"][0, 1, 2]
    assert not got["easy"][0, 1, 2] and not got["easy"][0, 1, 3]
    assert margin_triplet_mask(S, y, 0.125, "easy")[0, 1, 2]  # t = 0.25 > 0.125


def test_candidate_masks_narrow_every_triplet_miner():
    S = torch.tensor([[1.0, 0.75, 0.5, 0.75], [0.75, 1.0, 0.0, 0.0], [0.5, 0.0, 1.0, 0.0],
                      [0.75, 0.0, 0.0, 1.0]], dtype=torch.float64)  # fmt: skip
    y = torch.tensor([0, 0, 1, 2])
    no_pos = torch.zeros(4, 4, dtype=torch.bool)
    no_neg = torch.zeros(4, 4, dtype=torch.bool)
    assert not all_triplet_mask(y, pos_mask=no_pos).any()
    assert not all_triplet_mask(y, neg_mask=no_neg).any()
    for kind in TRIPLET_KINDS:
        assert not margin_triplet_mask(S, y, 1.0, kind, pos_mask=no_pos).any()
        assert not margin_triplet_mask(S, y, 1.0, kind, neg_mask=no_neg).any()
    assert semihard_triplet_mask(S, y, 0.25)[0, 1, 2]
    assert not semihard_triplet_mask(S, y, 0.25, pos_mask=no_pos).any()
    assert not semihard_triplet_mask(S, y, 0.25, neg_mask=no_neg).any()
    with pytest.raises(ValueError, match=r"shape"):
        all_triplet_mask(y, pos_mask=torch.zeros(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^form must be one of 'similarity', "):
        margin_triplet_mask(S, y, 0.25, form="cosine")

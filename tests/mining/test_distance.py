"""Liu et al.'s miners on distances (Eq. 16-17, 22-23) against loops written here from the paper,
and the difference between Eq. 22-23 (margin on D) and Wang et al.'s Eq. 11-12 (margin on S)."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from loss_cases import unit_sphere_batches

from dmlbook.mining import ms_distance_mining_masks, ms_mining_masks, threshold_pair_masks


def _distances(S):
    return [[math.sqrt(max(2.0 - 2.0 * s, 0.0)) for s in row] for row in S.tolist()]


@settings(max_examples=40, deadline=None)
@given(unit_sphere_batches(8), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_thresholds_are_eq_16_17(batch, a, b):
    S, y = batch
    m1, m2 = min(a, b), max(a, b)
    pos, neg = threshold_pair_masks(S, y, m1, m2)
    d, lab, B = _distances(S), y.tolist(), len(y)
    for i in range(B):
        for j in range(B):
            same = lab[i] == lab[j]
            assert bool(pos[i, j]) == (i != j and same and d[i][j] >= m1)
            assert bool(neg[i, j]) == (not same and d[i][j] <= m2)


@settings(max_examples=40, deadline=None)
@given(unit_sphere_batches(8), st.floats(0.0, 0.5))
def test_ms_mining_on_distances_is_eq_22_23(batch, eps):
    S, y = batch
    pos, neg = ms_distance_mining_masks(S, y, eps)
    d, lab, B = _distances(S), y.tolist(), len(y)
    for i in range(B):
        P = [j for j in range(B) if j != i and lab[j] == lab[i]]
        N = [k for k in range(B) if lab[k] != lab[i]]
        for j in range(B):
            keep_p = bool(P and N) and j in P and d[i][j] >= min(d[i][k] for k in N) - eps
            keep_n = bool(P and N) and j in N and d[i][j] <= max(d[i][k] for k in P) + eps
            assert bool(pos[i, j]) == keep_p and bool(neg[i, j]) == keep_n


def test_liu_eq_22_23_differ_from_wang_eq_11_12_at_the_same_epsilon():
    """Anchor 0 with a positive at D = 1.2 and a negative at D = 1.29: Liu keeps the negative
    (1.29 <= 1.2 + 0.1), Wang does not (S = 0.1679 is not > S_p - 0.1 = 0.18)."""
    d_p, d_n = 1.2, 1.29
    s_p, s_n = 1 - d_p**2 / 2, 1 - d_n**2 / 2
    S = torch.tensor([[1.0, s_p, s_n], [s_p, 1.0, -0.5], [s_n, -0.5, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    _, neg_liu = ms_distance_mining_masks(S, y, 0.1)
    _, neg_wang = ms_mining_masks(S, y, 0.1)
    assert bool(neg_liu[0, 2]) and not bool(neg_wang[0, 2])


@settings(max_examples=40, deadline=None)
@given(unit_sphere_batches(8))
def test_liu_and_wang_agree_at_epsilon_zero(batch):
    """D is decreasing in S (and sqrt, rounded correctly, stays monotone), so with epsilon = 0
    both rules compare the same numbers; they could differ only on a positive tied with a
    negative (Liu non-strict, Wang strict), which a random batch does not have."""
    S, y = batch
    pl, nl = ms_distance_mining_masks(S, y, 0.0)
    pw, nw = ms_mining_masks(S, y, 0.0)
    assert torch.equal(pl, pw) and torch.equal(nl, nw)


def test_errors_name_the_fix():
    S, y = torch.eye(3, dtype=torch.float64), torch.tensor([0, 0, 1])
    with pytest.raises(ValueError, match="pos_margin <= neg_margin"):
        threshold_pair_masks(S, y, 0.9, 0.5)
    # the whole sentence, from its start (tools/mutation_equivalent.md: messages are tested)
    with pytest.raises(
        ValueError,
        match=r"^Eq\. 16-17 need 0 <= pos_margin <= neg_margin, got pos_margin=0\.9, "
        r"neg_margin=0\.5\.$",
    ):
        threshold_pair_masks(S, y, 0.9, 0.5)
    with pytest.raises(ValueError, match="epsilon"):
        ms_distance_mining_masks(S, y, -0.1)


def test_thresholds_keep_a_pair_exactly_at_the_margin():
    """Eq. 16-17 are non-strict: a same-class duplicate (D = 0) is a positive at m1 = 0, the
    Pair-P default, and a different-class duplicate a negative at m2 = 0. Issue 38: made strict
    (``D > m1``) the duplicate was dropped and Pair-P printed 1.0213 instead of 1.2128."""
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    S, y = x @ x.T, torch.tensor([0, 0, 1, 2])
    pos, neg = threshold_pair_masks(S, y, 0.0, 0.0)
    assert pos.tolist() == [[False, True, False, False], [True, False, False, False],
                            [False] * 4, [False] * 4]  # fmt: skip
    assert neg.tolist() == [[False] * 4, [False] * 4, [False, False, False, True],
                            [False, False, True, False]]  # fmt: skip
    D = math.sqrt(2.0)  # a pair at exactly the margin, orthogonal vectors
    pos, neg = threshold_pair_masks(S, torch.tensor([0, 1, 0, 2]), D, D)
    assert bool(pos[0, 2]) and bool(neg[0, 1])


def test_liu_eq_22_23_are_non_strict_and_wang_eq_11_12_strict_at_ties():
    """A positive and a negative of anchor 0 at the same similarity (so the same distance), at
    epsilon = 0: Liu's Eq. 22-23 keep both, Wang's Eq. 11-12 neither."""
    S = torch.tensor([[1.0, 0.5, 0.5], [0.5, 1.0, 0.0], [0.5, 0.0, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    pos, neg = ms_distance_mining_masks(S, y, 0.0)
    assert pos[0, 1] and neg[0, 2]
    pos, neg = ms_mining_masks(S, y, 0.0)
    assert not pos[0, 1] and not neg[0, 2]


def test_defaults_are_the_papers_values_and_errors_say_them():
    g = torch.Generator().manual_seed(5)
    x = torch.nn.functional.normalize(torch.randn(12, 4, generator=g, dtype=torch.float64), dim=1)
    S, y = x @ x.T, torch.arange(12) // 3
    for miner, default in ((threshold_pair_masks, (0.0, 0.8)),
                           (ms_distance_mining_masks, (0.1,)), (ms_mining_masks, (0.1,))):  # fmt: skip
        got, explicit = miner(S, y), miner(S, y, *default)
        assert all(torch.equal(a, b) for a, b in zip(got, explicit, strict=True))
    assert not torch.equal(threshold_pair_masks(S, y, 1.0, 1.8)[0], threshold_pair_masks(S, y)[0])
    assert not torch.equal(ms_mining_masks(S, y, 1.1)[0], ms_mining_masks(S, y)[0])
    messages = {
        "pos_margin must be a finite number in [0, 1e+06] (a distance; Liu et al. use m1 = 0, "
        "m2 = 0.8), got -1.": (lambda: threshold_pair_masks(S, y, -1.0, 0.8)),
        "neg_margin must be a finite number in [0, 1e+06] (a distance; Liu et al. use m1 = 0, "
        "m2 = 0.8), got -1.": (lambda: threshold_pair_masks(S, y, 0.0, -1.0)),
        "epsilon must be a finite number in [0, 1e+06] (a mining margin; both papers use 0.1), "
        "got -1.": (lambda: ms_mining_masks(S, y, -1.0)),
    }  # fmt: skip
    for message, call in messages.items():
        with pytest.raises(ValueError) as refused:
            call()
        assert str(refused.value).startswith(message)
    with pytest.raises(ValueError, match=r"epsilon must be a finite number in \[0, 1e\+06\]"):
        ms_distance_mining_masks(S, y, -1.0)


def test_candidate_masks_narrow_the_distance_miners():
    S = torch.tensor([[1.0, 0.5, 0.5], [0.5, 1.0, 0.0], [0.5, 0.0, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    none = torch.zeros(3, 3, dtype=torch.bool)
    wide = lambda S, y, **masks: threshold_pair_masks(S, y, 0.0, 1.5, **masks)  # noqa: E731
    for miner in (wide, ms_distance_mining_masks):
        assert not miner(S, y, pos_mask=none)[0].any() and miner(S, y)[0].any()
        assert not miner(S, y, neg_mask=none)[1].any() and miner(S, y)[1].any()
        with pytest.raises(ValueError, match="shape"):
            miner(S, y, pos_mask=torch.zeros(2, 2, dtype=torch.bool))


def test_half_precision_similarities_are_mined_in_float32():
    """A float16 S is mined in float32 (compute_dtype): in float16, sqrt(2 - 2 s) at
    s = -0.93701171875 (a float16 number) is 1.96875, above the float32 distance 1.96825 used
    here as the margin (which float16 would round to 1.9678)."""
    S = torch.tensor([[1.0, -0.93701171875], [-0.93701171875, 1.0]], dtype=torch.float16)
    y = torch.tensor([0, 1])
    m2 = float(torch.sqrt(2 - 2 * S.float()[0, 1]))
    assert bool(threshold_pair_masks(S, y, 0.0, m2)[1][0, 1])
    # Eq. 12 at epsilon = 0.001: 0.5009765625 < 0.5 + 0.001 in float32; in float16 the sum
    # rounds to 0.5009765625 itself and the positive would be dropped
    S = torch.tensor([[1.0, 0.5009765625, 0.5], [0.5009765625, 1.0, 0.0], [0.5, 0.0, 1.0]],
                     dtype=torch.float16)  # fmt: skip
    assert bool(ms_mining_masks(S, torch.tensor([0, 0, 1]), 0.001)[0][0, 1])

"""Histogram loss (Wang et al. 2019, supplement Eq. 3-5) against a loop written from the equations.

Implementation: :mod:`dmlbook.losses.histogram`; chapter ``book/08_three_similarities.ipynb``
(8.6). The loop (:func:`dmlbook.reference.classic.histogram_loss_reference`) reads Eq. 3-5 one pair
and one node at a time, with plain floats; the
weight claims of the supplement (Eq. 9 and the sentences after it) are checked by autograd.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import sympy as sp
import torch
from hypothesis import given
from loss_cases import FAST, batches, grad_of, pk_batch

from dmlbook import symbolic as sy
from dmlbook.losses import HistogramLoss, describe_loss, get_loss, histogram_loss, histograms
from dmlbook.reference.classic import (
    histogram_loss_reference,
    histogram_nodes,
    histogram_reference,
)


def loss_of(values_pos: list[float], values_neg: list[float], R: int) -> float:
    """Eq. 3 on given pair similarities, by the loop's histograms."""
    h_pos, h_neg = histogram_reference(values_pos, R), histogram_reference(values_neg, R)
    return sum(h_neg[r] * sum(h_pos[: r + 1]) for r in range(R))


# ------------------------------------------------------------------------------------ the loss


@FAST
@given(batches(max_b=7), st.integers(2, 12))
def test_histogram_loss_matches_the_loop(batch, R):
    S, y = batch
    got = histogram_loss(S, y, R)
    assert float(got) == pytest.approx(
        histogram_loss_reference(S.tolist(), y.tolist(), R), abs=1e-12
    )


@FAST
@given(batches(max_b=6, symmetric=False), st.integers(2, 9))
def test_histograms_match_the_loop_and_hold_one_unit_of_mass(batch, R):
    S, y = batch
    h_pos, h_neg = histograms(S, y, R)
    same = y[:, None] == y[None, :]
    off = ~torch.eye(len(y), dtype=torch.bool)
    for h, sel in ((h_pos, same & off), (h_neg, ~same)):
        values = S[sel].tolist()
        if not values:
            assert float(h.abs().sum()) == 0.0
            continue
        expected = torch.tensor(histogram_reference(values, R), dtype=h.dtype)
        torch.testing.assert_close(h, expected, atol=1e-12, rtol=0)
        assert float(h.sum()) == pytest.approx(1.0, abs=1e-12)


def test_the_printed_nodes_lose_the_mass_of_similarities_below_the_first_node():
    """Supplement Eq. 5 prints ``t_r = r Delta - 1``: node -1 is missing, so a pair at
    ``S`` in [-1, -1 + Delta) keeps only ``(S + 1) / Delta`` of its unit mass (none at -1)."""
    R = 5  # Delta = 1/2
    for s, kept in ((-1.0, 0.0), (-0.75, 0.5), (-0.5, 1.0), (0.3, 1.0)):
        printed = sum(histogram_reference([s], R, printed=True))
        assert printed == pytest.approx(kept, abs=1e-12)
        assert sum(histogram_reference([s], R)) == pytest.approx(1.0, abs=1e-12)
    assert histogram_nodes(R, printed=True)[0] == -0.5 and histogram_nodes(R) == [
        -1,
        -0.5,
        0,
        0.5,
        1,
    ]


def test_eq3_three_lines_are_one_sum():
    """Supplement Eq. 3: swapping the order of the double sum (R = 5, symbolic histograms)."""
    R = 5
    hp = sp.symbols(f"hp1:{R + 1}", real=True)
    hn = sp.symbols(f"hn1:{R + 1}", real=True)
    first = lambda: sum(hn[r] * sum(hp[: r + 1]) for r in range(R))  # noqa: E731
    third = lambda: sum(sum(hn[q:]) * hp[q] for q in range(R))  # noqa: E731
    assert sy.prove_equal(first, third)  # both sides as typed
    assert not sy.prove_equal(first, lambda: sum(sum(hn[q + 1 :]) * hp[q] for q in range(R)))


def test_symmetric_s_gives_the_loss_of_unordered_pairs():
    S, y = pk_batch(1, classes=4, per=3)
    iu = torch.triu_indices(len(y), len(y), 1)
    same = (y[:, None] == y[None, :])[iu[0], iu[1]]
    s = S[iu[0], iu[1]].tolist()
    unordered = loss_of(
        [v for v, m in zip(s, same, strict=True) if m],
        [v for v, m in zip(s, same, strict=True) if not m],
        21,
    )
    assert float(histogram_loss(S, y, 21)) == pytest.approx(unordered, abs=1e-12)


# ----------------------------------------------------------------- the weights (supplement Eq. 9)


def _between_nodes(S: torch.Tensor, R: int) -> int:
    """``p`` (1-based) with ``t_p < S < t_{p+1}``: the node just below."""
    return int(torch.floor((S + 1) / (2 / (R - 1)))) + 1


@pytest.mark.parametrize(("seed", "R"), [(0, 11), (1, 21), (2, 7)])
def test_weights_are_eq9_the_other_sides_histogram_at_one_node(seed, R):
    """Eq. 9: a positive pair in (t_p, t_{p+1}) has -dL/dS = h^-_p / (Delta |S+|); the text after
    it: a negative pair there has dL/dS = h^+_{p+1} / (Delta |S-|). Autograd of the loss."""
    S, y = pk_batch(seed, classes=4, per=3)
    g = grad_of(lambda s: histogram_loss(s, y, R), S)
    h_pos, h_neg = histograms(S, y, R)
    same = y[:, None] == y[None, :]
    off = ~torch.eye(len(y), dtype=torch.bool)
    delta, n_pos, n_neg = 2 / (R - 1), int((same & off).sum()), int((~same).sum())
    for i, j in zip(*torch.nonzero(off, as_tuple=True), strict=True):
        p = _between_nodes(S[i, j], R)
        if same[i, j]:
            expected = -float(h_neg[p - 1]) / (delta * n_pos)
        else:
            expected = float(h_pos[p]) / (delta * n_neg)
        assert float(g[i, j]) == pytest.approx(expected, abs=1e-12)


def test_a_weight_is_a_local_density_not_the_share_of_pairs_below():
    """The supplement reads h^-_p as "approximately the ratio of negative pairs which have a lower
    cosine similarity compared with the current positive pair". Every negative below the
    positive, none near it: that ratio is 1, the weight is 0."""
    y = torch.tensor([0, 0, 1, 1])
    S = torch.full((4, 4), -0.9, dtype=torch.float64)
    S.fill_diagonal_(1.0)
    S[0, 1] = S[1, 0] = 0.5  # the positive pairs
    S[2, 3] = S[3, 2] = 0.45
    g = grad_of(lambda s: histogram_loss(s, y, 21), S)
    share_below = float((S[~(y[:, None] == y[None, :])] < 0.5).double().mean())
    assert share_below == 1.0 and float(g[0, 1]) == 0.0
    # and a negative above every positive gets weight 0 as well, though all positives lie below it
    S2 = S.clone()
    S2[0, 2] = 0.95
    g2 = grad_of(lambda s: histogram_loss(s, y, 21), S2)
    assert float(g2[0, 2]) == 0.0


def test_negative_weights_ignore_the_other_negatives():
    """Table 1's histogram column has no Similarity-N: moving another negative leaves a negative
    pair's weight exactly unchanged (dL/dh^-_r does not contain h^-)."""
    S, y = pk_batch(3, classes=3, per=3)
    before = grad_of(lambda s: histogram_loss(s, y, 11), S)[0, 3]
    for value in (-0.9, 0.0, 0.8):
        T = S.clone()
        T[0, 6] = value  # another negative of anchor 0
        assert float(grad_of(lambda s: histogram_loss(s, y, 11), T)[0, 3]) == float(before)


# -------------------------------------------------------------------- module, registry, errors


def test_module_normalises_and_registers():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64) * 3
    y = torch.arange(12) // 3
    loss = get_loss("histogram", R=31)
    assert isinstance(loss, HistogramLoss) and describe_loss(loss) == ("histogram", {"R": 31})
    unit = x / x.norm(dim=1, keepdim=True)
    expected = histogram_loss_reference((unit @ unit.T).tolist(), y.tolist(), 31)
    assert float(loss(x, y)) == pytest.approx(expected)


def test_masks_narrow_the_pairs():
    S, y = pk_batch(4, classes=3, per=3)
    same = y[:, None] == y[None, :]
    keep_neg = (~same) & (S > 0)
    got = histogram_loss(S, y, 11, neg_mask=keep_neg)
    pos = [S[i, j].item() for i in range(9) for j in range(9) if i != j and same[i, j]]
    assert float(got) == pytest.approx(loss_of(pos, S[keep_neg].tolist(), 11))


@pytest.mark.parametrize("labels", [[0, 0, 0], [0, 1, 2], [5]])
def test_no_positive_or_no_negative_pair_is_zero_with_zero_gradient(labels):
    y = torch.tensor(labels)
    S = torch.eye(len(labels), dtype=torch.float64).requires_grad_(True)
    value = histogram_loss(S, y)
    (g,) = torch.autograd.grad(value, S)
    assert float(value.detach()) == 0.0 and float(g.abs().sum()) == 0.0


@pytest.mark.parametrize(
    ("R", "message"),
    [
        (1, r"R must be an integer in \[2, 100000\] \(histogram nodes"),
        (0, r"R must be an integer in \[2, 100000\] \(histogram nodes"),
        (2.5, r"R must be an integer, got 2\.5 \(float\)"),
        (True, r"R must be an integer, got True \(bool\)"),
        ("101", r"R must be an integer, got '101' \(str\)"),
    ],
)
def test_bad_node_count_is_refused(R, message):
    with pytest.raises(ValueError, match=message):
        get_loss("histogram", R=R)


def test_similarities_outside_the_nodes_are_refused():
    S = torch.tensor([[1.0, 3.0], [3.0, 1.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"needs cosine similarities in \[-1, 1\]"):
        histogram_loss(S, torch.tensor([0, 0]))


def test_positive_mask_narrows_the_pairs_down_to_a_single_one():
    """A miner's positive mask: the loss of the kept pairs; one kept pair is a whole histogram
    (its mass sums to 1, Eq. 4)."""
    S, y = pk_batch(4, classes=3, per=3)
    same = y[:, None] == y[None, :]
    eye = torch.eye(9, dtype=torch.bool)
    for keep in ((S < 0.3) & same & ~eye, torch.zeros(9, 9, dtype=torch.bool)):
        if not keep.any():
            keep[0, 1] = True  # the one kept pair
        pos = S[keep].tolist()
        neg = [S[i, j].item() for i in range(9) for j in range(9) if not same[i, j]]
        got = histogram_loss(S, y, 11, pos_mask=keep)
        assert float(got) == pytest.approx(loss_of(pos, neg, 11), rel=1e-12)
        h_pos, _ = histograms(S, y, 11, pos_mask=keep)
        assert float(h_pos.sum()) == pytest.approx(1.0, rel=1e-12)


def test_rounding_slack_in_bfloat16_and_the_message():
    """bf16 rounds a cosine of 1 up to 1 + 2^-7: two of its steps above 1 (1.015625) are
    rounding, three (1.0234375) are not; 1.5 never is. The message names what to pass."""
    y = torch.tensor([0, 0])
    ok = torch.tensor([[1.0, 1.015625], [1.015625, 1.0]], dtype=torch.bfloat16)
    assert float(histogram_loss(ok, y, 11)) == 0.0  # no negative pair: 0, no error
    message = (
        r"^the histogram loss needs cosine similarities in \[-1, 1\]; a pair has {} in absolute "
        r"value\. Pass the similarities of L2-normalised embeddings "
        r"\(HistogramLoss\(\)\(embeddings, labels\) normalises them\)\.$"
    )
    for value, shown in ((1.0234375, r"1\.023"), (1.5, r"1\.5")):
        S = torch.tensor([[1.0, value], [value, 1.0]], dtype=torch.bfloat16)
        with pytest.raises(ValueError, match=message.format(shown)):
            histogram_loss(S, y, 11)

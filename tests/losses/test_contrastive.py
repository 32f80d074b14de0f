"""Contrastive loss (Wang et al. 2019, Eq. 4) and its distance forms (Liu et al., Eq. 11, 35, 36).

Implementation: :mod:`dmlbook.losses.contrastive`; chapter ``book/03_contrastive.ipynb``.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import (
    FAST,
    batches,
    grad_of,
    masks,
    pk_batch,
    random_narrowing,
)

from dmlbook.core.pairs import resolve_masks
from dmlbook.losses import (
    ContrastiveLoss,
    contrastive_distance_loss,
    contrastive_loss,
)
from dmlbook.reference.classic import (
    contrastive_distance_loss_reference as ref_contrastive_distance,
)


def brute_force(S, labels, margin):
    total, count = 0.0, 0
    for i in range(len(labels)):
        for j in range(len(labels)):
            if i == j:
                continue
            count += 1
            if labels[i] == labels[j]:
                total += -float(S[i, j])
            else:
                total += max(float(S[i, j]) - margin, 0.0)
    return total / max(count, 1)


def test_matches_equation_4_pair_by_pair():
    g = torch.Generator().manual_seed(1)
    S = torch.rand(6, 6, generator=g, dtype=torch.float64) * 2 - 1
    S = (S + S.T) / 2
    labels = torch.tensor([0, 0, 1, 1, 2, 0])
    for margin in (-0.2, 0.0, 0.4):
        got = float(contrastive_loss(S, labels, margin))
        assert got == pytest.approx(brute_force(S, labels.tolist(), margin), abs=1e-12)


def test_masks_only_narrow_the_label_masks():
    S = torch.full((3, 3), 0.9)
    labels = torch.tensor([0, 0, 1])
    everything = torch.ones(3, 3, dtype=torch.bool)
    assert contrastive_loss(S, labels, 0.5, pos_mask=everything, neg_mask=everything) == (
        contrastive_loss(S, labels, 0.5)
    )
    with pytest.raises(ValueError, match="bool tensor of shape"):
        contrastive_loss(S, labels, 0.5, pos_mask=torch.ones(2, 2, dtype=torch.bool))


def test_single_sample_gives_zero_with_defined_gradient():
    x = torch.randn(1, 4, requires_grad=True)
    loss = ContrastiveLoss()(x, torch.tensor([3]))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))


def test_module_checks_inputs():
    with pytest.raises(ValueError, match="one label per embedding"):
        ContrastiveLoss()(torch.randn(4, 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"margin must be a finite number in \(-1, 1\)"):
        ContrastiveLoss(margin=2.0)


@FAST
@given(batches(), st.sampled_from(["hinge", "squared_hinge", "squared_distance"]))
def test_contrastive_distance_matches_loops(batch, variant):
    S, y = batch
    m1, m2 = (0.1, 0.9) if variant != "squared_distance" else (0.05, 1.5)
    got = contrastive_distance_loss(S, y, m1, m2, variant=variant)
    want = ref_contrastive_distance(S.tolist(), y.tolist(), m1, m2, variant)
    assert float(got) == pytest.approx(want, abs=1e-7)


def test_contrastive_distance_weight_is_one_over_distance():
    S, y = pk_batch(5)
    g = grad_of(lambda s: contrastive_distance_loss(s, y, 0.0, 1.2, reduction="sum"), S)
    pos, neg = masks(y)
    D = (2 - 2 * S).sqrt()
    want_neg = torch.where(neg & (D < 1.2), 1 / D, torch.zeros_like(S))
    torch.testing.assert_close(g[neg], want_neg[neg], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[pos], -1 / D[pos], rtol=1e-10, atol=1e-12)


def _contrastive_reference(S, y, margin, pos, neg):
    """Wang et al. Eq. 4 over the kept ordered pairs ``i != j``, mean (a loop)."""
    terms = [-S[i][j] if pos[i][j] else max(S[i][j] - margin, 0.0)
             for i in range(len(y)) for j in range(len(y)) if pos[i][j] or neg[i][j]]  # fmt: skip
    return sum(terms) / len(terms) if terms else 0.0


@FAST
@given(batches(), st.floats(-1.0, 1.0, exclude_min=True, exclude_max=True), st.booleans())
def test_eq4_matches_the_loop_with_and_without_masks(batch, margin, masked):
    S, y = batch
    B = len(y)
    kw = random_narrowing(B) if masked else {}
    pos, neg = resolve_masks(y, kw.get("pos_mask"), kw.get("neg_mask"), (B, B))
    want = _contrastive_reference(S.tolist(), y.tolist(), margin, pos.tolist(), neg.tolist())
    assert float(contrastive_loss(S, y, margin, **kw)) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_defaults_are_the_documented_margins_and_variant():
    """Called without them: Eq. 4 with lambda = 0.5, Eq. 11 with m1 = 0, m2 = 1 (mean)."""
    S, y = pk_batch(3)
    D = (2 - 2 * S).sqrt()
    pos, neg = masks(y)
    assert bool((D[pos] > 0.05).all()) and bool((D[neg] < 1.0).any())  # every default matters
    assert float(contrastive_loss(S, y)) == pytest.approx(
        brute_force(S, y.tolist(), 0.5), abs=1e-12
    )
    want = ref_contrastive_distance(S.tolist(), y.tolist(), 0.0, 1.0, "hinge")
    assert float(contrastive_distance_loss(S, y)) == pytest.approx(want, abs=1e-12)


def test_equal_margins_are_refused_naming_both():
    S, y = pk_batch(3)
    message = r"^margins are distances and need 0 <= pos_margin < neg_margin, got pos_margin=0.5, "
    with pytest.raises(ValueError, match=message + "neg_margin=0.5"):
        contrastive_distance_loss(S, y, 0.5, 0.5)

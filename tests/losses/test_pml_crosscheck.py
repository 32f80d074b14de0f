"""dmlbook against pytorch-metric-learning (PML), with the parameter mapping written down.

Every comparison is in float64, on values *and* on gradients with respect to the raw
(pre-normalisation) features: PML normalises inside its distance objects and dmlbook's modules
normalise before forming ``S``, so both differentiate through the same normalisation.

Mappings (PML left, dmlbook right; ``D = sqrt(2 - 2 S)`` of the normalised embeddings, which is
what PML's ``LpDistance(normalize_embeddings=True)`` computes):

* ``ContrastiveLoss(pos_margin=m1, neg_margin=m2)`` = the ``"hinge"`` terms of
  ``contrastive_distance_loss(S, y, m1, m2, reduction="none")`` (Liu et al. Eq. 11), reduced the
  PML way (``AvgNonZeroReducer``): mean of the non-zero positive terms + mean of the non-zero
  negative terms. With ``CosineSimilarity`` and ``SumReducer``, PML's ``relu(1 - S)`` positive
  term is Wang et al.'s Eq. 4 ``-S`` plus 1, so its sum is ``n_pairs * contrastive_loss + |P|``.
* ``TripletMarginLoss(margin=m)`` = ``triplet_loss(S, y, m, form="distance",
  reduction="mean_nonzero")`` (default ``AvgNonZeroReducer``) or ``reduction="mean"``
  (``MeanReducer``). ``BatchHardMiner`` = ``mining.batch_hard_masks``;
  ``TripletMarginMiner(m, type)`` = ``mining.margin_triplet_mask(..., form="distance")`` with
  PML's ``"all"`` called ``"violating"``.
* ``LiftedStructureLoss(neg_margin=mn, pos_margin=mp)`` = ``lifted_structure_loss(S, y,
  margin=mn - mp)`` (Song et al.: joint log-sum-exp over both ends' negatives, squared hinge / 2,
  mean over ordered positive pairs).
* ``GeneralizedLiftedStructureLoss(neg_margin=mn, pos_margin=mp)`` = ``lifted_loss(S, y,
  margin=mn - mp, form="distance")`` (Wang et al. Eq. 6 on distances) with two differences:
  PML divides by all ``B`` anchors (``MeanReducer``) where dmlbook averages over the anchors that
  have both a positive and a negative, and PML takes an empty log-sum-exp as 0 where dmlbook
  takes it as ``log 0 = -inf`` (hinge off). An anchor with no positive therefore adds
  ``relu(logsumexp_N(mn - D))`` in PML and nothing in dmlbook; the test adds that term.
* ``NPairsLoss()`` = ``npair_loss(S, y)`` (Sohn's form on cosine similarities, one pair per class
  from :func:`dmlbook.mining.npair_masks`, mean over the pairs).
* Binomial deviance, LiftedStruct* and BinLifted: PML has no such loss, so there is nothing to
  compare; they are checked against loops and against Wang et al.'s weight formulas (Eq. 10,
  Eq. 16, supplement Eq. 10) in ``tests/losses/`` (one module per loss module).

Agreement: the fixture values of ``../shared/notes/reference-implementations.md`` to 1e-12
relative; values and gradients on random batches to 1e-9 relative (+1e-11 absolute for the
gradients), float64.
"""

from __future__ import annotations

import math

import pytest
import torch
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners
from pytorch_metric_learning import reducers as pml_reducers

from dmlbook.core.pairs import dissimilarity, prepare_batch
from dmlbook.core.similarity import pair_masks
from dmlbook.losses import (
    ContrastiveDistanceLoss,
    ContrastiveLoss,
    LiftedLoss,
    LiftedStructureLoss,
    NPairLoss,
    TripletLoss,
    contrastive_distance_loss,
    contrastive_loss,
    lifted_loss,
    triplet_loss,
)
from dmlbook.mining import batch_hard_masks, margin_triplet_mask

REL = 1e-9
GRAD_ATOL = 1e-11


def fixture():
    """PML's own test fixture: (2 cos a, 0.5 sin a), a = 0, 20, ..., 80 degrees; labels 0,0,1,1,2."""
    a = torch.tensor([0.0, 20.0, 40.0, 60.0, 80.0], dtype=torch.float64) * math.pi / 180
    x = torch.stack([2 * torch.cos(a), 0.5 * torch.sin(a)], dim=1)
    return x, torch.tensor([0, 0, 1, 1, 2])


LABELINGS = {
    "pk": [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3],
    "singletons": [0, 0, 1, 1, 1, 2, 3, 3, 4, 5, 5, 6],
    "one_class_pair": [0, 0, 1, 2, 3, 4],
}


def random_batch(seed: int, labeling: str):
    y = torch.tensor(LABELINGS[labeling])
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(y), 6, generator=g, dtype=torch.float64)
    return x, y


def value_and_grad(loss_fn, x, y):
    x = x.detach().clone().requires_grad_(True)
    loss = loss_fn(x, y)
    (g,) = torch.autograd.grad(loss, x, allow_unused=True)
    return float(loss.detach()), torch.zeros_like(x) if g is None else g


def assert_same(ours, theirs, x, y):
    v1, g1 = value_and_grad(ours, x, y)
    v2, g2 = value_and_grad(theirs, x, y)
    assert v1 == pytest.approx(v2, rel=REL, abs=1e-12)
    torch.testing.assert_close(g1, g2, rtol=REL, atol=GRAD_ATOL)


CASES = [(seed, labeling) for seed in range(3) for labeling in LABELINGS]


# ------------------------------------------------------------------------- contrastive


def contrastive_pml_way(x, y, m1=0.0, m2=1.0):
    """dmlbook's Eq. 11 terms, reduced as PML's AvgNonZeroReducer does."""
    S, y = prepare_batch(x, y)
    per = contrastive_distance_loss(S, y, m1, m2, reduction="none")
    pos, neg = pair_masks(y)
    total = torch.zeros((), dtype=S.dtype)
    for mask in (pos, neg):
        terms = per[mask]
        nonzero = terms > 0
        if nonzero.any():
            total = total + terms[nonzero].mean()
    return total


def test_contrastive_fixture():
    x, y = fixture()
    assert float(contrastive_pml_way(x, y)) == pytest.approx(0.6364218784759629, rel=1e-12)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
@pytest.mark.parametrize(("m1", "m2"), [(0.0, 1.0), (0.3, 1.2)])
def test_contrastive_random(seed, labeling, m1, m2):
    x, y = random_batch(seed, labeling)
    pml = pml_losses.ContrastiveLoss(pos_margin=m1, neg_margin=m2)
    assert_same(lambda a, b: contrastive_pml_way(a, b, m1, m2), pml, x, y)


def test_contrastive_module_mean_differs_from_pml_only_by_the_reducer():
    x, y = random_batch(0, "pk")
    S, _ = prepare_batch(x, y)
    mean = ContrastiveDistanceLoss(0.0, 1.0)(x, y)
    per = contrastive_distance_loss(S, y, reduction="none")
    assert float(mean) == pytest.approx(float(per.sum() / (len(y) * (len(y) - 1))), rel=1e-12)
    assert float(mean) != pytest.approx(float(pml_losses.ContrastiveLoss()(x, y)), rel=1e-3)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
def test_contrastive_eq4_through_pml_cosine_sum(seed, labeling):
    """PML with cosine similarity and a sum: relu(1 - S) on positives = Eq. 4's -S plus 1."""
    x, y = random_batch(seed, labeling)
    lam = 0.3
    pml = pml_losses.ContrastiveLoss(
        pos_margin=1.0,
        neg_margin=lam,
        distance=pml_distances.CosineSimilarity(),
        reducer=pml_reducers.SumReducer(),
    )
    pos, neg = pair_masks(y)
    n_pairs, n_pos = int((pos | neg).sum()), int(pos.sum())

    def ours(a, b):
        return n_pairs * ContrastiveLoss(lam)(a, b) + n_pos

    assert_same(ours, pml, x, y)
    S, _ = prepare_batch(x, y)
    assert float(contrastive_loss(S, y, lam)) == pytest.approx(
        (float(pml(x, y)) - n_pos) / n_pairs, rel=1e-12
    )


# ----------------------------------------------------------------------------- triplet


def test_triplet_fixture():
    x, y = fixture()
    S, _ = prepare_batch(x, y)
    nonzero = triplet_loss(S, y, 0.2, form="distance", reduction="mean_nonzero")
    mean = triplet_loss(S, y, 0.2, form="distance", reduction="mean")
    assert float(nonzero) == pytest.approx(0.16493327089843018, rel=1e-12)
    assert float(mean) == pytest.approx(0.06872219620767925, rel=1e-12)
    pos, neg = batch_hard_masks(S, y)
    hard = triplet_loss(
        S, y, 0.2, form="distance", reduction="mean_nonzero", pos_mask=pos, neg_mask=neg
    )
    assert float(hard) == pytest.approx(0.1573890174838467, rel=1e-12)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
@pytest.mark.parametrize("reduction", ["mean_nonzero", "mean"])
def test_triplet_all_triplets_random(seed, labeling, reduction):
    x, y = random_batch(seed, labeling)
    reducer = (
        pml_reducers.AvgNonZeroReducer()
        if reduction == "mean_nonzero"
        else pml_reducers.MeanReducer()
    )
    pml = pml_losses.TripletMarginLoss(margin=0.3, reducer=reducer)
    ours = TripletLoss(0.3, form="distance", reduction=reduction)
    assert_same(ours, pml, x, y)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
def test_triplet_batch_hard_random(seed, labeling):
    x, y = random_batch(seed, labeling)
    loss, miner = pml_losses.TripletMarginLoss(margin=0.3), pml_miners.BatchHardMiner()

    def pml(a, b):
        return loss(a, b, miner(a, b))

    S, yy = prepare_batch(x, y)
    pos, neg = batch_hard_masks(S, yy)
    a, p, n = miner(x, y)
    assert sorted(zip(a.tolist(), p.tolist(), strict=True)) == sorted(
        map(tuple, pos.nonzero().tolist())
    )
    assert sorted(zip(a.tolist(), n.tolist(), strict=True)) == sorted(
        map(tuple, neg.nonzero().tolist())
    )
    ours = TripletLoss(0.3, form="distance", mining="batch_hard", reduction="mean_nonzero")
    assert_same(ours, pml, x, y)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
@pytest.mark.parametrize(
    ("pml_type", "kind"), [("semihard", "semihard"), ("all", "violating"), ("hard", "hard")]
)
def test_triplet_margin_miner_random(seed, labeling, pml_type, kind):
    x, y = random_batch(seed, labeling)
    m = 0.3
    loss, miner = pml_losses.TripletMarginLoss(margin=m), pml_miners.TripletMarginMiner(m, pml_type)

    def pml(a, b):
        return loss(a, b, miner(a, b))

    def ours(a, b):
        S, yy = prepare_batch(a, b)
        T = margin_triplet_mask(S, yy, m, kind, form="distance")
        return triplet_loss(S, yy, m, form="distance", reduction="mean_nonzero", triplet_mask=T)

    S, yy = prepare_batch(x, y)
    T = margin_triplet_mask(S, yy, m, kind, form="distance")
    assert sorted(zip(*(t.tolist() for t in miner(x, y)), strict=True)) == sorted(
        map(tuple, T.nonzero().tolist())
    )
    if pml_type == "semihard":
        assert TripletLoss(m, form="distance", mining="semihard", reduction="mean_nonzero")(
            x, y
        ) == (pytest.approx(float(pml(x, y)), rel=REL))
    assert_same(ours, pml, x, y)


# ------------------------------------------------------------------------------ lifted


@pytest.mark.parametrize(
    ("neg_margin", "want"), [(0.5, 2.091247760159201), (1.0, 3.2379395060250564)]
)
def test_lifted_structure_fixture(neg_margin, want):
    x, y = fixture()
    assert float(LiftedStructureLoss(neg_margin)(x, y)) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
@pytest.mark.parametrize(("mn", "mp"), [(1.0, 0.0), (0.7, 0.2)])
def test_lifted_structure_random(seed, labeling, mn, mp):
    x, y = random_batch(seed, labeling)
    pml = pml_losses.LiftedStructureLoss(neg_margin=mn, pos_margin=mp)
    assert_same(LiftedStructureLoss(mn - mp), pml, x, y)


def generalized_lifted_pml_way(x, y, mn, mp):
    """dmlbook's Eq. 6 (distance form) with PML's conventions: divide by B, and an anchor without
    positives adds relu(logsumexp_N(mn - D)) (PML's empty log-sum-exp is 0, not -inf)."""
    S, y = prepare_batch(x, y)
    per = lifted_loss(S, y, mn - mp, form="distance", reduction="none")
    D = dissimilarity(S, "distance")
    pos, neg = pair_masks(y)
    no_pos = ~pos.any(1) & neg.any(1)
    extra = [torch.relu(torch.logsumexp(mn - D[i][neg[i]], 0)) for i in no_pos.nonzero().flatten()]
    return (per.sum() + sum(extra, torch.zeros((), dtype=S.dtype))) / len(y)


def test_generalized_lifted_fixture():
    x, y = fixture()  # anchor 4 is a singleton: the PML-only term is needed
    assert float(generalized_lifted_pml_way(x, y, 0.5, 0.0)) == pytest.approx(
        1.3069794139109263, rel=1e-12
    )
    S, yy = prepare_batch(x, y)
    # dmlbook's own mean is over the 4 anchors that have both sets
    per = lifted_loss(S, yy, 0.5, form="distance", reduction="none")
    assert float(LiftedLoss(0.5, form="distance")(x, y)) == pytest.approx(float(per[:4].mean()))


@pytest.mark.parametrize(("seed", "labeling"), CASES)
@pytest.mark.parametrize(("mn", "mp"), [(1.0, 0.0), (0.5, 0.2)])
def test_generalized_lifted_random(seed, labeling, mn, mp):
    x, y = random_batch(seed, labeling)
    pml = pml_losses.GeneralizedLiftedStructureLoss(neg_margin=mn, pos_margin=mp)
    assert_same(lambda a, b: generalized_lifted_pml_way(a, b, mn, mp), pml, x, y)
    if labeling == "pk":  # every anchor has both sets: the plain module agrees as it is
        assert_same(LiftedLoss(mn - mp, form="distance"), pml, x, y)


# ------------------------------------------------------------------------------ N-pair


def test_npair_fixture():
    x, y = fixture()
    want = float(pml_losses.NPairsLoss()(x, y))
    assert float(NPairLoss()(x, y)) == pytest.approx(want, rel=1e-12)
    S, _ = prepare_batch(x, y)  # pairs (0, 1) and (2, 3): log(1 + e^{S_03 - S_01}), ...
    by_hand = (
        math.log1p(math.exp(S[0, 3] - S[0, 1])) + math.log1p(math.exp(S[2, 1] - S[2, 3]))
    ) / 2
    assert want == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize(("seed", "labeling"), CASES)
def test_npair_random(seed, labeling):
    x, y = random_batch(seed, labeling)
    assert_same(NPairLoss(), pml_losses.NPairsLoss(), x, y)

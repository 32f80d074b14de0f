"""The classic pair-based losses against pair-by-pair loops, their GPW weights against the
papers' closed forms, and their behaviour at the edges (no positives, no negatives, one class,
one sample, extreme similarities in float32)."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings

from dmlbook.losses import (
    BinLiftedLoss,
    BinomialDevianceLoss,
    ContrastiveDistanceLoss,
    LiftedLoss,
    LiftedStarLoss,
    LiftedStructureLoss,
    NPairLoss,
    PairLoss,
    TripletLoss,
    available_losses,
    binlifted_loss,
    binomial_deviance_loss,
    contrastive_distance_loss,
    contrastive_loss,
    get_loss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
    loss_parameters,
    npair_loss,
    register_loss,
    triplet_loss,
)
from dmlbook.losses import registry as loss_registry
from dmlbook.losses.base import dissimilarity, masked_logsumexp, safe_distance
from dmlbook.similarity import cosine_similarity

FAST = settings(max_examples=30, deadline=None)

# ----------------------------------------------------------------------------- strategies


@st.composite
def batches(draw, max_b: int = 7, n_classes: int = 3, symmetric: bool = True):
    """A label vector (singletons, single class and B = 1 included) and a similarity matrix."""
    B = draw(st.integers(1, max_b))
    labels = draw(st.lists(st.integers(0, n_classes - 1), min_size=B, max_size=B))
    vals = draw(
        st.lists(
            st.one_of(st.floats(-1.0, 1.0), st.sampled_from([-1.0, 1.0, 0.0])),
            min_size=B * B,
            max_size=B * B,
        )
    )
    S = torch.tensor(vals, dtype=torch.float64).reshape(B, B)
    if symmetric:
        S = (S + S.T) / 2
        S.fill_diagonal_(1.0)
    return S, torch.tensor(labels)


def dist(s: float, form: str) -> float:
    if form == "similarity":
        return -s
    if form == "squared_distance":
        return 2 - 2 * s
    return math.sqrt(max(2 - 2 * s, 0.0))


def lse(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def sets(labels: list[int], i: int) -> tuple[list[int], list[int]]:
    P = [k for k in range(len(labels)) if k != i and labels[k] == labels[i]]
    N = [k for k in range(len(labels)) if labels[k] != labels[i]]
    return P, N


# ------------------------------------------------------------------- loop references


def ref_triplet(S, y, margin, form, reduction):
    terms = []
    for a in range(len(y)):
        P, N = sets(y, a)
        for p in P:
            for n in N:
                terms.append(max(dist(S[a][p], form) - dist(S[a][n], form) + margin, 0.0))
    if reduction == "sum":
        return sum(terms)
    if reduction == "mean_nonzero":
        terms = [t for t in terms if t > 0]
    return sum(terms) / len(terms) if terms else 0.0


def ref_lifted(S, y, margin, form):
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if P and N:
            a = lse([dist(S[i][k], form) for k in P]) + lse([-dist(S[i][k], form) for k in N])
            terms.append(max(a + margin, 0.0))
    return sum(terms) / len(terms) if terms else 0.0


def ref_lifted_structure(S, y, margin, form, squared, joint):
    terms = []
    for i in range(len(y)):
        P, Ni = sets(y, i)
        for j in P:
            Nj = sets(y, j)[1]
            ti = [margin - dist(S[i][k], form) for k in Ni]
            tj = [margin - dist(S[j][k], form) for k in Nj]
            if joint:
                if not (ti or tj):
                    continue
                J = dist(S[i][j], form) + lse(ti + tj)
            else:
                if not (ti and tj):
                    continue
                J = dist(S[i][j], form) + lse(ti) + lse(tj)
            h = max(J, 0.0)
            terms.append(h * h / 2 if squared else h)
    return sum(terms) / len(terms) if terms else 0.0


def softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def ref_binomial(S, y, alpha, beta, lam):
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not (P or N):
            continue
        t = 0.0
        if P:
            t += sum(softplus(alpha * (lam - S[i][k])) for k in P) / len(P)
        if N:
            t += sum(softplus(beta * (S[i][k] - lam)) for k in N) / len(N)
        terms.append(t)
    return sum(terms) / len(terms) if terms else 0.0


def ref_lifted_star(S, y, alpha, beta):
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not (P or N):
            continue
        t = 0.0
        if P:
            t += lse([-alpha * S[i][k] for k in P]) / alpha
        if N:
            t += lse([beta * S[i][k] for k in N]) / beta
        terms.append(t)
    return sum(terms) / len(terms) if terms else 0.0


def ref_binlifted(S, y, alpha, beta, lam):
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not (P or N):
            continue
        t = 0.0
        if N:
            t += sum(softplus(beta * (S[i][k] - lam)) for k in N) / (2 * beta)
            t += lse([beta * S[i][k] for k in N]) / (2 * beta)
        if P:
            t += sum(softplus(alpha * (lam - S[i][k])) for k in P) / (2 * alpha)
            t += lse([-alpha * S[i][k] for k in P]) / (2 * alpha)
        terms.append(t)
    return sum(terms) / len(terms) if terms else 0.0


def ref_npair_pairs(y):
    """Sohn's construction by a loop: first two samples of each class."""
    members: dict[int, list[int]] = {}
    for idx, c in enumerate(y):
        members.setdefault(c, []).append(idx)
    return [(m[0], m[1]) for m in members.values() if len(m) >= 2]


def ref_npair(S, y, form, sampling):
    terms = []
    if sampling == "npair":
        pairs = ref_npair_pairs(y)
        for a, p in pairs:
            negs = [q for (b, q) in pairs if y[b] != y[a]]
            x = [dist(S[a][p], form) - dist(S[a][q], form) for q in negs]
            terms.append(softplus(lse(x)) if x else 0.0)
    else:
        for i in range(len(y)):
            P, N = sets(y, i)
            for j in P:
                x = [dist(S[i][j], form) - dist(S[i][k], form) for k in N]
                terms.append(softplus(lse(x)) if x else 0.0)
    return sum(terms) / len(terms) if terms else 0.0


def ref_contrastive_distance(S, y, m1, m2, variant):
    terms = []
    for i in range(len(y)):
        for j in range(len(y)):
            if i == j:
                continue
            d = dist(S[i][j], "squared_distance" if variant == "squared_distance" else "distance")
            t = max(d - m1, 0.0) if y[i] == y[j] else max(m2 - d, 0.0)
            terms.append(t * t if variant == "squared_hinge" else t)
    return sum(terms) / len(terms) if terms else 0.0


# ------------------------------------------------------------------ against the loops

FORMS = ("similarity", "distance", "squared_distance")


@FAST
@given(batches(), st.sampled_from(FORMS), st.sampled_from(["mean", "mean_nonzero", "sum"]))
def test_triplet_matches_loops(batch, form, reduction):
    S, y = batch
    got = triplet_loss(S, y, 0.3, form=form, reduction=reduction)
    want = ref_triplet(S.tolist(), y.tolist(), 0.3, form, reduction)
    assert float(got) == pytest.approx(want, abs=1e-7)


@FAST
@given(batches(), st.sampled_from(FORMS), st.floats(-0.5, 1.5))
def test_lifted_eq6_matches_loops(batch, form, margin):
    S, y = batch
    got = lifted_loss(S, y, margin, form=form)
    assert float(got) == pytest.approx(ref_lifted(S.tolist(), y.tolist(), margin, form), abs=1e-7)


@FAST
@given(batches(), st.sampled_from(FORMS), st.booleans(), st.booleans())
def test_lifted_structure_matches_loops(batch, form, squared, joint):
    S, y = batch
    got = lifted_structure_loss(S, y, 0.8, form=form, squared_hinge=squared, joint_negatives=joint)
    want = ref_lifted_structure(S.tolist(), y.tolist(), 0.8, form, squared, joint)
    assert float(got) == pytest.approx(want, abs=1e-7)


@FAST
@given(batches(), st.floats(0.5, 5.0), st.floats(1.0, 60.0), st.floats(-0.5, 1.0))
def test_binomial_lifted_star_binlifted_match_loops(batch, alpha, beta, lam):
    S, y = batch
    Sl, yl = S.tolist(), y.tolist()
    assert float(binomial_deviance_loss(S, y, alpha, beta, lam)) == pytest.approx(
        ref_binomial(Sl, yl, alpha, beta, lam), rel=1e-9, abs=1e-9
    )
    assert float(lifted_star_loss(S, y, alpha, beta)) == pytest.approx(
        ref_lifted_star(Sl, yl, alpha, beta), rel=1e-9, abs=1e-9
    )
    assert float(binlifted_loss(S, y, alpha, beta, lam)) == pytest.approx(
        ref_binlifted(Sl, yl, alpha, beta, lam), rel=1e-9, abs=1e-9
    )


@FAST
@given(batches(), st.sampled_from(FORMS), st.sampled_from(["npair", "all"]))
def test_npair_matches_loops(batch, form, sampling):
    S, y = batch
    got = npair_loss(S, y, form=form, sampling=sampling)
    assert float(got) == pytest.approx(ref_npair(S.tolist(), y.tolist(), form, sampling), abs=1e-7)


@FAST
@given(batches(), st.sampled_from(["hinge", "squared_hinge", "squared_distance"]))
def test_contrastive_distance_matches_loops(batch, variant):
    S, y = batch
    m1, m2 = (0.1, 0.9) if variant != "squared_distance" else (0.05, 1.5)
    got = contrastive_distance_loss(S, y, m1, m2, variant=variant)
    want = ref_contrastive_distance(S.tolist(), y.tolist(), m1, m2, variant)
    assert float(got) == pytest.approx(want, abs=1e-7)


def test_squared_distance_triplet_is_similarity_triplet_with_half_margin():
    """Liu et al. Eq. 37 on unit vectors = 2 x Wang et al. Eq. 5 with margin m / 2."""
    g = torch.Generator().manual_seed(0)
    S = cosine_similarity(torch.randn(9, 4, generator=g, dtype=torch.float64))
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    a = triplet_loss(S, y, 0.4, form="squared_distance", reduction="sum")
    b = triplet_loss(S, y, 0.2, form="similarity", reduction="sum")
    assert float(a) == pytest.approx(2 * float(b), rel=1e-12)


# --------------------------------------------------------- GPW weights = closed forms


def grad_of(fn, S):
    S = S.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(S), S)
    return g


def pk_batch(seed: int = 0, classes: int = 3, per: int = 3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(classes * per, 5, generator=g, dtype=torch.float64)
    y = torch.arange(classes).repeat_interleave(per)
    return cosine_similarity(x), y


def masks(y):
    same = y[:, None] == y[None, :]
    eye = torch.eye(len(y), dtype=torch.bool)
    return same & ~eye, ~same


def test_binomial_weights_are_eq10():
    S, y = pk_batch()
    a, b, lam = 2.0, 50.0, 0.5
    g = grad_of(lambda s: binomial_deviance_loss(s, y, a, b, lam, reduction="sum"), S)
    pos, neg = masks(y)
    P, N = pos.sum(1, keepdim=True), neg.sum(1, keepdim=True)
    w_pos = a * torch.sigmoid(a * (lam - S)) / P
    w_neg = b * torch.sigmoid(b * (S - lam)) / N
    torch.testing.assert_close(g[pos], -w_pos[pos], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[neg], w_neg[neg], rtol=1e-10, atol=1e-12)
    # "mean" divides every weight by the number of anchors.
    gm = grad_of(lambda s: binomial_deviance_loss(s, y, a, b, lam), S)
    torch.testing.assert_close(gm, g / len(y), rtol=1e-10, atol=1e-14)


def test_lifted_weights_are_eq7_and_eq8():
    S, y = pk_batch(1)
    g = grad_of(lambda s: lifted_loss(s, y, 1.0, reduction="sum"), S)
    pos, neg = masks(y)
    assert bool((lifted_loss(S, y, 1.0, reduction="none") > 0).all())  # every hinge is on
    e_neg = torch.where(neg, S.exp(), torch.zeros_like(S))
    e_pos = torch.where(pos, (-S).exp(), torch.zeros_like(S))
    w8 = e_neg / e_neg.sum(1, keepdim=True)  # Eq. 8
    w7 = e_pos / e_pos.sum(1, keepdim=True)  # Eq. 7
    torch.testing.assert_close(g[neg], w8[neg], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[pos], -w7[pos], rtol=1e-10, atol=1e-12)


def test_lifted_hinge_can_switch_off_only_for_tiny_anchors():
    """On cosines, lambda = 1 keeps the hinge of Eq. 6 on whenever |P_i| |N_i| >= 3."""
    y = torch.tensor([0, 0, 1])
    S = torch.tensor([[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]], dtype=torch.float64)
    assert float(lifted_loss(S, y, 1.0)) == 0.0  # 1 - 1 + (-1) < 0: one pos, one neg, off
    y3 = torch.tensor([0, 0, 1, 2, 2])
    S3 = torch.full((5, 5), -1.0, dtype=torch.float64)
    S3[0, 1] = S3[1, 0] = 1.0
    S3[3, 4] = S3[4, 3] = 1.0
    S3.fill_diagonal_(1.0)
    per = lifted_loss(S3, y3, 1.0, reduction="none")
    assert bool((per[[0, 1, 3, 4]] > 0).all())  # |P| |N| = 3: still on at the most separated S


def test_lifted_star_and_binlifted_weights():
    S, y = pk_batch(2)
    a, b, lam = 2.0, 50.0, 0.5
    pos, neg = masks(y)
    zero = torch.zeros_like(S)
    soft_neg = torch.where(neg, torch.softmax(torch.where(neg, b * S, -math.inf), 1), zero)
    soft_pos = torch.where(pos, torch.softmax(torch.where(pos, -a * S, -math.inf), 1), zero)
    g = grad_of(lambda s: lifted_star_loss(s, y, a, b, reduction="sum"), S)
    torch.testing.assert_close(g[neg], soft_neg[neg], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[pos], -soft_pos[pos], rtol=1e-10, atol=1e-12)
    g = grad_of(lambda s: binlifted_loss(s, y, a, b, lam, reduction="sum"), S)
    supp_eq10 = 0.5 * (torch.sigmoid(b * (S - lam)) + soft_neg)
    torch.testing.assert_close(g[neg], supp_eq10[neg], rtol=1e-10, atol=1e-12)
    analogue = 0.5 * (torch.sigmoid(a * (lam - S)) + soft_pos)
    torch.testing.assert_close(g[pos], -analogue[pos], rtol=1e-10, atol=1e-12)


def test_npair_negative_weight_has_the_positive_in_its_denominator():
    S, y = pk_batch(3, classes=4, per=2)  # pairs (0,1), (2,3), (4,5), (6,7)
    g = grad_of(lambda s: npair_loss(s, y, reduction="sum"), S)
    a, p, negs = 0, 1, [3, 5, 7]
    denom = S[a, p].exp() + S[a, negs].exp().sum()
    torch.testing.assert_close(g[a, negs], S[a, negs].exp() / denom, rtol=1e-10, atol=1e-12)
    assert float(g[a, p]) == pytest.approx(-float(S[a, negs].exp().sum() / denom), rel=1e-10)
    # the anchors' own negatives that are not other classes' positives get no weight
    assert float(g[a, [2, 4, 6]].abs().sum()) == 0.0


def test_triplet_weight_counts_violated_triplets():
    S, y = pk_batch(4)
    lam = 0.2
    g = grad_of(lambda s: triplet_loss(s, y, lam, reduction="sum"), S)
    pos, neg = masks(y)
    viol = pos[:, :, None] & neg[:, None, :] & (S[:, None, :] - S[:, :, None] + lam > 0)
    torch.testing.assert_close(g, viol.sum(1).double() - viol.sum(2).double())


def test_contrastive_distance_weight_is_one_over_distance():
    S, y = pk_batch(5)
    g = grad_of(lambda s: contrastive_distance_loss(s, y, 0.0, 1.2, reduction="sum"), S)
    pos, neg = masks(y)
    D = (2 - 2 * S).sqrt()
    want_neg = torch.where(neg & (D < 1.2), 1 / D, torch.zeros_like(S))
    torch.testing.assert_close(g[neg], want_neg[neg], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g[pos], -1 / D[pos], rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------- every loss, generic checks

#: Every registered loss, with hyper-parameters that stress it (beta = 50 where it has one).
ALL_LOSSES = {
    "contrastive": {},
    "contrastive_distance": {"variant": "squared_hinge"},
    "triplet": {"form": "distance", "mining": "batch_hard"},
    "lifted": {},
    "lifted_structure": {},
    "lifted_star": {"beta": 50.0},
    "binomial": {"beta": 50.0},
    "binlifted": {"beta": 50.0},
    "npair": {"sampling": "all"},
}
VARIANTS = [
    ("triplet", {}),
    ("triplet", {"form": "squared_distance", "mining": "semihard", "reduction": "mean_nonzero"}),
    ("triplet", {"form": "distance"}),
    ("contrastive_distance", {}),
    ("contrastive_distance", {"variant": "squared_distance", "neg_margin": 2.0}),
    ("lifted", {"form": "distance"}),
    ("lifted_structure", {"form": "similarity", "joint_negatives": False}),
    ("npair", {}),
    ("npair", {"form": "distance"}),
    *ALL_LOSSES.items(),
]


def test_registry_covers_every_loss_here():
    assert set(ALL_LOSSES) <= set(available_losses())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fill", [1.0, -1.0, 0.0])
@pytest.mark.parametrize(("name", "hp"), VARIANTS)
def test_extreme_constant_similarities_stay_finite(name, hp, fill, dtype):
    fn = get_loss(name, **hp).loss_on_similarity
    for y in ([0, 0, 1, 1, 2], [0, 0, 0, 0], [0, 1, 2], [7]):
        S = torch.full((len(y), len(y)), fill, dtype=dtype, requires_grad=True)
        loss = fn(S, torch.tensor(y))
        loss.backward()
        assert torch.isfinite(loss) and bool(torch.isfinite(S.grad).all()), (name, hp, y)


@settings(max_examples=25, deadline=None)
@given(batches(max_b=8, symmetric=False), st.sampled_from(VARIANTS))
def test_float32_any_similarity_in_range_is_finite(batch, variant):
    """No inf/NaN in value or gradient, float32, beta = 50, any S in [-1, 1] (not even symmetric)."""
    S, y = batch
    name, hp = variant
    S = S.float().requires_grad_(True)
    loss = get_loss(name, **hp).loss_on_similarity(S, y)
    loss.backward()
    assert torch.isfinite(loss) and bool(torch.isfinite(S.grad).all())


@settings(max_examples=25, deadline=None)
@given(batches(max_b=8), st.sampled_from(VARIANTS))
def test_gpw_sign_convention_and_no_weight_off_pairs(batch, variant):
    """dL/dS <= 0 on positive pairs, >= 0 on negative pairs, 0 on the diagonal (Wang et al. Eq. 3)."""
    S, y = batch
    name, hp = variant
    g = grad_of(lambda s: get_loss(name, **hp).loss_on_similarity(s, y), S)
    pos, neg = masks(y)
    assert bool((g[pos] <= 1e-12).all()) and bool((g[neg] >= -1e-12).all())
    assert bool((g.diagonal() == 0).all())


# ----------------------------------------------------------------------- edge cases

NEED_BOTH = ["triplet", "lifted", "lifted_structure", "npair"]
HALVES = ["contrastive", "contrastive_distance", "binomial", "lifted_star", "binlifted"]


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_batch_of_one_is_zero_with_zero_gradient(name):
    x = torch.randn(1, 4, requires_grad=True)
    loss = get_loss(name, **ALL_LOSSES[name])(x, torch.tensor([3]))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))


@pytest.mark.parametrize("name", NEED_BOTH)
def test_single_class_batch_is_zero_for_losses_that_need_negatives(name):
    S = cosine_similarity(torch.randn(5, 3, dtype=torch.float64)).requires_grad_(True)
    loss = get_loss(name).loss_on_similarity(S, torch.zeros(5, dtype=torch.long))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(S.grad, torch.zeros_like(S))


@pytest.mark.parametrize("name", HALVES)
def test_single_class_batch_keeps_pulling_positives(name):
    S = cosine_similarity(torch.randn(5, 3, dtype=torch.float64)).requires_grad_(True)
    loss = get_loss(name).loss_on_similarity(S, torch.zeros(5, dtype=torch.long))
    loss.backward()
    off = ~torch.eye(5, dtype=torch.bool)
    assert torch.isfinite(loss)
    assert bool((S.grad[off] <= 0).all()) and float(S.grad.diagonal().abs().sum()) == 0.0


def test_anchor_without_positives_gets_no_weight_where_positives_are_needed():
    S, _ = pk_batch(6, classes=3, per=2)
    y = torch.tensor([0, 0, 1, 1, 2, 3])  # anchors 4 and 5 are singletons
    for name in NEED_BOTH:
        g = grad_of(lambda s, name=name: get_loss(name).loss_on_similarity(s, y), S)
        assert float(g[4:].abs().sum()) == 0.0, name
        assert float(g[:4].abs().sum()) > 0.0, name
    for name in ("binomial", "lifted_star", "binlifted", "contrastive"):
        hp = {"margin": -1.0} if name == "contrastive" else {}
        g = grad_of(lambda s, name=name, hp=hp: get_loss(name, **hp).loss_on_similarity(s, y), S)
        assert bool((g[4:, :4] > 0).all()), name  # singletons still push their negatives


def test_anchor_without_negatives_through_a_mask():
    S, y = pk_batch(7)
    neg_mask = torch.ones(9, 9, dtype=torch.bool)
    neg_mask[0] = False  # anchor 0 loses all its negatives
    for fn in (
        lambda s: lifted_loss(s, y, neg_mask=neg_mask),
        lambda s: triplet_loss(s, y, neg_mask=neg_mask),
    ):
        g = grad_of(fn, S)
        assert float(g[0].abs().sum()) == 0.0 and float(g[1:].abs().sum()) > 0
    g = grad_of(lambda s: binomial_deviance_loss(s, y, neg_mask=neg_mask), S)
    assert float(g[0, 3:].abs().sum()) == 0.0 and bool((g[0, 1:3] < 0).all())
    # Song's pairwise form: the pair (0, 1) still has anchor 1's negatives
    g = grad_of(lambda s: lifted_structure_loss(s, y, neg_mask=neg_mask), S)
    assert float(g[0, 3:].abs().sum()) == 0.0 and float(g[0, 1].abs()) > 0


def test_masks_only_narrow_and_are_checked():
    S, y = pk_batch(8)
    everything = torch.ones(9, 9, dtype=torch.bool)
    for fn in (
        triplet_loss,
        lifted_loss,
        lifted_structure_loss,
        npair_loss,
        binomial_deviance_loss,
    ):
        assert torch.equal(fn(S, y, pos_mask=everything, neg_mask=everything), fn(S, y))
        with pytest.raises(ValueError, match="bool tensor of shape"):
            fn(S, y, pos_mask=torch.ones(9, 9))


# ------------------------------------------------------------------ modules and inputs


@pytest.mark.parametrize(("name", "hp"), VARIANTS)
def test_module_normalises_and_calls_its_function(name, hp):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 4, generator=g, dtype=torch.float64) * 5
    y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    module = get_loss(name, **hp)
    assert isinstance(module, PairLoss)
    want = module.loss_on_similarity(cosine_similarity(x), y)
    assert float(module(x, y)) == pytest.approx(float(want), rel=1e-12, abs=1e-15)
    assert float(module(3 * x, y)) == pytest.approx(float(want), rel=1e-12, abs=1e-15)


# Each module and the pure function it must call, with settings away from every default.
PURE = {
    "contrastive": (contrastive_loss, {"margin": 0.3}),
    "contrastive_distance": (
        contrastive_distance_loss,
        {"pos_margin": 0.2, "neg_margin": 1.5, "variant": "squared_hinge", "reduction": "sum"},
    ),
    "lifted": (lifted_loss, {"margin": 0.7, "form": "distance", "reduction": "sum"}),
    "lifted_structure": (
        lifted_structure_loss,
        {
            "margin": 0.8,
            "form": "squared_distance",
            "squared_hinge": False,
            "joint_negatives": False,
            "reduction": "sum",
        },
    ),  # fmt: skip
    "lifted_star": (lifted_star_loss, {"alpha": 3.0, "beta": 20.0, "reduction": "sum"}),
    "binomial": (
        binomial_deviance_loss,
        {"alpha": 3.0, "beta": 20.0, "margin": 0.2, "reduction": "sum"},
    ),
    "binlifted": (binlifted_loss, {"alpha": 3.0, "beta": 20.0, "margin": 0.2, "reduction": "sum"}),
    "npair": (npair_loss, {"form": "distance", "sampling": "all", "reduction": "sum"}),
}


@pytest.mark.parametrize("name", sorted(PURE))
def test_module_passes_every_setting_to_its_function(name):
    fn, hp = PURE[name]
    assert set(hp) == set(loss_parameters(name)), "PURE must set every hyper-parameter"
    S, y = pk_batch()
    module = get_loss(name, **hp)
    assert torch.equal(module.loss_on_similarity(S, y), fn(S, y, **hp))
    assert not torch.equal(module.loss_on_similarity(S, y), get_loss(name).loss_on_similarity(S, y))
    shown = repr(module)
    assert all(f"{k}={v!r}" in shown for k, v in hp.items()), shown


def test_pair_loss_without_a_function_says_what_to_do():
    class Bare(PairLoss):
        pass

    with pytest.raises(NotImplementedError, match="must set loss_function or override"):
        Bare()(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]))


def test_module_forwards_miner_masks():
    x = torch.randn(6, 3, dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    none = torch.zeros(6, 6, dtype=torch.bool)
    for module in (LiftedLoss(), TripletLoss(), BinomialDevianceLoss(), ContrastiveDistanceLoss()):
        assert module(x, y, pos_mask=none, neg_mask=none).item() == 0.0


def test_bad_inputs_raise_clear_errors():
    S, y = pk_batch()
    with pytest.raises(ValueError, match="square"):
        triplet_loss(S[:, :4], y)
    with pytest.raises(ValueError, match="one label per row"):
        lifted_loss(S, y[:3])
    with pytest.raises(ValueError, match="NaN or infinite"):
        binomial_deviance_loss(S * float("nan"), y)
    with pytest.raises(TypeError, match="floating-point"):
        npair_loss(S.long(), y)
    with pytest.raises(ValueError, match="form must be one of"):
        triplet_loss(S, y, form="cosine")
    with pytest.raises(ValueError, match="reduction must be one of"):
        lifted_loss(S, y, reduction="avg")
    with pytest.raises(ValueError, match="alpha must be"):
        BinomialDevianceLoss(alpha=0)
    with pytest.raises(ValueError, match="beta must be"):
        LiftedStarLoss(beta=-1)
    with pytest.raises(ValueError, match="pos_margin < neg_margin"):
        ContrastiveDistanceLoss(pos_margin=1.0, neg_margin=0.5)
    with pytest.raises(ValueError, match="mining must be one of"):
        TripletLoss(mining="hardest")
    with pytest.raises(ValueError, match="sampling must be one of"):
        NPairLoss(sampling="random")
    with pytest.raises(ValueError, match="triplet_mask"):
        triplet_loss(S, y, triplet_mask=torch.ones(9, 9, dtype=torch.bool))
    assert "margin=1.0" in repr(LiftedStructureLoss()) and "beta=50.0" in repr(BinLiftedLoss())


# ------------------------------------------------------------------------- registry


def test_get_loss_builds_every_loss_with_its_defaults():
    for name in available_losses():
        module = get_loss(name)
        assert isinstance(module, PairLoss)
        # every constructor argument is stored, passed on and shown by repr
        assert set(module.hyper_parameters) == set(loss_parameters(name)), name
    assert isinstance(get_loss("Binomial-Deviance"), BinomialDevianceLoss)
    assert isinstance(get_loss("n_pairs"), NPairLoss)
    assert loss_parameters("triplet") == {
        "margin": 0.1,
        "form": "similarity",
        "mining": "all",
        "reduction": "mean",
    }


def test_get_loss_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"unknown loss 'tripplet'.*Did you mean 'triplet'"):
        get_loss("tripplet")
    with pytest.raises(
        ValueError, match=r"no hyper-parameter 'margn'.*'margin'\?.*accepts: margin=0.1"
    ):
        get_loss("triplet", margn=0.2)
    with pytest.raises(ValueError, match="must lie in"):
        get_loss("contrastive", margin=3.0)
    with pytest.raises(TypeError, match="str"):
        get_loss(3)


def test_register_loss_extends_the_registry(monkeypatch):
    monkeypatch.setattr(loss_registry, "_REGISTRY", dict(loss_registry._REGISTRY))
    monkeypatch.setattr(loss_registry, "_ALIASES", dict(loss_registry._ALIASES))

    class Toy(PairLoss):
        def __init__(self, scale: float = 1.0) -> None:
            super().__init__()
            self.scale = scale

        def loss_on_similarity(self, S, labels):
            return self.scale * S.sum()

    register_loss("toy", Toy, aliases=("toy2",))
    assert get_loss("TOY2", scale=2.0).scale == 2.0
    with pytest.raises(ValueError, match="already registered"):
        register_loss("toy", Toy)
    register_loss("toy", Toy, overwrite=True)


# -------------------------------------------------------------- numerical building blocks


@FAST
@given(batches(max_b=6, symmetric=False), st.floats(1.0, 200.0))
def test_masked_logsumexp_matches_torch_and_survives_empty_rows(batch, scale):
    S, y = batch
    x = (S * scale).requires_grad_(True)
    mask = y[:, None] == y[None, :]
    mask[0] = False  # an empty row
    value, nonempty = masked_logsumexp(x, mask, dim=1)
    rows = mask.any(1)
    want = torch.logsumexp(torch.where(mask, x, -math.inf), dim=1)
    torch.testing.assert_close(value[rows], want[rows])
    assert value[0].item() == 0.0 and not nonempty[0]
    value.sum().backward()
    assert bool(torch.isfinite(x.grad).all()) and float(x.grad[0].abs().sum()) == 0.0
    one, _ = masked_logsumexp(x.detach(), mask, dim=1, add_one=True)
    padded = torch.cat([torch.where(mask, x, -math.inf), torch.zeros(len(y), 1, dtype=x.dtype)], 1)
    want1 = torch.logsumexp(padded, 1)
    torch.testing.assert_close(one, want1.detach())


def test_safe_distance_has_finite_gradient_at_zero():
    S = torch.tensor([1.0, 1.0 - 1e-9, 0.5, -1.0], dtype=torch.float64, requires_grad=True)
    D = dissimilarity(S, "distance")
    D.sum().backward()
    assert D[0].item() == 0.0 and bool(torch.isfinite(S.grad).all())
    assert D[3].item() == pytest.approx(2.0)
    assert safe_distance(torch.tensor([-1e-7])).item() == 0.0

"""dmlbook's vectorised MS loss against three independent readings of it.

(a) **The paper's description**, as a per-anchor loop (:mod:`dmlbook.reference.multi_similarity`): same
    mined sets, values and gradients to 1e-12 (float64) and 1e-6 (float32, relative) on random
    batches with duplicates, singleton classes, one-class batches and B = 1.

(b) **pytorch-metric-learning** 2.x. Mapping (PML left, dmlbook right)::

        MultiSimilarityLoss(alpha, beta, base)                   MultiSimilarityLoss(alpha, beta,
          + MultiSimilarityMiner(epsilon) as indices_tuple  =        margin=base, epsilon=epsilon)
        MultiSimilarityLoss(alpha, beta, base), no miner     =   ... mining=False

    Both average over all B anchors; PML's miner takes its thresholds from the unmined sets with
    the same strict inequalities. One documented difference: when the miner returns at most one
    positive and at most one negative pair, PML returns 0 (``GenericPairLoss``), dmlbook the value
    of Eq. 15. Gradients are compared with respect to the raw (pre-normalisation) features, since
    PML normalises inside ``CosineSimilarity``.

(c) **Liu et al.'s two writings of MS** (distance form, their Sec. II-B5 and Eq. 39). The "log
    form" is MS as a log-sum-exp on distances, ``(1/a) log[1 + sum_P e^{a (D - m)}] + (1/b)
    log[1 + sum_N e^{b (m - D)}]``; the "Eq. 39 surrogate" is the same loss "translated" into pair
    weighting, ``sum_P w+ (D - m) + sum_N w- (m - D)`` with the weights held constant. The
    surrogate has the log form's gradient (not its value). Eq. 39 *without* the "+1" in the
    weights' denominators is a different loss: the gradient of a plain log-sum-exp, in which the
    threshold m cancels (no Similarity-S). That loss is what Liu et al.'s Fig. 5 calls "MS loss
    (v2)" (their "v1" is MS with the "+1"); :func:`dmlbook.losses.ms_distance_loss` implements both
    (``tests/losses/test_liu_weighting.py``).
    On squared distances ``D^2 = 2 - 2S`` the log form is exactly twice Wang et al.'s Eq. 15 with
    ``(2a, 2b, lambda = 1 - m/2)``.
"""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners

from dmlbook.core.similarity import cosine_similarity, l2_normalize, pair_masks
from dmlbook.losses import MultiSimilarityLoss, multi_similarity_loss
from dmlbook.mining import ms_mining_masks
from dmlbook.reference import ms_mining_reference, multi_similarity_loss_reference

FAST = settings(max_examples=40, deadline=None)

# ------------------------------------------------------------------ (a) per-anchor loop


@st.composite
def embedding_batches(draw, max_b: int = 10):
    """Embeddings with duplicated rows, and labels with singletons / one class / B = 1."""
    B = draw(st.integers(1, max_b))
    kind = draw(st.sampled_from(["random", "one_class", "singletons", "pk"]))
    if kind == "random":
        labels = draw(st.lists(st.integers(0, 3), min_size=B, max_size=B))
    elif kind == "one_class":
        labels = [0] * B
    elif kind == "singletons":
        labels = list(range(B))
    else:
        labels = [i // 3 for i in range(B)]
    seed = draw(st.integers(0, 10_000))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 5, generator=g, dtype=torch.float64)
    n_dup = draw(st.integers(0, B // 2))
    for k in range(n_dup):  # exact duplicates, with the same label or another one
        x[B - 1 - k] = x[k]
        if draw(st.booleans()):
            labels[B - 1 - k] = labels[k]
    return x, torch.tensor(labels)


def _value_grad(fn, S):
    S = S.detach().clone().requires_grad_(True)
    v = fn(S)
    (g,) = torch.autograd.grad(v, S)
    return v.detach(), g


@FAST
@given(
    embedding_batches(),
    st.sampled_from([torch.float32, torch.float64]),
    st.sampled_from([0.5, 1.0]),
    st.booleans(),
)
def test_vectorised_equals_the_per_anchor_loop(batch, dtype, margin, mining):
    x, y = batch
    S = cosine_similarity(x.to(dtype))
    hp = (2.0, 50.0, margin, 0.1)
    v1, g1 = _value_grad(lambda s: multi_similarity_loss(s, y, *hp, mining=mining), S)
    v2, g2 = _value_grad(lambda s: multi_similarity_loss_reference(s, y, *hp, mining=mining), S)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    assert v1.dtype == dtype
    assert abs(float(v1) - float(v2)) <= tol * max(1.0, abs(float(v2)))
    scale = max(1.0, float(g2.abs().max()))
    assert float((g1 - g2).abs().max()) <= tol * scale
    if mining:
        pos, neg = ms_mining_masks(S, y, 0.1)
        P, N = ms_mining_reference(S, y, 0.1)
        assert [r.nonzero().flatten().tolist() for r in pos] == P
        assert [r.nonzero().flatten().tolist() for r in neg] == N


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_loop_on_a_pk_batch_with_duplicates(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(40, 16, generator=g, dtype=torch.float64)
    y = torch.arange(40) // 5
    x[5] = x[0]  # duplicate image of another class
    x[1] = x[0]  # duplicate image of the same class: a positive pair with S = 1
    S = cosine_similarity(x.to(dtype))
    v1, g1 = _value_grad(lambda s: multi_similarity_loss(s, y, 2.0, 50.0, 0.5), S)
    v2, g2 = _value_grad(lambda s: multi_similarity_loss_reference(s, y, 2.0, 50.0, 0.5), S)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    assert abs(float(v1) - float(v2)) <= tol * abs(float(v2))
    assert float((g1 - g2).abs().max()) <= tol * float(g2.abs().max())


# ------------------------------------------------------------- (b) pytorch-metric-learning


def fixture():
    """PML's own test fixture: (2 cos a, 0.5 sin a), a = 0, 20, ..., 80 degrees; labels 0,0,1,1,2."""
    a = torch.tensor([0.0, 20.0, 40.0, 60.0, 80.0], dtype=torch.float64) * math.pi / 180
    return torch.stack([2 * torch.cos(a), 0.5 * torch.sin(a)], dim=1), torch.tensor([0, 0, 1, 1, 2])


@pytest.mark.parametrize(
    ("alpha", "beta", "base", "mining", "expected"),
    [
        (2.0, 50.0, 0.5, False, 0.5846771408719862),
        (2.0, 40.0, 0.5, False, 0.5865065843588732),
        (2.0, 50.0, 1.0, False, 0.289029036277031),
        (2.0, 50.0, 0.5, True, 0.513914693312344),
        (0.1, 40.0, 0.5, False, 5.810982113373071),
    ],
)
def test_shared_fixture_values(alpha, beta, base, mining, expected):
    """The PML values recorded in shared/notes/reference-implementations.md."""
    x, y = fixture()
    ours = MultiSimilarityLoss(alpha, beta, base, 0.1, mining=mining)(x, y)
    assert float(ours) == pytest.approx(expected, rel=1e-12)
    miner = pml_miners.MultiSimilarityMiner(0.1) if mining else None
    pml = pml_losses.MultiSimilarityLoss(alpha, beta, base)
    theirs = pml(x, y, miner(x, y) if miner else None)
    assert float(theirs) == pytest.approx(expected, rel=1e-12)


LABELINGS = {
    "pk": [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3],
    "singletons": [0, 0, 1, 1, 1, 2, 3, 3, 4, 5, 5, 6],
    "one_class_pair": [0, 0, 1, 2, 3, 4],
    "big_pk": [i // 5 for i in range(40)],
}


def _pml_masks(idx, B):
    a1, p, a2, n = idx
    pos = torch.zeros(B, B, dtype=torch.bool)
    neg = torch.zeros(B, B, dtype=torch.bool)
    pos[a1, p] = True
    neg[a2, n] = True
    return pos, neg


def _value_grad_x(fn, x):
    x = x.detach().clone().requires_grad_(True)
    v = fn(x)
    (g,) = torch.autograd.grad(v, x, allow_unused=True)
    return float(v.detach()), torch.zeros_like(x) if g is None else g


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("labeling", list(LABELINGS))
@pytest.mark.parametrize(("alpha", "beta", "base", "eps"), [(2, 50, 0.5, 0.1), (2, 40, 1.0, 0.3)])
def test_pml_loss_with_miner(seed, labeling, alpha, beta, base, eps):
    y = torch.tensor(LABELINGS[labeling])
    x = torch.randn(len(y), 6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    miner = pml_miners.MultiSimilarityMiner(eps)
    idx = miner(x, y)
    pos, neg = ms_mining_masks(cosine_similarity(x), y, eps)
    assert torch.equal(_pml_masks(idx, len(y))[0], pos)
    assert torch.equal(_pml_masks(idx, len(y))[1], neg)
    pml = pml_losses.MultiSimilarityLoss(alpha, beta, base)
    ours = MultiSimilarityLoss(alpha, beta, base, eps)
    v1, g1 = _value_grad_x(lambda z: ours(z, y), x)
    v2, g2 = _value_grad_x(lambda z: pml(z, y, idx), x)
    if all(len(t) <= 1 for t in idx):  # PML's shortcut: at most one pair of each kind -> 0
        assert v2 == 0.0
        return
    assert v1 == pytest.approx(v2, rel=1e-9, abs=1e-12)
    torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("labeling", list(LABELINGS))
def test_pml_loss_without_miner_is_ms_weighting(seed, labeling):
    y = torch.tensor(LABELINGS[labeling])
    x = torch.randn(len(y), 6, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    v1, g1 = _value_grad_x(lambda z: MultiSimilarityLoss(2, 50, 0.5, mining=False)(z, y), x)
    v2, g2 = _value_grad_x(lambda z: pml_losses.MultiSimilarityLoss(2, 50, 0.5)(z, y), x)
    assert v1 == pytest.approx(v2, rel=1e-9, abs=1e-12)
    torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-11)


def test_pml_shortcut_is_the_one_difference():
    """Only anchor 0 mines anything: one positive and one negative pair. PML returns 0."""
    S = torch.tensor([[1.0, 0.5, 0.45], [0.5, 1.0, 0.1], [0.45, 0.1, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    pos, neg = ms_mining_masks(S, y)
    assert int(pos.sum()) == 1 and int(neg.sum()) == 1
    expected = (0.5 * math.log(2) + math.log1p(math.exp(-2.5)) / 50) / 3
    assert float(multi_similarity_loss(S, y, 2.0, 50.0, 0.5)) == pytest.approx(expected, rel=1e-12)
    idx = (torch.tensor([0]), torch.tensor([1]), torch.tensor([0]), torch.tensor([2]))
    x = torch.randn(3, 4, dtype=torch.float64)
    assert float(pml_losses.MultiSimilarityLoss(2, 50, 0.5)(x, y, idx)) == 0.0


def test_float32_agrees_with_pml_at_scale():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(320, 64, generator=g)
    y = torch.arange(320) // 5
    idx = pml_miners.MultiSimilarityMiner(0.1)(x, y)
    v1, g1 = _value_grad_x(lambda z: MultiSimilarityLoss(2, 50, 0.5, 0.1)(z, y), x)
    v2, g2 = _value_grad_x(lambda z: pml_losses.MultiSimilarityLoss(2, 50, 0.5)(z, y, idx), x)
    assert v1 == pytest.approx(v2, rel=1e-5)
    torch.testing.assert_close(g1, g2, rtol=1e-4, atol=1e-7)


# ------------------------------------------------- (c) Liu et al.: log form, Eq. 39 surrogate


def _distances(x):
    z = l2_normalize(x)
    return torch.sqrt((2 - 2 * z @ z.T).clamp_min(1e-30))


def liu_log_form(D, pos, neg, a, b, m):
    """MS on distances as a log-sum-exp (Liu et al. Sec. II-B5), mean over anchors."""
    zero = torch.zeros_like(D)
    sp_ = torch.where(pos, torch.exp(a * (D - m)), zero).sum(1)
    sn_ = torch.where(neg, torch.exp(b * (m - D)), zero).sum(1)
    return (torch.log1p(sp_) / a + torch.log1p(sn_) / b).mean()


def liu_eq39_surrogate(D, pos, neg, a, b, m, plus_one=True):
    """Eq. 39: sum_P w+ (D - m) + sum_N w- (m - D), weights held constant (mean over anchors)."""
    zero = torch.zeros_like(D)
    ep = torch.where(pos, torch.exp(a * (D - m)), zero).detach()
    en = torch.where(neg, torch.exp(b * (m - D)), zero).detach()
    one = 1.0 if plus_one else 0.0
    wp = ep / (one + ep.sum(1, keepdim=True)).clamp_min(1e-300)
    wn = en / (one + en.sum(1, keepdim=True)).clamp_min(1e-300)
    per = torch.where(pos, wp * (D - m), zero).sum(1) + torch.where(neg, wn * (m - D), zero).sum(1)
    return per.mean()


def liu_lse(D, pos, neg, a, b, m):
    """What Eq. 39 without the +1 is the gradient of: plain log-sum-exps (no threshold left)."""
    ninf = torch.full_like(D, -torch.inf)
    lp = torch.logsumexp(torch.where(pos, a * (D - m), ninf), 1)
    ln = torch.logsumexp(torch.where(neg, b * (m - D), ninf), 1)
    return (lp / a + ln / b).mean()


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("mined", [False, True])
def test_liu_eq39_has_the_gradient_of_ms_not_its_value(seed, mined):
    y = torch.arange(20) // 4
    x = torch.randn(20, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    if mined:
        pos, neg = ms_mining_masks(cosine_similarity(x), y, 0.1)
    else:
        pos, neg = pair_masks(y)
    a, b, m = 2.0, 5.0, 0.8
    v1, g1 = _value_grad_x(lambda z: liu_log_form(_distances(z), pos, neg, a, b, m), x)
    v2, g2 = _value_grad_x(lambda z: liu_eq39_surrogate(_distances(z), pos, neg, a, b, m), x)
    torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-14)
    assert v1 != pytest.approx(v2, rel=1e-3)  # "translated": same gradient, different value
    # without the +1: not MS any more, but the log-sum-exp, whose gradient ignores m
    v3, g3 = _value_grad_x(lambda z: liu_eq39_surrogate(_distances(z), pos, neg, a, b, m, False), x)
    _, g4 = _value_grad_x(lambda z: liu_lse(_distances(z), pos, neg, a, b, m), x)
    _, g5 = _value_grad_x(
        lambda z: liu_eq39_surrogate(_distances(z), pos, neg, a, b, m + 0.5, False), x
    )
    torch.testing.assert_close(g3, g4, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(g3, g5, rtol=1e-12, atol=1e-14)
    assert float((g1 - g3).abs().max()) > 1e-3


def test_liu_log_form_on_squared_distances_is_wang_eq15():
    y = torch.arange(15) // 3
    x = torch.randn(15, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    S = cosine_similarity(x)
    pos, neg = pair_masks(y)
    a, b, m = 1.0, 25.0, 1.0
    liu = liu_log_form(2 - 2 * S, pos, neg, a, b, m)
    wang = multi_similarity_loss(S, y, 2 * a, 2 * b, 1 - m / 2, mining=False)
    assert float(liu) == pytest.approx(2 * float(wang), rel=1e-12)
    # on plain distances it is another loss
    assert float(
        liu_log_form(torch.sqrt(2 - 2 * S.clamp_max(1)), pos, neg, a, b, m)
    ) != pytest.approx(2 * float(wang), rel=1e-3)

"""The triplet family against loops and its GPW weight: the hinge (Wang et al. 2019, Eq. 5; Liu
et al., Eq. 12, 37), batch-hard, every triplet in blocks of any size, and the cosine (NCA) triplet
of Xuan & Pless (Eq. 4, its weight Eq. 6).

Implementation: :mod:`dmlbook.losses.triplet`; chapters ``book/04_triplet.ipynb`` and
``book/13_gradient_surgery.ipynb``; the miners are tested in ``tests/mining/test_triplets.py``.
"""

from __future__ import annotations

import contextlib
import math

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import (
    FAST,
    FORMS,
    batches,
    grad_of,
    masks,
    pk_batch,
    rand_S,
)

from dmlbook.core.pairs import dissimilarity, resolve_masks
from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import TripletLoss, cosine_triplet_loss, describe_loss, get_loss, triplet_loss
from dmlbook.losses import triplet as triplet_module
from dmlbook.reference.classic import dist, sets
from dmlbook.reference.classic import triplet_loss_reference as ref_triplet
from dmlbook.reference.gradient_surgery import cosine_triplet_loss_reference


@FAST
@given(batches(), st.sampled_from(FORMS), st.sampled_from(["mean", "mean_nonzero", "sum"]))
def test_triplet_matches_loops(batch, form, reduction):
    S, y = batch
    got = triplet_loss(S, y, 0.3, form=form, reduction=reduction)
    want = ref_triplet(S.tolist(), y.tolist(), 0.3, form, reduction)
    assert float(got) == pytest.approx(want, abs=1e-7)


def test_squared_distance_triplet_is_similarity_triplet_with_half_margin():
    """Liu et al. Eq. 37 on unit vectors = 2 x Wang et al. Eq. 5 with margin m / 2."""
    g = torch.Generator().manual_seed(0)
    S = cosine_similarity(torch.randn(9, 4, generator=g, dtype=torch.float64))
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    a = triplet_loss(S, y, 0.4, form="squared_distance", reduction="sum")
    b = triplet_loss(S, y, 0.2, form="similarity", reduction="sum")
    assert float(a) == pytest.approx(2 * float(b), rel=1e-12)


def test_triplet_weight_counts_violated_triplets():
    S, y = pk_batch(4)
    lam = 0.2
    g = grad_of(lambda s: triplet_loss(s, y, lam, reduction="sum"), S)
    pos, neg = masks(y)
    viol = pos[:, :, None] & neg[:, None, :] & (S[:, None, :] - S[:, :, None] + lam > 0)
    torch.testing.assert_close(g, viol.sum(1).double() - viol.sum(2).double())


def _dense_triplet(S, y, margin, form, reduction):
    """The (B, B, B) form, written out with autograd (the loss before its O(B^2) path)."""
    pos, neg = masks(y)
    d = dissimilarity(S, form)
    valid = pos[:, :, None] & neg[:, None, :]
    per = torch.relu(d[:, :, None] - d[:, None, :] + margin)[valid]
    if reduction == "mean_nonzero":
        per = per[per > 0]
    if reduction == "sum":
        return per.sum()
    return per.sum() / max(per.numel(), 1)


@FAST
@given(
    batches(max_b=9),
    st.sampled_from(FORMS),
    st.sampled_from(["mean", "mean_nonzero", "sum"]),
    st.sampled_from([1, 5, 10**6]),
)
def test_all_triplets_in_blocks_matches_loops_and_dense_gradient(batch, form, reduction, block):
    """Any block size (one pair at a time, a few, all at once) gives the loop's value and the
    gradient of the dense (B, B, B) form."""
    S, y = batch
    with triplet_block(block * S.shape[0]):
        got = triplet_loss(S, y, 0.3, form=form, reduction=reduction)
        g = grad_of(lambda s: triplet_loss(s, y, 0.3, form=form, reduction=reduction), S)
    want = ref_triplet(S.tolist(), y.tolist(), 0.3, form, reduction)
    assert float(got) == pytest.approx(want, abs=1e-9)
    g_dense = grad_of(lambda s: _dense_triplet(s, y, 0.3, form, reduction), S)
    torch.testing.assert_close(g, g_dense, rtol=1e-9, atol=1e-12)


@contextlib.contextmanager
def triplet_block(value: int):
    """Run with ``dmlbook.losses.triplet.TRIPLET_BLOCK = value``."""
    saved, triplet_module.TRIPLET_BLOCK = triplet_module.TRIPLET_BLOCK, value
    try:
        yield
    finally:
        triplet_module.TRIPLET_BLOCK = saved


def test_all_triplets_never_builds_a_b_cubed_tensor():
    """B = 400: one (B, B, B) float tensor is 256 MB (the dense form allocates several); no
    operator allocates an eighth of that (the profiler sums each operator's allocations)."""
    S, y = rand_S(400, dtype=torch.float32, d=16).requires_grad_(True), torch.arange(400) // 5
    with torch.profiler.profile(profile_memory=True) as prof:
        triplet_loss(S, y, 0.2, form="distance", reduction="mean_nonzero").backward()
    largest = max(e.cpu_memory_usage for e in prof.key_averages())
    assert 0 < largest < 4 * 400**3 / 8


def batch_hard_reference(S, y, margin, form, reduction):
    """Per anchor: least similar positive, most similar negative (first on ties), the hinge."""
    terms = []
    for a in range(len(y)):
        P, N = sets(y, a)
        if P and N:
            p = min(P, key=lambda k: (S[a][k], k))
            n = min(N, key=lambda k: (-S[a][k], k))
            terms.append(max(dist(S[a][p], form) - dist(S[a][n], form) + margin, 0.0))
    if reduction == "sum":
        return sum(terms)
    if reduction == "mean_nonzero":
        terms = [t for t in terms if t > 0]
    return sum(terms) / len(terms) if terms else 0.0


@FAST
@given(
    batches(),
    st.sampled_from(FORMS),
    st.sampled_from(["mean", "mean_nonzero", "sum"]),
    st.sampled_from([0.0, 0.2, 1.0]),
)
def test_batch_hard_matches_the_loop(batch, form, reduction, margin):
    """One triplet per anchor (ties to the lowest index), through the pair masks of the miner."""
    S, y = batch
    S = torch.round(S * 4) / 4  # ties in the hardest positive or negative
    module = TripletLoss(margin, form=form, mining="batch_hard", reduction=reduction)
    got = module.loss_on_similarity(S, y)
    loop = batch_hard_reference(S.tolist(), y.tolist(), margin, form, reduction)
    assert float(got) == pytest.approx(loop, abs=1e-7)  # D = 0 below eps


# ----------------------------------------------------------------------------- cosine (NCA)


def _eq4_on_every_triplet(S, pos, neg, tau, reduction):
    """Eq. 4 on the full (B, B, B) tensor of triplets with autograd (the O(B^3) form)."""
    valid = pos[:, :, None] & neg[:, None, :]
    gap = tau * (S[:, None, :] - S[:, :, None])  # [a, p, n] = tau (S_an - S_ap)
    per = torch.where(valid, torch.nn.functional.softplus(gap), torch.zeros_like(gap))
    total = per.sum()
    return total if reduction == "sum" else total / valid.sum().clamp_min(1)


def _ephn_pair_masks(S, pos, neg):
    """One easy positive and one hard negative per anchor with both, by a plain loop."""
    one_pos, one_neg = torch.zeros_like(pos), torch.zeros_like(neg)
    s = S.tolist()
    for a in range(S.shape[0]):
        P = [j for j in range(S.shape[0]) if pos[a, j]]
        N = [j for j in range(S.shape[0]) if neg[a, j]]
        if P and N:
            one_pos[a, max(P, key=lambda j: (s[a][j], -j))] = True
            one_neg[a, max(N, key=lambda j: (s[a][j], -j))] = True
    return one_pos, one_neg


@FAST
@given(batches(max_b=9), st.floats(0.5, 20.0))
def test_cosine_triplet_value_matches_eq4_and_the_loop(batch, tau):
    S, y = batch
    pos, neg = _ephn_pair_masks(S, *resolve_masks(y, None, None, tuple(S.shape)))
    s = S.tolist()
    terms = [math.log1p(math.exp(tau * (s[a][n] - s[a][p])))
             for a in range(len(y)) for p in range(len(y)) for n in range(len(y))
             if pos[a, p] and neg[a, n]]  # fmt: skip
    got = float(cosine_triplet_loss(S, y, tau))
    assert got == pytest.approx(sum(terms) / max(len(terms), 1), rel=1e-12, abs=1e-12)
    got_all = float(cosine_triplet_loss(S, y, tau, mining="all"))
    assert got_all == pytest.approx(cosine_triplet_loss_reference(S, y, tau), rel=1e-12, abs=1e-12)


@FAST
@given(
    batches(max_b=10, n_classes=4),
    st.sampled_from(["ephn", "all"]),
    st.sampled_from(["mean", "sum"]),
    st.integers(0, 2**16),
    st.sampled_from([None, 1, 7]),
)
def test_cosine_triplet_matches_eq4_on_every_triplet(batch, mining, reduction, seed, block):
    """Against Eq. 4 on the whole (B, B, B) tensor with autograd, in float64: value and dL/dS,
    with and without random pair masks (anchors without a positive or a negative), blocks of
    any size."""
    S, y = batch
    B = len(y)
    g = torch.Generator().manual_seed(seed)
    masks = {}
    if seed % 2:
        masks = {"pos_mask": torch.rand(B, B, generator=g) < 0.6,
                 "neg_mask": torch.rand(B, B, generator=g) < 0.6}  # fmt: skip
    with triplet_block(block or triplet_module.TRIPLET_BLOCK):
        fn = lambda s: cosine_triplet_loss(s, y, 3.0, mining=mining, reduction=reduction, **masks)
        got, g_got = fn(S), grad_of(fn, S)
    pos, neg = resolve_masks(y, masks.get("pos_mask"), masks.get("neg_mask"), (B, B))
    if mining == "ephn":
        pos, neg = _ephn_pair_masks(S, pos, neg)
    want = _eq4_on_every_triplet(S, pos, neg, 3.0, reduction)
    g_want = grad_of(lambda s: _eq4_on_every_triplet(s, pos, neg, 3.0, reduction), S)
    assert abs(float(got) - float(want)) < 1e-12
    torch.testing.assert_close(g_got, g_want, rtol=1e-10, atol=1e-13)


def test_cosine_triplet_mean_of_a_single_triplet_is_its_own_loss():
    """One triplet (a, p, n) = (0, 1, 2) left by the masks: the mean is that triplet's Eq. 4,
    softplus(tau (S_an - S_ap)), computed here with math, not divided by anything else."""
    S = torch.tensor([[1.0, 0.3, 0.6], [0.3, 1.0, -0.2], [0.6, -0.2, 1.0]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    pos_mask = torch.zeros(3, 3, dtype=torch.bool)
    neg_mask = torch.zeros(3, 3, dtype=torch.bool)
    pos_mask[0, 1] = neg_mask[0, 2] = True
    tau = 4.0
    want = math.log1p(math.exp(tau * (0.6 - 0.3)))
    for mining in ("all", "ephn"):
        got = cosine_triplet_loss(S, y, tau, mining=mining, pos_mask=pos_mask, neg_mask=neg_mask)
        assert float(got) == pytest.approx(want, rel=1e-12)


def test_cosine_triplet_without_a_triplet_float32_and_registration():
    S = torch.eye(3, dtype=torch.float64, requires_grad=True)
    for mining in ("ephn", "all"):
        for y in (torch.tensor([0, 1, 2]), torch.tensor([0, 0, 0])):
            value = cosine_triplet_loss(S, y, mining=mining)
            (grad,) = torch.autograd.grad(value, S)
            assert float(value.detach()) == 0.0 and float(grad.abs().max()) == 0.0
    S64, y = rand_S(40, 1, d=8), torch.arange(40) // 4
    v32 = cosine_triplet_loss(S64.float(), y, mining="all")
    assert v32.dtype == torch.float32
    torch.testing.assert_close(v32.double(), cosine_triplet_loss(S64, y, mining="all"), rtol=1e-5,
                               atol=1e-6)  # fmt: skip
    name, params = describe_loss(get_loss("nca_triplet", tau=8.0))
    assert name == "cosine_triplet" and params["tau"] == 8.0
    x = torch.randn(9, 4, dtype=torch.float64, requires_grad=True)
    module = get_loss("cosine_triplet", tau=5.0, mining="all")
    assert torch.autograd.gradcheck(lambda v: module(v, torch.arange(9) // 3), (x,))


def _triplet_loop(S, y, margin, form, keep):
    """Every triplet ``(a, p, n)`` that ``keep(a, p, n, d_ap, d_an)`` selects, with its hinge
    ``[d_ap - d_an + m]_+`` (Python floats; Wang et al. Eq. 5 / Liu et al. Eq. 12, 37)."""
    out = {}
    for a in range(len(y)):
        P, N = sets(y, a)
        for p in P:
            for n in N:
                d_ap, d_an = dist(S[a][p], form), dist(S[a][n], form)
                if keep(a, p, n, d_ap, d_an):
                    out[a, p, n] = max(d_ap - d_an + margin, 0.0)
    return out


@pytest.mark.parametrize("form", FORMS)
def test_reduction_none_is_every_selected_triplet_hinge(form):
    """``reduction="none"``: ``L[a, p, n]`` on the selected triplets, 0 on every other entry;
    a triplet mask narrows the selection (both masks here are random)."""
    S, y = pk_batch(4)
    B, margin = len(y), 0.3
    g = torch.Generator().manual_seed(7)
    T = torch.rand(B, B, B, generator=g) < 0.5
    wants = []
    for triplet_mask in (None, T):
        got = triplet_loss(S, y, margin, form=form, reduction="none", triplet_mask=triplet_mask)
        keep = (lambda *t: True) if triplet_mask is None else (lambda a, p, n, *_: bool(T[a, p, n]))
        want = torch.full((B, B, B), 0.0, dtype=S.dtype)
        for (a, p, n), v in _triplet_loop(S.tolist(), y.tolist(), margin, form, keep).items():
            want[a, p, n] = v
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        wants.append(want)
    assert bool((wants[0][T] > 0).any()) and bool((wants[0][~T] > 0).any())  # the mask matters


@pytest.mark.parametrize("form", FORMS)
def test_triplet_mask_selects_the_triplets_of_the_mean(form):
    S, y = pk_batch(4)
    B, margin = len(y), 0.3
    T = torch.rand(B, B, B, generator=torch.Generator().manual_seed(8)) < 0.5
    kept = _triplet_loop(S.tolist(), y.tolist(), margin, form, lambda a, p, n, *_: bool(T[a, p, n]))
    got = triplet_loss(S, y, margin, form=form, triplet_mask=T)
    assert float(got) == pytest.approx(sum(kept.values()) / len(kept), rel=1e-12)


@pytest.mark.parametrize("form", FORMS)
def test_module_semihard_mining_is_schroffs_triplets_in_its_form(form):
    """``TripletLoss(mining="semihard")``: the mean hinge over the triplets with
    ``0 < d_an - d_ap <= m`` in the module's own form, within the masks it is given."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64)
    y = torch.arange(4).repeat_interleave(3)
    S = cosine_similarity(x)
    margin = {"similarity": 0.3, "distance": 0.4, "squared_distance": 0.6}[form]
    pos, neg = masks(y)
    pos_mask = torch.rand(12, 12, generator=g) < 0.8
    neg_mask = torch.rand(12, 12, generator=g) < 0.8
    for given_masks in ({}, {"pos_mask": pos_mask, "neg_mask": neg_mask}):
        pm, nm = given_masks.get("pos_mask", pos), given_masks.get("neg_mask", neg)

        def keep(a, p, n, d_ap, d_an, pm=pm, nm=nm):
            return bool(pm[a, p] and nm[a, n]) and 0 < d_an - d_ap <= margin

        kept = _triplet_loop(S.tolist(), y.tolist(), margin, form, keep)
        loss = TripletLoss(margin=margin, form=form, mining="semihard")(x, y, **given_masks)
        assert len(kept) > 5
        assert float(loss) == pytest.approx(sum(kept.values()) / len(kept), rel=1e-9)


def test_module_batch_hard_mining_stays_within_the_masks_it_is_given():
    """Hermans et al.'s batch-hard triplet per anchor, the hardest positive and negative among
    the pairs the given masks keep (similarity form: the least similar positive, the most
    similar negative)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64)
    y = torch.arange(4).repeat_interleave(3)
    S = cosine_similarity(x).tolist()
    pos, neg = masks(y)
    pos_mask = torch.rand(12, 12, generator=g) < 0.7
    neg_mask = torch.rand(12, 12, generator=g) < 0.7
    terms = []
    for a in range(12):
        P = [p for p in range(12) if pos[a, p] and pos_mask[a, p]]
        N = [n for n in range(12) if neg[a, n] and neg_mask[a, n]]
        if P and N:
            terms.append(max(min(S[a][p] for p in P) * -1 + max(S[a][n] for n in N) + 0.2, 0.0))
    loss = TripletLoss(margin=0.2, mining="batch_hard")(x, y, pos_mask=pos_mask, neg_mask=neg_mask)
    free = TripletLoss(margin=0.2, mining="batch_hard")(x, y)
    assert float(loss) == pytest.approx(sum(terms) / len(terms), rel=1e-9)
    assert float(free) != pytest.approx(float(loss))  # the masks change the mined triplets


def test_module_default_mining_is_every_triplet():
    x = torch.randn(9, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    y = torch.arange(3).repeat_interleave(3)
    want = ref_triplet(cosine_similarity(x).tolist(), y.tolist(), 0.1, "similarity", "mean")
    assert float(TripletLoss()(x, y)) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize(
    ("block", "anchors_per_block"), [(24, 1), (72, 3), (95, 3), (287, 11), (288, 12)]
)
def test_anchors_go_in_the_largest_blocks_within_triplet_block(
    monkeypatch, block, anchors_per_block
):
    """B = 12 anchors with K = 2 positives each: K * B = 24 entries per anchor, so a block
    holds ``TRIPLET_BLOCK // 24`` anchors (at least one), each block under checkpoint; a batch
    that fits in one block is computed directly (no checkpoint)."""
    S, y = pk_batch(6, classes=4, per=3)
    sizes = []

    def counting_checkpoint(fn, *rows, **kwargs):
        sizes.append(rows[0].shape[0])
        return fn(*rows)

    monkeypatch.setattr(triplet_module, "checkpoint", counting_checkpoint)
    with triplet_block(block):
        got = triplet_loss(S, y, 0.3, form="distance")
    if anchors_per_block == 12:
        assert sizes == []
    else:
        full, last = divmod(12, anchors_per_block)
        assert sizes == [anchors_per_block] * full + ([last] if last else [])
    want = ref_triplet(S.tolist(), y.tolist(), 0.3, "distance", "mean")
    assert float(got) == pytest.approx(want, rel=1e-12)

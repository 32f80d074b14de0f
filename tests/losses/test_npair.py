"""N-pair loss (Sohn; Liu et al., Eq. 13) against loops and its GPW weight.

Implementation: :mod:`dmlbook.losses.npair`; chapter ``book/07_npair.ipynb``.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given
from loss_cases import (
    FAST,
    FORMS,
    batches,
    grad_of,
    pk_batch,
)

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import (
    NPairLoss,
    npair_loss,
)
from dmlbook.reference.classic import npair_loss_reference as ref_npair


@FAST
@given(batches(), st.sampled_from(FORMS), st.sampled_from(["npair", "all"]))
def test_npair_matches_loops(batch, form, sampling):
    S, y = batch
    got = npair_loss(S, y, form=form, sampling=sampling)
    assert float(got) == pytest.approx(ref_npair(S.tolist(), y.tolist(), form, sampling), abs=1e-7)


def test_npair_negative_weight_has_the_positive_in_its_denominator():
    S, y = pk_batch(3, classes=4, per=2)  # pairs (0,1), (2,3), (4,5), (6,7)
    g = grad_of(lambda s: npair_loss(s, y, reduction="sum"), S)
    a, p, negs = 0, 1, [3, 5, 7]
    denom = S[a, p].exp() + S[a, negs].exp().sum()
    torch.testing.assert_close(g[a, negs], S[a, negs].exp() / denom, rtol=1e-10, atol=1e-12)
    assert float(g[a, p]) == pytest.approx(-float(S[a, negs].exp().sum() / denom), rel=1e-10)
    # the anchors' own negatives that are not other classes' positives get no weight
    assert float(g[a, [2, 4, 6]].abs().sum()) == 0.0


@FAST
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=14),
    st.sampled_from(FORMS),
    st.sampled_from(["mean", "sum"]),
    st.integers(0, 2**16),
)
def test_module_on_the_pairs_samples_equals_the_loss_on_the_whole_s(labels, form, red, seed):
    """NPairLoss forms S of the anchors and positives only: same value as the loop on the whole
    batch's S, and the same gradient (w.r.t. the raw features) as npair_loss on the whole S."""
    y = torch.tensor(labels)
    x = torch.randn(len(labels), 4, generator=torch.Generator().manual_seed(seed)).double()
    x.requires_grad_(True)
    got = NPairLoss(form=form, reduction=red)(x, y)
    (g,) = torch.autograd.grad(got, x, allow_unused=True)
    S_full = cosine_similarity(x)
    n_pairs = sum(labels.count(c) >= 2 for c in set(labels))
    want = ref_npair(S_full.tolist(), labels, form, "npair") * (n_pairs if red == "sum" else 1)
    assert float(got.detach()) == pytest.approx(want, rel=1e-12, abs=1e-12)
    full = npair_loss(S_full, y, form=form, reduction=red)
    (g_full,) = torch.autograd.grad(full, x, allow_unused=True)
    zero = torch.zeros_like(x)
    torch.testing.assert_close(
        zero if g is None else g, zero if g_full is None else g_full, rtol=1e-10, atol=1e-12
    )


def test_one_pair_is_zero_with_zero_gradient():
    """C = 1: the anchor has no negative, L = log(1 + 0) = 0 and its gradient 0 (Eq. 13)."""
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    value = NPairLoss()(x, torch.tensor([5, 9, 5]))
    (g,) = torch.autograd.grad(value, x, allow_unused=True)
    assert float(value.detach()) == 0.0
    assert g is None or float(g.abs().max()) == 0.0


def _npair_terms(S, y, form, sampling, neg_keep, pos_keep=None):
    """Liu et al. Eq. 13 per selected positive pair ``(a, p)`` that ``pos_keep`` keeps:
    ``log(1 + sum_k e^{d_ap - d_ak})`` over the negatives ``k`` that ``neg_keep`` keeps (a loop)."""
    from dmlbook.reference.classic import dist, lse, npair_pairs_reference, sets, softplus

    terms = {}
    if sampling == "npair":
        pairs = npair_pairs_reference(y)
        for a, p in pairs:
            if pos_keep is not None and not pos_keep[a][p]:
                continue
            negs = [q for (b, q) in pairs if y[b] != y[a] and neg_keep[a][q]]
            x = [dist(S[a][p], form) - dist(S[a][q], form) for q in negs]
            terms[a, p] = softplus(lse(x)) if x else 0.0
    else:
        for i in range(len(y)):
            P, N = sets(y, i)
            for j in P:
                if pos_keep is not None and not pos_keep[i][j]:
                    continue
                x = [dist(S[i][j], form) - dist(S[i][k], form) for k in N if neg_keep[i][k]]
                terms[i, j] = softplus(lse(x)) if x else 0.0
    return terms


@pytest.mark.parametrize("sampling", ["npair", "all"])
@pytest.mark.parametrize("form", ["similarity", "distance"])
def test_npair_reductions_and_negative_mask_match_the_loop(sampling, form):
    """Both samplings: "mean", "sum" and "none" (the (B, B) matrix of the pair terms) of Eq. 13,
    with all negatives and with a miner's negative mask."""
    S, y = pk_batch(5, classes=4, per=3)
    B = len(y)
    neg_mask = torch.rand(B, B, generator=torch.Generator().manual_seed(3)) < 0.6
    pos_mask = torch.ones(B, B, dtype=torch.bool)
    pos_mask[3, 4] = pos_mask[0, 1] = False  # two of the N-pair construction's pairs
    everything = torch.ones(B, B, dtype=torch.bool)
    for kw in ({}, {"neg_mask": neg_mask}, {"pos_mask": pos_mask, "neg_mask": neg_mask}):
        keep = kw.get("neg_mask", everything).tolist()
        pos_keep = kw.get("pos_mask", everything).tolist()
        terms = _npair_terms(S.tolist(), y.tolist(), form, sampling, keep, pos_keep)
        run = dict(form=form, sampling=sampling, **kw)
        mean = npair_loss(S, y, **run)
        assert float(mean) == pytest.approx(sum(terms.values()) / len(terms), rel=1e-12)
        assert float(npair_loss(S, y, reduction="sum", **run)) == pytest.approx(
            sum(terms.values()), rel=1e-12
        )
        want = torch.zeros(B, B, dtype=S.dtype)
        for (a, p), v in terms.items():
            want[a, p] = v
        torch.testing.assert_close(npair_loss(S, y, reduction="none", **run), want)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_npair_module_with_either_mask_or_none_matches_the_loop(reduction):
    """``NPairLoss`` on embeddings: its shortcut (only the pairs' similarities) without masks,
    the whole loss with a positive mask, a negative mask or both."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64)
    y = torch.arange(4).repeat_interleave(3)
    S = cosine_similarity(x)
    pos_mask = torch.ones(12, 12, dtype=torch.bool)
    pos_mask[3, 4] = False
    neg_mask = torch.rand(12, 12, generator=g) < 0.6
    everything = torch.ones(12, 12, dtype=torch.bool)
    for kw in (
        {},
        {"pos_mask": pos_mask},
        {"neg_mask": neg_mask},
        {"pos_mask": pos_mask, "neg_mask": neg_mask},
    ):
        keep = kw.get("neg_mask", everything).tolist()
        pos_keep = kw.get("pos_mask", everything).tolist()
        terms = _npair_terms(S.tolist(), y.tolist(), "similarity", "npair", keep, pos_keep)
        want = sum(terms.values()) / (len(terms) if reduction == "mean" else 1)
        got = NPairLoss(reduction=reduction)(x, y, **kw)
        assert float(got) == pytest.approx(want, rel=1e-12), kw


def test_npair_module_refuses_a_misspelt_mask_instead_of_taking_its_shortcut():
    """A keyword ``forward`` does not know is refused, as ``PairLoss.forward`` refuses it: the
    shortcut must not drop it silently and return the unmasked loss."""
    x = torch.randn(6, 4, dtype=torch.float64)
    y = torch.arange(3).repeat_interleave(2)
    with pytest.raises(TypeError, match="pos_mak"):
        NPairLoss()(x, y, pos_mak=torch.ones(6, 6, dtype=torch.bool))

"""Triplet-P/E (dmlbook.losses.liu_triplet), Liu et al. Eq. 21 with the weights of Eq. 25-34:
autograd of the loss against the printed weights of :func:`triplet_weights`, the blocked sums
(any block size, user masks, large alpha) against Algorithm 1's per-anchor loop, and a B = 1000
forward + backward in bounded memory (a (B, B, B) float32 tensor alone would be 4 GB)."""

from __future__ import annotations

import subprocess
import sys

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import given, settings
from loss_cases import unit_sphere_batches

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import triplet as triplet_module
from dmlbook.losses.liu_triplet import triplet_weighted_loss, triplet_weights
from dmlbook.reference.liu_weighting import triplet_weighted_loss_reference

WEIGHTINGS = [("constant", 1.0), ("power", 0.0), ("power", 2.5), ("power", 5.0),
              ("power", 20.0), ("exponential", 0.0), ("exponential", 40.0)]  # fmt: skip
NORMS = ["none", "anchor", "batch"]


def _value_and_grad(fn, S):
    S = S.clone().requires_grad_(True)
    value = fn(S)
    (g,) = torch.autograd.grad(value, S, allow_unused=True) if value.requires_grad else (None,)
    return value.detach(), torch.zeros_like(S) if g is None else g


@settings(max_examples=40, deadline=None)
@given(
    unit_sphere_batches(12, 4),
    st.sampled_from(WEIGHTINGS),
    st.sampled_from(NORMS),
    st.sampled_from([1, 30, 10**6]),
)
def test_blocks_of_any_size_are_algorithm_1(batch, weighting, norm, block):
    S, y = batch
    kw = dict(weighting=weighting[0], exponent=weighting[1], normalization=norm)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(triplet_module, "TRIPLET_BLOCK", block)
        got = _value_and_grad(lambda s: triplet_weighted_loss(s, y, 0.2, **kw), S)
    want = _value_and_grad(lambda s: triplet_weighted_loss_reference(s, y, 0.2, **kw), S)
    torch.testing.assert_close(got[0], want[0], rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(got[1], want[1], rtol=1e-10, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    unit_sphere_batches(12, 4),
    st.sampled_from(WEIGHTINGS),
    st.sampled_from(NORMS),
    st.integers(0, 2**16),
)
def test_autograd_equals_the_printed_weights(batch, weighting, norm, seed):
    """Eq. 21's gradient is the weights of Eq. 25-34 (detached: footnote 6), dL/dD_ij = sum_k
    w_ijk and dL/dD_ik = -sum_j w_ijk over the active triplets, divided by B; with and without
    arbitrary pos/neg masks (uneven positives per anchor, padding)."""
    S, y = batch
    B = len(y)
    g = torch.Generator().manual_seed(seed)
    same = y[:, None] == y[None, :]
    pos = same & (torch.rand(B, B, generator=g) < 0.7)
    neg = ~same & (torch.rand(B, B, generator=g) < 0.7)
    if seed % 2:  # the label masks themselves
        pos, neg = same & ~torch.eye(B, dtype=torch.bool), ~same
    kw = dict(weighting=weighting[0], exponent=weighting[1], normalization=norm)
    m = 0.3
    _, grad = _value_and_grad(
        lambda s: triplet_weighted_loss(s, y, m, pos_mask=pos, neg_mask=neg, **kw), S
    )
    W = triplet_weights(S, y, m, pos_mask=pos, neg_mask=neg, **kw)
    D = torch.sqrt(2.0 - 2.0 * S)
    active = W * ((D[:, :, None] - D[:, None, :] + m) > 0)
    G_D = (active.sum(dim=2) - active.sum(dim=1)) / B
    dD_dS = -1.0 / D.fill_diagonal_(1.0)
    torch.testing.assert_close(grad, G_D * dD_dS, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
def test_large_alpha_in_float32_is_finite_and_close_to_float64(norm):
    """alpha = 400: e^{alpha t} overflows float32 unshifted; the shifted factors do not."""
    x = torch.randn(40, 8, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    S, y = cosine_similarity(x), torch.arange(40) // 4
    kw = dict(weighting="exponential", exponent=400.0, normalization=norm, reduction="none")
    want = triplet_weighted_loss_reference(S, y, 0.1, weighting="exponential", exponent=400.0,
                                           normalization=norm)  # fmt: skip
    got = triplet_weighted_loss(S.float(), y, 0.1, **kw)
    if norm == "none":  # as printed, e^{400 t} overflows float32 and float64 alike: inf, not nan
        assert not torch.isnan(got).any()
        return
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double().mean(), want, rtol=1e-4, atol=1e-6)


_B1000 = """
import resource, torch
from dmlbook.losses import get_loss
torch.manual_seed(0)
x = torch.randn(1000, 512, requires_grad=True)
y = torch.arange(1000) // 5
for name in ("triplet_p", "triplet_e"):
    loss = get_loss(name)(x, y)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all(), name
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow
def test_b1000_runs_in_bounded_memory():
    """Peak resident memory of a fresh process doing both losses at B = 1000 stays < 1.5 GB."""
    out = subprocess.run([sys.executable, "-c", _B1000], capture_output=True, text=True, check=True)
    peak_kib = int(out.stdout.split()[-1])  # Linux reports ru_maxrss in KiB
    assert peak_kib < 1.5 * 2**20, f"peak RSS {peak_kib / 2**20:.2f} GiB"


def _pk(seed, classes=4, per=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(classes * per, 6, generator=g, dtype=torch.float64)
    return cosine_similarity(x), torch.arange(classes).repeat_interleave(per)


@pytest.mark.parametrize("normalization", ["none", "anchor", "batch"])
def test_power_and_exponential_triplet_losses_forward_every_setting(normalization):
    """Liu et al.'s Triplet-P and Triplet-E (Eq. 21 with Eq. 25, 28, 31, 34) with no default
    anywhere: the paper-literal loop; "sum" is B times the loop's mean."""
    from dmlbook.losses.liu_triplet import triplet_exponential_loss, triplet_power_loss

    S, y = _pk(31)
    B, m = len(y), 0.3
    cases = (
        (triplet_power_loss, "power", "p", 2.5),
        (triplet_exponential_loss, "exponential", "alpha", 3.0),
    )
    for fn, weighting, name, value in cases:
        want = triplet_weighted_loss_reference(
            S, y, m, weighting=weighting, exponent=value, normalization=normalization
        )
        assert float(want) > 0
        for reduction, scale in (("mean", 1), ("sum", B)):
            got = fn(S, y, m, normalization=normalization, reduction=reduction, **{name: value})
            assert float(got) == pytest.approx(scale * float(want), rel=1e-10), fn.__name__


def _tie_batch():
    """Anchor 0, positive 1 at distance 0.5, negative 2 at 0.75 and negative 3 at 0.5: with
    margin 0.25 the triplet (0, 1, 2) sits exactly on Eq. 19's boundary (0.5 + 0.25 = 0.75,
    all exact in binary), (0, 1, 3) inside it. ``S = 1 - D^2 / 2``."""
    S = torch.zeros(4, 4, dtype=torch.float64)
    S[0, 1] = S[1, 0] = S[0, 3] = S[3, 0] = 0.875
    S[0, 2] = S[2, 0] = 0.71875
    S.fill_diagonal_(1.0)
    return S, torch.tensor([0, 0, 1, 2])


@pytest.mark.parametrize("weighting", ["constant", "exponential"])
def test_a_triplet_on_eq19s_boundary_is_mined(weighting):
    """Eq. 19 mines ``D_ap + m >= D_an``: the boundary triplet has hinge 0 but a weight
    (``e^0`` or 1), which enters the anchor's normalisation."""
    S, y = _tie_batch()
    w = triplet_weights(S, y, 0.25, weighting=weighting, exponent=1.0, normalization="none")
    assert float(w[0, 1, 2]) == 1.0 and float(w[0, 1, 3]) > 0
    got = triplet_weighted_loss(S, y, 0.25, weighting=weighting, exponent=1.0)
    want = triplet_weighted_loss_reference(S, y, 0.25, weighting=weighting, exponent=1.0)
    assert float(got) == pytest.approx(float(want), rel=1e-12)


def _kept_and_moved(S, same, seed):
    """A symmetric random mask keeping about 70 % of the pairs, and ``S`` with every dropped
    positive moved to similarity 1 (distance 0) and every dropped negative to -1 (distance 2)."""
    keep = torch.rand(*S.shape, generator=torch.Generator().manual_seed(seed)) < 0.7
    keep = keep & keep.T
    moved = S.clone()
    moved[same & ~keep] = 1.0
    moved[~same & ~keep] = -1.0
    moved.fill_diagonal_(1.0)
    return keep, moved


def test_masks_act_as_triplets_moved_out_of_eq19():
    """A dropped positive pair moved to distance 0 and a dropped negative pair to distance 2
    leave Eq. 19 (every negative is farther than the margin, every positive nearer than 2 minus
    it), so the paper-literal loop on the
    moved similarities is the masked loss, and the weights agree."""
    S, y = _pk(34)
    same = y[:, None] == y[None, :]
    keep, moved = _kept_and_moved(S, same, seed=7)
    D = (2 - 2 * S).clamp_min(0).sqrt()
    assert float(D[~same].min()) > 0.2 and float(D[same].max()) < 2 - 0.2
    kw = dict(weighting="power", exponent=2.0, normalization="anchor")
    got = triplet_weighted_loss(S, y, 0.2, **kw, pos_mask=keep, neg_mask=keep)
    assert float(got) == pytest.approx(
        float(triplet_weighted_loss_reference(moved, y, 0.2, **kw)), rel=1e-10
    )
    torch.testing.assert_close(
        triplet_weights(S, y, 0.2, **kw, pos_mask=keep, neg_mask=keep),
        triplet_weights(moved, y, 0.2, **kw),
        rtol=1e-12, atol=1e-15,
    )  # fmt: skip


def test_large_power_in_float32_stays_the_float64_value():
    """``p = 200``: weights up to ``t^200`` are scaled by each anchor's largest before ``exp``, so
    float32 neither overflows nor underflows to an all-zero anchor."""
    from dmlbook.losses.liu_triplet import triplet_power_loss

    S, y = _pk(33)
    want = triplet_weighted_loss_reference(S, y, 0.3, weighting="power", exponent=200.0)
    got = triplet_power_loss(S.float(), y, 0.3, p=200.0)
    assert float(got) == pytest.approx(float(want), rel=1e-4)


@pytest.mark.parametrize("normalization", ["none", "anchor", "batch"])
def test_an_anchor_whose_only_triplet_is_on_the_boundary(normalization):
    """Anchor 0's one triplet has ``t = 0`` exactly: its power weight is ``0^p = 0`` and the
    loss (every anchor's) is the loop's, finite, in every normalisation."""
    S, y = _tie_batch()
    S, y = S[:3, :3], y[:3]
    for p in (2.0, 60.0):
        got = triplet_weighted_loss(
            S, y, 0.25, weighting="power", exponent=p, normalization=normalization
        )
        want = triplet_weighted_loss_reference(S, y, 0.25, weighting="power", exponent=p,
                                               normalization=normalization)  # fmt: skip
        assert bool(torch.isfinite(got)) and float(got) == pytest.approx(float(want), abs=1e-15)


def test_half_precision_in_gives_half_precision_out():
    S, y = _pk(35)
    value = triplet_weighted_loss(S.half(), y, 0.3)
    assert value.dtype == torch.float16
    want = triplet_weighted_loss_reference(S.half().double(), y, 0.3)
    assert float(value) == pytest.approx(float(want), rel=2e-3)


def test_power_and_exponential_triplet_losses_pass_the_masks_on():
    """Triplet-P and Triplet-E with a miner's masks: the loop on the similarities with the
    dropped pairs moved out of Eq. 19 (as for ``triplet_weighted_loss`` above)."""
    from dmlbook.losses.liu_triplet import triplet_exponential_loss, triplet_power_loss

    S, y = _pk(34)
    same = y[:, None] == y[None, :]
    keep, moved = _kept_and_moved(S, same, seed=8)
    for fn, weighting, kw in ((triplet_power_loss, "power", {"p": 2.0}),
                              (triplet_exponential_loss, "exponential", {"alpha": 2.0})):  # fmt: skip
        want = triplet_weighted_loss_reference(moved, y, 0.2, weighting=weighting, exponent=2.0)
        got = fn(S, y, 0.2, **kw, pos_mask=keep, neg_mask=keep)
        assert float(got) == pytest.approx(float(want), rel=1e-10), fn.__name__

"""Properties every registered loss must have: finite in float32 at beta = 50, the GPW sign
convention (Wang et al. Eq. 3), the edges (no positives, no negatives, one class, one sample),
masks that only narrow, and clear errors for bad input.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import assume, given, settings
from loss_cases import (
    ALL_LOSSES,
    VARIANTS,
    batches,
    grad_of,
    masks,
    pk_batch,
)

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import (
    BinLiftedLoss,
    BinomialDevianceLoss,
    ContrastiveDistanceLoss,
    LiftedStarLoss,
    LiftedStructureLoss,
    NPairLoss,
    TripletLoss,
    available_losses,
    binomial_deviance_loss,
    get_loss,
    lifted_loss,
    lifted_structure_loss,
    loss_parameters,
    npair_loss,
    triplet_loss,
)


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
        hp = {"margin": -0.99} if name == "contrastive" else {}  # (-1, 1): every negative
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


# ----------------------------------------------------------------------------- finite gradients

#: Every registered loss with its defaults, and the variants whose arithmetic differs most.
FINITE_CASES = [(name, {}) for name in available_losses()] + [
    ("multi_similarity", {"mining": False}),
    ("triplet", {"form": "distance", "mining": "batch_hard"}),
    ("cosine_triplet", {"mining": "all"}),
    ("lifted", {"form": "distance"}),
    ("npair", {"sampling": "all", "form": "distance"}),
    ("contrastive_distance", {"variant": "squared_hinge"}),
    ("ms_distance", {"version": "v1", "epsilon": None}),
    ("dro", {"uncertainty": "kl"}),
    ("dro", {"uncertainty": "chi2", "base": "binomial"}),
    ("dro_kl_g", {"pseudo_pairs": True, "base": "binomial"}),
    ("pair_e", {"normalization": "batch", "alpha": 1.0}),
    ("triplet_e", {"normalization": "batch"}),
    ("circle", {"detach_weights": False}),
]


def _scaled(name: str, hp: dict, factor: float) -> dict:
    """``hp`` with every positive float hyper-parameter multiplied by ``factor``, each one kept
    at its default where the loss refuses the scaled value (a cosine margin beyond 1, ...)."""
    out = dict(hp)
    for key, default in loss_parameters(name).items():
        value = out.get(key, default)
        if isinstance(value, float) and value > 0:
            try:
                get_loss(name, **{**out, key: value * factor})
                out[key] = value * factor
            except ValueError:
                pass
    return out


@st.composite
def edge_batches(draw):
    """Embeddings in float64 and labels: one class, all singletons, or a few classes; B = 1
    and duplicated samples (S = 1 off the diagonal) included."""
    B = draw(st.integers(1, 10))
    kind = draw(st.sampled_from(["one class", "singletons", "classes"]))
    if kind == "one class":
        y = [0] * B
    elif kind == "singletons":
        y = list(range(B))
    else:
        y = draw(st.lists(st.integers(0, 2), min_size=B, max_size=B))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    x = torch.randn(B, 4, generator=g, dtype=torch.float64)
    if B > 2 and draw(st.booleans()):
        x[1] = x[0]
    return x, torch.tensor(y)


@pytest.mark.parametrize(("name", "hp"), FINITE_CASES, ids=lambda v: str(v) if v else "defaults")
@settings(max_examples=12, deadline=None)
@given(
    edge_batches(),
    st.sampled_from([torch.float64, torch.float32, torch.bfloat16]),
    st.one_of(st.sampled_from([0.01, 1.0, 100.0]), st.floats(0.01, 100.0)),
)
def test_no_nan_or_inf_gradient_where_float64_is_finite(name, hp, batch, dtype, factor):
    """Whatever the dtype, hyper-parameters from 1/100 to 100 times their defaults, one-class and
    all-singleton batches: the loss and its gradient are finite wherever float64 autograd on the
    same batch is (the readable code is the only path, so it must be the stable one)."""
    x64, y = batch
    module = get_loss(name, **_scaled(name, hp, factor))
    ref = x64.clone().requires_grad_(True)
    value = module(ref, y)
    value.backward()
    assume(bool(torch.isfinite(value)) and bool(torch.isfinite(ref.grad).all()))
    x = x64.to(dtype).requires_grad_(True)
    value = get_loss(name, **_scaled(name, hp, factor))(x, y)
    value.backward()
    assert bool(torch.isfinite(value)), (name, value)
    assert bool(torch.isfinite(x.grad).all()), (name, x.grad)


def test_ms_at_large_alpha_on_one_class_has_a_finite_gradient():
    """The fused path that was removed returned loss 0 with a NaN gradient here (issue 33)."""
    for dtype, alpha in ((torch.float32, 100.0), (torch.float64, 700.0)):
        x = torch.randn(200, 8, dtype=dtype, generator=torch.Generator().manual_seed(0))
        x.requires_grad_(True)
        value = get_loss("multi_similarity", alpha=alpha)(x, torch.zeros(200, dtype=torch.long))
        value.backward()
        assert value.item() == 0.0 and bool(torch.isfinite(x.grad).all()) and not x.grad.any()


#: Sampling losses draw their pairs from the similarities, so a bf16 similarity can draw other
#: pairs than the float64 one: their gradient is compared only for being finite.
SAMPLED = {"dro_kl_sampled"}


@pytest.mark.parametrize("name", available_losses())
def test_bf16_autocast_stays_close_to_float64(name):
    """Under bf16 autocast (as the engine's ``train.bf16``) every registered loss runs, and its
    value and gradient stay within a few per cent of float64 (measured on an H200 and on this
    CPU: bench/results/gpu_check_h200.md; the histogram's nodes and gradient surgery's field
    are computed in float32)."""
    g = torch.Generator().manual_seed(0)
    x64 = torch.randn(32, 64, generator=g, dtype=torch.float64)
    y = torch.arange(8).repeat_interleave(4)
    results = []
    for dtype, bf16 in ((torch.float64, False), (torch.float32, True)):
        x = x64.detach().to(dtype).clone().requires_grad_(True)
        torch.manual_seed(0)
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            value = get_loss(name)(x, y)
        value.float().backward()
        results.append((value.detach().double(), x.grad.double()))
    (v64, g64), (v, grad) = results
    assert torch.isfinite(v) and torch.isfinite(grad).all()
    assert float(abs(v - v64)) <= 0.05 * max(float(abs(v64)), 1e-3), (float(v), float(v64))
    if name not in SAMPLED:
        assert float((grad - g64).norm()) <= 0.05 * float(g64.norm())


@pytest.mark.parametrize("name", available_losses())
def test_bool_labels_are_refused_by_every_loss(name):
    """Issue 45: bool labels passed every loss's fast input check, although
    ``validation.as_labels`` refuses them (two classes, or a mask passed by mistake?)."""
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([True, True, False, False, True, False])
    module = get_loss(name)
    with pytest.raises(TypeError, match=r"labels must be integer class ids, got dtype torch.bool"):
        module(x, labels)
    if module.loss_function is not None and name != "dro_kl_sampled":
        with pytest.raises(TypeError, match=r"labels must be integer class ids"):
            module.loss_function(cosine_similarity(x), labels)


#: Every loss function's defaults as its docstring (and the comment above it) documents them: a
#: call that leaves them out must compute what the call that passes them computes (values and
#: gradients). A changed default fails here until the table (and the book) says so.
_DRO = dict(
    uncertainty="topk", base="margin", K=160, gamma=0.1, rho=1.0, margin=0.2, threshold=0.5,
    alpha=2.0, beta=50.0, drop_zero=True,
)  # fmt: skip
_GROUPED = dict(
    gamma_pos=0.1, gamma_neg=0.1, base="margin", margin=0.2, threshold=0.5, alpha=2.0,
    beta=50.0, pseudo_pairs=False, pseudo_loss=0.0, drop_zero=True,
)  # fmt: skip
_PAIR_WEIGHTS = dict(
    pos_margin=0.0, neg_margin=0.8, weighting="power", pos_exponent=0.0, neg_exponent=1.0,
    normalization="anchor",
)  # fmt: skip
DOCUMENTED_DEFAULTS = {
    "binomial_deviance_loss": dict(alpha=2.0, beta=50.0, margin=0.5, reduction="mean"),
    "circle_loss": dict(gamma=80.0, margin=0.4, detach_weights=True, reduction="mean"),
    "contrastive_loss": dict(margin=0.5),
    "contrastive_distance_loss": dict(
        pos_margin=0.0, neg_margin=1.0, variant="hinge", reduction="mean"
    ),
    "dro_loss": _DRO,
    "dro_weights": _DRO,
    "dro_kl_grouped_loss": {**_GROUPED, "reduction": "mean"},
    "dro_kl_grouped_weights": _GROUPED,
    "hap2s_e_loss": dict(margin=0.2, gamma=0.1, reduction="mean"),
    "histograms": dict(R=101),
    "histogram_loss": dict(R=101),
    "lifted_loss": dict(margin=1.0, form="similarity", reduction="mean"),
    "lifted_weights": dict(margin=1.0),
    "lifted_structure_loss": dict(
        margin=1.0, form="distance", squared_hinge=True, joint_negatives=True, reduction="mean"
    ),  # fmt: skip
    "lifted_star_loss": dict(alpha=2.0, beta=50.0, reduction="mean"),
    "triplet_weights": dict(margin=0.1, weighting="power", exponent=5.0, normalization="anchor"),
    "triplet_weighted_loss": dict(
        margin=0.1, weighting="power", exponent=5.0, normalization="anchor", reduction="mean"
    ),  # fmt: skip
    "triplet_power_loss": dict(margin=0.1, p=5.0, normalization="anchor", reduction="mean"),
    "triplet_exponential_loss": dict(
        margin=0.1, alpha=40.0, normalization="anchor", reduction="mean"
    ),  # fmt: skip
    "pair_weights": _PAIR_WEIGHTS,
    "pair_weighted_loss": {**_PAIR_WEIGHTS, "reduction": "mean"},
    "pair_power_loss": dict(
        pos_margin=0.0, neg_margin=0.8, p=0.0, q=1.0, normalization="anchor", reduction="mean"
    ),  # fmt: skip
    "pair_exponential_loss": dict(
        pos_margin=0.0,
        neg_margin=0.8,
        alpha=0.0,
        beta=2.0,
        normalization="anchor",
        reduction="mean",
    ),  # fmt: skip
    "ms_distance_loss": dict(
        margin=1.0, alpha=2.0, beta=50.0, version="v2", epsilon=0.1, reduction="mean"
    ),  # fmt: skip
    "ms_distance_weights": dict(margin=1.0, alpha=2.0, beta=50.0, version="v2", epsilon=0.1),
    "ms_weights": dict(alpha=2.0, beta=50.0, margin=0.5),
    "multi_similarity_loss": dict(
        alpha=2.0, beta=50.0, margin=0.5, epsilon=0.1, mining=True, reduction="mean"
    ),  # fmt: skip
    "ms_mining_loss": dict(epsilon=0.1, mining=True, reduction="mean"),
    "npair_loss": dict(form="similarity", sampling="npair", reduction="mean"),
    "triplet_loss": dict(margin=0.1, form="similarity", reduction="mean"),
    "cosine_triplet_loss": dict(tau=16.0, mining="ephn", reduction="mean"),
}

#: Settings under which a default matters that the defaults alone leave unused.
DEFAULT_CONTEXTS = [
    ("dro_loss", {"uncertainty": "kl"}),
    ("dro_loss", {"uncertainty": "chi2"}),
    ("dro_loss", {"uncertainty": "kl", "base": "binomial"}),
    ("dro_weights", {"uncertainty": "kl"}),
    ("dro_weights", {"uncertainty": "chi2"}),
    ("dro_weights", {"uncertainty": "kl", "base": "binomial"}),
    ("dro_kl_grouped_loss", {"pseudo_pairs": True}),
    ("dro_kl_grouped_loss", {"base": "binomial"}),
    ("dro_kl_grouped_weights", {"pseudo_pairs": True}),
    ("dro_kl_grouped_weights", {"base": "binomial"}),
    ("lifted_loss", {"form": "distance"}),
    ("triplet_loss", {"form": "distance"}),
    ("pair_weighted_loss", {"weighting": "exponential"}),
    ("triplet_weighted_loss", {"weighting": "exponential"}),
    ("ms_distance_loss", {"version": "v1"}),
]


def _outputs_and_gradient(fn, S, y, kwargs):
    S = S.detach().clone().requires_grad_(True)
    out = fn(S, y, **kwargs)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if torch.is_tensor(o)]
    total = sum(o.sum() for o in outs if o.is_floating_point() and o.requires_grad)
    grad = torch.autograd.grad(total, S)[0] if torch.is_tensor(total) else None
    return [o.detach() for o in outs], grad


@pytest.mark.parametrize(
    ("name", "context"), [(n, {}) for n in DOCUMENTED_DEFAULTS] + DEFAULT_CONTEXTS
)
def test_called_without_hyper_parameters_uses_the_documented_defaults(name, context):
    import dmlbook.losses as losses

    fn = getattr(losses, name)
    S, y = pk_batch(5, classes=5, per=4)  # B = 20: 190 pairs, more than the top-K's K = 160
    given = {k: v for k, v in DOCUMENTED_DEFAULTS[name].items() if k not in context}
    left_out, left_grad = _outputs_and_gradient(fn, S, y, context)
    passed, passed_grad = _outputs_and_gradient(fn, S, y, {**context, **given})
    assert len(left_out) == len(passed) > 0
    for a, b in zip(left_out, passed, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    if passed_grad is not None:
        torch.testing.assert_close(left_grad, passed_grad, rtol=0, atol=0)

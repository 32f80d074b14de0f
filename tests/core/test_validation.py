"""Tests of the input checks every loss shares (dmlbook.core.validation, through dmlbook.core.pairs.check_batch)
and of the hyper-parameter checks declared once (dmlbook.losses.base): each case used to give a
silent wrong number, a NaN, or an error that did not name what was wrong (issue 29)."""

from __future__ import annotations

import inspect
import warnings
from typing import Literal

import numpy as np
import pytest
import torch

from dmlbook.core.pairs import check_batch
from dmlbook.core.validation import (
    NothingToLearnWarning,
    Real,
    Scale,
    as_labels,
    declared,
    hyper_parameters,
)
from dmlbook.losses import TripletLoss, get_loss

X = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
Y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def test_complex_embeddings_are_refused():
    z = torch.randn(4, 3, dtype=torch.complex64)
    with pytest.raises(TypeError, match=r"complex \(torch.complex64\).*view_as_real"):
        get_loss("contrastive")(z, Y[:4])


@pytest.mark.parametrize("name", ["multi_similarity", "contrastive", "npair"])
def test_norms_beyond_float32_are_an_error_not_a_zero_similarity(name):
    loss = get_loss(name)
    with pytest.raises(ValueError, match=r"rows .* have norms beyond the range of torch.float32"):
        loss(X * 1e19, Y)  # |x|^2 overflows: S was 0 and the loss finite and wrong
    # below the limit the cosine is scale-free: the same loss as the unscaled batch
    assert float(loss(X * 1e18, Y)) == pytest.approx(float(loss(X, Y)), rel=1e-5)


@pytest.mark.parametrize("name", ["multi_similarity", "gradient_surgery"])
def test_a_zero_row_in_float16_is_named_not_a_diverged_model(name):
    x = X.half()
    x[2] = 0
    with pytest.raises(ValueError, match=r"rows 2 have norm 0 in float16.*embeddings.float\(\)"):
        get_loss(name)(x.requires_grad_(), Y)
    assert torch.isfinite(get_loss(name)(x.float(), Y))  # float32 keeps a zero row finite


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        ([float("inf"), float("-inf")], "NaN or infinite"),
        ([1e19, 2e19], "cannot tell neighbouring ids apart"),
        ([16777216.0, 16777218.0], "cannot tell neighbouring ids apart"),  # float32: 2**24
    ],
)
def test_labels_that_would_merge_classes_are_refused(labels, match):
    with pytest.raises(ValueError, match=match):
        get_loss("contrastive")(X[:2], torch.tensor(labels))
    assert as_labels(torch.tensor([3.0, 7.0], dtype=torch.float64)).tolist() == [3, 7]


def test_a_batch_with_nothing_to_learn_warns_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            get_loss("multi_similarity")(X[:4], torch.tensor([0, 1, 2, 3]))  # k = 1
        get_loss("multi_similarity")(X[:4], torch.zeros(4, dtype=torch.long))  # one class
        check_batch(X, Y)  # a PK batch: no warning
    messages = [str(w.message) for w in caught if w.category is NothingToLearnWarning]
    assert len(messages) == 2, messages
    assert "no positive pair" in messages[0] and "no negative pair" in messages[1]
    assert all("nothing to learn" in m and "k >= 2" in m for m in messages)


def test_hyper_parameters_are_checked_by_name():
    with pytest.raises(
        ValueError, match=r"margin must be a finite number in \(-1, 1\) \(a cosine similarity\)"
    ):
        get_loss("contrastive", margin=-1.0)
    with pytest.raises(ValueError, match=r"margin must be a number, got 'a' \(str\)"):
        get_loss("contrastive", margin="a")
    with pytest.raises(ValueError, match=r"alpha must be a number, got \[2\] \(list\)"):
        get_loss("multi_similarity", alpha=[2])
    with pytest.raises(TypeError, match=r"reduction must be a string, got 3 \(int\)"):
        TripletLoss(reduction=3)  # the module itself: a TypeError
    assert get_loss("multi_similarity", alpha=2).alpha == 2.0  # an int is a number


def test_gradient_surgery_sig_ms_with_a_large_beta_is_finite_or_a_clear_error():
    """beta = 1000 on an ordinary 4 x 3 batch: both terms of 1 / (m + exp(x)) underflow in
    float32 and the gradient was NaN. float64 holds the true weights; float32 cannot and says so."""
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1])
    loss = get_loss("gradient_surgery", pair_weight="sig_ms", beta=1000.0)
    x64 = x.clone().requires_grad_()
    loss(x64, y).backward()
    assert torch.isfinite(x64.grad).all()
    with pytest.raises(ValueError, match=r"beyond torch.float32 .*Lower beta"):
        loss(x.float().requires_grad_(), y)
    # where float32 can hold them, the weights agree with float64's
    moderate = get_loss("gradient_surgery", pair_weight="sig_ms", beta=40.0)
    grads = []
    for dtype in (torch.float32, torch.float64):
        xd = x.to(dtype).requires_grad_()
        moderate(xd, y).backward()
        grads.append(xd.grad.double())
    assert torch.isfinite(grads[0]).all()
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- declared ranges


def test_a_declared_range_accepts_python_and_numpy_numbers_and_refuses_bools():
    from dmlbook.core.similarity import cosine_similarity
    from dmlbook.core.validation import Number, Scale, check_argument
    from dmlbook.losses import histogram_loss, histograms

    S = cosine_similarity(X.double())
    h_pos, _ = histograms(S, Y, R=np.int64(101))  # a numpy integer is an integer
    assert h_pos.shape == (101,)
    assert (
        get_loss("histogram", R=np.int32(11)).R == 11
        and type(get_loss("histogram", R=np.int64(11)).R) is int
    )
    assert check_argument("alpha", np.float32(2.0), Scale) == 2.0
    for bad, kind in (
        (True, TypeError),
        (np.bool_(True), TypeError),
        (2.5, TypeError),
        (1, ValueError),
    ):
        with pytest.raises(kind, match=r"^R must be an integer"):
            histogram_loss(S, Y, R=bad)
    with pytest.raises(
        ValueError, match=r"alpha must be a finite number in \[1e-06, 1e\+06\]"
    ) as err:
        check_argument("alpha", float("nan"), Scale)
    assert err.value.parameter == "alpha"
    assert repr(Number(-1.0, 1.0, open=True)) == "number in (-1, 1)"


def test_finite_values_that_overflow_the_loss_are_refused_by_their_range():
    """Issue 45: multi_similarity(alpha=1e308) gave loss 0.0 and a NaN gradient; a subnormal
    alpha gave inf (1 / alpha). Both are outside alpha's declared range, and say so."""
    for alpha in (1e308, 5e-324):
        with pytest.raises(ValueError, match=r"alpha must be a finite number in \[1e-06, 1e\+06\]"):
            get_loss("multi_similarity", alpha=alpha)
    x = X.double().requires_grad_(True)
    value = get_loss("multi_similarity", alpha=1e6, beta=1e-6)(x, Y)  # the ends of the range
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(x.grad).all()


@pytest.mark.parametrize("name", ["dro_kl_g", "dro_kl_sampled", "dro", "hap2s_e"])
@pytest.mark.parametrize("param", ["margin", "threshold"])
def test_dro_margins_that_are_nan_or_infinite_are_refused(name, param):
    """Issue 45: dro_kl_g and dro_kl_sampled with margin=nan returned a finite 0.0 (a config
    with ``margin: .nan`` trained 10 iterations at loss 0.0)."""
    from dmlbook.losses import loss_parameters

    assert param in loss_parameters(name) or (name, param) == ("hap2s_e", "threshold")
    if param not in loss_parameters(name):
        return  # hap2s_e has a margin only
    for value in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=rf"loss '{name}': {param} must be a finite number"):
            get_loss(name, **{param: value})


def test_a_declared_function_checks_once_and_trusts_the_calls_it_makes(monkeypatch):
    """Issue 37: each family's checks run once. pair_power_loss calls pair_weighted_loss, which
    calls pair_weights, all three declared: one call checks its arguments once; a module checks
    at construction and its forward checks nothing."""
    import dmlbook.core.validation as validation
    from dmlbook.core.similarity import cosine_similarity
    from dmlbook.losses import pair_power_loss

    calls = []
    real = validation.check_argument
    monkeypatch.setattr(validation, "check_argument", lambda *a: calls.append(a[0]) or real(*a))
    S = cosine_similarity(X.double())
    pair_power_loss(S, Y, 0.0, 0.8, p=2.0)
    assert sorted(calls) == ["neg_margin", "p", "pos_margin"]  # each once, no default
    calls.clear()
    module = get_loss("pair_p", p=2.0)
    assert "p" in calls
    calls.clear()
    module(X, Y)
    assert calls == []


def test_every_declared_default_is_in_its_own_range():
    """A call trusts the defaults it declares; each is checked here, against its annotation."""
    import dmlbook.losses as losses
    from dmlbook.core.validation import hyper_parameters

    declared = [f for f in map(losses.__dict__.get, losses.__all__) if hasattr(f, "trusted")]
    assert len(declared) > 25
    for f in declared:
        defaults = {
            n: p.default for n, p in hyper_parameters(f).items() if p.default is not p.empty
        }
        assert f.check(**defaults) == {**defaults, **f.check()}, f.__name__


def test_like_gives_bare_parameters_the_other_declaration_and_its_rules():
    """Issue 37: a family that reuses another's hyper-parameters says so once. The bare
    parameters of a ``like=`` function take the annotation, the default and the rules of the
    other; what it writes itself stays its own; a bare name the other lacks is refused."""

    def ordered(low: float, high: float) -> None:
        if low > high:
            raise ValueError("low > high")

    @declared(rules=(ordered,))
    def root(S, low: Real = 0.0, high: Real = 1.0, *, scale: Scale = 2.0, flag: bool = False):
        return (low, high, scale, flag)

    @declared(like=root)
    def sibling(S, low, high, *, scale: Scale = 5.0, flag):
        return (low, high, scale, flag)

    @declared(like=root)
    def part(S, *, scale, flag):
        return (scale, flag)

    assert sibling(None) == (0.0, 1.0, 5.0, False)  # root's defaults, its own scale
    assert part(None) == (2.0, False)
    assert sibling(None, 0.5, high=0.75, flag=True) == (0.5, 0.75, 5.0, True)
    params = inspect.signature(sibling).parameters
    assert params["low"].annotation is Real and params["flag"].annotation is bool
    assert list(hyper_parameters(sibling)) == ["low", "high", "scale", "flag"]
    with pytest.raises(ValueError, match="low > high"):  # root's rule came along
        sibling(None, 0.9, 0.1)
    with pytest.raises(ValueError, match="scale must be a finite number"):
        part(None, scale=0.0)
    with pytest.raises(TypeError, match="flag must be True or False"):
        sibling(None, flag="yes")
    with pytest.raises(TypeError, match=r"\['other'\] are not declared by root nor by loss_frame"):

        @declared(like=root)
        def stray(S, other):
            return other


def test_bare_frame_parameters_take_the_declaration_of_loss_frame():
    """Issue 37: the frame every loss shares (S, labels, reduction, the miner's masks) is declared
    once; a declared function names it bare and gets its annotation and default; any other bare
    name is refused."""

    @declared
    def f(S, labels, margin: Real = 1.0, *, reduction, pos_mask, neg_mask, triplet_mask):
        return margin, reduction, pos_mask, neg_mask, triplet_mask

    params = inspect.signature(f).parameters
    assert [p.name for p in params.values()][:2] == ["S", "labels"]
    assert params["S"].annotation is torch.Tensor and params["S"].default is params["S"].empty
    assert params["labels"].annotation is torch.Tensor
    assert params["reduction"].annotation == Literal["mean", "sum", "none"]
    assert params["reduction"].default == "mean"
    for mask in ("pos_mask", "neg_mask", "triplet_mask"):
        assert params[mask].annotation == (torch.Tensor | None) and params[mask].default is None
        assert params[mask].kind is params[mask].KEYWORD_ONLY
    assert f(None, None) == (1.0, "mean", None, None, None)
    assert list(hyper_parameters(f)) == ["margin", "reduction"]
    with pytest.raises(ValueError, match="reduction must be one of 'mean', 'sum', 'none'"):
        f(None, None, reduction="average")
    with pytest.raises(TypeError, match=r"\['x'\] are not declared by loss_frame"):

        @declared
        def stray(S, x):
            return x


def test_the_losses_signatures_spell_out_the_frame_they_declare_bare():
    """What a reader of ``help(circle_loss)`` sees: the frame's annotations and defaults, written
    out here by hand (Sun et al.'s gamma = 80, m = 0.4 are the function's own)."""
    from dmlbook.losses import circle_loss

    params = inspect.signature(circle_loss).parameters
    kinds = {p.name: (p.kind.name, p.default) for p in params.values()}
    assert kinds == {
        "S": ("POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        "labels": ("POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        "gamma": ("POSITIONAL_OR_KEYWORD", 80.0),
        "margin": ("POSITIONAL_OR_KEYWORD", 0.4),
        "detach_weights": ("KEYWORD_ONLY", True),
        "reduction": ("KEYWORD_ONLY", "mean"),
        "pos_mask": ("KEYWORD_ONLY", None),
        "neg_mask": ("KEYWORD_ONLY", None),
    }
    assert params["S"].annotation is torch.Tensor and params["labels"].annotation is torch.Tensor


from hypothesis import given  # noqa: E402 (the numpy-integer tests of issue 38)
from hypothesis import strategies as st  # noqa: E402

from dmlbook.core.validation import is_integer, is_number  # noqa: E402

NUMPY_INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@given(st.integers(0, 127), st.sampled_from(NUMPY_INTS))
def test_is_integer_takes_python_and_numpy_integers_only(v, dtype):
    """Issue 38: numpy integers count as integers; bool, numpy bool and floats never do."""
    assert is_integer(v) and is_integer(dtype(v)) and is_number(dtype(v)) and is_number(v)
    assert not is_integer(float(v)) and not is_integer(np.float64(v)) and not is_integer(str(v))
    assert is_number(float(v)) and is_number(np.float32(v))
    for flag in (True, False, np.bool_(True)):
        assert not is_integer(flag) and not is_number(flag)

"""Tests of the input checks every loss shares (dmlbook.core.validation, through dmlbook.core.pairs.check_batch)
and of the hyper-parameter checks declared once (dmlbook.losses.base): each case used to give a
silent wrong number, a NaN, or an error that did not name what was wrong (issue 29)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from dmlbook.core.pairs import check_batch
from dmlbook.core.validation import NothingToLearnWarning, Scale, as_labels
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
    from dmlbook.core.declaration import check_argument
    from dmlbook.core.similarity import cosine_similarity
    from dmlbook.core.validation import Number
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

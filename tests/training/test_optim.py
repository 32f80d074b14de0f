"""Tests of dmlbook.training.optim: the one optimiser factory, used by fit and the engine configs.

That a config's ``optim`` section reaches it is tested in ``tests/engine/test_build.py``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dmlbook.engine import build
from dmlbook.training import fit
from dmlbook.training.optim import OPTIMIZERS, check_optimizer, make_optimizer


def _param() -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.ones(3))


def test_fit_and_engine_share_the_factory():
    assert fit.__globals__["make_optimizer"] is make_optimizer  # what fit calls
    assert build.make_optimizer is make_optimizer  # what the engine's configs call
    assert OPTIMIZERS == ("adam", "adamw", "sgd")


@pytest.mark.parametrize(
    ("name", "kwargs", "cls", "expected"),
    [
        ("sgd", {}, torch.optim.SGD, {"momentum": 0.9, "nesterov": False}),
        ("SGD", {"momentum": 0.0}, torch.optim.SGD, {"momentum": 0.0}),
        ("sgd", {"momentum": 0.5, "nesterov": True}, torch.optim.SGD, {"nesterov": True}),
        ("adam", {"betas": (0.5, 0.9), "eps": 1e-6}, torch.optim.Adam, {"betas": (0.5, 0.9)}),
        ("adamw", {"weight_decay": 0.0}, torch.optim.AdamW, {"weight_decay": 0.0}),
    ],
)
def test_every_setting_reaches_the_torch_optimizer(name, kwargs, cls, expected):
    opt = make_optimizer([_param()], name, 0.1, **kwargs)
    assert type(opt) is cls
    group = opt.param_groups[0]
    assert group["lr"] == 0.1
    for key, value in {**kwargs, **expected}.items():
        assert group[key] == (tuple(value) if isinstance(value, tuple) else value), key


@given(lr=st.floats(1e-4, 1.0), momentum=st.sampled_from([0.0, 0.5, 0.9]))
def test_sgd_steps_match_the_update_rule(lr, momentum):
    """Two steps on f(w) = w . w / 2 (gradient w), against the rule written out by hand."""
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = make_optimizer([w], "sgd", lr, momentum=momentum)
    ref, buf = w.detach().clone(), None
    for _ in range(2):
        opt.zero_grad()
        (0.5 * (w * w).sum()).backward()
        opt.step()
        grad = ref.clone()
        buf = grad if buf is None else momentum * buf + grad
        ref = ref - lr * buf
    assert torch.allclose(w.detach(), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "rmsprop"}, "Unknown optimizer 'rmsprop'; use one of adam, adamw, sgd"),
        ({"lr": 0.0}, "lr must be a positive finite number"),
        ({"weight_decay": -1.0}, "weight_decay must be >= 0"),
        ({"momentum": 1.0}, r"momentum must be in \[0, 1\) \(0: plain SGD\)"),
        ({"name": "sgd", "momentum": 0.0, "nesterov": True}, "nesterov needs momentum > 0"),
        ({"betas": (0.9,)}, r"betas must be two numbers in \[0, 1\)"),
        ({"eps": 0.0}, "eps must be a positive number"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    args = {"name": "adam", "lr": 1e-3, **kwargs}
    with pytest.raises(ValueError, match=message):
        check_optimizer(args.pop("name"), args.pop("lr"), **args)
    with pytest.raises(ValueError, match=message):
        make_optimizer([_param()], **{"name": "adam", "lr": 1e-3, **kwargs})


def test_check_optimizer_takes_a_numpy_integer_learning_rate():
    """Issue 38: lr=numpy.int64(1) is a positive number, as lr=1 is; True is not."""
    import numpy as np

    for lr in (np.int64(1), np.int32(2), np.float32(0.5)):
        check_optimizer("sgd", lr)
    with pytest.raises(ValueError, match="lr must be"):
        check_optimizer("sgd", True)

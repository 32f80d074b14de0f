"""The loss registry (:mod:`dmlbook.losses.registry`): build by name, clear errors, extension."""

from __future__ import annotations

import inspect
import math

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import example, given, settings

from dmlbook.losses import (
    BinomialDevianceLoss,
    MSMiningLoss,
    MultiSimilarityLoss,
    NPairLoss,
    PairLoss,
    available_losses,
    get_loss,
    loss_parameters,
    register_loss,
)
from dmlbook.losses import registry as loss_registry


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
    with pytest.raises(ValueError, match=r"margin must be a finite number in \(-1, 1\)"):
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


def test_registered_in_the_loss_registry():
    assert isinstance(get_loss("multi_similarity"), MultiSimilarityLoss)
    assert isinstance(get_loss("MS", margin=1.0), MultiSimilarityLoss)
    assert isinstance(get_loss("multi-similarity", mining=False), MultiSimilarityLoss)
    assert isinstance(get_loss("ms_mining"), MSMiningLoss)
    with pytest.raises(ValueError, match="epsilon"):
        get_loss("ms", epsilonn=0.2)


#: Every value a careless or hostile caller can pass for a number: the whole float range (NaN,
#: infinities, subnormals, 1e308, signed zeros), numpy scalars, unbounded ints and bools.
HOSTILE = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 5e-324, -5e-324, 1e308, -1e308, 0.0, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.floats(width=32).map(np.float32),
    st.floats().map(np.float64),
    st.integers(-(2**70), 2**70),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.booleans(),
    st.booleans().map(np.bool_),
)
EVERY_PARAMETER = [(name, p) for name in available_losses() for p in loss_parameters(name)]
X = torch.randn(12, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
Y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])


def _refused_by_name(err: Exception, param: str) -> bool:
    return isinstance(err, ValueError | TypeError) and param in str(err) and "\n" not in str(err)


@pytest.mark.parametrize(("name", "param"), EVERY_PARAMETER)
@settings(max_examples=4, deadline=None)
@given(value=HOSTILE)
@example(value=math.nan)
@example(value=-math.inf)
@example(value=5e-324)
@example(value=1e308)
@example(value=-1e308)
@example(value=True)
@example(value=np.int64(3))
def test_every_hyper_parameter_over_the_whole_float_range(name, param, value):
    """Issue 45: for every registered loss and every hyper-parameter, a value from anywhere in
    the float range (or a numpy scalar, a huge int, a bool) is either refused with one line
    naming the parameter, by ``get_loss`` and by the loss function, or gives a finite loss and a
    finite gradient in float32 and float64 (no silent NaN, inf or crash inside torch)."""
    try:
        module = get_loss(name, **{param: value})
    except Exception as err:  # noqa: BLE001 - what was raised is the point
        assert _refused_by_name(err, param), (name, param, value, repr(err))
        refused = True
    else:
        refused = False
        for dtype in (torch.float32, torch.float64):
            x = X.to(dtype).clone().requires_grad_(True)
            loss = module(x, Y)
            loss.backward()
            assert torch.isfinite(loss) and torch.isfinite(x.grad).all(), (name, param, value)
    function = type(get_loss(name)).loss_function
    if function is None or param not in inspect.signature(function).parameters:
        return  # gradient surgery has no function of S; a module's own option (a miner, a seed)
    if any(p.default is p.empty for p in list(inspect.signature(function).parameters.values())[2:]):
        return  # dro_kl_sampled_loss needs a generator: its module is tested above
    S = (X @ X.T / (X.norm(dim=1)[:, None] * X.norm(dim=1)[None, :])).requires_grad_(True)
    try:
        loss = function(S, Y, **{param: value})
    except Exception as err:  # noqa: BLE001
        assert _refused_by_name(err, param) and refused, (name, param, value, repr(err))
        return
    assert not refused, (name, param, value, "the function accepts what the module refuses")
    loss.sum().backward()
    assert torch.isfinite(loss).all() and torch.isfinite(S.grad).all(), (name, param, value)


def test_registry_refusals_are_whole_sentences():
    """Each refusal word for word: what was wrong, the names involved, and what to do."""
    import re

    import torch

    from dmlbook.losses import describe_loss, get_loss, register_loss

    cases = [
        (TypeError, lambda: register_loss("h7_not_callable", 3),
         "factory for loss 'h7_not_callable' must be callable, got int."),
        (ValueError, lambda: register_loss("contrastive", lambda **k: None),
         "loss name(s) 'contrastive' already registered; pass overwrite=True to replace them."),
        (ValueError, lambda: register_loss("contrastive", lambda **k: None, aliases=("ms",)),
         "loss name(s) 'contrastive', 'ms' already registered; pass overwrite=True to replace "
         "them."),
        (ValueError, lambda: get_loss("npair", marginn=1),
         "loss 'npair' has no hyper-parameter 'marginn'. It accepts: form='similarity', "
         "sampling='npair', reduction='mean'."),
        (ValueError, lambda: get_loss("contrastive_distance", pos_margn=0.1, neg_margn=1.0),
         "loss 'contrastive_distance' has no hyper-parameter 'neg_margn', 'pos_margn' "
         "('neg_margn' -> 'neg_margin'?; 'pos_margn' -> 'pos_margin'?). It accepts: "
         "pos_margin=0.0, neg_margin=1.0, variant='hinge', reduction='mean'."),
        (ValueError, lambda: describe_loss(torch.nn.MSELoss()),
         "MSELoss is not in the loss registry, so it cannot be named in a config; register it "
         "with dmlbook.losses.register_loss(name, MSELoss)."),
    ]  # fmt: skip
    for error, call, message in cases:
        with pytest.raises(error, match="^" + re.escape(message) + "$"):
            call()


def test_registering_replaces_names_and_aliases_and_wraps_a_factory_s_errors(monkeypatch):
    """On a copy of the registry: ``overwrite=True`` turns an alias into a name and a name into
    an alias; a factory taking ``**kwargs`` accepts any hyper-parameter; its errors come back as
    ``ValueError`` naming the loss (a ``ValueError`` without ``parameter`` unchanged)."""
    from dmlbook.losses import get_loss, register_loss

    monkeypatch.setattr(loss_registry, "_REGISTRY", dict(loss_registry._REGISTRY))
    monkeypatch.setattr(loss_registry, "_ALIASES", dict(loss_registry._ALIASES))

    def anything(**kwargs):
        return kwargs

    register_loss("ms", anything, overwrite=True)  # "ms" was multi_similarity's alias
    assert get_loss("ms", whatever=1) == {"whatever": 1}
    register_loss("h7_new", anything, aliases=("ms",), overwrite=True)  # and now an alias again
    assert get_loss("ms", other=2) == {"other": 2} and "ms" not in loss_registry._REGISTRY

    def failing(error):
        def factory(**kwargs):
            raise error

        return factory

    named = ValueError("margin must be positive")
    named.parameter = "margin"
    register_loss("h7_type", failing(TypeError("boom")))
    register_loss("h7_named", failing(named))
    register_loss("h7_plain", failing(ValueError("plain")))
    with pytest.raises(ValueError, match=r"^could not build loss 'h7_type': boom$"):
        get_loss("h7_type")
    with pytest.raises(ValueError, match=r"^loss 'h7_named': margin must be positive$") as info:
        get_loss("h7_named")
    assert info.value.parameter == "margin"
    with pytest.raises(ValueError, match=r"^plain$"):
        get_loss("h7_plain")


def test_names_forgive_case_spaces_and_hyphens_and_unknown_names_get_suggestions(monkeypatch):
    import re

    from dmlbook.losses import available_losses, get_loss, register_loss

    assert type(get_loss("Multi similarity")) is type(get_loss("multi_similarity"))
    assert type(get_loss("lifted-star")) is type(get_loss("lifted_star"))
    with pytest.raises(TypeError, match=r"^loss name must be a str, got int\.$"):
        get_loss(3)
    message = (f"unknown loss 'contrastiv'. Did you mean 'contrastive', 'contrastive_distance'? "
               f"Available: {', '.join(available_losses())}.")  # fmt: skip
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        get_loss("contrastiv")
    with pytest.raises(ValueError, match=r"^unknown loss 'zzz'\. Available: "):
        get_loss("zzz")
    monkeypatch.setattr(loss_registry, "_REGISTRY", dict(loss_registry._REGISTRY))
    monkeypatch.setattr(loss_registry, "_ALIASES", dict(loss_registry._ALIASES))

    def needs_a(*, a, b=1):
        return a, b

    def takes_nothing():
        return None

    register_loss("h7_needs_a", needs_a)
    register_loss("h7_nothing", takes_nothing)
    with pytest.raises(
        ValueError, match=r"^loss 'h7_needs_a' has no hyper-parameter 'c'\. It accepts: a, b=1\.$"
    ):
        get_loss("h7_needs_a", c=3)
    with pytest.raises(
        ValueError, match=r"^loss 'h7_nothing' has no hyper-parameter 'c'\. It accepts: \(none\)\.$"
    ):
        get_loss("h7_nothing", c=3)


def test_an_unknown_name_gets_at_most_three_suggestions():
    from dmlbook.losses import get_loss

    with pytest.raises(
        ValueError, match=r"Did you mean 'triplet', 'triplet_p', 'triplet_e'\? Available"
    ):
        get_loss("triplt")

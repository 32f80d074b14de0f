"""The loss registry (:mod:`dmlbook.losses.registry`): build by name, clear errors, extension."""

from __future__ import annotations

import pytest

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

"""The thin loss modules (:mod:`dmlbook.losses.base`): a module normalises, forms S and calls its
pure function with every one of its declared hyper-parameters.
"""

from __future__ import annotations

import pytest
import torch
from loss_cases import (
    VARIANTS,
    pk_batch,
)

from dmlbook.core.similarity import cosine_similarity
from dmlbook.losses import (
    BinomialDevianceLoss,
    ContrastiveDistanceLoss,
    LiftedLoss,
    PairLoss,
    TripletLoss,
    available_losses,
    binlifted_loss,
    binomial_deviance_loss,
    contrastive_distance_loss,
    contrastive_loss,
    get_loss,
    lifted_loss,
    lifted_star_loss,
    lifted_structure_loss,
    loss_parameters,
    npair_loss,
)


@pytest.mark.parametrize(("name", "hp"), VARIANTS)
def test_module_normalises_and_calls_its_function(name, hp):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 4, generator=g, dtype=torch.float64) * 5
    y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    module = get_loss(name, **hp)
    assert isinstance(module, PairLoss)
    want = module.loss_on_similarity(cosine_similarity(x), y)
    assert float(module(x, y)) == pytest.approx(float(want), rel=1e-12, abs=1e-15)
    assert float(module(3 * x, y)) == pytest.approx(float(want), rel=1e-12, abs=1e-15)


PURE = {
    "contrastive": (contrastive_loss, {"margin": 0.3}),
    "contrastive_distance": (
        contrastive_distance_loss,
        {
            "pos_margin": 0.2,
            "neg_margin": 1.5,
            "variant": "squared_hinge",
            "reduction": "sum",
        },
    ),
    "lifted": (
        lifted_loss,
        {"margin": 0.7, "form": "distance", "reduction": "sum"},
    ),
    "lifted_structure": (
        lifted_structure_loss,
        {
            "margin": 0.8,
            "form": "squared_distance",
            "squared_hinge": False,
            "joint_negatives": False,
            "reduction": "sum",
        },
    ),  # fmt: skip
    "lifted_star": (
        lifted_star_loss,
        {"alpha": 3.0, "beta": 20.0, "reduction": "sum"},
    ),
    "binomial": (
        binomial_deviance_loss,
        {"alpha": 3.0, "beta": 20.0, "margin": 0.2, "reduction": "sum"},
    ),
    "binlifted": (
        binlifted_loss,
        {"alpha": 3.0, "beta": 20.0, "margin": 0.2, "reduction": "sum"},
    ),
    "npair": (npair_loss, {"form": "distance", "sampling": "all", "reduction": "sum"}),
}


@pytest.mark.parametrize("name", sorted(PURE))
def test_module_passes_every_setting_to_its_function(name):
    fn, hp = PURE[name]
    assert set(hp) == set(loss_parameters(name)), "PURE must set every hyper-parameter"
    S, y = pk_batch()
    module = get_loss(name, **hp)
    assert torch.equal(module.loss_on_similarity(S, y), fn(S, y, **hp))
    assert not torch.equal(module.loss_on_similarity(S, y), get_loss(name).loss_on_similarity(S, y))
    shown = repr(module)
    assert all(f"{k}={v!r}" in shown for k, v in hp.items()), shown


def test_pair_loss_without_a_function_says_what_to_do():
    class Bare(PairLoss):
        pass

    with pytest.raises(NotImplementedError, match="must set loss_function or override"):
        Bare()(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]))


def test_module_forwards_miner_masks():
    x = torch.randn(6, 3, dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    none = torch.zeros(6, 6, dtype=torch.bool)
    for module in (LiftedLoss(), TripletLoss(), BinomialDevianceLoss(), ContrastiveDistanceLoss()):
        assert module(x, y, pos_mask=none, neg_mask=none).item() == 0.0


# Second derivatives (gradgradcheck for every loss and setting, or the refusal of a loss that holds
# part of its gradient fixed): tests/losses/test_first_order.py.


def test_a_subclass_defined_at_run_time_declares_its_function_and_options():
    """A ``PairLoss`` subclass made after import: its signature is the loss function's
    hyper-parameters (in their kind) with ``module_options`` merged in (a shared name takes the
    module's default), its ``_passed`` only the function's; a module built from it calls the
    function with those settings."""
    import inspect

    from dmlbook.core.similarity import cosine_similarity
    from dmlbook.losses import PairLoss, contrastive_distance_loss

    class Mine(PairLoss):
        loss_function = staticmethod(contrastive_distance_loss)

        @staticmethod
        def module_options(*, neg_margin: float = 1.5, seed: int = 0) -> None:
            """A module default for one of the function's settings, and a setting of its own."""

    sig = inspect.signature(Mine)
    assert list(sig.parameters) == ["pos_margin", "neg_margin", "variant", "reduction", "seed"]
    assert sig.parameters["neg_margin"].default == 1.5
    assert sig.parameters["neg_margin"].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert sig.parameters["seed"].annotation is int  # evaluated, not the string "int"
    assert Mine._passed == ("pos_margin", "neg_margin", "variant", "reduction")
    assert Mine.hyper_parameters == ("pos_margin", "neg_margin", "variant", "reduction", "seed")
    module = Mine(0.1, seed=3)
    assert (module.pos_margin, module.neg_margin, module.seed) == (0.1, 1.5, 3)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    want = contrastive_distance_loss(cosine_similarity(x), y, 0.1, 1.5)
    assert float(module(x, y)) == pytest.approx(float(want), rel=1e-12)
    assert (
        repr(module)
        == "Mine(pos_margin=0.1, neg_margin=1.5, variant='hinge', reduction='mean', seed=3)"
    )


def test_a_plain_loss_function_and_a_missing_one():
    """A ``loss_function`` that is a plain (undeclared) function is called as it is; a module
    with none says what to set."""
    from dmlbook.losses import PairLoss

    def plain(S, labels, *, pos_mask=None, neg_mask=None):
        return S.sum()

    class Plain(PairLoss):
        loss_function = staticmethod(plain)

    class Bare(PairLoss):
        pass

    x = torch.eye(3, dtype=torch.float64)
    assert float(Plain()(x, torch.tensor([0, 0, 1]))) == 3.0
    with pytest.raises(
        NotImplementedError, match=r"^Bare must set loss_function or override loss_on_similarity\.$"
    ):
        Bare()(x, torch.tensor([0, 0, 1]))


def test_a_module_refuses_a_reduction_that_is_not_a_scalar():
    from dmlbook.losses import TripletLoss

    message = (r"^reduction must be one of 'mean', 'mean_nonzero', 'sum' for a module \(it returns "
               r"a scalar\); got 'none'\.$")  # fmt: skip
    with pytest.raises(ValueError, match=message):
        TripletLoss(reduction="none")


def test_a_subclass_with_only_a_settings_class_declares_its_parameters():
    import inspect

    from dmlbook.losses import PairLoss

    class Spec:
        def __init__(self, a: float = 1.0) -> None:
            self.a = float(a)

    class OnlySettings(PairLoss):
        hyper = Spec

    assert list(inspect.signature(OnlySettings).parameters) == ["a"]
    assert OnlySettings(a=2).a == 2.0


@pytest.mark.parametrize("name", available_losses())
def test_a_setting_assigned_after_construction_is_checked_and_a_bad_one_not_stored(name):
    """``loss.alpha = nan`` is refused as the constructor refuses it (the calls trust the stored
    settings, so an unchecked one would reach the loss: NaN, or an unknown reduction read as
    the mean); the module keeps its value, and a good value is taken."""
    module = get_loss(name)
    for setting, default in loss_parameters(name).items():
        if isinstance(default, bool):
            bad = "maybe"
        elif isinstance(default, str):
            bad = "no such choice"
        else:  # a number, or None where a number may be given
            bad = float("nan")
        with pytest.raises((ValueError, TypeError), match=setting):
            setattr(module, setting, bad)
        assert getattr(module, setting) == default, setting
        setattr(module, setting, default)
        assert getattr(module, setting) == default

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

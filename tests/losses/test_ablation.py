"""The Table 2 loss family of Wang et al. 2019 (:mod:`dmlbook.losses.ablation`)."""

from __future__ import annotations

import pytest
import torch
from loss_cases import (
    rand_S,
)

from dmlbook.losses import (
    TABLE_2,
    MinedPairLoss,
    MultiSimilarityLoss,
    PairLoss,
    ablation_loss,
    binomial_deviance_loss,
    lifted_star_loss,
    table_2_names,
)
from dmlbook.mining import ms_mining_masks


@pytest.mark.parametrize("name", table_2_names())
def test_every_variant_builds_and_trains_a_step(name):
    loss_fn = ablation_loss(name, margin=0.5)
    assert isinstance(loss_fn, PairLoss)
    x = torch.randn(20, 8, requires_grad=True)
    y = torch.arange(20) % 4
    loss = loss_fn(x, y)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    mined = next(v.mined for v in TABLE_2 if v.name == name)
    assert ("P" in next(v.similarities for v in TABLE_2 if v.name == name)) == mined


def test_mined_variants_are_the_base_losses_on_ms_masks():
    S = rand_S(12, 9)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    pos, neg = ms_mining_masks(S, y, 0.1)
    got = ablation_loss("binomial_m", margin=0.5).loss_on_similarity(S, y)
    want = binomial_deviance_loss(S, y, 2.0, 50.0, 0.5, pos_mask=pos, neg_mask=neg)
    assert float(got) == pytest.approx(float(want), rel=1e-12)
    got = ablation_loss("LiftedStruct*_m").loss_on_similarity(S, y)
    want = lifted_star_loss(S, y, 2.0, 50.0, pos_mask=pos, neg_mask=neg)
    assert float(got) == pytest.approx(float(want), rel=1e-12)
    assert float(ablation_loss("Binomial").loss_on_similarity(S, y)) != pytest.approx(
        float(ablation_loss("Binomial_m").loss_on_similarity(S, y)), rel=1e-6
    )
    ms_w = ablation_loss("MS weighting", margin=0.7)
    assert isinstance(ms_w, MultiSimilarityLoss) and not ms_w.mining and ms_w.margin == 0.7
    assert isinstance(ablation_loss("ms"), MultiSimilarityLoss) and ablation_loss("ms").mining
    assert isinstance(ablation_loss("lifted_star_m"), MinedPairLoss)
    with pytest.raises(ValueError, match="Table 2"):
        ablation_loss("triplet")
    with pytest.raises(ValueError, match="beta"):
        ablation_loss("MS", beta=0)

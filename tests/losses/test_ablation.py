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


def _ablation_batch():
    g = torch.Generator().manual_seed(61)
    x = torch.randn(12, 6, generator=g, dtype=torch.float64)
    y = torch.arange(4).repeat_interleave(3)
    keep = torch.rand(12, 12, generator=g) < 0.8
    return x, y, keep & keep.T


def test_every_table_2_variant_passes_its_settings_and_masks_on():
    """``ablation_loss(name, alpha, beta, lambda, epsilon)`` on embeddings with a miner's masks:
    the named loss function with those settings, on the MS-mined pairs (Eq. 11-12, this
    epsilon, within the masks) where the variant mines; the module says so in its repr."""
    from dmlbook.core.similarity import cosine_similarity
    from dmlbook.losses import binlifted_loss, ms_mining_loss, multi_similarity_loss
    from dmlbook.losses.ablation import table_2_names, table_2_variant

    x, y, keep = _ablation_batch()
    S = cosine_similarity(x)
    settings = dict(alpha=3.0, beta=20.0, margin=0.4, epsilon=0.25)
    for name in table_2_names():
        v = table_2_variant(name)
        base = v.name.removesuffix("_m")
        loss = ablation_loss(name, **settings)
        for masks in ({}, {"pos_mask": keep, "neg_mask": keep}):
            got = loss(x, y, **masks)
            if base in ("MS", "MS weighting"):
                want = multi_similarity_loss(
                    S, y, 3.0, 20.0, 0.4, 0.25, mining=base == "MS", **masks
                )
            elif base == "MS mining":
                want = ms_mining_loss(S, y, 0.25, **masks)
            else:
                fn = {"Binomial": binomial_deviance_loss, "LiftedStruct*": lifted_star_loss,
                      "BinLifted": binlifted_loss}[base]  # fmt: skip
                hp = {"alpha": 3.0, "beta": 20.0} | (
                    {} if base == "LiftedStruct*" else {"margin": 0.4}
                )
                pm, nm = masks.get("pos_mask"), masks.get("neg_mask")
                if v.mined:
                    pm, nm = ms_mining_masks(S, y, 0.25, pos_mask=pm, neg_mask=nm)
                want = fn(S, y, **hp, pos_mask=pm, neg_mask=nm)
            assert float(got) == pytest.approx(float(want), rel=1e-12), (name, masks)
        if isinstance(loss, MinedPairLoss):
            hp_text = "alpha=3.0, beta=20.0" + ("" if base == "LiftedStruct*" else ", margin=0.4")
            mined_text = ", epsilon=0.25" if v.mined else ""
            assert repr(loss).endswith(f"({v.name}: {hp_text}, mining={v.mined}{mined_text})")
    default = ablation_loss("MS")(x, y)
    assert float(default) == pytest.approx(float(multi_similarity_loss(S, y, 2.0, 50.0, 0.5, 0.1)))


def test_mined_pair_loss_defaults_and_its_name():
    """``MinedPairLoss(fn)``: MS mining with epsilon 0.1, named after its function; a
    non-callable is refused naming what it got."""
    from dmlbook.core.similarity import cosine_similarity

    x, y, _ = _ablation_batch()
    S = cosine_similarity(x)
    loss = MinedPairLoss(binomial_deviance_loss)
    pm, nm = ms_mining_masks(S, y, 0.1)
    assert float(loss(x, y)) == pytest.approx(
        float(binomial_deviance_loss(S, y, pos_mask=pm, neg_mask=nm))
    )
    assert loss.name == "binomial_deviance_loss" and repr(loss).endswith(
        "(binomial_deviance_loss: , mining=True, epsilon=0.1)"
    )
    with pytest.raises(TypeError, match=r"^loss_fn must be callable, got int\.$"):
        MinedPairLoss(3)


def test_table_2_names_forgive_case_spaces_and_hyphens_and_refusals_say_what_to_use():
    import functools
    import re

    from dmlbook.losses.ablation import table_2_variant

    assert table_2_variant("ms-weighting") == table_2_variant("MS weighting")
    assert table_2_variant(" binomial_M ") == table_2_variant("Binomial_m")
    with pytest.raises(TypeError, match=r"^a Table 2 name must be a str, got int\.$"):
        table_2_variant(3)
    names = ("'Binomial', 'LiftedStruct*', 'MS mining', 'BinLifted', 'MS weighting', "
             "'Binomial_m', 'LiftedStruct*_m', 'MS'")  # fmt: skip
    message = f"unknown Table 2 variant 'foo'; use one of {names}."
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        table_2_variant("foo")
    assert MinedPairLoss(functools.partial(binomial_deviance_loss)).name == "loss"  # no __name__


def test_mined_pair_loss_checks_a_declared_loss_once_at_construction(monkeypatch):
    """``MinedPairLoss`` checks a declared loss's settings (and refuses an unknown one) when built,
    and its forward checks none again: neither the loss's nor the miner's epsilon."""
    import dmlbook.core.declaration as declaration
    from dmlbook.core.similarity import cosine_similarity

    with pytest.raises(ValueError, match="beta"):
        MinedPairLoss(binomial_deviance_loss, {"beta": 0.0})
    with pytest.raises(TypeError, match="betta"):
        MinedPairLoss(binomial_deviance_loss, {"betta": 40.0})
    loss = MinedPairLoss(binomial_deviance_loss, {"alpha": 3, "beta": 40.0})
    assert loss.hparams == {"alpha": 3.0, "beta": 40.0}
    lifted = ablation_loss("LiftedStruct*_m")
    checked = []
    real = declaration.check_argument
    monkeypatch.setattr(
        declaration, "check_argument", lambda *a: (checked.append(a[0]), real(*a))[1]
    )
    x, y, _ = _ablation_batch()
    loss(x, y)
    lifted(x, y)
    assert checked == []
    binomial_deviance_loss(cosine_similarity(x), y, beta=40.0)  # the counter sees a call's check
    assert checked == ["beta"]


def test_mined_pair_loss_calls_a_plain_function_of_its_own_as_given():
    """A loss function that is not declared (a student's own) is called as it is, with its
    settings and the mined masks."""
    from dmlbook.core.similarity import cosine_similarity

    def pulled_apart(S, labels, *, scale=1.0, pos_mask=None, neg_mask=None):
        return scale * (S[neg_mask].sum() - S[pos_mask].sum())

    x, y, _ = _ablation_batch()
    S = cosine_similarity(x)
    pm, nm = ms_mining_masks(S, y, 0.2)
    loss = MinedPairLoss(pulled_apart, {"scale": 3.0}, epsilon=0.2)
    assert loss.hparams == {"scale": 3.0}
    want = 3.0 * (S[nm].sum() - S[pm].sum())
    assert float(loss(x, y)) == pytest.approx(float(want), rel=1e-12)


def test_a_setting_the_row_does_not_use_is_still_checked():
    """LiftedStruct* has no lambda, so no module it builds reads ``margin``: ``ablation_loss``'s
    own declaration is what refuses a bad one."""
    with pytest.raises(ValueError, match="margin must be a finite number"):
        ablation_loss("LiftedStruct*", margin=float("nan"))

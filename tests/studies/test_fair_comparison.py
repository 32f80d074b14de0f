"""Tests of dmlbook.studies.fair_comparison: the split, the families, the intervals.

Intervals are checked against scipy's own (``stats.t.interval``, ``ttest_rel``'s confidence
interval), not against the formula the module uses.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from dmlbook.data import load_dataset
from dmlbook.studies import fair_comparison as fc


@pytest.fixture(scope="module")
def train():
    return load_dataset("omniglot", "train")


def alphabets(ds) -> set[str]:
    return {ds.class_names[int(c)].split("/")[1] for c in ds.classes}


def test_validation_split_holds_out_two_training_alphabets(train):
    fit_part, val = fc.validation_split(train)
    assert alphabets(val) == set(fc.VALIDATION_ALPHABETS)
    assert alphabets(fit_part) == {"Greek", "Korean", "Latin"}
    assert (fit_part.num_classes, val.num_classes) == (90, 46)
    assert len(fit_part) + len(val) == len(train) == 2720
    assert not set(fit_part.classes.tolist()) & set(val.classes.tolist())
    test = load_dataset("omniglot", "test")
    assert not alphabets(test) & (alphabets(fit_part) | alphabets(val))  # test never touched
    with pytest.raises(ValueError, match="validation alphabets"):
        fc.validation_split(val)


def test_every_family_of_the_book_is_there_and_every_setting_builds():
    labels = [f.label for f in fc.FAMILIES]
    assert len(labels) == len(set(labels)) == 14
    names = {f.name for f in fc.FAMILIES}
    assert {
        "multi_similarity",
        "pair_e",
        "triplet_e",
        "dro_kl_g",
        "dro",
        "gradient_surgery",
    } <= names
    assert {
        "contrastive",
        "triplet",
        "lifted",
        "lifted_star",
        "binomial",
        "npair",
        "binlifted",
    } <= names
    surgery = fc.family("gradient surgery (best)").grid[0]
    assert (surgery["direction"], surgery["pair_weight"], surgery["triplet_weight"]) == (
        "cos_orth",
        "lin_ms",
        "cir",
    )  # Xuan & Pless's Table 5 combination
    assert fc.family("DRO-TopK-PN").grid[0]["uncertainty"] == "topk_pn"
    x = torch.nn.functional.normalize(
        torch.randn(20, 8, generator=torch.Generator().manual_seed(0)), dim=1
    )
    y = torch.arange(4).repeat_interleave(5)
    for fam in fc.FAMILIES:
        for hp in fam.grid:
            assert torch.isfinite(fam.build(hp)(x, y)), (fam.label, hp)
    with pytest.raises(ValueError, match="unknown loss family"):
        fc.family("ArcFace")


def test_grid_is_every_combination_first_values_first():
    assert fc.family("Pair-E").grid == (
        {"alpha": 0.0, "beta": 2.0}, {"alpha": 0.0, "beta": 10.0},
        {"alpha": 2.0, "beta": 2.0}, {"alpha": 2.0, "beta": 10.0},
    )  # fmt: skip


def test_select_tuned_takes_the_best_and_the_first_of_ties():
    rows = pd.DataFrame(
        {
            "loss": ["a", "a", "a", "b", "b"],
            "hparams": [json.dumps({"m": v}) for v in (1, 2, 3, 1, 2)],
            "val MAP@R": [0.2, 0.4, 0.3, 0.5, 0.5],
        }
    )
    assert fc.select_tuned(rows) == {"a": {"m": 2}, "b": {"m": 1}}
    with pytest.raises(ValueError, match="lacks column"):
        fc.select_tuned(rows.drop(columns="hparams"))


def test_intervals_match_scipy():
    rng = np.random.default_rng(0)
    seeds = [0, 1, 2, 3]
    a, b = rng.normal(0.3, 0.02, 4), rng.normal(0.25, 0.02, 4)
    results = pd.DataFrame(
        {"loss": ["A"] * 4 + ["B"] * 4, "seed": seeds * 2, "err": np.concatenate([a, b])}
    )
    means = fc.mean_intervals(results, "err")
    low, high = stats.t.interval(0.95, 3, loc=a.mean(), scale=stats.sem(a))
    assert means.loc["A", "low"] == pytest.approx(low) and means.loc["A", "high"] == pytest.approx(
        high
    )
    assert means.loc["B", "seeds"] == 4
    paired = fc.paired_intervals(results, "A", "err")
    ci = stats.ttest_rel(b, a).confidence_interval(0.95)
    assert paired.loc["B", "low"] == pytest.approx(ci.low)
    assert paired.loc["B", "high"] == pytest.approx(ci.high)
    assert paired.loc["B", "wins"] == int((b > a).sum())
    as_error = fc.paired_intervals(results, "A", "err", lower_is_better=True)
    assert as_error.loc["B", "wins"] == int((b < a).sum())  # an error: lower wins
    one = fc.mean_intervals(results[results.seed == 0], "err")
    assert np.isnan(one.loc["A", "low"])  # one seed: no interval
    with pytest.raises(ValueError, match="unknown reference"):
        fc.paired_intervals(results, "C", "err")


def test_a_seed_fixes_the_run_and_the_smoke_scale_trains(train):
    fam = fc.family("MS")
    scale = fc.SCALES["smoke"]
    one = fc.train_one(fam, fam.grid[0], train, scale, seed=3)
    two = fc.train_one(fam, fam.grid[0], train, scale, seed=3)
    for p, q in zip(one.parameters(), two.parameters(), strict=True):
        assert torch.equal(p, q)
    test = load_dataset("omniglot", "test")
    from dmlbook.data.omniglot import one_shot_runs

    metrics = fc.score(one, test, one_shot_runs())
    assert set(metrics) == {"one-shot error", "MAP@R", "R@1"}
    assert all(0 <= v <= 1 for v in metrics.values())


def tuning(fam, scores):
    """Tuning rows of ``fam`` scoring its grid settings in order."""
    return pd.DataFrame(
        {"loss": fam.label, "hparams": [json.dumps(hp, sort_keys=True) for hp in fam.grid[: len(scores)]],
         "val MAP@R": scores}
    )  # fmt: skip


def test_extension_steps_beyond_an_end_of_the_grid_once():
    binomial = fc.family("binomial")  # beta 50, 25, 10, geometric steps
    assert fc.extension(binomial, tuning(binomial, [0.3, 0.4, 0.5])) == {"beta": 4.0}
    assert fc.extension(binomial, tuning(binomial, [0.5, 0.4, 0.3])) == {"beta": 100.0}
    assert fc.extension(binomial, tuning(binomial, [0.3, 0.5, 0.4])) is None  # inside: done
    assert fc.extension(binomial, tuning(binomial, [0.3, 0.4])) is None  # grid not finished
    contrastive = fc.family("contrastive")  # margin 0.5, 0.3, 0.7, arithmetic steps
    assert fc.extension(contrastive, tuning(contrastive, [0.3, 0.2, 0.4])) == {"margin": 0.9}
    assert fc.extension(contrastive, tuning(contrastive, [0.3, 0.4, 0.2])) == {"margin": 0.1}
    topk = fc.family("DRO-TopK-PN")  # an integer K stays an integer
    assert fc.extension(topk, tuning(topk, [0.3, 0.2, 0.4])) == {"uncertainty": "topk_pn", "K": 640}
    kl = fc.family("DRO-KL-G")  # both temperatures move together
    assert fc.extension(kl, tuning(kl, [0.3, 0.2, 0.4])) == {"gamma_pos": 0.001, "gamma_neg": 0.001}
    pair_e = fc.family("Pair-E")  # along beta, at the best alpha
    assert fc.extension(pair_e, tuning(pair_e, [0.3, 0.2, 0.1, 0.5])) == {
        "alpha": 2.0,
        "beta": 50.0,
    }
    assert (
        fc.extension(fc.family("MS"), tuning(fc.family("MS"), [0.1, 0.2, 0.3])) is None
    )  # no axis

"""Tests of dmlbook.studies.fair_comparison: the split, the families, training, choices, intervals.

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

from dmlbook.core.reproducibility import seed_everything
from dmlbook.data import RandomAffine, load_dataset
from dmlbook.data.handwritten.omniglot import one_shot_runs
from dmlbook.studies import fair_comparison as fc
from dmlbook.training import fit


@pytest.fixture(scope="module")
def train():
    return load_dataset("omniglot", "train")


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


def test_every_family_gets_the_same_declared_budget():
    for fam in fc.FAMILIES:  # Musgrave et al.: the same number of trials for every family
        settings = [json.dumps(hp, sort_keys=True) for hp in fam.grid]
        assert len(settings) == len(set(settings)) == fc.TRIALS == 3, fam.label
    assert fc.family("Pair-E").grid == (
        {"alpha": 0.0, "beta": 2.0}, {"alpha": 2.0, "beta": 2.0}, {"alpha": 0.0, "beta": 10.0},
    )  # fmt: skip
    assert fc.family("binomial").grid[0] == {"beta": 50.0}  # the paper's setting first


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


def same_weights(a, b) -> bool:
    return all(
        torch.equal(p, q)
        for p, q in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


def test_train_one_is_fits_run_and_a_seed_fixes_it(train):
    """train_one drives the steps itself: the reference is dmlbook.training.fit with epochs=1."""
    fam, scale = fc.family("MS"), fc.SCALES["smoke"]
    one, history = fc.train_one(fam, fam.grid[0], train, scale, seed=3, steps=5)
    two, _ = fc.train_one(fam, fam.grid[0], train, scale, seed=3, steps=5)
    assert same_weights(one, two)
    seed_everything(3)
    ref = fc.make_model(scale)
    fit_history = fit(
        ref, fam.build(fam.grid[0]), train, None, epochs=1, batches_per_epoch=5,
        batch_size=scale.batch_size, k=scale.per_class, lr=scale.lr, optimizer="adam", seed=3,
        progress=False, augment=RandomAffine(), lr_decay="cosine",
    )  # fmt: skip
    assert same_weights(one, ref)
    assert history["step"].tolist() == [1, 2, 3, 4, 5]
    assert history["loss"].tolist() == pytest.approx(fit_history.attrs["step_loss"])
    metrics = fc.score(one, load_dataset("omniglot", "test"), one_shot_runs())
    assert set(metrics) == {"one-shot error", "run errors", "MAP@R", "R@1"}
    assert len(metrics["run errors"]) == 20
    assert metrics["one-shot error"] == pytest.approx(np.mean(metrics["run errors"]))
    assert set(fc.score(one, None, one_shot_runs())) == {"one-shot error", "run errors"}


def test_a_long_run_reports_evaluates_and_resumes_from_its_checkpoint(train, tmp_path):
    fam, scale = fc.family("Triplet-E"), fc.SCALES["smoke"]
    fit_part, val = fc.validation_split(train)
    lines = []
    whole, curve = fc.train_one(fam, fam.grid[0], fit_part, scale, seed=1, steps=6, every=2,
                                evaluate=val, log=lines.append)  # fmt: skip
    assert [line.split(",")[0] for line in lines] == ["step 2/6", "step 4/6", "step 6/6"]
    scored = curve.dropna(subset=["MAP@R"])
    assert scored["step"].tolist() == [0, 2, 4, 6]
    assert scored["MAP@R"].iloc[-1] == pytest.approx(fc.score(whole, val)["MAP@R"])

    def stop_at_step_four(line):
        if line.startswith("step 4/"):
            raise KeyboardInterrupt  # the checkpoint of step 2 is on disk, not that of step 4

    ckpt = tmp_path / "run.pt"
    with pytest.raises(KeyboardInterrupt):
        fc.train_one(fam, fam.grid[0], fit_part, scale, seed=1, steps=6, every=2,
                     checkpoint=ckpt, log=stop_at_step_four)  # fmt: skip
    assert ckpt.is_file()
    later = []
    resumed, history = fc.train_one(
        fam,
        fam.grid[0],
        fit_part,
        scale,
        seed=1,
        steps=6,
        every=2,
        checkpoint=ckpt,
        log=later.append,
    )
    assert [line.split(",")[0] for line in later] == ["step 4/6", "step 6/6"]  # went on from 2
    assert same_weights(resumed, whole)  # as if never interrupted
    assert history["loss"].tolist() == pytest.approx(curve.dropna(subset=["loss"])["loss"].tolist())
    with pytest.raises(ValueError, match="steps must be"):
        fc.train_one(fam, fam.grid[0], fit_part, scale, seed=1, steps=0)


def test_declared_order_puts_the_papers_setting_first_whatever_finished_first():
    """Parallel runs finish in any order; ties must still go to the paper's setting."""
    lifted = [json.dumps(hp, sort_keys=True) for hp in fc.family("lifted").grid]
    rows = pd.DataFrame(
        {"loss": ["lifted"] * 3 + ["contrastive"], "hparams": [lifted[2], lifted[1], lifted[0], '{"margin": 0.5}'],
         "val MAP@R": [0.33, 0.33, 0.33, 0.2], "fold": "0"}
    )  # fmt: skip
    ordered = fc.declared_order(rows)
    assert ordered["loss"].tolist() == [
        "contrastive",
        "lifted",
        "lifted",
        "lifted",
    ]  # FAMILIES' order
    assert ordered["hparams"].tolist()[1:] == lifted
    assert fc.select_tuned(ordered)["lifted"] == {"margin": 1.0}  # the paper's, on a tie
    assert fc.select_tuned(rows)["lifted"] == {"margin": 2.0}  # finish order would pick another

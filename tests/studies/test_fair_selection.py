"""Tests of dmlbook.studies.fair_selection: every choice of the fair comparison, on validation rows.

Expected choices are worked by hand from small tables of two folds, built so that the fold mean
chooses otherwise than either fold alone or the best single row would; a table holding any test
column must be refused by every selection function (the rule "choose on validation, test once").
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dmlbook.studies import fair_comparison as fc
from dmlbook.studies import fair_selection as fs

M = [json.dumps({"m": v}) for v in (1, 2, 3)]
#: Two families on two folds. Means by hand: a m=1 (0.47 + 0.10) / 2 = 0.285, a m=2 (0.40 +
#: 0.30) / 2 = 0.35, a m=3 (0.30 + 0.35) / 2 = 0.325; b m=1 (0.20 + 0.48) / 2 = 0.34, b m=2 0.10.
TUNE = pd.DataFrame(
    {
        "loss": ["a"] * 6 + ["b"] * 4,
        "hparams": [*M, *M, M[0], M[1], M[0], M[1]],
        "fold": ["0"] * 3 + ["1"] * 3 + ["0", "0", "1", "1"],
        "val MAP@R": [0.47, 0.40, 0.30, 0.10, 0.30, 0.35, 0.20, 0.10, 0.48, 0.10],
    }
)


def test_the_fold_mean_is_what_every_choice_reads():
    means = fs.fold_means(TUNE, ("loss", "hparams"))
    assert means["val MAP@R"].tolist() == pytest.approx([0.285, 0.35, 0.325, 0.34, 0.10])
    assert means["folds"].tolist() == [2] * 5
    assert fs.select_tuned(TUNE) == {"a": {"m": 2}, "b": {"m": 1}}
    assert fs.select_family(TUNE) == "a"  # 0.35 against 0.34
    fold0, fold1 = (TUNE[TUNE["fold"] == k] for k in ("0", "1"))
    assert fs.select_tuned(fold0)["a"] == {"m": 1} and fs.select_tuned(fold1)["a"] == {"m": 3}
    assert fs.select_family(fold1) == "b"  # one fold alone would choose otherwise
    assert TUNE.loc[TUNE["val MAP@R"].idxmax(), "loss"] == "b"  # so would the best single row


def test_ties_go_to_the_first_setting_and_family():
    tied = TUNE.assign(
        **{"val MAP@R": [0.25, 0.5, 0.25, 0.25, 0.0, 0.25, 0.25, 0.125, 0.25, 0.125]}
    )
    # means (exact in binary): a 0.25, 0.25, 0.25; b 0.25, 0.125
    assert fs.select_tuned(tied) == {"a": {"m": 1}, "b": {"m": 1}}
    assert fs.select_family(tied) == "a"
    with pytest.raises(ValueError, match="lacks column"):
        fs.select_tuned(TUNE.drop(columns="hparams"))
    with pytest.raises(ValueError, match="lacks column"):
        fs.select_tuned(TUNE.drop(columns="fold"))


def test_a_setting_missing_a_fold_is_refused():
    with pytest.raises(ValueError, match="not once on each of"):
        fs.select_tuned(TUNE.iloc[1:])  # a m=1 lacks fold 0: its mean would be over fold 1 only
    with pytest.raises(ValueError, match="not once on each of"):
        fs.select_family(pd.concat([TUNE, TUNE.iloc[:1]]))  # fold 0 twice


def recipe_rows(values: list[float]) -> pd.DataFrame:
    """The recipe's candidates on two folds: ``values`` = fold 0's five, then fold 1's: the
    300-step tuning run, 2,000 steps at widths 32 and 64, one alphabet fewer, 4,000 steps."""
    return pd.DataFrame(
        {
            "steps": [300, 2000, 2000, 2000, 4000] * 2,
            "width": [32, 32, 64, 32, 32] * 2,
            "variant": ["affine/fit", "affine/fit", "affine/fit", "affine/fit-1", "affine/fit"] * 2,
            "fold": ["0"] * 5 + ["1"] * 5,
            "val MAP@R": values,
        }
    )


def test_select_recipe_follows_its_declared_rules_on_fold_means():
    # means: 300 w32 0.40; 2000 w32 0.44; 2000 w64 0.45; fit-1 (0.47 + 0.38) / 2 = 0.425;
    # 4000 w32 (0.41 + 0.47) / 2 = 0.44
    rows = recipe_rows([0.40, 0.46, 0.44, 0.47, 0.41, 0.40, 0.42, 0.46, 0.38, 0.47])
    assert fs.select_recipe(rows) == {
        "steps": 2000, "width": 64, "augment": "affine", "training": "train+test",
    }  # fmt: skip
    fold0 = rows[rows["fold"] == "0"]  # fold 0 alone: 32 wide (0.46 > 0.44), train (0.47 > 0.46)
    assert fs.select_recipe(fold0) == {
        "steps": 2000, "width": 32, "augment": "affine", "training": "train",
    }  # fmt: skip
    fold1 = rows[rows["fold"] == "1"]  # fold 1 alone: 4,000 steps (0.47)
    assert fs.select_recipe(fold1)["steps"] == 4000
    tied = recipe_rows([0.40, 0.45, 0.44, 0.45, 0.45, 0.40, 0.45, 0.46, 0.45, 0.45])
    assert fs.select_recipe(tied) == {  # w32 = w64 = 4,000 steps = fit-1: fewer steps, narrower
        "steps": 2000, "width": 32, "augment": "affine", "training": "train",
    }  # fmt: skip
    short = recipe_rows([0.46, 0.45, 0.44, 0.47, 0.40, 0.46, 0.45, 0.46, 0.40, 0.40])
    assert fs.select_recipe(short)["steps"] == 300  # ties and better: fewer steps
    shifts = pd.concat(
        [rows, rows.iloc[[1, 6]].assign(variant="shifts/fit", **{"val MAP@R": [0.50, 0.50]})]
    )
    assert fs.select_recipe(shifts)["augment"] == "shifts"
    with pytest.raises(ValueError, match="needs one affine/fit-1"):
        fs.select_recipe(rows[rows["variant"] != "affine/fit-1"])
    with pytest.raises(ValueError, match="needs runs of the variants"):
        fs.select_recipe(rows.replace({"variant": {"affine/fit-1": "affine/other"}}))


def test_every_selection_function_refuses_a_table_with_a_test_column():
    recipe = recipe_rows([0.1] * 10)
    for select, rows in ((fs.select_tuned, TUNE), (fs.select_family, TUNE),
                         (fs.select_recipe, recipe),
                         (lambda r: fs.fold_means(r, ("loss", "hparams")), TUNE)):  # fmt: skip
        select(rows)  # validation columns only: fine
        for column in fs.TEST_COLUMNS:
            with pytest.raises(ValueError, match="validation runs only"):
                select(rows.assign(**{column: 0.5}))
    assert not set(fs.TEST_COLUMNS) & set(fs.VALIDATION_COLUMNS)
    assert {"fold", "width"} <= set(fs.VALIDATION_COLUMNS)


def test_the_recipe_candidates_are_declared_once():
    assert fs.RECIPE_CANDIDATES == (
        ("affine/fit", 1, 1), ("affine/fit", 2, 1), ("affine/fit-1", 1, 1), ("affine/fit", 1, 2),
    )  # fmt: skip
    assert fc.RECIPE_CANDIDATES is fs.RECIPE_CANDIDATES


def test_the_comparison_re_exports_the_choices():
    assert fc.select_tuned is fs.select_tuned and fc.select_recipe is fs.select_recipe
    assert fc.fold_means is fs.fold_means and fc.TEST_COLUMNS == fs.TEST_COLUMNS

"""Tests of dmlbook.studies.fair_selection: every choice of the fair comparison, on validation rows.

Expected choices are worked by hand from small tables; a table holding any test column must be
refused by every selection function (the rule "choose on validation, test once").
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dmlbook.studies import fair_comparison as fc
from dmlbook.studies import fair_selection as fs


def test_select_tuned_takes_the_best_and_the_first_of_ties():
    rows = pd.DataFrame(
        {
            "loss": ["a", "a", "a", "b", "b"],
            "hparams": [json.dumps({"m": v}) for v in (1, 2, 3, 1, 2)],
            "val MAP@R": [0.2, 0.4, 0.3, 0.5, 0.5],
        }
    )
    assert fs.select_tuned(rows) == {"a": {"m": 2}, "b": {"m": 1}}
    with pytest.raises(ValueError, match="lacks column"):
        fs.select_tuned(rows.drop(columns="hparams"))


def validation_rows(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


def test_every_selection_function_refuses_a_table_with_a_test_column():
    tune = validation_rows(loss=["a", "a", "b"], hparams=['{"m": 1}', '{"m": 2}', "{}"],
                           **{"val MAP@R": [0.2, 0.4, 0.3]})  # fmt: skip
    recipe = validation_rows(steps=[3, 8, 8, 8], variant=list(("affine/fit", *fs.RECIPE_VARIANTS)),
                             **{"val MAP@R": [0.1, 0.2, 0.3, 0.1]})  # fmt: skip
    for select, rows in ((fs.select_tuned, tune), (fs.select_family, tune),
                         (fs.select_recipe, recipe)):  # fmt: skip
        select(rows)  # validation columns only: fine
        for column in fs.TEST_COLUMNS:
            with pytest.raises(ValueError, match="validation runs only"):
                select(rows.assign(**{column: 0.5}))
    assert not set(fs.TEST_COLUMNS) & set(fs.VALIDATION_COLUMNS)


def test_select_family_and_recipe_follow_their_declared_rules():
    tune = validation_rows(loss=["a", "a", "b", "b"], hparams=["{}"] * 4,
                           **{"val MAP@R": [0.2, 0.45, 0.44, 0.3]})  # fmt: skip
    assert fs.select_family(tune) == "a"  # a's best setting (0.45) beats b's (0.44)
    assert fs.select_family(tune.assign(**{"val MAP@R": [0.5, 0.1, 0.5, 0.2]})) == "a"  # tie: first

    def recipe(short, affine, shifts, fewer):
        return fs.select_recipe(validation_rows(
            steps=[600, 4000, 4000, 4000], variant=["affine/fit", *fs.RECIPE_VARIANTS],
            **{"val MAP@R": [short, affine, shifts, fewer]},
        ))  # fmt: skip

    assert recipe(0.40, 0.45, 0.44, 0.43) == {
        "steps": 4000,
        "augment": "affine",
        "training": "train+test",
    }
    assert recipe(0.40, 0.44, 0.45, 0.43) == {
        "steps": 4000,
        "augment": "shifts",
        "training": "train+test",
    }
    assert recipe(0.46, 0.44, 0.45, 0.45) == {
        "steps": 600,
        "augment": "affine",
        "training": "train",
    }
    assert recipe(0.40, 0.45, 0.45, 0.45)["augment"] == "affine"  # ties: affine; equal: train
    assert recipe(0.40, 0.45, 0.45, 0.45)["training"] == "train"
    with pytest.raises(ValueError, match="needs"):
        fs.select_recipe(
            validation_rows(steps=[600], variant=["affine/fit"], **{"val MAP@R": [0.4]})
        )


def test_the_comparison_re_exports_the_choices():
    assert fc.select_tuned is fs.select_tuned and fc.select_recipe is fs.select_recipe
    assert fc.TEST_COLUMNS == fs.TEST_COLUMNS

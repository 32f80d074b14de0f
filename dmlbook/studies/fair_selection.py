"""Every choice of the fair Omniglot comparison, made from validation runs alone.

Musgrave, Belongie and Lim (2020) require that hyper-parameters be chosen on classes disjoint
from the test classes. :mod:`dmlbook.studies.fair_comparison` trains every declared setting on
three training alphabets and scores it by MAP@R on the two held out; the functions here choose
from those rows: each family's setting (:func:`select_tuned`), the family of the recipe
(:func:`select_family`) and the recipe's length, distortions and training set
(:func:`select_recipe`). Each refuses a table holding a test score (:data:`TEST_COLUMNS`), so a
number of the test data cannot steer a choice. Tests: ``tests/studies/test_fair_selection.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = [
    "RECIPE_VARIANTS",
    "TEST_COLUMNS",
    "VALIDATION_COLUMNS",
    "select_family",
    "select_recipe",
    "select_tuned",
]


#: What a run on the test data records; no selection function accepts a table holding one.
TEST_COLUMNS = ("one-shot error", "MAP@R", "R@1", "run errors")
#: What the selection functions read: validation runs (trained without the validation
#: alphabets, scored on them) and what identifies them.
VALIDATION_COLUMNS = (
    "phase",
    "loss",
    "hparams",
    "seed",
    "steps",
    "variant",
    "val MAP@R",
    "val R@1",
)


def _validation_only(rows: pd.DataFrame, needs: Sequence[str], who: str) -> None:
    """Refuse a table that holds test scores, or lacks a column ``who`` reads."""
    leaked = [c for c in TEST_COLUMNS if c in rows.columns]
    if leaked:
        raise ValueError(
            f"{who} chooses on validation runs only, but the table holds the test column(s) "
            f"{', '.join(leaked)}; pass rows[list(fc.VALIDATION_COLUMNS)] of the validation runs."
        )
    missing = sorted(set(needs) - set(rows.columns))
    if missing:
        raise ValueError(f"tuning table lacks column(s) {', '.join(missing)}.")


def select_tuned(tuning: pd.DataFrame, metric: str = "val MAP@R") -> dict[str, dict[str, Any]]:
    """The best setting of each family: ``{label: hparams}`` by the largest ``metric``.

    ``tuning`` has one row per tuning run with columns ``loss``, ``hparams`` (JSON) and
    ``metric``, and no test column (:data:`TEST_COLUMNS`); ties go to the row that comes first,
    so pass the rows in the declared order (:func:`~dmlbook.studies.fair_comparison.declared_order`:
    the paper's setting first), not in the order parallel runs happened to finish
    (the paper's).
    """
    _validation_only(tuning, ("loss", "hparams", metric), "select_tuned")
    best = {}
    for label, rows in tuning.groupby("loss", sort=False):
        top = rows.iloc[int(rows[metric].to_numpy().argmax())]
        best[str(label)] = json.loads(top["hparams"])
    return best


def select_family(tuning: pd.DataFrame, metric: str = "val MAP@R") -> str:
    """The family whose chosen setting scores best on validation (the recipe's loss).

    Reads the same table as :func:`select_tuned`; ties go to the family listed first.
    """
    _validation_only(tuning, ("loss", metric), "select_family")
    return str(tuning.groupby("loss", sort=False)[metric].max().idxmax())


#: The recipe's declared candidates, trained on the fit part (or one alphabet less) with seed 0
#: and scored on the validation alphabets: ``variant`` is ``augmentation/training set``.
RECIPE_VARIANTS = ("affine/fit", "shifts/fit", "affine/fit-1")


def select_recipe(trials: pd.DataFrame, metric: str = "val MAP@R") -> dict[str, Any]:
    """The recipe's steps, augmentation and training set, chosen on validation runs.

    ``trials`` holds the chosen family's validation runs (columns ``steps``, ``variant``,
    ``metric``): its tuning run (the comparison's steps, ``affine/fit``) and the recipe's
    :data:`RECIPE_VARIANTS` at the longer step count. The declared rules:

    * steps and augmentation: the ``*/fit`` run that scores best (``affine``: Koch et al.'s
      distortions; ``shifts``: whole-pixel shifts only); ties go to the fewer steps, then to
      ``affine``;
    * training set: every shipped character (``train+test``) if the run on all three fit
      alphabets beats the run on one alphabet fewer at the longer step count (more characters
      help on validation), else the ``train`` split alone.

    Returns ``{"steps": int, "augment": "affine" or "shifts", "training": "train+test" or "train"}``.
    """
    _validation_only(trials, ("steps", "variant", metric), "select_recipe")
    fit = trials[trials["variant"].isin(["affine/fit", "shifts/fit"])]
    if fit.empty or set(trials["variant"]) - set(RECIPE_VARIANTS):
        raise ValueError(f"select_recipe needs runs of the variants {RECIPE_VARIANTS}.")
    order = fit.assign(aug=fit["variant"].ne("affine/fit")).sort_values(
        ["steps", "aug"], kind="stable"
    )
    top = order.iloc[int(order[metric].to_numpy().argmax())]
    longest = int(trials["steps"].max())
    at = trials[trials["steps"] == longest].set_index("variant")[metric]
    if "affine/fit-1" not in at or "affine/fit" not in at:
        raise ValueError(f"select_recipe needs affine/fit and affine/fit-1 at {longest} steps.")
    more = bool(at["affine/fit"] > at["affine/fit-1"])
    return {
        "steps": int(top["steps"]),
        "augment": str(top["variant"]).split("/")[0],
        "training": "train+test" if more else "train",
    }

"""Every choice of the fair Omniglot comparison, made from validation runs alone.

Musgrave, Belongie and Lim (2020) require that hyper-parameters be chosen on classes disjoint
from the test classes. :mod:`dmlbook.studies.fair_comparison` trains every declared setting on
three training alphabets and scores it by MAP@R on the two held out, once per validation fold
(:data:`~dmlbook.studies.fair_folds.VALIDATION_FOLDS`); the functions here choose from those
rows, always by the mean over the folds (:func:`fold_means`): each family's setting
(:func:`select_tuned`), the family of the recipe (:func:`select_family`) and the recipe's length,
width, distortions and training set (:func:`select_recipe`). Each refuses a table holding a test
score (:data:`TEST_COLUMNS`), so a number of the test data cannot steer a choice, and a setting
missing a fold, so that no mean is over fewer folds than another's. Tests:
``tests/studies/test_fair_selection.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = [
    "RECIPE_CANDIDATES",
    "TEST_COLUMNS",
    "VALIDATION_COLUMNS",
    "fold_means",
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
    "width",
    "variant",
    "fold",
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


def fold_means(rows: pd.DataFrame, by: Sequence[str], metric: str = "val MAP@R") -> pd.DataFrame:
    """The mean of ``metric`` over the validation folds of each group of ``rows`` by ``by``.

    ``rows`` holds one validation run per row with a ``fold`` column; every group must have
    been scored on the same folds, each once (the folds found in ``rows``), so that every mean
    is over the same folds. Returns one row per group, in the order groups first appear, with
    the ``by`` columns, ``metric`` (the mean) and ``folds`` (how many).
    """
    _validation_only(rows, (*by, "fold", metric), "fold_means")
    if rows.empty:
        raise ValueError("fold_means needs at least one validation row.")
    folds = sorted(set(rows["fold"].astype(str)))
    out = []
    for key, g in rows.groupby(list(by), sort=False):
        seen = sorted(g["fold"].astype(str))
        if seen != folds:
            raise ValueError(
                f"{dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))} was "
                f"scored on fold(s) {seen}, not once on each of {folds}; finish its runs first."
            )
        out.append((*(key if isinstance(key, tuple) else (key,)), float(g[metric].mean())))
    return pd.DataFrame(out, columns=[*by, metric]).assign(folds=len(folds))


def select_tuned(tuning: pd.DataFrame, metric: str = "val MAP@R") -> dict[str, dict[str, Any]]:
    """The best setting of each family: ``{label: hparams}`` by the largest ``metric``.

    ``tuning`` has one row per tuning run and fold with columns ``loss``, ``hparams`` (JSON),
    ``fold`` and ``metric``, and no test column (:data:`TEST_COLUMNS`); a setting's score is
    its mean over the folds (:func:`fold_means`); ties go to the setting that comes first,
    so pass the rows in the declared order (:func:`~dmlbook.studies.fair_comparison.declared_order`:
    the paper's setting first), not in the order parallel runs happened to finish
    (the paper's).
    """
    means = fold_means(tuning, ("loss", "hparams"), metric)
    best = {}
    for label, rows in means.groupby("loss", sort=False):
        top = rows.iloc[int(rows[metric].to_numpy().argmax())]
        best[str(label)] = json.loads(top["hparams"])
    return best


def select_family(tuning: pd.DataFrame, metric: str = "val MAP@R") -> str:
    """The family whose chosen setting scores best on validation (the recipe's loss).

    Reads the same table as :func:`select_tuned` (fold means of each setting); ties go to the
    family listed first.
    """
    means = fold_means(tuning, ("loss", "hparams"), metric)
    return str(means.groupby("loss", sort=False)[metric].max().idxmax())


#: The recipe's declared candidates, each trained with seed 0 on every fold's fit part (or on it
#: less one alphabet) and scored on that fold's validation alphabets: ``(variant, width multiple,
#: steps multiple)``, ``variant`` being ``augmentation/training set``, the width the scale's
#: width times its multiple (32 and 64 at the CPU scale) and the steps the scale's recipe steps
#: times theirs (2,000 and 4,000). Koch et al.'s distortions (``affine``) throughout: whole-pixel
#: shifts lost to them on validation under the earlier protocol and are not re-run (CPU budget);
#: :func:`select_recipe` still weighs ``shifts/fit`` runs when a table holds them.
RECIPE_CANDIDATES: tuple[tuple[str, int, int], ...] = (
    ("affine/fit", 1, 1),
    ("affine/fit", 2, 1),
    ("affine/fit-1", 1, 1),
    ("affine/fit", 1, 2),
)


def select_recipe(trials: pd.DataFrame, metric: str = "val MAP@R") -> dict[str, Any]:
    """The recipe's steps, width, augmentation and training set, chosen on validation runs.

    ``trials`` holds the chosen family's validation runs on every fold (columns ``steps``,
    ``width``, ``variant``, ``fold``, ``metric``): its tuning runs (the comparison's steps and
    width, ``affine/fit``) and the recipe's :data:`RECIPE_CANDIDATES`.
    Each candidate scores its mean over the folds (:func:`fold_means`). The declared rules:

    * steps, width and augmentation: the ``*/fit`` candidate with the best fold mean
      (``affine``: Koch et al.'s distortions; ``shifts``: whole-pixel shifts only); ties go to
      the fewer steps, then the narrower net, then ``affine``;
    * training set: every shipped character (``train+test``) if the run on all three fit
      alphabets beats the run on one alphabet fewer (``affine/fit-1``) at that run's steps and
      width (more characters help on validation), else the ``train`` split alone.

    Returns ``{"steps": int, "width": int, "augment": "affine" or "shifts", "training":
    "train+test" or "train"}``.
    """
    means = fold_means(trials, ("steps", "width", "variant"), metric)
    known = {"affine/fit", "shifts/fit", "affine/fit-1"}
    fit = means[means["variant"].isin(["affine/fit", "shifts/fit"])]
    if fit.empty or set(means["variant"]) - known:
        raise ValueError(f"select_recipe needs runs of the variants {sorted(known)} only.")
    order = fit.assign(aug=fit["variant"].ne("affine/fit")).sort_values(
        ["steps", "width", "aug"], kind="stable"
    )
    top = order.iloc[int(order[metric].to_numpy().argmax())]
    fewer = means[means["variant"] == "affine/fit-1"]
    same = means[
        (means["variant"] == "affine/fit")
        & means["steps"].isin(fewer["steps"])
        & means["width"].isin(fewer["width"])
    ]
    if len(fewer) != 1 or len(same) != 1:
        raise ValueError(
            "select_recipe needs one affine/fit-1 candidate and the affine/fit run of its steps "
            "and width."
        )
    more = bool(same[metric].iloc[0] > fewer[metric].iloc[0])
    return {
        "steps": int(top["steps"]),
        "width": int(top["width"]),
        "augment": str(top["variant"]).split("/")[0],
        "training": "train+test" if more else "train",
    }

"""Self-checks of Chapters 10-15 and the appendix (:mod:`dmlbook.exercises.advanced`): a right
and a wrong answer each.

The right answers are the instructor answers' values, worked by hand from the statements and
the papers' printed tables (e.g. 10.3: 74.6 - 71.9 and 72.2 - 69.7; 12.2: (0.9 + 0.5)/2 and
1.8/10; 13.4: the appendix table's best rates, 69.5 at 0.05 for e^euc and 75.5 at 0.1 for e^cos), not taken from the checks.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from exercise_cases import right_then_wrong

from dmlbook.exercises import advanced
from dmlbook.exercises.registry import EXERCISES, check


def falling(df):
    r = df[df.metric.str.startswith("R@")].assign(k=lambda d: d.metric.str[2:].astype(int))
    r = r.sort_values("k", kind="stable")
    keys = ["paper", "table", "dataset", "method", "backbone", "dim", "batch"]
    drop = r.groupby(keys, dropna=False)["value"].transform(lambda v: v.diff() < 0)
    return r[drop]


def falling_by_method(df):  # groups rows of one table that differ in dimension or batch
    r = df[df.metric.str.startswith("R@")].assign(k=lambda d: d.metric.str[2:].astype(int))
    r = r.sort_values("k", kind="stable")
    drop = r.groupby(["paper", "table", "dataset", "method"])["value"].transform(
        lambda v: v.diff() < 0
    )
    return r[drop]


RIGHT = {
    "10.1": 0.9933,
    "10.2": ((239, 2609), (240, 3044)),
    "10.3": (2.7, 2.5),
    "11.2": 12.0,
    "11.3": "((Dp - Dn1 + m)**(p + 1) + (Dp - Dn2 + m)**(p + 1)) / (p + 1)",
    "11.4": (2.1, 2.6, 7.2, 4.5),
    "12.1": 0.6201,
    "12.2": (0.7, 0.18),
    "12.3": "lambda + m - l0",
    "12.4": [1.0, 1.0, 1.0],
    "12.5": (1.4, 0.2),
    "13.1": 4,
    "13.3": lambda s_ap, s_an: (1 - s_ap) ** 2 / 2 + s_an**2 / 2,
    "13.4": {"euc": 0.05, "cos": 0.1, "euc-orth": 0.05, "cos-orth": 0.1},
    "14.1": "1/G",
    "14.2": (False, 2),
    "14.3": (0.19, 12100),
    "14.4": {75, 90},
    "15.2": (2.48, 7, 18),
    "90.1": (65.7, 67.7, 2.0, True),
    "90.2": (2.0, 3.04),
    "90.3": falling,
}
WRONG = {
    "10.1": 0.5,
    "10.2": ((239, 2790), (240, 3044)),
    "10.3": (2.7, -2.5),
    "11.2": 1.0,  # "the same value"
    "11.3": "(Dp - Dn1 + m)**(p + 1) + (Dp - Dn2 + m)**(p + 1)",  # without 1/(p + 1)
    "11.4": (2.6, 2.1, 4.5, 7.2),
    "12.1": 0.5,
    "12.2": (0.7, 0.45),  # the mean of all four
    "12.3": "lambda",  # the paper's l0 = 0 does not give lambda
    "12.4": 0.5,  # TopK-PN's half
    "12.5": (1.4, 1.2),
    "13.1": 2,
    "13.3": lambda s_ap, s_an: (1 - s_ap) ** 2 + s_an**2,  # c = 4, not 2
    "13.4": {"euc": 0.1, "cos": 0.1, "euc_orth": 0.1, "cos_orth": 0.1},  # one rate for all
    "14.1": "1",
    "14.2": (True, 1),
    "14.3": (0.19, 1910),
    "14.4": {80},
    "15.2": (2.48, 6, 18),
    "90.1": (65.7, 67.7, 2.0, False),
    "90.2": (2.0, 2.0),
    "90.3": falling_by_method,
}


def test_every_entry_of_the_module_is_tested():
    mine = {n for n, e in EXERCISES.items() if e.test.__module__ == advanced.__name__}
    assert mine == set(RIGHT) == set(WRONG)


@pytest.mark.parametrize("number", sorted(RIGHT))
def test_right_and_wrong(number, capsys):
    right_then_wrong(number, RIGHT[number], WRONG[number], capsys)


def test_a_function_that_raises_is_reported_not_raised(capsys):
    assert not check("13.3", lambda s_ap, s_an: s_ap.nonexistent)
    assert "your function raised AttributeError" in capsys.readouterr().out
    assert not check("90.3", lambda df: df.value.sum())
    assert "DataFrame" in capsys.readouterr().out
    assert not check("13.3", lambda s_ap, s_an: float(torch.zeros(())))
    assert isinstance(pd.DataFrame(), pd.DataFrame)

"""The self-check machinery (:mod:`dmlbook.exercises.registry`): unknown exercises, answers of
the wrong form, quiet use, and that no message ever carries an expected answer."""

from __future__ import annotations

import re

import pytest
import sympy as sp

from dmlbook.exercises import EXERCISES, check
from dmlbook.exercises.registry import WrongForm, close, exercise, expression, numbers, proved
from dmlbook.symbolic import derived


def test_an_unknown_exercise_is_one_clear_error():
    with pytest.raises(ValueError, match=r"no self-check for exercise '4\.9'.*4\.2"):
        check("4.9", 1)


def test_a_second_check_for_one_exercise_is_refused():
    with pytest.raises(ValueError, match="two self-checks"):
        exercise("4.2", "x", "y")(lambda a: True)


def test_an_answer_of_the_wrong_form_says_what_was_expected(capsys):
    assert check("2.3", [[1, 2], [3, 4]]) is False
    out = capsys.readouterr().out
    assert "Expected the 4 x 4 weights" in out and "shape (2, 2)" in out
    assert check("6.1", "lambda +") is False
    assert "cannot read" in capsys.readouterr().out
    assert check("6.1", "mu") is False
    assert "unknown symbol(s) mu" in capsys.readouterr().out
    assert check("1.3", "240") is False  # a string is not a count


def test_quiet_prints_nothing(capsys):
    assert check("1.3", (240, 3300), quiet=True) is True
    assert capsys.readouterr().out == ""


def test_messages_name_a_section_and_no_other_number():
    """What a wrong answer prints besides its number is the section to re-read: section and
    equation numbers, never a value."""
    allowed = r"Section \d+\.\d+|Eq\. \d+(-\d+)?|float32|Case 1|Check \d|Table \d"
    for entry in EXERCISES.values():
        assert entry.reread.startswith(("Section", "the appendix")), entry.number
        assert not re.search(r"\d", re.sub(allowed, "", entry.reread)), entry.reread


def test_helpers():
    assert numbers(3, 1) == [3.0] and numbers([[1, 2]], 2) == [1.0, 2.0]
    with pytest.raises(WrongForm, match="2 number"):
        numbers((1, 2), 3)
    assert close([1.0, float("inf")], [1.0005, float("inf")], 1e-3)
    assert not close([float("inf")], [1e38], 1e-3)
    x = expression("0.5*x", {"x": sp.Symbol("x", positive=True)})
    assert x == sp.Rational(1, 2) * sp.Symbol("x", positive=True)


def test_proved_takes_the_reference_as_a_side_never_as_a_value():
    """The answer is a value; the reference is typed (its divisions then count) or derived: a
    reference built before the check is the exercise author's error, refused loudly (not judged
    False, which would fail every student)."""
    x = sp.Symbol("x", real=True)
    s = sp.Symbol("s", positive=True)
    assert proved(2 * x, lambda: 2 * x) and not proved(2 * x, lambda: 3 * x)
    with pytest.raises(TypeError, match=r"the reference 2\*x is a value built before the check"):
        proved(2 * x, 2 * x)
    assert proved(x, lambda: s * x / s)  # typed, s > 0: defined everywhere
    assert not proved(x, lambda: x * x / x)  # typed: x / x is undefined at 0, no where
    assert proved(x, lambda: x * x / x, where=[sp.Ne(x, 0)])
    assert proved(3 * x**2, derived(sp.diff, lambda: x**3, x))
    assert not proved(2 * x**2, derived(sp.diff, lambda: x**3, x))

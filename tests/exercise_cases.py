"""The right-and-wrong check that the self-check tests of every chapter group share."""

from __future__ import annotations

from dmlbook.exercises.registry import EXERCISES, check


def right_then_wrong(number: str, right: object, wrong: object, capsys) -> str:
    """Check a right answer (it must print "right.") and a wrong one ("not yet. ..."), and
    return what the wrong one printed, for the caller's own assertions on the hint."""
    assert number in EXERCISES
    assert check(number, right) is True
    assert capsys.readouterr().out == f"Exercise {number}: right.\n"
    assert check(number, wrong) is False
    out = capsys.readouterr().out
    assert out.startswith(f"Exercise {number}: not yet. ")
    return out

"""Tests of dmlbook.engine.run_result: what a run returns and the note stored with best.pt."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd

from dmlbook.engine import Config, RunResult
from dmlbook.engine.run_result import TEST_SELECTION_NOTE, selection_note


def test_the_note_applies_to_best_pt_only():
    best_pt = {"model": {}, "best": {"iteration": 8, "note": TEST_SELECTION_NOTE}}
    assert selection_note(best_pt) == TEST_SELECTION_NOTE
    last_pt = {"model": {}, "position": {"iteration": 12}, "best": {"note": TEST_SELECTION_NOTE}}
    assert selection_note(last_pt) is None  # the final model, not chosen on the test set
    assert selection_note({"model": {}}) is None  # no record of a best checkpoint
    assert selection_note({"model": {}, "best": None}) is None
    assert selection_note({"model": {}, "best": {"iteration": 8}}) is None  # chosen on held-out
    assert "TEST split" in TEST_SELECTION_NOTE and "last.pt" in TEST_SELECTION_NOTE


def test_a_run_result_reads_on_its_own():
    """Every field is documented in the class docstring, in order (what a caller reads)."""
    documented = re.findall(r"^    (\w+) :", RunResult.__doc__, flags=re.MULTILINE)
    assert documented == [f.name for f in dataclasses.fields(RunResult)]
    assert "interrupted" in documented and "stopped_by" in documented
    result = RunResult(pd.DataFrame(), pd.DataFrame(), None, Path("runs/x"), False, Config())
    assert result.stopped_by is None  # a run that no signal stopped

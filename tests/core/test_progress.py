"""Tests of dmlbook.core.progress: the caller's ``progress`` wins; ``None`` defers to ``TQDM_DISABLE``,
read when the loop starts (the table of cases is below)."""

from __future__ import annotations

import io

import pytest
from tqdm import tqdm

from dmlbook.core.progress import progress_disabled


@pytest.mark.parametrize("env", [None, "1", "0"])
def test_an_explicit_choice_ignores_the_variable(monkeypatch, env):
    if env is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", env)
    assert progress_disabled(True) is False and progress_disabled(False) is True


@pytest.mark.parametrize(
    ("env", "hidden"), [("yes", True), ("2", True), ("No", False), (" false ", False)]
)
def test_the_variable_is_read_at_each_call(monkeypatch, env, hidden):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert progress_disabled(None) is False
    monkeypatch.setenv("TQDM_DISABLE", env)  # set after import: still obeyed
    assert progress_disabled(None) is hidden


def test_the_value_is_tqdms_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    for choice, shown in ((None, False), (True, True)):
        out = io.StringIO()
        for _ in tqdm(range(3), desc="bar", file=out, disable=progress_disabled(choice)):
            pass
        assert ("3/3" in out.getvalue()) is shown, choice


@pytest.mark.parametrize(
    ("progress", "env", "hidden"),
    [
        (True, "1", False),
        (False, None, True),
        (None, None, False),
        (None, "1", True),
        (None, " TRUE ", True),
        (None, "0", False),
        (None, "off", False),
        (None, "", False),
    ],
)
def test_progress_disabled_obeys_the_caller_then_tqdm_disable(monkeypatch, progress, env, hidden):
    if env is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", env)
    assert progress_disabled(progress) is hidden

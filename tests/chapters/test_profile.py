"""Tests of dmlbook.chapters.profile: ``DMLBOOK_PROFILE`` (quick by default, full on benchmark data) and
the errors that name the variable to fix."""

from __future__ import annotations

import pytest
import torch

from dmlbook.chapters.profile import PROFILES, Profile, current_profile


@pytest.fixture
def env(monkeypatch):
    """A clean slate: neither variable set."""
    monkeypatch.delenv("DMLBOOK_PROFILE", raising=False)
    monkeypatch.delenv("DMLBOOK_DATA", raising=False)
    return monkeypatch


@pytest.mark.parametrize("value", [None, "", "  ", "quick", " QUICK "])
def test_quick_is_the_default_and_runs_on_the_cpu(env, value):
    if value is not None:
        env.setenv("DMLBOOK_PROFILE", value)
    assert current_profile() == Profile(name="quick", data_dir=None, device="cpu")
    assert not current_profile().full and PROFILES == ("quick", "full")


def test_quick_reports_the_data_folder_when_one_is_set(env, tmp_path):
    env.setenv("DMLBOOK_DATA", str(tmp_path))
    profile = current_profile()
    assert profile.data_dir == tmp_path and profile.device == "cpu" and not profile.full


def test_full_needs_an_existing_data_folder(env, tmp_path):
    env.setenv("DMLBOOK_PROFILE", "full")
    with pytest.raises(ValueError, match="DMLBOOK_PROFILE=full needs DMLBOOK_DATA.*it is unset"):
        current_profile()
    env.setenv("DMLBOOK_DATA", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match=r"missing is not a folder\). Unset DMLBOOK_PROFILE"):
        current_profile()
    env.setenv("DMLBOOK_DATA", str(tmp_path))
    profile = current_profile()
    assert profile.full and profile.data_dir == tmp_path
    assert profile.device == ("cuda" if torch.cuda.is_available() else "cpu")


def test_an_unknown_profile_names_the_known_ones(env):
    env.setenv("DMLBOOK_PROFILE", "fast")
    with pytest.raises(
        ValueError, match="DMLBOOK_PROFILE='fast' is not a known profile; use one of quick, full"
    ):
        current_profile()

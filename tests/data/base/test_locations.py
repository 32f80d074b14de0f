"""DMLBOOK_DATA and DMLBOOK_CACHE are read in one place and mean the same to every caller."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dmlbook.chapters.profile import current_profile
from dmlbook.data.base.locations import cache_folder, datasets_folder
from dmlbook.data.benchmarks.benchmark import data_root
from dmlbook.data.cache.image_cache_file import default_cache_dir
from dmlbook.data.generated import synthetic


@pytest.mark.parametrize("value", [None, "", "   "])
def test_unset_or_blank_means_no_data_folder_and_the_home_cache(monkeypatch, tmp_path, value):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("DMLBOOK_DATA", "DMLBOOK_CACHE"):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert datasets_folder() is None
    assert cache_folder() == tmp_path / ".cache" / "dmlbook"
    with pytest.raises(ValueError, match="DMLBOOK_DATA"):
        data_root("CUB_200_2011", None, dataset="cub")


def test_every_caller_sees_the_same_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DMLBOOK_DATA", " ~/data ")  # blanks around it, a ~ in it
    monkeypatch.setenv("DMLBOOK_CACHE", "~/cache")
    monkeypatch.delenv("DMLBOOK_PROFILE", raising=False)
    data, cache = tmp_path / "data", tmp_path / "cache"
    assert datasets_folder() == data and cache_folder() == cache
    assert data_root("CUB_200_2011", None, dataset="cub") == data / "CUB_200_2011"
    assert current_profile().data_dir == data
    assert default_cache_dir() == cache / "images"
    assert synthetic.cache_path("train").parent == cache


def test_the_variables_are_read_nowhere_else():
    package = Path(__file__).resolve().parents[3] / "dmlbook"
    read = re.compile(r'(environ(\.get)?|getenv)\s*[\[(]\s*"DMLBOOK_(DATA|CACHE)"')
    readers = sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if read.search(p.read_text())
    )
    assert readers == ["data/base/locations.py"]

"""Tests of dmlbook.data.base.errors: the error types, and that every fix a message spells exists.

A data error tells the reader what to type (``allow_partial=True``, ``skip_bad=True``,
``dmlbook.data.fetch.download.prepare('cub', data_dir)``); these tests hold each spelling to the
keyword or function it names, read from the signatures, so a renamed option fails here.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from dmlbook.data.base.errors import (
    ALLOW_PARTIAL,
    SKIP_BAD,
    DownloadError,
    IncompleteDatasetError,
    listed,
    prepare_call,
)
from dmlbook.data.benchmarks import cars, cub, inshop, sop
from dmlbook.data.benchmarks.image_folder import ImageListDataset


def test_errors_are_caught_as_the_builtin_errors_they_refine():
    assert issubclass(IncompleteDatasetError, ValueError)
    assert issubclass(DownloadError, OSError)
    with pytest.raises(ValueError, match="fewer images"):
        raise IncompleteDatasetError("fewer images")


@pytest.mark.parametrize(
    ("items", "limit", "text"),
    [
        ([], 5, ""),
        (["a"], 5, "a"),
        ([1, 2, 3, 4, 5], 5, "1, 2, 3, 4, 5"),
        ([1, 2, 3, 4, 5, 6, 7], 5, "1, 2, 3, 4, 5 and 2 more"),
        (("x", "y", "z"), 2, "x, y and 1 more"),
        (list(range(1005)), 3, "0, 1, 2 and 1,002 more"),
    ],
)
def test_listed(items, limit, text):
    assert listed(items, limit) == text


def keyword(spelling: str) -> str:
    name, value = spelling.split("=")
    assert value == "True"
    return name


@pytest.mark.parametrize(
    "loader", [cub.load, cars.load, sop.load, inshop.load], ids=["cub", "cars", "sop", "inshop"]
)
def test_allow_partial_is_a_keyword_of_every_benchmark_loader(loader):
    parameter = inspect.signature(loader).parameters[keyword(ALLOW_PARTIAL)]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is False


def test_skip_bad_is_a_keyword_of_the_cache():
    parameter = inspect.signature(ImageListDataset.cached).parameters[keyword(SKIP_BAD)]
    assert parameter.default is False


def test_prepare_call_names_a_function_that_takes_those_arguments():
    call = prepare_call("cub")
    assert call == "dmlbook.data.fetch.download.prepare('cub', data_dir)"
    module, function = call.split("(")[0].rsplit(".", 1)
    target = getattr(importlib.import_module(module), function)
    assert list(inspect.signature(target).parameters)[:2] == ["name", "data_dir"]

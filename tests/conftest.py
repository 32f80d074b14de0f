"""Fixtures shared by the unit tests (the root ``conftest.py`` sets the environment)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from book_check import find_browser  # noqa: E402  (tools/ is not a package)


@pytest.fixture
def one_thread():
    """Run the test on one torch thread (bit-for-bit reproducible training), then restore it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The headless Chromium the browser tests drive: skipped with the reason where there is none,
    a failure where ``DMLBOOK_REQUIRE_BROWSER=1`` (CI) demands one."""
    found = find_browser()
    if found is None:
        message = "no Chromium on PATH (apt-get install chromium)"
        if os.environ.get("DMLBOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; DMLBOOK_REQUIRE_BROWSER=1 requires it")
        pytest.skip(message)
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives the browser is slow (``make test-quick`` runs none): marked here from
    its fixtures, so that no browser test can be left out of the marker by hand."""
    for item in items:
        if "chromium" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every matplotlib figure a test opened (only where pyplot was imported at all)."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")

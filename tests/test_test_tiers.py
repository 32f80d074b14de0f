"""The quick tier (``make test-quick``, ``-m "not slow"``) runs no browser test: a test that
requests the ``chromium`` fixture is marked slow by ``tests/conftest.py``, whether or not its file
says so (the slider test of the offline explorer did not)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _browser_tests() -> set[str]:
    """``file::name`` of every test function whose parameters name a browser fixture, read from
    the sources (not from pytest's markers)."""
    found = set()
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        functions = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
        fixtures = {"chromium"} | {  # a fixture of the file that takes chromium
            f.name for f in functions if "chromium" in {a.arg for a in f.args.args}
        }
        for f in functions:
            if f.name.startswith("test_") and fixtures & {a.arg for a in f.args.args}:
                found.add(f"{path.relative_to(TESTS.parent).as_posix()}::{f.name}")
    return found


def test_no_browser_test_runs_in_the_quick_tier():
    browser = _browser_tests()
    assert "tests/chapters/test_explorer_html.py::test_moving_a_slider_draws_the_precomputed_" \
        "weights_of_that_setting" in browser  # fmt: skip
    files = sorted({name.split("::")[0] for name in browser})
    quick = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "not slow", *files],
        capture_output=True, text=True, cwd=TESTS.parent, check=False,
    )  # fmt: skip
    assert quick.returncode in (0, 5), quick.stdout + quick.stderr  # 5: nothing collected
    collected = {line.split("[")[0] for line in quick.stdout.splitlines() if "::" in line}
    assert not browser & collected, sorted(browser & collected)

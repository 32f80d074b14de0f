"""How chapter outputs are checked under nbval (CONTRIBUTING.md, "Chapters").

nbval compares every code cell's output byte for byte with the stored one, except in cells tagged
``nbval-ignore-output``: those print numbers that come out of float32 computation (training, an
untrained network) and assert them instead. Float64 round-off printed in scientific notation is
masked by ``book/sanitize.cfg``. The chapters' kernels run on other math-library code paths
than ``make refresh`` stored them with (root ``conftest.py``), so every ``make test`` checks that
the byte-compared outputs do not depend on them. These tests keep those rules from drifting.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import torch
from nbval.plugin import get_sanitize_patterns

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
TAG = "nbval-ignore-output"


def chapter_code_cells() -> dict[str, list]:
    return {
        path.name: [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        for path in CHAPTERS
    }


def asserts_something(source: str) -> bool:
    """Whether the cell has an ``assert`` statement or calls ``check_close``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_close":
            return True
    return False


def test_cells_left_out_of_the_comparison_assert_what_they_print():
    tagged, silent = 0, []
    for chapter, cells in chapter_code_cells().items():
        for i, cell in enumerate(cells):
            if TAG not in cell.metadata.get("tags", []):
                continue
            tagged += 1
            checked_here_or_next = [c.source for c in cells[i : i + 2]]
            if not any(asserts_something(source) for source in checked_here_or_next):
                silent.append(f"{chapter}::Cell {i}")
    assert tagged >= 20, "the chapters' training cells carry the tag"
    assert silent == [], f"cells tagged {TAG} whose numbers nothing asserts (here or next cell)"


def test_cells_are_left_out_by_tag_not_by_a_comment_the_reader_sees():
    marked = [
        f"{chapter}::Cell {i}"
        for chapter, cells in chapter_code_cells().items()
        for i, cell in enumerate(cells)
        if re.search(r"#\s*NBVAL_", cell.source)
    ]
    assert marked == [], f"use the cell tag {TAG!r} instead of a '# NBVAL_...' comment"


def test_roundoff_sanitizer_masks_round_off_and_nothing_else():
    patterns = get_sanitize_patterns((ROOT / "book" / "sanitize.cfg").read_text())

    def sanitize(text: str) -> str:
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    assert sanitize("max abs err 1.4e-17, gradcheck True") == sanitize(
        "max abs err 0.0e+00, gradcheck True"
    )
    assert sanitize("|F - loop| 1e-15 3e-16") == sanitize("|F - loop| 2e-14 0e+00")
    for kept in ("1.0e-01", "9.08e-06", "3.000e-03", "1e+00", "R@1 22.3", "x1e-15", "2e-9"):
        assert sanitize(kept) == kept
    assert sanitize("at 0x7f3a2b1c9d40") == "at 0xADDRESS"


def load_root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chapter_kernels_start_on_the_other_math_paths_and_unit_tests_do_not(monkeypatch):
    root = load_root_conftest()
    for key in root.KERNEL_MATH:
        monkeypatch.delenv(key, raising=False)
    for suffix, applied in ((".ipynb", True), (".py", False)):
        hook = root.pytest_runtest_setup(SimpleNamespace(path=Path("book/01_x" + suffix)))
        next(hook)  # nbval starts the kernel here
        seen = {key: os.environ.get(key) for key in root.KERNEL_MATH}
        assert seen == (root.KERNEL_MATH if applied else dict.fromkeys(root.KERNEL_MATH))
        with pytest.raises(StopIteration):
            hook.send(None)
        assert all(key not in os.environ for key in root.KERNEL_MATH)  # restored after setup
    monkeypatch.setenv("MKL_CBWR", "AUTO")  # a setting given by the user wins
    hook = root.pytest_runtest_setup(SimpleNamespace(path=Path("book/01_x.ipynb")))
    next(hook)
    assert os.environ["MKL_CBWR"] == "AUTO"
    with pytest.raises(StopIteration):
        hook.send(None)
    assert os.environ["MKL_CBWR"] == "AUTO"


FLOAT32_STEPS = """
import torch
g = torch.Generator().manual_seed(0)
x, w = torch.randn(80, 784, generator=g), torch.randn(784, 128, generator=g).requires_grad_()
images = torch.randn(60, 3, 32, 32, generator=g)
kernel = torch.randn(16, 3, 3, 3, generator=g).requires_grad_()
opt = torch.optim.SGD([w, kernel], lr=0.01)
for _ in range(5):
    loss = (x @ w).tanh().square().mean() + torch.conv2d(images, kernel).tanh().square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    print(repr(float((x @ w).double().sum())), repr(float(torch.conv2d(images, kernel).double().sum())))
"""


@pytest.mark.slow
@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="torch built without MKL")
def test_the_kernels_math_setting_changes_float32_results(one_thread):
    """The nbval run is a real cross-setting check: its setting moves float32 numbers here."""
    root = load_root_conftest()
    env = {k: v for k, v in os.environ.items() if k not in root.KERNEL_MATH}
    env["OMP_NUM_THREADS"] = "1"

    def run(extra: dict[str, str]) -> list[float]:
        command = [sys.executable, "-c", FLOAT32_STEPS]
        out = subprocess.run(
            command, env={**env, **extra}, capture_output=True, text=True, check=True
        ).stdout
        return [float(v) for v in out.split()]

    if any(key in os.environ for key in root.KERNEL_MATH):  # this process is not on its own paths
        native = run({})
    else:  # the machine's own paths, in this process (one torch start-up fewer)
        namespace: dict = {}
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(FLOAT32_STEPS, namespace)
        native = [float(v) for v in printed.getvalue().split()]
    other = run(root.KERNEL_MATH)
    assert native != other, "MKL_CBWR / ONEDNN_MAX_CPU_ISA no longer change anything here"
    for a, b in zip(native, other, strict=True):
        assert abs(a - b) <= 1e-3 * abs(a)  # the same computation, other rounding

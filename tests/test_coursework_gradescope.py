"""The Gradescope autograder zip (issue 28): what it installs and how it runs.

Checked here without installing anything: the zip keeps otter's tests, configuration and entry
point, and replaces otter's Miniforge environment (Python and otter only) with a virtual
environment whose requirements are dmlbook's wheel (in the zip), the CPU build of torch, SymPy,
SciPy and otter-grader, each pinned to the version installed here, with their dependencies; every
module the assignments' tests and solutions import is covered. The full proof, ``setup.sh`` and
``run_autograder`` run in Gradescope's layout (``python tools/coursework.py gradescope NAME``,
several minutes of package installation), is measured in docs/teaching.md, not run by the suite.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import coursework_gradescope as gradescope  # noqa: E402  (tools/ is not a package)

import coursework as cw  # noqa: E402


@pytest.fixture(scope="module")
def zipped(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("gradescope")
    otter_zip = tmp / "otter.zip"
    with zipfile.ZipFile(otter_zip, "w") as zf:
        for name, text in {
            "run_otter.py": "from otter.run.run_autograder import main\n",
            "otter_config.json": '{"assignment_name": "x"}',
            "tests/q1.py": "OK_FORMAT = True\ntest = {}\n",
            "setup.sh": "wget miniforge ...",
            "run_autograder": "mamba activate otter-env",
            "environment.yml": "dependencies: [python=3.13, otter-grader]",
        }.items():
            zf.writestr(name, text)
    wheel = tmp / "dmlbook-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"a wheel")
    gradescope.gradescope_zip(otter_zip, wheel, tmp / "x.zip")
    return tmp / "x.zip"


def test_the_zip_keeps_otters_tests_and_replaces_its_environment(zipped):
    with zipfile.ZipFile(zipped) as zf:
        names = set(zf.namelist())
        setup, run = zf.read("setup.sh").decode(), zf.read("run_autograder").decode()
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert {"run_otter.py", "otter_config.json", "tests/q1.py", "requirements.txt"} <= names
    assert "dmlbook-0.1.0-py3-none-any.whl" in names and "environment.yml" not in names
    assert "python3 -m venv /autograder/env" in setup and "-r requirements.txt" in setup
    assert "mamba" not in setup + run and "miniforge" not in setup.lower()
    assert "/autograder/env/bin/python /autograder/source/run_otter.py" in run
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111


def test_requirements_pin_what_the_tests_need(zipped):
    with zipfile.ZipFile(zipped) as zf:
        lines = zf.read("requirements.txt").decode().splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line)
    assert f"--extra-index-url {gradescope.TORCH_CPU_INDEX}" in lines
    assert "/autograder/source/dmlbook-0.1.0-py3-none-any.whl" in lines
    for name in ("torch", "sympy", "scipy", "numpy", "otter-grader", "ipykernel"):
        assert pins[name] == metadata.version(name), name
    assert "nvidia-cudnn-cu12" not in pins and "dmlbook" not in pins
    assert "jupyterlab" not in pins and "pytest" not in pins, (
        "the book's and tests' extras stay out"
    )


def test_every_import_of_the_assignments_is_installed_on_gradescope():
    sources = []
    for name in cw.assignments():
        nb = nbformat.read(cw.master(name), as_version=4)
        sources += [c.source for c in nb.cells if c.cell_type == "code"]
    assert {"torch", "sympy", "scipy", "dmlbook", "numpy"} <= gradescope.imported_modules(sources)
    assert gradescope.uncovered_imports(sources) == []
    assert gradescope.uncovered_imports(["import seaborn", ">>> import pytest"]) == [
        "pytest",
        "seaborn",
    ]

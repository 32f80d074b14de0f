"""The Gradescope autograder zip (issues 28, 43): what it carries, and its scores, offline.

The layout is checked on a small zip: the tests, ``cases.json`` and this repository's grader
replace otter's environment; ``requirements.txt`` pins what grading needs and nothing of the
book's toolchain (no otter, Sphinx, Playwright or JupyterLab). Then the proof: a3's zip, built
with every wheel it needs, is unpacked into a fake ``/autograder`` root and its ``setup.sh`` and
``run_autograder`` run under bubblewrap **with the network cut** (and Docker's capabilities:
no namespaces inside, so the grader falls back to its separate-user isolation as on
Gradescope), for the reference solution and for a committed wrong submission; their
``results.json`` give 18/18 and exactly the points ``mistakes/expected.json`` says, with the
hidden tests' names but not their contents. That proof installs torch and 63 other wheels
offline (``setup.sh``: minutes on a busy two-core machine, measured in book/91_instructors.ipynb),
so the installed environment is kept in ``build/gradescope-env/<hash>`` (git-ignored) and
``setup.sh`` runs again only when it or ``requirements.txt`` changes; the wheels are downloaded
once into ``build/wheel-cache``. Measured: the first run of this file took 461 s of wall clock
at load average 13, 277 s of it ``setup.sh``; a later run, reusing the environment, 56 s (17 s
of CPU, load average 5).
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import coursework_gradescope as gradescope  # noqa: E402  (tools/ is not a package)

import coursework as cw  # noqa: E402

# The installed /autograder/env, kept between runs (git-ignored): setup.sh runs again only when
# it or requirements.txt changes (coursework_gradescope.simulate's env_cache).
ENV_CACHE = ROOT / "build" / "gradescope-env"


def _otter_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in {
            "run_otter.py": "from otter.run.run_autograder import main\n",
            "otter_config.json": '{"assignment_name": "x"}',
            "tests/q1.py": "OK_FORMAT = True\ntest = {}\n",
            "setup.sh": "wget miniforge ...",
            "run_autograder": "mamba activate otter-env",
            "environment.yml": "dependencies: [python=3.13, otter-grader]",
        }.items():
            zf.writestr(name, text)
    return path


@pytest.mark.parametrize("carried", [False, True])
def test_the_zip_carries_the_grader_and_only_what_grading_needs(tmp_path, carried):
    wheel = tmp_path / "dmlbook-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"a wheel")
    extra = tmp_path / "sympy-1.14.0-py3-none-any.whl"
    extra.write_bytes(b"another")
    case = cw.report.Case("q1 - 1", 2.0, True, "hidden message")
    target = tmp_path / "x.zip"
    gradescope.gradescope_zip(
        _otter_zip(tmp_path / "o.zip"), wheel, target, [case], [extra] if carried else None
    )
    with zipfile.ZipFile(target) as zf:
        names = set(zf.namelist())
        setup, run = zf.read("setup.sh").decode(), zf.read("run_autograder").decode()
        lines = zf.read("requirements.txt").decode().splitlines()
        cases = json.loads(zf.read("cases.json"))
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    assert {"otter_config.json", "tests/q1.py", *gradescope.GRADING_TOOLS} <= names
    assert "run_otter.py" not in names and "environment.yml" not in names
    assert cases == [
        {"name": "q1 - 1", "points": 2.0, "hidden": True, "failure_message": "hidden message"}
    ]
    assert "coursework_gradescope_run.py" in run and "mamba" not in setup + run
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert ("--no-index --find-links /autograder/source/wheels" in setup) == carried
    assert ("wheels/sympy-1.14.0-py3-none-any.whl" in names) == carried
    assert any(line.startswith("--extra-index-url") for line in lines) != carried
    pins = dict(line.split("==") for line in lines if "==" in line)
    assert {"torch", "sympy", "scipy", "numpy", "ipykernel", "nbclient"} <= set(pins)
    for name in ("otter-grader", "sphinx", "playwright", "jupyterlab", "pytest", "nbconvert"):
        assert name not in pins, f"{name}: not needed to grade"


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


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> dict:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    out = tmp_path_factory.mktemp("gradescope")
    wheel = gradescope.build_wheel(out / "wheel")
    wheels = gradescope.collect_wheels(out / "wheels", cw.WHEEL_CACHE)
    cw.build_one("a3_dro", out, wheel=wheel, wheels=wheels)
    wrong = cw.COURSEWORK / "a3_dro" / "mistakes" / "kl_without_uniform.ipynb"
    zip_path = out / "autograder" / "a3_dro.zip"
    subs = [out / "reference" / "a3_dro.ipynb", wrong]
    results, setup = gradescope.simulate(zip_path, subs, env_cache=ENV_CACHE)
    said = "reused from an earlier run" if setup is None else f"{setup:.0f} s"
    print(f"setup.sh: {said}; the zip: {zip_path.stat().st_size / 2**20:.0f} MiB")
    return {"results": results, "setup": setup, "zip": zip_path}


@pytest.mark.slow
def test_offline_gradescope_gives_the_reference_full_marks(offline):
    reference = offline["results"][0]
    assert reference["score"] == 18 and sum(t["max_score"] for t in reference["tests"]) == 18
    assert "isolation process" in reference["output"], "no namespaces in Docker's capabilities"


@pytest.mark.slow
def test_offline_gradescope_gives_a_wrong_submission_its_points(offline):
    expected = json.loads((cw.COURSEWORK / "a3_dro" / "mistakes" / "expected.json").read_text())
    fails = set(expected["kl_without_uniform.ipynb"]["fails"])
    wrong = offline["results"][1]
    lost = {t["name"].removesuffix(" (hidden)") for t in wrong["tests"] if t["score"] == 0}
    assert lost == fails
    hidden = [t for t in wrong["tests"] if t["visibility"] == "after_published"]
    assert hidden and all(t["output"] in ("passed", "failed") for t in hidden), "no contents"
    with zipfile.ZipFile(offline["zip"]) as zf:
        secret = zf.read("tests/q2.py").decode()
    assert "minimize(" in secret and "minimize(" not in json.dumps(wrong)

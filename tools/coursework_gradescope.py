"""Make an otter autograder zip Gradescope-ready, and prove it in Gradescope's layout here.

``otter assign`` writes a zip whose ``setup.sh`` installs Miniforge and an environment with
Python and otter only: a test that imports ``torch``, ``sympy``, ``scipy`` or ``dmlbook`` would
fail on Gradescope. ``gradescope_zip`` keeps otter's tests, ``otter_config.json`` and
``run_otter.py`` (otter's own Gradescope entry point, ``otter.run.run_autograder``) and replaces
the environment:

* ``requirements.txt``: what the tests need and nothing else, pinned to the versions the
  reference solution was graded with here: ``dmlbook`` (its wheel is in the zip), the CPU
  build of ``torch``, SymPy, SciPy, ``otter-grader[grading]``, and every package they depend on
  (``pinned_requirements`` walks the installed distributions' metadata);
* ``setup.sh``: a virtual environment ``/autograder/env`` from the image's ``python3`` (Ubuntu
  24.04's 3.12; 3.11 or newer), ``pip install -r requirements.txt``, and a check that the CPU
  torch imports;
* ``run_autograder``: ``/autograder/env/bin/python /autograder/source/run_otter.py``.

``simulate`` proves a zip: under a temporary root it lays out ``/autograder/source`` (the zip),
``/autograder/submission`` (a notebook) and ``/autograder/results``, mounts it at
``/autograder`` with bubblewrap (the rest of the file system as it is, as in Gradescope's
container), runs the zip's ``setup.sh`` (a fresh virtual environment, packages from pip's
configured index) and then its ``run_autograder``, and returns ``results.json``. ``python
tools/coursework.py gradescope NAME`` runs it on the reference solution. Tested (the layout and
the requirements, not the install) by ``tests/test_coursework_gradescope.py``.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from dmlbook.assignment_rules import parse_cell

ROOT = Path(__file__).resolve().parent.parent
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# What grading runs on (the tests' imports are checked to be covered by these and their
# dependencies): the book's package, and otter with its grading extra (ipykernel).
TOP_LEVEL = ("dmlbook", "torch", "sympy", "scipy", "otter-grader[grading]")
REPLACED = ("setup.sh", "run_autograder", "environment.yml", "requirements.txt", "requirements.r")

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. Choose the Ubuntu
# 24.04 base image (python3 is 3.12; this needs 3.11 or newer). It creates /autograder/env, a
# virtual environment with exactly what the tests need (requirements.txt: dmlbook from the wheel
# beside this file, the CPU build of torch, SymPy, SciPy, otter-grader, their dependencies).
set -euo pipefail
cd /autograder/source
if ! python3 -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "setup.sh: this autograder needs Python 3.11 or newer: choose the Ubuntu 24.04 image" >&2
    exit 1
fi
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
fi
python3 -m venv /autograder/env
/autograder/env/bin/python -m pip install --no-cache-dir --progress-bar off -r requirements.txt
/autograder/env/bin/python -c "import dmlbook, otter, scipy, sympy, torch; assert not torch.version.cuda, 'a CUDA build of torch'"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission: the notebook is in /autograder/submission;
# otter-grader's run_autograder grades it and writes /autograder/results/results.json.
set -euo pipefail
exec /autograder/env/bin/python /autograder/source/run_otter.py
"""


def _closure(top: tuple[str, ...]) -> dict[str, str]:
    """Installed distributions needed by ``top`` (requirement strings), name -> version."""
    found: dict[str, str] = {}
    todo = [Requirement(t) for t in top]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in found:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this environment does not have
        found[name] = dist.version
        for text in dist.requires or []:
            sub = Requirement(text)
            extras = req.extras or {""}
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return found


def pinned_requirements(wheel_name: str) -> str:
    """requirements.txt: every distribution grading needs, pinned to the installed version."""
    pins = _closure(TOP_LEVEL)
    pins.pop("dmlbook", None)
    lines = [
        "# Everything the tests need, pinned to the versions the reference solution passed with.",
        f"--extra-index-url {TORCH_CPU_INDEX}",
        f"/autograder/source/{wheel_name}",
    ]
    lines += [f"{name}=={version}" for name, version in sorted(pins.items())]
    return "\n".join(lines) + "\n"


def imported_modules(sources: list[str]) -> set[str]:
    """Top-level modules imported by Python sources (cells, tests); doctest prompts stripped."""
    out = set()
    for source in sources:
        tree = parse_cell(source, doctest=True)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                out.add(node.module.split(".")[0])
    return out


def uncovered_imports(sources: list[str]) -> list[str]:
    """Imported modules that neither the standard library nor the requirements provide."""
    provided = set(_closure(TOP_LEVEL))
    by_module = metadata.packages_distributions()
    missing = []
    for module in sorted(imported_modules(sources)):
        if module in sys.stdlib_module_names:
            continue
        dists = {d.lower().replace("_", "-") for d in by_module.get(module, [])}
        if not dists & provided:
            missing.append(module)
    return missing


def build_wheel(out: Path) -> Path:
    """The dmlbook wheel of this checkout (``pip wheel``, no dependencies), in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("dmlbook-*.whl"):
        old.unlink()
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    proc = subprocess.run(
        cmd + ["--quiet", "-w", str(out), str(ROOT)], capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"pip wheel failed:\n{proc.stderr[-2000:]}")
    (wheel,) = out.glob("dmlbook-*.whl")
    return wheel


def gradescope_zip(otter_zip: Path, wheel: Path, target: Path) -> None:
    """Write ``target``: otter's zip with the environment replaced (module docstring)."""
    files = {
        "setup.sh": SETUP_SH,
        "run_autograder": RUN_AUTOGRADER,
        "requirements.txt": pinned_requirements(wheel.name),
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    with (
        zipfile.ZipFile(otter_zip) as src,
        zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf,
    ):
        for info in src.infolist():
            if info.filename not in REPLACED:
                zf.writestr(info, src.read(info))
        for name, text in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            zf.writestr(info, text)
        zf.write(wheel, wheel.name)


def _container(root: Path) -> list[str]:
    """bubblewrap: this machine's file system as it is, with ``root`` at ``/autograder``."""
    argv = ["bwrap", "--die-with-parent", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for top in sorted(os.listdir("/")):
        path = Path("/") / top
        if top in ("autograder", "dev", "proc", "tmp", "sys") or not path.exists():
            continue
        argv += ["--symlink", os.readlink(path), str(path)] if path.is_symlink() else []
        argv += [] if path.is_symlink() else ["--bind", str(path), str(path)]
    argv += ["--ro-bind", "/sys", "/sys", "--bind", str(root), "/autograder"]
    # python3 is this environment's base interpreter: the pins were resolved for its version
    # (Gradescope's image brings its own python3, which setup.sh checks).
    path = f"{Path(sys.base_prefix) / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    # An index that cannot be reached (PyTorch's, from an offline machine) is given up at once
    # rather than retried for every package.
    return argv + ["--setenv", "PATH", path, "--setenv", "PIP_RETRIES", "0"]


def simulate(zip_path: Path, submission: Path, log=print) -> dict:
    """Run a Gradescope zip's ``setup.sh`` and ``run_autograder`` in a temporary layout.

    Returns ``results.json`` (otter's Gradescope results: ``score``, ``tests``). Needs
    bubblewrap, as root or with user namespaces. Raises ``RuntimeError`` with the script's
    output when a step fails.
    """
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        root = Path(tmp) / "autograder"
        for folder in ("source", "submission", "results"):
            (root / folder).mkdir(parents=True)
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(root / "source")
        for script in ("setup.sh", "run_autograder"):
            os.chmod(root / "source" / script, 0o755)
        shutil.copyfile(submission, root / "submission" / submission.name)
        container = _container(root)
        if os.geteuid() != 0:
            container[1:1] = ["--unshare-user", "--uid", "0", "--gid", "0"]
        for step in ("setup.sh", "run_autograder"):
            log(f"running /autograder/source/{step} ...")
            proc = subprocess.run(
                container + ["bash", f"/autograder/source/{step}"],
                capture_output=True,
                text=True,
            )
            if proc.returncode:
                tail = (proc.stdout + proc.stderr)[-4000:]
                raise RuntimeError(f"{step} failed (exit status {proc.returncode}):\n{tail}")
        return json.loads((root / "results" / "results.json").read_text())


def check(zip_path: Path, submission: Path, keep: Path) -> tuple[float, float, float]:
    """``simulate``, keep ``results.json`` at ``keep``: ``(score, possible, seconds)``.

    ``possible`` comes from the zip's own tests (``score`` 0 when otter reported a failure).
    """
    from coursework_report import load_tests

    start = time.perf_counter()
    results = simulate(zip_path, submission)
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps(results, indent=1))
    scored = [t for t in results["tests"] if "score" in t]
    score = results.get("score", sum(t["score"] for t in scored))
    possible = sum(c.points for c in load_tests(zip_path)[1])
    return score, possible, time.perf_counter() - start

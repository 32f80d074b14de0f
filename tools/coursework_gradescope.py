"""Make a Gradescope autograder zip that grades as ``make grade`` does, and prove it offline.

Gradescope runs ``/autograder/source/setup.sh`` once (as root, when it builds the image) and
``/autograder/source/run_autograder`` for every submission (in ``/autograder/submission``),
which writes ``/autograder/results/results.json``. otter's own zip would run the tests in the
kernel that ran the student's code; this one runs the grader of this repository instead
(``coursework_gradescope_run``: the tests in the grader's process, the answers asked of the
sandboxed kernel as plain data, ``coursework_grade``). ``gradescope_zip`` writes:

* the tests (otter's ``tests/``), ``cases.json`` (each test case's points, visibility and
  message, resolved by otter at build time) and the grading tools (``GRADING_TOOLS``);
* ``requirements.txt``: what grading needs and nothing else (``GRADING_NEEDS``: dmlbook, the
  CPU build of torch, SciPy, SymPy, ipykernel, nbclient, nbformat, mistune, PyYAML, and their
  dependencies, pinned to the versions the reference solution passed with here): no otter, no
  book toolchain, no browser;
* ``wheels/``: every one of those as a wheel (``collect_wheels``: from folders of wheels on
  this machine, ``/opt/wheels`` and the build's cache, else ``pip download`` once), so that
  ``setup.sh`` installs with ``--no-index``, offline, for the Python that built the zip (a
  Gradescope image with that Python: ``setup.sh`` checks it). Without wheels (``wheels=None``)
  it installs from PyPI and PyTorch's CPU index instead;
* ``setup.sh`` (a virtual environment ``/autograder/env``, the install, an import check) and
  ``run_autograder``.

``simulate`` proves a zip: under a temporary root it lays out ``/autograder/source`` (the zip),
``/autograder/submission`` (a notebook) and ``/autograder/results``, mounts it at
``/autograder`` with bubblewrap with the network cut (``--unshare-net``) and the capabilities
of Docker's default container (root, without ``CAP_SYS_ADMIN``: no namespaces inside, as on
Gradescope), runs ``setup.sh`` then ``run_autograder``, and returns ``results.json``. ``python
tools/coursework.py gradescope NAME`` runs it on the reference solution. Tested by
``tests/test_coursework_gradescope.py``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict
from pathlib import Path

from packaging.requirements import Requirement

from dmlbook.exercises.assignment_rules import parse_cell

ROOT = Path(__file__).resolve().parent.parent
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# What grading runs on (the tests' imports are checked to be covered by these and their
# dependencies): the book's package and what the tests import, the kernel, the driver.
GRADING_NEEDS = (
    "dmlbook",
    "torch",
    "sympy",
    "scipy",
    "ipykernel",
    "nbclient",
    "nbformat",
    "mistune",
    "pyyaml",
)
TOP_LEVEL = GRADING_NEEDS
GRADING_TOOLS = (
    "coursework_answer.py",
    "coursework_channel.py",
    "coursework_grade.py",
    "coursework_gradescope_run.py",
    "coursework_remote.py",
    "coursework_report.py",
    "coursework_sandbox.py",
)
KEPT = ("otter_config.json",)  # of otter's zip, besides its tests
WHEEL_FOLDERS = (Path("/opt/wheels"),)  # searched before pip download (the torch CPU wheel)

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. It creates
# /autograder/env, a virtual environment with exactly what grading needs (requirements.txt),
# installed offline from the wheels beside this file (built for Python {python}: choose a
# Gradescope base image whose python3 is {python}).
set -euo pipefail
cd /autograder/source
if ! python3 -c 'import sys; assert sys.version_info[:2] == ({major}, {minor})' 2>/dev/null; then
    echo "setup.sh: these wheels are for Python {python}: choose an image with that python3" >&2
    exit 1
fi
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
fi
python3 -m venv /autograder/env
/autograder/env/bin/python -m pip install --no-cache-dir --progress-bar off {where} -r requirements.txt
/autograder/env/bin/python -c "import dmlbook, scipy, sympy, torch, ipykernel, nbclient; assert not torch.version.cuda, 'a CUDA build of torch'"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission (the notebook in /autograder/submission): the
# grader of dmlbook grades it (the tests here, the answers asked of the submission's sandboxed
# kernel) and writes /autograder/results/results.json.
set -euo pipefail
exec /autograder/env/bin/python /autograder/source/coursework_gradescope_run.py
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


def pinned_requirements(wheel_name: str, offline: bool = True) -> str:
    """requirements.txt: every distribution grading needs, pinned to the installed version."""
    pins = _closure(GRADING_NEEDS)
    pins.pop("dmlbook", None)
    lines = [
        "# Everything grading needs, pinned to the versions the reference solution passed with."
    ]
    lines += [] if offline else [f"--extra-index-url {TORCH_CPU_INDEX}"]
    lines.append(f"/autograder/source/{wheel_name}")
    lines += [f"{name}=={version}" for name, version in sorted(pins.items())]
    return "\n".join(lines) + "\n"


def _matches(wheel: Path, name: str, version: str) -> bool:
    parts = wheel.name.split("-")
    norm = parts[0].lower().replace("_", "-").replace(".", "-")
    return norm == name.replace("_", "-").replace(".", "-") and parts[1] == version


def collect_wheels(dest: Path, cache: Path) -> list[Path]:
    """A wheel of every pinned distribution (``pinned_requirements``), copied into ``dest``.

    Each comes from ``WHEEL_FOLDERS`` or ``cache`` when one is there, else from ``pip
    download`` into ``cache`` (once: later builds find it). Raises ``RuntimeError`` naming a
    distribution that no wheel can be found for.
    """
    pins = _closure(GRADING_NEEDS)
    pins.pop("dmlbook", None)
    cache.mkdir(parents=True, exist_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    folders = [f for f in (*WHEEL_FOLDERS, cache) if f.is_dir()]
    out, missing = [], []
    for name, version in sorted(pins.items()):
        found = [w for f in folders for w in f.glob("*.whl") if _matches(w, name, version)]
        if not found:
            missing.append(f"{name}=={version}")
            continue
        out.append(found[0])
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--quiet", "-d", str(cache)]
        # PyTorch's index only for torch itself (its CPU build): every other pin is on PyPI
        cmd += ["--extra-index-url", TORCH_CPU_INDEX] if any("torch=" in m for m in missing) else []
        cmd += missing
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(
                f"no wheel for {missing}: pip download failed:\n{proc.stderr[-2000:]}"
            )
        return collect_wheels(dest, cache)
    for wheel in out:
        shutil.copyfile(wheel, dest / wheel.name)
    return [dest / w.name for w in out]


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


def gradescope_zip(
    otter_zip: Path, wheel: Path, target: Path, cases: list, wheels: list[Path] | None = None
) -> None:
    """Write ``target`` (module docstring): otter's tests, our grader, the environment.

    ``cases``: the test cases (``coursework_report.Case``) as otter resolved them;
    ``wheels``: the wheels to carry (``collect_wheels``), or None to install from the indexes.
    """
    where = "--no-index --find-links /autograder/source/wheels" if wheels else ""
    version = sys.version_info
    files = {
        "setup.sh": SETUP_SH.format(
            python=f"{version.major}.{version.minor}",
            major=version.major,
            minor=version.minor,
            where=where,
        ),
        "run_autograder": RUN_AUTOGRADER,
        "requirements.txt": pinned_requirements(wheel.name, offline=bool(wheels)),
        "cases.json": json.dumps([asdict(c) for c in cases], indent=1) + "\n",
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    with (
        zipfile.ZipFile(otter_zip) as src,
        zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf,
    ):
        for info in src.infolist():
            if info.filename.startswith("tests/") or info.filename in KEPT:
                zf.writestr(info, src.read(info))
        for name, text in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            zf.writestr(info, text)
        for tool in GRADING_TOOLS:
            zf.write(Path(__file__).with_name(tool), tool)
        zf.write(wheel, wheel.name)
        for extra in wheels or []:  # already compressed: stored as they are
            zf.write(extra, f"wheels/{extra.name}", compress_type=zipfile.ZIP_STORED)


# Docker's default capabilities (a Gradescope container's root has these, not CAP_SYS_ADMIN).
DOCKER_CAPS = (
    "CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID SETFCAP SETPCAP "
    "NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE"
).split()


def _container(root: Path) -> list[str]:
    """bubblewrap: this machine's file system, ``root`` at ``/autograder``, no network."""
    argv = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-pid", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", "/tmp"]
    for top in sorted(os.listdir("/")):
        path = Path("/") / top
        if top in ("autograder", "dev", "proc", "tmp", "sys") or not path.exists():
            continue
        argv += ["--symlink", os.readlink(path), str(path)] if path.is_symlink() else []
        argv += [] if path.is_symlink() else ["--ro-bind", str(path), str(path)]
    argv += ["--ro-bind", "/sys", "/sys", "--bind", str(root), "/autograder"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"] + [a for c in DOCKER_CAPS for a in ("--cap-add", f"CAP_{c}")]
    # python3 is this environment's base interpreter: the wheels were chosen for its version
    path = f"{Path(sys.base_prefix) / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {"PATH": path, "PIP_RETRIES": "0", "HOME": "/tmp", "LANG": "C.UTF-8"}
    # its grading user ids apart from this machine's grading runs (their locks are not shared)
    env["DMLBOOK_GRADER_UID_BASE"] = "2100000"
    # a clean environment, as Gradescope's (not this checkout's PYTHONPATH or pip settings)
    return argv + ["--clearenv"] + [a for k, v in env.items() for a in ("--setenv", k, v)]


def simulate(
    zip_path: Path, submissions: list[Path], log=print, env_cache: Path | None = None
) -> tuple[list[dict], float | None]:
    """Run a zip's ``setup.sh`` once, then ``run_autograder`` on each submission, offline.

    Returns each submission's ``results.json`` and the seconds ``setup.sh`` took. With
    ``env_cache``, ``/autograder/env`` lives in ``env_cache/<hash of setup.sh and
    requirements.txt>``: ``setup.sh`` runs only when no earlier run left a complete one there
    (the seconds are then None). Needs bubblewrap, as root or with user namespaces. Raises
    ``RuntimeError`` with the script's output when a step fails.
    """
    with tempfile.TemporaryDirectory(prefix="gradescope-") as tmp:
        root = Path(tmp) / "autograder"
        for folder in ("source", "submission", "results"):
            (root / folder).mkdir(parents=True)
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(root / "source")
        for script in ("setup.sh", "run_autograder"):
            os.chmod(root / "source" / script, 0o755)
        container = _container(root)
        if os.geteuid() != 0:
            container[1:1] = ["--unshare-user", "--uid", "0", "--gid", "0"]
        cached = None
        if env_cache is not None:
            key = hashlib.sha256()
            for name in ("setup.sh", "requirements.txt"):
                key.update((root / "source" / name).read_bytes())
            cached = env_cache / key.hexdigest()[:16]
            (cached / "env").mkdir(parents=True, exist_ok=True)
            at = container.index("--clearenv")
            container[at:at] = ["--bind", str(cached / "env"), "/autograder/env"]

        def step(name: str) -> None:
            log(f"running /autograder/source/{name} ...")
            proc = subprocess.run(
                container + ["bash", f"/autograder/source/{name}"], capture_output=True, text=True
            )
            if proc.returncode:
                tail = (proc.stdout + proc.stderr)[-4000:]
                raise RuntimeError(f"{name} failed (exit status {proc.returncode}):\n{tail}")

        setup_seconds = None
        if cached is None or not (cached / "complete").is_file():
            start = time.perf_counter()
            step("setup.sh")
            setup_seconds = time.perf_counter() - start
            if cached is not None:
                (cached / "complete").write_text(f"setup.sh took {setup_seconds:.0f} s\n")
        results = []
        for submission in submissions:
            for folder in ("submission", "results"):
                shutil.rmtree(root / folder)
                (root / folder).mkdir()
            shutil.copyfile(submission, root / "submission" / submission.name)
            step("run_autograder")
            results.append(json.loads((root / "results" / "results.json").read_text()))
        return results, setup_seconds


def check(zip_path: Path, submission: Path, keep: Path) -> tuple[float, float, float]:
    """``simulate`` one submission, keep ``results.json`` at ``keep``: ``(score, possible,
    seconds of setup.sh)``."""
    (results,), seconds = simulate(zip_path, [submission])
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.write_text(json.dumps(results, indent=1))
    possible = sum(t["max_score"] for t in results["tests"])
    return results["score"], possible, seconds

"""The library-only install: dmlbook's wheel in a clean environment, as `pip install .` gives it.

The wheel is built from a copy of the checkout (what a clone holds), installed into a new virtual
environment that sees nothing but the standard library, the wheel, and the distributions that
the wheel's metadata requires (``Requires-Dist`` without extras, followed transitively through each
dependency's own metadata, markers evaluated for this interpreter). Those are not downloaded
again: each one is linked from this test environment into a folder the new environment puts on its
path. So an import of a package that ``pyproject.toml`` does not declare (pyyaml for the configs,
once) fails here as it would for a researcher's ``pip install .``, while the test costs seconds,
not the minutes of copying torch.

Then, from a folder outside the checkout: ``import dmlbook``, ``dmlbook --help``, and a short CPU
training run with a config found by its bare name, which must come from the wheel's
``dmlbook/configs/``.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
NOT_IN_A_CLONE = (".git", ".venv", "build", "__pycache__", "*.egg-info", "_build", ".hypothesis")


def requirements_closure(requires: list[str]) -> dict[str, md.Distribution]:
    """The installed distributions that ``requires`` pulls in, transitively, without extras."""
    env = default_environment() | {"extra": ""}
    found: dict[str, md.Distribution] = {}
    todo = [Requirement(r) for r in requires]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name in found:
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            pytest.fail(f"{req} is required by the wheel but not installed here (make install)")
        assert req.specifier.contains(dist.version, prereleases=True), f"{req}: {dist.version}"
        found[name] = dist
        todo += [Requirement(r) for r in dist.requires or []]
    return found


def link_distributions(dists: dict[str, md.Distribution], view: Path) -> None:
    """Link every top-level file and folder of each distribution (its RECORD) into ``view``."""
    view.mkdir()
    for dist in dists.values():
        site = Path(dist.locate_file(""))
        for top in sorted({f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}):
            target = view / top
            if not target.exists() and (site / top).exists():
                target.symlink_to(site / top)


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the new environment's bin folder, its environment variables, a folder to run in)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE), symlinks=True)
    wheels = tmp / "dist"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DMLBOOK_"))}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, source], tmp, base)
    (wheel,) = wheels.glob("dmlbook-*.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))
    requires = Parser().parsestr(meta.decode()).get_all("Requires-Dist") or []
    closure = requirements_closure([r for r in requires if "extra ==" not in r])
    env_dir = tmp / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    link_distributions(closure, tmp / "deps")
    (site,) = env_dir.glob("lib/python*/site-packages")
    (site / "dmlbook_test_deps.pth").write_text(f"{tmp / 'deps'}\n")
    python = env_dir / "bin" / "python"
    run([*pip, "--python", python, "install", "--no-deps", "--no-index", wheel], tmp, base)
    work = tmp / "elsewhere"
    work.mkdir()
    env = base | {"DMLBOOK_CACHE": str(tmp / "cache"), "PATH": f"{env_dir / 'bin'}:{base['PATH']}"}
    return env_dir / "bin", env, work


def test_the_wheel_imports_from_its_own_environment(installed):
    bin_dir, env, work = installed
    out = run([bin_dir / "python", "-c", "import dmlbook; print(dmlbook.__file__)"], work, env)
    assert Path(out.stdout.strip()).is_relative_to(bin_dir.parent), out.stdout
    code = "import jupyterlab"  # the book toolchain must not be there
    proc = subprocess.run([bin_dir / "python", "-c", code], cwd=work, env=env, capture_output=True)
    assert proc.returncode != 0, "the clean environment sees the book toolchain"


def test_the_command_and_a_shipped_config_by_name(installed):
    bin_dir, env, work = installed
    assert "train" in run([bin_dir / "dmlbook", "--help"], work, env).stdout
    out = run(
        [
            bin_dir / "dmlbook",
            "train",
            "--config",
            "synthetic_ms_cpu",
            "--quiet",
            "--set",
            "data.options.num_classes=8",
            "--set",
            "train.batch_size=20",
            "--set",
            "train.iterations=2",
            "--set",
            "train.epoch_iters=2",
            "--set",
            "train.eval_at_start=false",
            "--set",
            f"train.out_dir={work / 'run'}",
        ],  # fmt: skip
        work,
        env,
    )
    assert "iter      2" in out.stdout and "R@1" in out.stdout, out.stdout
    assert (work / "run" / "best.pt").is_file()
    where = "from dmlbook.engine.config import find_config; print(find_config('synthetic_ms_cpu'))"
    found = Path(run([bin_dir / "python", "-c", where], work, env).stdout.strip())
    assert found.is_relative_to(bin_dir.parent) and found.parent.name == "configs", found

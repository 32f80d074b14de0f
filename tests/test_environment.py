"""environment.yml (conda) and pyproject.toml (pip) must describe the same environment.

Conda cannot run here, so this test is what keeps the two files in step: the same dependency
names (after mapping conda names to PyPI names) and version bounds that agree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PYPI = {"pytorch": "torch"}
NOT_PACKAGES = {"python", "pip"}


def pyproject_requirements() -> dict[str, SpecifierSet]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    out = {}
    for r in map(Requirement, reqs):
        out[canonicalize_name(r.name)] = r.specifier
    return out


def environment_requirements() -> dict[str, SpecifierSet]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            entries += [p for p in dep["pip"] if not p.startswith("-e")]
        else:
            entries.append(dep)
    out = {}
    for entry in entries:
        m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", entry.strip())
        name, spec = m.group(1), m.group(2).replace(" ", "")
        if name in NOT_PACKAGES:
            continue
        name = CONDA_TO_PYPI.get(name, name)
        out[canonicalize_name(name)] = SpecifierSet(spec)
    return out


def lower_bound(spec: SpecifierSet) -> str | None:
    for s in spec:
        if s.operator in (">=", "=="):
            return s.version
    return None


def test_same_dependency_names():
    pip, conda = pyproject_requirements(), environment_requirements()
    assert set(pip) - set(conda) == set(), "in pyproject.toml but missing from environment.yml"
    assert set(conda) - set(pip) == set(), "in environment.yml but missing from pyproject.toml"


@pytest.mark.parametrize("name", sorted(pyproject_requirements()))
def test_compatible_bounds(name):
    pip, conda = pyproject_requirements()[name], environment_requirements()[name]
    for a, b in ((pip, conda), (conda, pip)):
        low = lower_bound(a)
        assert low is not None, f"{name}: give a lower bound in both files"
        assert b.contains(low, prereleases=True), f"{name}: {a} and {b} disagree"


def test_torch_constraint_is_allowed():
    pinned = re.search(r"^torch==(\S+)", (ROOT / "constraints.txt").read_text(), re.M).group(1)
    assert pyproject_requirements()["torch"].contains(pinned)
    assert environment_requirements()["torch"].contains(pinned)

"""Mutation testing of dmlbook's equations: ``make mutation`` (not part of ``make test``).

For each area (``mining``, ``surgery``, ``losses``) mutmut (a maintained mutation tool) changes
the area's code one small edit at a time (``>`` into ``>=``, ``1`` into ``2``, ``and`` into ``or``,
...) and runs the area's fast test selection (:data:`AREAS`) against each mutant. A mutant the
tests do not notice *survives*; each survivor must be killed by a new test or argued equivalent
(the code means the same after the edit) in ``tools/mutation_equivalent.md``, beside this file.
The run fails listing every survivor that is neither.

Each area runs in its own scratch copy under ``build/mutation/AREA`` (the project's
``pyproject.toml`` plus the ``[tool.mutmut]`` section of that area), so runs never touch the
working tree. Usage::

    python tools/mutation.py [AREA ...] [--max-children N]

Prints, per area, the mutants run, killed, survived (argued equivalent or not), timed out, and
the CPU time it took.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tools" / "mutation_equivalent.md"

#: Area -> (the code mutated, the fast test selection that must kill its mutants).
AREAS: dict[str, tuple[list[str], list[str]]] = {
    "mining": (["dmlbook/mining/*"], ["tests/mining"]),
    "surgery": (["dmlbook/surgery/*"], ["tests/surgery"]),
    "losses": (
        ["dmlbook/losses/*"],
        ["tests/losses", "--ignore=tests/losses/test_pml_crosscheck.py"],
    ),
}


def config_section(area: str) -> str:
    """The ``[tool.mutmut]`` section of one area, as TOML."""
    mutate, tests = AREAS[area]
    quoted = ", ".join(f'"{t}"' for t in tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["dmlbook"]\n'
        f"only_mutate = [{', '.join(repr(m).replace(chr(39), chr(34)) for m in mutate)}]\n"
        f"pytest_add_cli_args_test_selection = [{quoted}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-n", "0", "-x", "-q"]\n'
        'also_copy = ["conftest.py", "tools"]\n'
    )


def scratch_copy(area: str) -> Path:
    """``build/mutation/AREA`` with the package, the tests and a pyproject for this area."""
    work = ROOT / "build" / "mutation" / area
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in ("dmlbook", "tests", "configs", "tools"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, work / name, ignore=ignore)
    shutil.copy(ROOT / "conftest.py", work / "conftest.py")
    text = (ROOT / "pyproject.toml").read_text()
    text = re.sub(r"\n\[tool\.mutmut\][^\[]*", "\n", text)
    (work / "pyproject.toml").write_text(text + config_section(area))
    return work


def equivalent_mutants() -> dict[str, str]:
    """Mutant name -> the argument that it is equivalent: the lines ``- `NAME`: WHY`` of
    ``mutation_equivalent.md``."""
    found = re.findall(r"^- `([\w.]+__mutmut_\d+)`: (.+)$", EQUIVALENT.read_text(), re.M)
    return dict(found)


def parse_results(text: str) -> dict[str, str]:
    """``mutmut results --all true`` lines ``name: status`` -> {name: status}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([\w.]+__mutmut_\d+): (.+?)\s*$", line)
        if m:
            out[m[1]] = m[2]
    return out


def run_area(area: str, max_children: int) -> tuple[dict[str, str], float]:
    """Run mutmut on one area; (mutant -> status, CPU seconds of the run and its children)."""
    work = scratch_copy(area)
    # one thread: mutmut forks its workers, and a forked child that starts torch's OpenMP pool
    # inherited from the parent can hang until the timeout (seen as 15 s "timeouts")
    env = {**os.environ, "PYTHONPATH": str(work), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    mutmut = [sys.executable, "-m", "mutmut"]
    subprocess.run([*mutmut, "run", "--max-children", str(max_children)], cwd=work, env=env,
                   check=False)  # fmt: skip
    shown = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env,
                           capture_output=True, text=True, check=True)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return parse_results(shown.stdout), cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("areas", nargs="*", default=list(AREAS), help=", ".join(AREAS))
    parser.add_argument("--max-children", type=int, default=1)
    args = parser.parse_args(argv)
    unknown = [a for a in args.areas if a not in AREAS]
    if unknown:
        parser.error(f"unknown area(s) {', '.join(unknown)}; choose from {', '.join(AREAS)}.")
    known = equivalent_mutants()
    unexplained = []
    for area in args.areas:
        t0 = time.time()
        results, cpu = run_area(area, args.max_children)
        # a mutant no selected test even runs ("no tests") is as alive as one they miss
        survivors = sorted(m for m, s in results.items() if s in ("survived", "no tests"))
        argued = [m for m in survivors if m in known]
        counts = {s: sum(v == s for v in results.values()) for s in set(results.values())}
        print(
            f"mutation {area}: {len(results)} mutants, "
            + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            + f"; {len(argued)} survivors argued equivalent; {cpu:.0f} s CPU, "
            f"{time.time() - t0:.0f} s wall"
        )
        unexplained += [m for m in survivors if m not in known]
    for m in unexplained:
        print(f"  survived, not argued equivalent: {m}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())

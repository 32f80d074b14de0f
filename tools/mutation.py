"""Mutation testing of dmlbook's equations: ``make mutation`` (not part of ``make test``).

For each area (``mining``, ``surgery``, ``losses``) mutmut (a maintained mutation tool) changes
the area's code one small edit at a time (``>`` into ``>=``, ``1`` into ``2``, ``and`` into ``or``,
...) and runs the area's fast test selection (:data:`AREAS`) against each mutant. A mutant the
tests do not notice *survives*; each survivor must be killed by a new test or argued equivalent
(the code means the same after the edit) in ``tools/mutation_equivalent.md``, beside this file.
The run fails listing every survivor that is neither.

Each area runs in its own scratch copy under ``build/mutation/AREA`` (the project's
``pyproject.toml`` plus the ``[tool.mutmut]`` section of that area), so runs never touch the
working tree. In that copy every ``@declared`` function is written as ``def f`` followed by
``f = declared(...)(f)`` (:func:`undecorate`): mutmut 3 leaves decorated functions unmutated, and
the losses' equations are all declared. Usage::

    python tools/mutation.py [AREA ...] [--max-children N] [--only FILE ...]

``--only dmlbook/losses/contrastive.py`` mutates only those files of the area (each must lie in
it) in their own scratch copy ``build/mutation/AREA-STEM``, against the area's whole test
selection: the losses area (about 4,000 mutants) can then be run file by file, and a file re-run
after new tests. Without it the whole area runs. Prints, per area, the mutants run, killed,
survived (argued equivalent or not), timed out, and the CPU time it took; fails on a survivor
neither killed nor argued, and on a mutant mutmut never ran.

A commit that renumbers the mutants of a function (a signature default added or removed) leaves
the list naming other edits: ``tools/mutation_remap.py AREA REV`` renames its entries from the
mutants of commit REV to the same edits now, without running the tests.
"""

from __future__ import annotations

import argparse
import ast
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
    # SurgeryFunction is applied by the loss, dmlbook/losses/gradient_surgery.py: its tests too
    "surgery": (["dmlbook/surgery/*"], ["tests/surgery", "tests/losses/test_gradient_surgery.py"]),
    "losses": (
        ["dmlbook/losses/*"],
        ["tests/losses", "--ignore=tests/losses/test_pml_crosscheck.py"],
    ),
}


def config_section(area: str, only: list[str] | None = None) -> str:
    """The ``[tool.mutmut]`` section of one area (or of the files ``only`` of it), as TOML."""
    mutate, tests = AREAS[area]
    mutate = only or mutate
    quoted = ", ".join(f'"{t}"' for t in tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["dmlbook"]\n'
        f"only_mutate = [{', '.join(repr(m).replace(chr(39), chr(34)) for m in mutate)}]\n"
        f"pytest_add_cli_args_test_selection = [{quoted}]\n"
        # no:unraisableexception: its gc.collect() at the end of every run took 1.9 of a
        # mutant's 2.4 s (torch and SymPy make a large heap); the tests' verdicts do not use it
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:unraisableexception",'
        ' "-n", "0", "-x", "-q"]\n'
        'also_copy = ["conftest.py", "tools"]\n'
    )


def scratch_copy(
    area: str, only: list[str] | None = None, root: Path = ROOT, prefix: str = ""
) -> Path:
    """``build/mutation/AREA`` (``AREA-STEM...`` for the files ``only``; ``PREFIXAREA...`` with a
    ``prefix``) with the package, the tests and a pyproject for this area, copied from ``root``
    (the working tree, or a commit's files: :func:`commit_tree`)."""
    name = prefix + "-".join([area, *(Path(f).stem for f in only or [])])
    work = ROOT / "build" / "mutation" / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in ("dmlbook", "tests", "configs", "tools"):
        if (root / name).exists():
            shutil.copytree(root / name, work / name, ignore=ignore)
    write_settings(work, area, only, root)
    for pattern in only or AREAS[area][0]:
        for path in sorted(work.glob(pattern)):
            if path.suffix == ".py":
                path.write_text(undecorate(path.read_text()))
    return work


def write_settings(work: Path, area: str, only: list[str] | None = None, root: Path = ROOT) -> None:
    """The scratch copy's ``pyproject.toml`` (with the area's mutmut section) and ``conftest.py``
    (the project's, with hypothesis reporting a mutant's failure unshrunk: shrinking took longer
    than the test, and the verdict is the same; and derandomized, so that a test draws the same
    examples in every mutant's run: in whole-file runs without it, hypothesis tests let mutants
    survive that they killed when mutmut re-ran those mutants alone, cause not found)."""
    text = (root / "pyproject.toml").read_text()
    text = re.sub(r"\n\[tool\.mutmut\][^\[]*", "\n", text)
    (work / "pyproject.toml").write_text(text + config_section(area, only))
    (work / "conftest.py").write_text(
        (root / "conftest.py").read_text() + "\n\nfrom hypothesis import Phase, settings\n\n"
        'settings.register_profile("mutation", database=None, derandomize=True, '
        "phases=(Phase.explicit, Phase.reuse, Phase.generate))\n"
        'settings.load_profile("mutation")\n'
    )


def undecorate(source: str, decorator: str = "declared") -> str:
    """``source`` with each ``@declared``/``@declared(...)`` function ``f`` written as the plain
    ``def f`` followed by ``f = declared(...)(f)``: the same module (a decorator is that call),
    but one mutmut mutates, since mutmut 3 leaves every decorated function alone."""
    lines = source.splitlines(keepends=True)
    edits = []  # (first decorator line, def line, last line, the assignment), 1-based
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.decorator_list:
            continue
        called = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
        if not any(isinstance(c, ast.Name) and c.id == decorator for c in called):
            continue
        if len(node.decorator_list) != 1:
            raise ValueError(f"{node.name}: @{decorator} with other decorators is not rewritten")
        if node.col_offset:
            raise ValueError(f"{node.name}: only module-level @{decorator} functions are rewritten")
        d, name = node.decorator_list[0], node.name
        assign = f"{name} = {ast.get_source_segment(source, d)}({name})\n"
        like = [k.value for k in getattr(d, "keywords", []) if k.arg == "like"]
        if any(a.annotation is None for a in node.args.args + node.args.kwonlyargs):
            # ``declared`` gives the bare parameters (the frame's, or ``like=``'s) their defaults
            # on the function it is handed, here mutmut's trampoline: the original (whose
            # signature the trampoline shows) and mutmut's copies of it, which the trampoline
            # calls, need them too (each copy keeps its own defaults of the parameters it writes
            # out, mutated ones included)
            other = ast.get_source_segment(source, like[0]) if like else "None"
            assign = (
                f"if hasattr({name}, '__wrapped__'):  # mutmut's trampoline\n"
                "    from dmlbook.core.declaration import _take_declaration\n\n"
                f"    for _f in (*mutants_x_{name}__mutmut.values(), {name}.__wrapped__):\n"
                f"        _take_declaration(_f, {other})\n" + assign
            )
        edits.append((d.lineno, node.end_lineno, assign))
    for first, last, assign in sorted(edits, reverse=True):
        lines.insert(last, assign)
        # the decorator's lines (``@`` up to the ``def``), as many as the expression took
        del lines[first - 1 : first - 1 + _decorator_lines(lines, first - 1)]
    return "".join(lines)


def _decorator_lines(lines: list[str], start: int) -> int:
    """How many lines from ``lines[start]`` (an ``@...`` line) come before the ``def``."""
    n = 0
    while not lines[start + n].lstrip().startswith(("def ", "async def ")):
        n += 1
    return n


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


def in_area(area: str, path: str) -> bool:
    """Whether the file ``path`` (relative to the repository) is mutated by ``area``."""
    return any(Path(path).match(pattern) for pattern in AREAS[area][0])


def run_area(
    area: str, max_children: int, only: list[str] | None = None
) -> tuple[dict[str, str], float]:
    """Run mutmut on one area (or on its files ``only``); (mutant -> status, CPU seconds of the
    run and its children)."""
    work = scratch_copy(area, only)
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
    parser.add_argument(
        "--only", nargs="+", metavar="FILE", help="mutate only these files of the (one) area"
    )
    args = parser.parse_args(argv)
    unknown = [a for a in args.areas if a not in AREAS]
    if unknown:
        parser.error(f"unknown area(s) {', '.join(unknown)}; choose from {', '.join(AREAS)}.")
    if args.only:
        if len(args.areas) != 1:
            parser.error(
                "--only needs exactly one area, e.g. `losses --only dmlbook/losses/npair.py`."
            )
        outside = [
            f for f in args.only if not in_area(args.areas[0], f) or not (ROOT / f).is_file()
        ]
        if outside:
            parser.error(
                f"--only: {', '.join(outside)} is not a file of area {args.areas[0]} "
                f"({', '.join(AREAS[args.areas[0]][0])}); give paths relative to the repository."
            )
    known = equivalent_mutants()
    unexplained, not_run = [], set()
    for area in args.areas:
        t0 = time.time()
        results, cpu = run_area(area, args.max_children, args.only)
        # a mutant no selected test even runs ("no tests") is as alive as one they miss
        survivors = sorted(m for m, s in results.items() if s in ("survived", "no tests"))
        argued = [m for m in survivors if m in known]
        counts = {s: sum(v == s for v in results.values()) for s in set(results.values())}
        print(
            f"mutation {area}{' ' + ' '.join(args.only) if args.only else ''}: {len(results)} mutants, "
            + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            + f"; {len(argued)} survivors argued equivalent; {cpu:.0f} s CPU, "
            f"{time.time() - t0:.0f} s wall"
        )
        unexplained += [m for m in survivors if m not in known]
        # a mutant mutmut never ran (its clean run or stats failed) is no verdict at all
        unchecked = {m for m, s in results.items() if s == "not checked"}
        not_run |= unchecked
        unexplained += sorted(unchecked)
    for m in unexplained:
        why = "not run (mutmut failed first)" if m in not_run else "survived, not argued equivalent"
        print(f"  {why}: {m}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())

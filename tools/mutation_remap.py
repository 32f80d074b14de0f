"""Carry ``mutation_equivalent.md`` over a commit that renumbers mutmut's mutants, with no test run.

mutmut numbers the mutants of each function in the order it makes them (``x_circle_loss__mutmut_4``
is the 4th edit of ``circle_loss``), so a change to a function's signature that adds or removes a
mutable default shifts the number of every later mutant of it, and the entries of
``tools/mutation_equivalent.md`` then name other edits. This script generates mutmut's mutants of
a commit ``REV`` and of the working tree, through the scratch copy and ``undecorate`` rewrite that
``tools/mutation.py`` runs mutmut on, and renames each listed mutant to the one that makes the
same edit to the same function now (the two functions compared without the annotations and
defaults of the parameters the new function writes bare: ``declared`` gives them theirs). It
prints each entry whose edit is no longer a mutant (its edit lay in what is now declared), to be
removed by hand with the reason, and fails while there is one. Usage::

    python tools/mutation_remap.py AREA REV [--only FILE ...]

e.g. ``python tools/mutation_remap.py losses 3f9b52d`` after commit a1d29c6 (the frame's
``reduction="mean"`` moved out of every loss's signature). Renaming is only bookkeeping: the
verdicts are those of the run at ``REV``; re-run a file (``tools/mutation.py --only``) to check.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation import AREAS, EQUIVALENT, ROOT, equivalent_mutants, scratch_copy  # noqa: E402


def commit_tree(rev: str) -> Path:
    """``build/mutation/tree-REV``: the files of commit ``rev`` that a scratch copy takes
    (``git archive``), for generating that commit's mutants."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    tree = ROOT / "build" / "mutation" / f"tree-{sha[:12]}"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    names = ["dmlbook", "tests", "configs", "tools", "pyproject.toml", "conftest.py"]
    listed = subprocess.run(["git", "ls-tree", "--name-only", sha, *names], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    archive = subprocess.run(["git", "archive", sha, *listed], cwd=ROOT, capture_output=True,
                             check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def generated_mutants(work: Path, files: list[str]) -> dict[str, ast.FunctionDef]:
    """Mutmut's mutants of ``files`` (relative to the scratch copy ``work``, already undecorated),
    generated as ``mutmut run`` generates them but with no test run: mutant name (``dmlbook.
    losses.circle.x_circle_loss__mutmut_4``, and ``...__mutmut_orig`` for each function's
    unmutated copy) -> the function mutmut wrote. Uses mutmut's ``mutate_file_contents`` (an
    internal of mutmut 3.8, the version ``pyproject.toml`` allows), in ``work`` so that mutmut
    reads that copy's settings."""
    from mutmut.configuration import reset_config
    from mutmut.mutation.file_mutation import mutate_file_contents
    from mutmut.utils.file_utils import change_cwd
    from mutmut.utils.format_utils import get_mutant_name

    out: dict[str, ast.FunctionDef] = {}
    reset_config()
    try:
        with change_cwd(work):
            for file in files:
                code = mutate_file_contents(file, (work / file).read_text()).code
                for node in _functions(ast.parse(code).body):
                    if re.search(r"__mutmut_(\d+|orig)$", node.name):
                        out[get_mutant_name(Path(file), node.name)] = node
    finally:
        reset_config()
    return out


def _functions(body: list[ast.stmt]) -> list[ast.FunctionDef]:
    """The functions of a module body and of its classes' bodies (mutmut's methods' copies)."""
    found = []
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append(node)
        elif isinstance(node, ast.ClassDef):
            found += _functions(node.body)
    return found


def _bare(function: ast.FunctionDef) -> set[str]:
    """The parameters ``function`` writes bare (no annotation, no default): ``declared`` gives
    them theirs."""
    a = function.args
    positional = a.posonlyargs + a.args
    defaulted = {p.arg for p in positional[len(positional) - len(a.defaults) :]}
    defaulted |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d}
    return {p.arg for p in positional + a.kwonlyargs if p.annotation is None} - defaulted


def _edit_form(function: ast.FunctionDef, bare: set[str]) -> str:
    """``function`` with its name and the annotations and defaults of the parameters ``bare``
    removed, as an AST dump (no positions, so no formatting): two commits' copies of a
    function are compared without the signature that ``declared`` now writes."""
    f = copy.deepcopy(function)
    f.name = "f"
    a = f.args
    positional = a.posonlyargs + a.args
    first = len(positional) - len(a.defaults)
    a.defaults = [d for p, d in zip(positional[first:], a.defaults, strict=True)
                  if p.arg not in bare]  # fmt: skip
    a.kw_defaults = [None if p.arg in bare else d
                     for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]  # fmt: skip
    for p in positional + a.kwonlyargs:
        if p.arg in bare:
            p.annotation = None
    return ast.dump(f)


def remap(
    old: dict[str, ast.FunctionDef], new: dict[str, ast.FunctionDef], names: list[str]
) -> dict[str, tuple[str | None, str]]:
    """Each old mutant of ``names`` -> (the new mutant that makes the same edit to the same
    function, or None; why). ``old`` and ``new`` are :func:`generated_mutants` of two commits.
    The functions are compared without the annotations and defaults of the parameters the new
    function writes bare (:func:`_edit_form`): an old mutant whose edit lay only there (a mutated
    ``reduction="mean"``) has no new mutant. Mutmut can make the same edit twice in a function;
    the k-th old one maps to the k-th new one."""
    forms: dict[str, tuple[dict[str, str], dict[str, str]]] = {}  # function -> old, new forms
    out: dict[str, tuple[str | None, str]] = {}
    for name in names:
        func = name.partition("__mutmut_")[0]
        if name not in old:
            out[name] = None, "not a mutant of the old commit"
            continue
        if func + "__mutmut_orig" not in new:
            out[name] = None, "its function is not mutated in the new commit"
            continue
        bare = _bare(new[func + "__mutmut_orig"])
        if func not in forms:
            forms[func] = tuple(
                {
                    n: _edit_form(f, bare)
                    for n, f in side.items()
                    if n.startswith(func + "__mutmut_")
                }
                for side in (old, new)
            )
        was, now = forms[func]
        orig = func + "__mutmut_orig"
        if was[name] == was[orig]:
            out[name] = None, f"its edit lies in what is now declared ({', '.join(sorted(bare))})"
        elif was[orig] != now[orig]:
            out[name] = None, "its function changed beyond the parameters now declared"
        else:
            before = [n for n, f in was.items() if f == was[name]]
            same = [n for n, f in now.items() if f == was[name]]
            if len(same) == len(before):
                out[name] = same[before.index(name)], "the same edit"
            else:
                out[name] = None, f"{len(before)} old and {len(same)} new mutants make this edit"
    return out


def rename_entries(text: str, renames: dict[str, str | None]) -> tuple[str, list[str]]:
    """``text`` (``mutation_equivalent.md``) with each entry ``- `OLD`: why`` of ``renames``
    named ``NEW`` instead, all at once (a new name may be another entry's old one), and the
    why's references to listed mutants by number (``as mutmut_42``, ``as lifted_loss mutmut_26``
    for a function of the same module) renumbered alike; (the text, the references to a mutant
    whose new name is None, to be rewritten by hand). A reference qualified by another module
    (``as mining's triplets mutmut_20``) is left alone."""
    functions = {n.partition("__mutmut_")[0] for n in renames}
    dangling = []

    def entry(m: re.Match[str]) -> str:
        name, why = m[1], m[2]
        module, own = _module(name), name.partition("__mutmut_")[0]

        def ref(r: re.Match[str]) -> str:
            word, qualified = r[1], why[: r.start()].endswith("'s ")
            func = f"{module}.x_{word}" if word and word != "as" else own
            old = f"{func}__mutmut_{r[2]}"
            if qualified or func not in functions or old not in renames:
                return r[0]
            if renames[old] is None:  # reported unless the entry goes too
                if renames.get(name, name) is not None:
                    dangling.append(f"{name} refers to {old}")
                return r[0]
            return r[0][: -len(r[2])] + renames[old].rpartition("__mutmut_")[2]

        why = re.sub(r"(?<![\w'])(?:(\w+) )?mutmut_(\d+)\b", ref, why)
        return f"- `{renames.get(name) or name}`: {why}"

    text = re.sub(r"^- `([\w.]+__mutmut_\d+)`: (.*)$", entry, text, flags=re.M)
    return text, dangling


def remap_area(area: str, rev: str, only: list[str] | None = None) -> int:
    """Rename the entries of ``mutation_equivalent.md`` that name mutants of ``area`` (or of its
    files ``only``) as mutmut generated them at commit ``rev``, to the names of the same edits in
    the working tree (:func:`remap`); no test runs. Prints what it renamed and each entry whose
    edit is no longer a mutant (to be removed by hand, with the reason); 1 if there is one."""
    found = []
    for root, prefix in ((commit_tree(rev), "old-"), (ROOT, "new-")):
        work = scratch_copy(area, only, root, prefix)
        files = {f.relative_to(work) for p in only or AREAS[area][0] for f in work.glob(p)}
        found.append(generated_mutants(work, sorted(str(f) for f in files if f.suffix == ".py")))
    old, new = found
    modules = {_module(n) for n in old}
    listed = [n for n in equivalent_mutants() if _module(n) in modules]
    mapping = remap(old, new, listed)
    text, dangling = rename_entries(EQUIVALENT.read_text(), {n: m for n, (m, _) in mapping.items()})
    EQUIVALENT.write_text(text)
    renames = {n: m for n, (m, _) in mapping.items() if m}
    mutants = [[n for n in found_ if not n.endswith("__mutmut_orig")] for found_ in found]
    images = {m for m, _ in remap(old, new, mutants[0]).values()}
    gone = {n: why for n, (m, why) in mapping.items() if m is None}
    print(
        f"remap {area}{' ' + ' '.join(only) if only else ''} from {rev}: {len(mutants[0])} mutants "
        f"then, {len(mutants[1])} now; {len(listed)} listed: "
        f"{sum(n != m for n, m in renames.items())} renamed, "
        f"{sum(n == m for n, m in renames.items())} unchanged, {len(gone)} no longer mutants; "
        f"{len(set(mutants[1]) - images)} mutants now make an edit none made then (not yet run)"
    )
    for name, why in gone.items():
        print(f"  no longer a mutant ({why}): {name}")
    for line in dangling:
        print(f"  reference to a mutant no longer there: {line}")
    return 1 if gone or dangling else 0


def _module(mutant: str) -> str:
    """The module of a mutant's name (``dmlbook.losses.triplet`` of ``dmlbook.losses.triplet.
    xǁTripletLossǁmine__mutmut_21``)."""
    parts = mutant.split(".")
    return ".".join(parts[: max(i for i, p in enumerate(parts) if p.startswith(("x_", "xǁ")))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("area", choices=list(AREAS))
    parser.add_argument("rev", help="the commit whose mutants the list names")
    parser.add_argument("--only", nargs="+", metavar="FILE", help="only these files of the area")
    args = parser.parse_args(argv)
    return remap_area(args.area, args.rev, args.only)


if __name__ == "__main__":
    sys.exit(main())

"""Every code line of the README and of the pages under ``docs/`` runs, and what the README states holds.

Each Python block runs, and each shell line that needs no data. A shell line is run in the
repository (``.venv``'s ``dmlbook`` first on PATH) unless it matches :data:`NOT_RUN`, which says
why it is not run here and, where another test runs its path, which. A new line is therefore run,
or listed with its reason: it cannot go unchecked.

The package example (the block that trains) also prints what the README says it prints, and
learns. Its printed table comes from float32 training, whose last digits can change with the
CPU's math library; the numbers are compared with the tolerance the README states, and the claim
it makes (R@1 on the unseen alphabets rises well above the untrained network's) is checked as
such. Its CPU time is measured against the one the README states.

The README's other facts are read from its text and checked against the code and the data: the
number of chapters and appendices and the chapter table (``book/``), the per-chapter CPU budget
(``tools/book.py``), the Omniglot split and the baselines the example is read against; the dry
run's default utilisation stated in ``docs/research.md`` (``dmlbook.engine.dry_run``), and the
number of GPU runs the pages under ``docs/`` state (the committed run folders).
"""

from __future__ import annotations

import ast
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
README = ROOT / "README.md"
#: The pages whose code is run: the README and the pages it links under docs/.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

#: Shell lines not run here (a regular expression on the line, and why).
NOT_RUN = {
    r"^make (book|test)\b": "the README's two commands are this suite and the book build (CI runs them)",
    r"^make lab\b": "a server; tests/test_lab.py starts JupyterLab as `make lab` does and drives it",
    r"^make coursework\b": "minutes; tests/test_coursework.py builds and checks the assignments",
    r"^make grade\b": "needs a folder of submissions; tests/test_coursework.py grades committed ones",
    r"^pip (install|wheel) ": "tests/test_wheel.py builds the wheel and installs it in a clean environment",
    r"--data /data\b": "needs the benchmark's images (CUB, SOP) under /data",
    r"^torchrun\b": "several processes on GPUs; tests/engine/test_distributed.py runs two on CPU",
    r"^make gpu-check\b": "needs a GPU; tests/bench/test_gpu_check.py runs its --smoke on CPU",
}


def blocks(kind: str) -> list[str]:
    return [
        m.group(2) for page in PAGES for m in BLOCK.finditer(page.read_text()) if m.group(1) == kind
    ]


def example() -> tuple[str, list[list[float]]]:
    """The example's code and the rows of the table printed under it in the README."""
    text = README.read_text()
    match = re.search(
        r"```python\n(import dmlbook\n.*?print\(history.*?\)\n)```\n\nprints[^\n]*\n+```\n(.*?)```",
        text,
        re.S,
    )
    assert match, "README: the Python example and its printed output were not found"
    code, printed = match.groups()
    return code, table(printed)


def table(printed: str) -> list[list[float]]:
    lines = printed.strip().splitlines()
    assert lines[0].split() == ["epoch", "loss", "R@1"], lines[0]
    return [[float(v) for v in line.split()[1:]] for line in lines[1:]]


def shell_lines() -> list[str]:
    lines = []
    for block in blocks("bash"):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                lines.append(command)
    return lines


def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLBOOK_")}
    bin_dir = str(Path(sys.executable).parent)
    return env | {"DMLBOOK_CACHE": str(tmp_path / "cache"), "PATH": f"{bin_dir}:{env['PATH']}"}


def test_the_pages_have_code_to_run():
    assert len(blocks("python")) >= 2 and len(shell_lines()) >= 10


@pytest.mark.slow
@pytest.mark.parametrize(
    "code",
    [code for code in blocks("python") if code != example()[0]],  # the example: the test below
    ids=lambda code: code.splitlines()[0][:40],
)
def test_python_block_runs(code, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=environment(tmp_path),
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, f"{code}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), "a README example prints what it shows"


#: Shell lines that build a model or train (seconds to a minute of CPU): marked slow.
SLOW_LINE = re.compile(r"^dmlbook train\b")


@pytest.mark.parametrize(
    "line",
    [pytest.param(x, marks=pytest.mark.slow) if SLOW_LINE.search(x) else x for x in shell_lines()],
)
def test_shell_line_runs_or_says_why_not(line, tmp_path):
    reasons = [why for pattern, why in NOT_RUN.items() if re.search(pattern, line)]
    if reasons:
        assert all(reasons), line  # listed, with its reason: nothing to run here
        return
    proc = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, env=environment(tmp_path), capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


#: What the README says of its example's output: its CPU time and how far the numbers may move.
STATED = re.compile(
    r"prints \(about (\d+) s of CPU on two cores; on another CPU the numbers can move by up to "
    r"([\d.]+)\):"
)


def stated() -> tuple[float, float]:
    match = STATED.search(README.read_text())
    assert match, f"README: the sentence before the example's output must match {STATED.pattern}"
    return float(match[1]), float(match[2])


@pytest.mark.slow
def test_readme_example_prints_its_table_and_learns():
    code, expected = example()
    seconds, tolerance = stated()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    got = table(proc.stdout)
    assert len(got) == len(expected) == 5
    for (epoch, loss, r1), (e_epoch, e_loss, e_r1) in zip(got, expected, strict=True):
        assert epoch == e_epoch
        assert r1 == pytest.approx(e_r1, abs=tolerance)
        if e_loss == e_loss:  # not NaN (epoch 0 has no training loss)
            assert loss == pytest.approx(e_loss, abs=tolerance)
    assert got[-1][2] > got[0][2] + 0.2  # better on the unseen alphabets than untrained
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # "about N s": within a factor of 2 either way (CPU time barely moves with the machine's load)
    assert seconds / 2 <= cpu <= seconds * 2, (
        f"the example took {cpu:.1f} s of CPU, not about {seconds:.0f}"
    )


WORDS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
WORDS += "fifteen sixteen seventeen eighteen nineteen twenty"
NUMBER = {word: n for n, word in enumerate(WORDS.split())}


def test_readme_counts_the_chapters_and_lists_each_one():
    stems = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    chapters = [s for s in stems if int(s[:2]) < 90]
    appendices = [s for s in stems if int(s[:2]) >= 90]
    text = README.read_text()
    match = re.search(r"(\w+) Jupyter chapters and (\w+)\s+appendices", text)
    assert match, "README: say how many chapters and appendices the book has"
    assert (NUMBER[match[1]], NUMBER[match[2]]) == (len(chapters), len(appendices)), match[0]
    rows = re.findall(r"^\| `(\d\d_\w+)`", text, re.M)
    assert rows == stems, "README's chapter table: one row per notebook of book/, in order"


def test_readme_states_the_chapter_budget_tools_book_enforces():
    tree = ast.parse((ROOT / "tools" / "book.py").read_text())
    (budget,) = [
        kw.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.args
        and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--max-cpu-seconds"
        for kw in node.keywords
        if kw.arg == "default"
    ]  # fmt: skip
    assert f"at most {budget:.0f} s of CPU on two cores" in README.read_text()


def test_readme_states_the_omniglot_split_and_the_baselines_of_its_example():
    """136 characters of five alphabets / 106 of three others, 20 drawings each, 28 x 28, 2,120
    test drawings; R@1 of a random ranking and of the raw pixels, computed here by brute force
    (not by dmlbook's metric)."""
    import torch

    from dmlbook.data import load_dataset

    text = " ".join(README.read_text().split())
    train, test = load_dataset("omniglot", "train"), load_dataset("omniglot", "test")
    assert train.num_classes == 136 and test.num_classes == 106
    assert set(train.class_counts().tolist()) == set(test.class_counts().tolist()) == {20}
    alphabets = [
        {d.class_names[c].split("/")[-2] for c in d.classes.tolist()} for d in (train, test)
    ]
    assert [len(a) for a in alphabets] == [5, 3] and not alphabets[0] & alphabets[1]
    assert tuple(train.input_shape[-2:]) == (28, 28)
    for phrase in ("136 characters of five alphabets", "106 characters of three",
                   "20 drawings", "28 x 28", f"the {len(test):,} test drawings"):  # fmt: skip
        assert phrase in text, phrase
    x = test.inputs.reshape(len(test), -1).double()
    x = x / x.norm(dim=1, keepdim=True)
    s = x @ x.T
    s.fill_diagonal_(-float("inf"))
    labels = torch.as_tensor(test.labels)
    pixels = (labels[s.argmax(dim=1)] == labels).double().mean().item()
    chance = 19 / (len(test) - 1)  # 19 other drawings of the character among the others
    match = re.search(r"([\d.]+) for a random ranking, ([\d.]+) for the raw pixels", text)
    assert match, "README: the baselines of the example"
    assert float(match[1]) == round(chance, 3) and float(match[2]) == round(pixels, 3)


def test_research_page_states_the_dry_runs_default_utilization():
    from dmlbook.engine.dry_run import DEFAULT_UTILIZATION

    text = " ".join((ROOT / "docs" / "research.md").read_text().split())
    match = re.search(r"`--utilization`, default ([\d.]+)", text)
    assert match, "docs/research.md: state the dry run's default utilisation"
    assert float(match[1]) == DEFAULT_UTILIZATION


def test_the_pages_count_the_committed_gpu_runs():
    """``docs/benchmarks.md`` and ``docs/research.md`` say how many H200 runs of ``make gpu-check``
    there are; each run's files are a folder ``bench/results/gpu_check_h200*/``."""
    runs = [p for p in (ROOT / "bench" / "results").glob("gpu_check_h200*") if p.is_dir()]
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
    for page in ("benchmarks.md", "research.md"):
        stated = re.findall(r"\b(\w+) H200s\b", (ROOT / "docs" / page).read_text(), re.I)
        assert stated, f"docs/{page}: say how many H200 runs there are"
        assert {words.get(w.lower()) for w in stated} == {len(runs)}, (page, stated, runs)


def test_readme_states_the_python_the_package_needs_and_the_chapters_were_run_with():
    import tomllib

    text = " ".join(README.read_text().split())
    needs = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f"Python {needs.replace('>=', '>= ')}" in text
    versions = {
        json.loads(p.read_text())["metadata"]["language_info"]["version"].rsplit(".", 1)[0]
        for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb")
    }
    match = re.search(r"the one that executed the chapters, (3\.\d+) here", text)
    assert match and versions == {match[1]}, versions


def test_readme_states_the_shipped_data_sets_and_the_explorer_chapters(monkeypatch):
    from dmlbook.data import available_datasets, load_dataset
    from dmlbook.data.base.locations import cache_folder

    text = " ".join(README.read_text().split())
    train, test = load_dataset("digits", "train"), load_dataset("digits", "test")
    assert f"scikit-learn's {len(train) + len(test):,} handwritten digits (8 x 8)" in text
    assert train.input_shape == (64,)
    assert (train.classes.tolist(), test.classes.tolist()) == ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    assert "train on classes 0-4, test on 5-9" in text
    assert {"omniglot", "digits", "synthetic", "omniglot_full"} <= set(available_datasets())
    monkeypatch.delenv("DMLBOOK_CACHE", raising=False)
    assert "`$DMLBOOK_CACHE` (default `~/.cache/dmlbook`)" in text
    assert cache_folder() == Path.home() / ".cache" / "dmlbook"
    explorer = sorted(
        int(p.name[:2])
        for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb")
        if "weight_explorer(" in p.read_text()
    )
    assert f"Chapters {explorer[0]} and {explorer[1]} hold the **weight explorer**" in text
    assert len(explorer) == 2, explorer


def test_readme_counts_the_assignments():
    assignments = sorted(p.name for p in (ROOT / "coursework").glob("a[0-9]_*") if p.is_dir())
    word = WORDS.split()[len(assignments)].capitalize()
    assert f"{word} autograded assignments" in README.read_text(), assignments

"""Every code line of the README runs: each Python block, and each shell line that needs no data.

A shell line is run in the repository (``.venv``'s ``dmlbook`` first on PATH) unless it matches
:data:`NOT_RUN`, which says why it is not run here and, where another test runs its path, which.
A new line in the README is therefore run, or listed with its reason: it cannot go unchecked.

The package example (the block that trains) also prints what the README says it prints, and
learns. Its printed table comes from float32 training, whose last digit can change with the
CPU's math library; the numbers are compared with a tolerance, and the claim the README makes
(R@1 on the unseen alphabets rises well above the untrained network's) is checked as such.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
README = ROOT / "README.md"

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
    text = (ROOT / "README.md").read_text()
    return [m.group(2) for m in BLOCK.finditer(text) if m.group(1) == kind]


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


def test_the_readme_has_code_to_run():
    assert len(blocks("python")) >= 2 and len(shell_lines()) >= 10


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


@pytest.mark.parametrize("line", shell_lines())
def test_shell_line_runs_or_says_why_not(line, tmp_path):
    reasons = [why for pattern, why in NOT_RUN.items() if re.search(pattern, line)]
    if reasons:
        assert all(reasons), line  # listed, with its reason: nothing to run here
        return
    proc = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, env=environment(tmp_path), capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


def test_readme_example_prints_its_table_and_learns():
    code, expected = example()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = table(proc.stdout)
    assert len(got) == len(expected) == 5
    for (epoch, loss, r1), (e_epoch, e_loss, e_r1) in zip(got, expected, strict=True):
        assert epoch == e_epoch
        assert r1 == pytest.approx(e_r1, abs=0.02)
        if e_loss == e_loss:  # not NaN (epoch 0 has no training loss)
            assert loss == pytest.approx(e_loss, abs=0.02)
    assert got[-1][2] > got[0][2] + 0.2  # better on the unseen alphabets than untrained

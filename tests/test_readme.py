"""The README's Python example runs, prints what the README says it prints, and learns.

The printed table comes from float32 training, whose last digit can change with the CPU's math
library; the numbers are compared with a tolerance, and the claim the README makes (R@1 on the
unseen alphabets rises well above the untrained network's) is checked as such.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


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

"""dmlbook.chapters.openmp: OMP_WAIT_POLICY is set before torch loads, and a late import is recorded."""

from __future__ import annotations

import os
import subprocess
import sys

import dmlbook
from dmlbook.chapters.openmp import POLICY_TOO_LATE

PROBE = (
    "import os\n"
    "from dmlbook.chapters.openmp import POLICY_TOO_LATE\n"
    "print(os.environ.get('OMP_WAIT_POLICY'), POLICY_TOO_LATE)\n"
)


def test_a_wait_policy_already_set_wins():
    """Before and after torch (the other two cases) are probed through ``dmlbook.setup`` in
    ``tests/chapters/test_notebook.py``."""
    env = dict(os.environ, OMP_WAIT_POLICY="ACTIVE")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.split() == ["ACTIVE", "False"]


def test_the_package_exposes_the_same_flag():
    assert dmlbook.OMP_POLICY_TOO_LATE is POLICY_TOO_LATE

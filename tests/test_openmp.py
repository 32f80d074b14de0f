"""dmlbook.openmp: OMP_WAIT_POLICY is set before torch loads, and a late import is recorded."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import dmlbook
from dmlbook.openmp import POLICY_TOO_LATE

PROBE = (
    "import os, sys\n"
    "{first}\n"
    "from dmlbook.openmp import POLICY_TOO_LATE\n"
    "print(os.environ.get('OMP_WAIT_POLICY'), POLICY_TOO_LATE)\n"
)


@pytest.mark.parametrize(
    ("first", "preset", "expected"),
    [
        ("", None, ["PASSIVE", "False"]),  # before torch: set, in time
        ("import torch", None, ["None", "True"]),  # after torch: too late, left alone
        ("", "ACTIVE", ["ACTIVE", "False"]),  # a value already set wins
    ],
)
def test_the_wait_policy_is_set_before_torch_only(first, preset, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset is not None:
        env["OMP_WAIT_POLICY"] = preset
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(first=first)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.split() == expected


def test_the_package_exposes_the_same_flag():
    assert dmlbook.OMP_POLICY_TOO_LATE is POLICY_TOO_LATE

"""OpenMP's wait policy, set before torch loads its OpenMP runtime (``import dmlbook`` does it).

Torch's OpenMP runtime (GNU libgomp) reads ``OMP_WAIT_POLICY`` once, when torch is loaded, and
otherwise lets its idle threads spin between parallel regions. On a shared machine (a course's
JupyterHub, a busy laptop) spinning threads burn CPU that nobody uses and slow the thread that does
the work. This module sets ``OMP_WAIT_POLICY=PASSIVE`` (unless the variable is already set) when it
is imported before torch, and records whether that was too late; :func:`dmlbook.setup` (through
:func:`dmlbook.chapters.notebook.chapter_threads`) then uses one thread and says why. Tested in
``tests/chapters/test_notebook.py``; measured in ``bench/results/notebook_cpu.md``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["POLICY_TOO_LATE"]

#: Whether torch was already loaded, without ``OMP_WAIT_POLICY`` set, when this module was imported:
#: its idle OpenMP threads then spin.
POLICY_TOO_LATE = "torch" in sys.modules and "OMP_WAIT_POLICY" not in os.environ
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

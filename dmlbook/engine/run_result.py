"""What an engine run returns and records about its best checkpoint.

:class:`RunResult` is what :func:`dmlbook.engine.train` returns; :data:`TEST_SELECTION_NOTE` is
stored with ``best.pt`` when R@1 on the test split chose it (as the public codes do), and
:func:`selection_note` reads it back from a loaded checkpoint. Kept apart from the run itself
(:mod:`dmlbook.engine.trainer`) so that what a caller receives reads on its own.

Tests: ``tests/engine/test_run_result.py``; Chapter 14 prints both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .config import Config

__all__ = ["RunResult", "TEST_SELECTION_NOTE", "selection_note"]

#: Stored with ``best.pt`` and printed when the best checkpoint was chosen by a test-split metric.
TEST_SELECTION_NOTE = (
    "best checkpoint selected by R@1 on the TEST split, as the public codes (MS, Proxy-Anchor) "
    "do; this is optimistic, not a held-out result. Compare last.pt for an honest number."
)


def selection_note(checkpoint: dict[str, Any]) -> str | None:
    """The test-selection note of a loaded checkpoint, or None where it does not apply.

    It applies to ``best.pt`` only: ``last.pt`` is the final (or latest) model, chosen without
    looking at the test set, and keeps its record of the best under ``best_record``.
    """
    best = checkpoint.get("best")
    return best.get("note") if isinstance(best, dict) and "position" not in checkpoint else None


@dataclass
class RunResult:
    """What :func:`train` returns.

    Attributes
    ----------
    history : DataFrame
        One row per evaluation: iteration, epoch, loss, lr, R@K..., MAP@R, RP, seconds, best.
    log : DataFrame
        One row per ``log_every`` iterations: iteration, epoch, loss, lr, images_per_s, seconds.
    best : dict or None
        ``{"iteration", "epoch", "metrics", "selected_on", "note"}`` of ``best.pt``.
    out_dir : Path
        Holds ``last.pt``, ``best.pt``, ``metrics.csv``, ``train_log.csv``, ``run.json``.
    interrupted : bool
        True if a stop signal (Ctrl-C, SIGTERM, SIGHUP) ended the run before its last iteration
        (``last.pt`` then holds the exact position, or the last checkpoint after a second signal).
    config : Config
    stopped_by : int or None
        The number of that signal; :func:`~dmlbook.engine.runtime.exit_status` turns it into
        the shell's exit status (130, 143, 129).
    """

    history: pd.DataFrame
    log: pd.DataFrame
    best: dict[str, Any] | None
    out_dir: Path
    interrupted: bool
    config: Config
    stopped_by: int | None = None

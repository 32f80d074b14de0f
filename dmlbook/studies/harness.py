"""The comparison harness: one run per (label, seed), in order, collected in the results layout.

Both comparisons of the book run their grid here:

* :func:`dmlbook.studies.loss_grid.compare_losses` (the chapters: :func:`dmlbook.training.fit`
  on in-memory data; a run cut short by Ctrl-C is dropped, since it is not comparable);
* :func:`dmlbook.studies.benchmark.compare_on_benchmark` (benchmark runs of the engine; an
  interrupted run keeps its row, since calling again resumes it from its checkpoint).

Every run's rows get the leading ``loss`` (the label) and ``seed`` columns of the results layout
(:mod:`dmlbook.studies.results`). Tests: ``tests/studies/test_harness.py``, and through the two
comparisons ``tests/studies/test_loss_grid.py`` and ``tests/studies/test_benchmark.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
from tqdm import tqdm

from ..core.progress import progress_disabled

__all__ = ["RunOne", "run_grid"]

#: ``run_one(label, seed) -> (rows, interrupted)``: the rows of one run (results layout, without
#: ``loss`` and ``seed``) and whether Ctrl-C cut it short.
RunOne = Callable[[str, int], tuple[pd.DataFrame, bool]]


def run_grid(
    runs: Sequence[tuple[str, int]],
    run_one: RunOne,
    *,
    keep_interrupted: bool,
    progress: bool | None = None,
) -> tuple[list[pd.DataFrame], bool]:
    """Call ``run_one(label, seed)`` for every run, in order; stop at the first interruption.

    Parameters
    ----------
    runs : sequence of (label, seed)
        The grid, in the order to run it (the comparisons: all seeds of a label, label by label).
    run_one : callable
        ``run_one(label, seed) -> (rows, interrupted)``.
    keep_interrupted : bool
        Keep the rows of a run that reports it was interrupted (they are dropped otherwise).
        The grid stops after that run either way.
    progress : bool, optional
        A tqdm bar over the runs; ``None``: on unless ``TQDM_DISABLE`` is set.

    Returns
    -------
    frames : list of DataFrame
        One per run kept, with leading columns ``loss`` (the label) and ``seed``.
    interrupted : bool
        Whether a run was interrupted or ``KeyboardInterrupt`` reached the grid.
    """
    bar = tqdm(total=len(runs), desc="runs", unit="run", disable=progress_disabled(progress))
    frames: list[pd.DataFrame] = []
    interrupted = False
    try:
        for label, seed in runs:
            bar.set_postfix(loss=label, seed=seed, refresh=False)
            rows, interrupted = run_one(label, seed)
            if not interrupted or keep_interrupted:
                rows = rows.copy()
                rows.insert(0, "seed", seed)
                rows.insert(0, "loss", label)
                frames.append(rows)
            if interrupted:
                break
            bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    return frames, interrupted

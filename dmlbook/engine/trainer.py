"""The engine's runs: a config in, a run folder out (checkpoints, CSV logs, ``run.json``).

:func:`train` builds everything a config describes and drives the package's one loop,
:class:`~dmlbook.training.loop.Trainer`, adding what a long run needs::

    build model, loss, optimiser, PK sampler from the config      (or restore them from last.pt)
    evaluate once before training                                  -> metrics.csv, iteration 0
    trainer.run(total, batches):                                   (dmlbook.training.loop)
        batches of epoch e: PK sampler and augmentation seeded by (seed, e)
        every log_every iterations: a train_log.csv row
        every checkpoint_every iterations / checkpoint_minutes: last.pt (exact position)
        at every epoch end: Recall@K every eval_every epochs (best.pt if R@1 rose); last.pt

The batches of epoch ``e`` depend only on ``(seed, e)`` and the augmentation generator is saved
with the checkpoint, so a resumed run replays exactly what an uninterrupted run would have done.
Every file is written atomically: ``kill -9`` loses at most the work since the last checkpoint,
which by default is at most ``train.checkpoint_minutes`` (10) minutes old.

Under ``torchrun`` (:mod:`dmlbook.engine.distributed`) the same function runs in every process:
``train.batch_size`` is the global ``P x K`` batch, each process takes ``P / N`` of its classes,
the loss sees the gathered global batch, evaluation is sharded and gathered, and rank 0 alone
prints and writes files. An iteration is one global batch whatever ``N``, and checkpoints hold
the bare model (no DistributedDataParallel prefix), so a run resumes on another number of
processes with the same batches; only the augmentation draws of the epoch it resumes in differ
then (each process has its own generator, and all of them are saved).

One run in progress (the built pieces, batches, logs, checkpoints) is
:class:`~dmlbook.engine.run_loop.EngineRun`.

Tests: ``tests/engine/test_trainer.py``; Chapter 14 runs it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .config import Config, load_config
from .distributed import distributed
from .run_folder import RunFolderBusy, RunFolderTaken, run_folder
from .run_loop import EngineRun
from .run_result import TEST_SELECTION_NOTE, RunResult
from .runtime import NothingToResume, resume_path, resume_state

__all__ = ["NothingToResume", "RunFolderBusy", "RunFolderTaken", "train"]


def train(
    config: Config | str | Path,
    *,
    resume: bool | str | Path = False,
    overwrite: bool = False,
    progress: bool | None = None,
    verbose: bool = True,
    resume_command: str | None = None,
) -> RunResult:
    """Train the run described by ``config``; write checkpoints, CSV logs and ``run.json``.

    Parameters
    ----------
    config : Config, str or Path
        A :class:`Config` or a config file (see :func:`dmlbook.engine.load_config`).
    resume : bool, "auto", str or Path
        ``True``: continue from ``<out_dir>/last.pt``, which must exist; ``"auto"``: continue
        from it if it exists, else start fresh; a path: continue from that checkpoint (it must
        exist); ``False``: start fresh.
    overwrite : bool
        A fresh run into a folder that holds another run's files (``last.pt``, ``best.pt``,
        ``metrics.csv`` ...) stops with :class:`RunFolderTaken` unless ``overwrite=True``, which
        moves them into ``<out_dir>/previous-run-N/`` first (nothing is deleted). Not with
        ``resume``.
    progress : bool, optional
        Progress bar; default on unless ``TQDM_DISABLE`` is set.
    verbose : bool
        Print one line per evaluation (rounded, no timings) and the best checkpoint, with the
        test-selection note when the best is not the final model.
    resume_command : str, optional
        How to resume this run, printed when it stops early or a checkpoint cannot be written
        (the command line passes its own; default ``train(config, resume=True)``).

    A first SIGINT (Ctrl-C), SIGTERM or SIGHUP stops the run after the current iteration and
    saves the exact position in ``last.pt``; a second one stops it at once (``last.pt`` keeps the
    last checkpoint), except while that final ``last.pt`` is being written, which it lets finish.
    The run folder is checked and locked for the run, and a fresh run never writes over another
    (:func:`~dmlbook.engine.run_folder.run_folder`).

    Returns
    -------
    RunResult

    Raises
    ------
    ConfigError
        For an invalid config (before anything is trained) or an incompatible checkpoint.
    NothingToResume
        (a :class:`FileNotFoundError`) for ``resume=True`` when the run folder has no
        ``last.pt``; the message names the folder and says to drop ``--resume``.
    FileNotFoundError
        For a checkpoint path that does not exist.
    FloatingPointError
        When the loss becomes NaN or infinite.
    RunFolderBusy
        (an :class:`OSError`) When another process trains in the same run folder
        (:func:`~dmlbook.engine.run_folder.run_folder`).
    RunFolderTaken
        (a :class:`FileExistsError`) When a fresh run would write over the run its folder holds;
        the message names the folder and the choices (resume, another ``train.out_dir``,
        ``overwrite``).
    OSError
        When the run folder cannot be written (checked before anything is built) or a checkpoint
        cannot be written (a full disk: the previous one is kept; the message ends with
        ``resume_command``).
    """
    cfg = config if isinstance(config, Config) else load_config(config)
    cfg.validate()
    if resume_command is None:
        resume_command = "train(config, resume=True)"
    start = resume_path(cfg, resume, overwrite)  # before the run folder is created
    own = cfg.out_dir / "last.pt"
    continues = start is not None and own.is_file() and start.resolve() == own.resolve()
    # Another run's checkpoint is read first: a damaged one is the error to report.
    state = None if continues else resume_state(cfg, start)
    with (
        distributed(cfg.train.device) as (ctx, device),
        run_folder(cfg.out_dir, ctx.is_main, fresh=not continues, overwrite=overwrite),
    ):
        if continues:  # read under the folder's lock
            state = resume_state(cfg, start)
        run = EngineRun(cfg, state, verbose, ctx, device)
        verbose = run.verbose  # rank 0 only
        if verbose:
            tqdm.write(run.describe(resumed=state is not None))
        stopped_by = run.run(progress, resume_command)
    best, history = run.best, run.trainer.history
    if verbose and best is not None:
        line = f"best: iteration {best['iteration']}, R@1 {100 * best['metrics']['R@1']:.1f}"
        if stopped_by is not None:
            line += " (so far: the run was stopped before its end)"
        elif history and best["iteration"] != history[-1]["iteration"]:
            line += f" -- note: {TEST_SELECTION_NOTE}"
        else:
            line += " (the last evaluation: best.pt holds the final model)"
        tqdm.write(line)
    return RunResult(
        history=pd.DataFrame(history),
        log=pd.DataFrame(run.log),
        best=best,
        out_dir=cfg.out_dir,
        interrupted=stopped_by is not None,
        config=cfg,
        stopped_by=stopped_by,
    )

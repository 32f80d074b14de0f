"""The training engine: config-driven, iteration-based runs at benchmark scale.

``train(load_config("configs/ms_cub_bninception.yaml", data_dir="/data"))`` trains the MS recipe
on CUB-200-2011 and writes ``runs/<name>/{last.pt, best.pt, metrics.csv, train_log.csv, run.json}``.
The same path runs the small CPU configs on the ``synthetic`` data set.

The engine builds on :mod:`dmlbook.training` (the one loop :class:`~dmlbook.training.Trainer`,
the optimiser factory, atomic checkpoints: what ``fit`` runs too) and never the reverse; the
comparisons of several losses under one recipe live in :mod:`dmlbook.studies.benchmark`.

* :mod:`~dmlbook.engine.config`: the schema (:class:`Config`) and :func:`load_config`;
* :mod:`~dmlbook.engine.config_file`: reading a config file (YAML or TOML) safely;
* :mod:`~dmlbook.engine.config_sections`: the sections of the schema and their defaults;
* :mod:`~dmlbook.engine.build`: device, model, loss, optimiser, learning-rate schedule;
* :mod:`~dmlbook.engine.data`: splits as batch sources (in-memory tensors or cached images);
* :mod:`~dmlbook.engine.trainer`: a config's run folder around the loop, :func:`train`;
* :mod:`~dmlbook.engine.runtime`: signals, progress, logs and the resume checks of a run;
* :mod:`~dmlbook.engine.run_folder`: one process per run folder (a lock), never overwritten;
* :mod:`~dmlbook.engine.run_result`: what a run returns (:class:`RunResult`);
* :mod:`~dmlbook.engine.evaluation`: Recall@K of a model or a checkpoint;
* :mod:`~dmlbook.engine.distributed`: several GPUs under ``torchrun``;
* :mod:`~dmlbook.engine.dry_run`: memory, FLOPs and speed predicted on fake tensors.

Tests: ``tests/engine/`` (one file per module).
"""

from .config import RECALL_KS, Config, ConfigError, config_from_dict, find_config, load_config
from .evaluation import evaluate_checkpoint, evaluate_model
from .run_result import TEST_SELECTION_NOTE, RunResult, selection_note
from .trainer import NothingToResume, train

__all__ = [
    "Config",
    "ConfigError",
    "NothingToResume",
    "RECALL_KS",
    "RunResult",
    "TEST_SELECTION_NOTE",
    "config_from_dict",
    "evaluate_checkpoint",
    "evaluate_model",
    "find_config",
    "load_config",
    "selection_note",
    "train",
]

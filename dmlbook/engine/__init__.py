"""The training engine: config-driven, iteration-based runs at benchmark scale.

``train(load_config("configs/ms_cub_bninception.yaml", data_dir="/data"))`` trains the MS recipe
on CUB-200-2011 and writes ``runs/<name>/{last.pt, best.pt, metrics.csv, train_log.csv, run.json}``.
The same path runs the small CPU configs on the ``synthetic`` data set.

* :mod:`~dmlbook.engine.config`: the schema (:class:`Config`) and :func:`load_config`;
* :mod:`~dmlbook.engine.build`: device, model, loss, optimiser, learning-rate schedule;
* :mod:`~dmlbook.engine.optim`: the one optimiser factory (also used by :func:`dmlbook.train.fit`);
* :mod:`~dmlbook.engine.loop`: the one training loop, :class:`Trainer` (also run by ``fit``);
* :mod:`~dmlbook.engine.data`: splits as batch sources (in-memory tensors or cached images);
* :mod:`~dmlbook.engine.trainer`: a config's run folder around the loop, :func:`train`;
* :mod:`~dmlbook.engine.evaluation`: Recall@K of a model or a checkpoint;
* :mod:`~dmlbook.engine.checkpoint`: atomic files;
* :mod:`~dmlbook.engine.compare`: several losses under one recipe (the chapters' full profile).
"""

from .checkpoint import load_checkpoint, save_checkpoint
from .compare import compare_on_benchmark, plan_benchmark
from .config import RECALL_KS, Config, ConfigError, config_from_dict, find_config, load_config
from .evaluation import evaluate_checkpoint, evaluate_model
from .loop import Trainer
from .optim import OPTIMIZERS, make_optimizer
from .run_result import TEST_SELECTION_NOTE, RunResult, selection_note
from .trainer import NothingToResume, train

__all__ = [
    "Config",
    "ConfigError",
    "NothingToResume",
    "OPTIMIZERS",
    "RECALL_KS",
    "RunResult",
    "TEST_SELECTION_NOTE",
    "Trainer",
    "compare_on_benchmark",
    "config_from_dict",
    "evaluate_checkpoint",
    "evaluate_model",
    "find_config",
    "load_checkpoint",
    "load_config",
    "make_optimizer",
    "plan_benchmark",
    "save_checkpoint",
    "selection_note",
    "train",
]

"""Training: the one loop, its optimiser factory, its checkpoints, and ``fit`` on in-memory data.

This is the lower layer of the package's training. Every chapter trains with
``fit(model, loss, train, test, epochs=...)``; the config-driven engine (:mod:`dmlbook.engine`,
benchmark runs with run folders, resumption and several GPUs) builds on the same pieces and is
never imported from here:

* :mod:`~dmlbook.training.loop`: :class:`Trainer`, the one training loop (step, evaluate,
  checkpoint, restore, run);
* :mod:`~dmlbook.training.optim`: :func:`make_optimizer`, the one optimiser factory (Adam, AdamW,
  SGD), and :func:`check_optimizer`, the one place that validates its settings;
* :mod:`~dmlbook.training.checkpoint`: checkpoints and run files written atomically;
* :mod:`~dmlbook.training.in_memory`: :func:`fit` on tensors held in memory, PK batches, a pair
  loss and Recall@K per epoch.

Tests: ``tests/training/`` (one file per module).
"""

from .checkpoint import load_checkpoint, save_checkpoint
from .in_memory import LR_DECAYS, SAMPLERS, cosine_factor, fit, inputs_and_labels
from .loop import Stop, Trainer
from .optim import OPTIMIZERS, check_optimizer, make_optimizer

__all__ = [
    "LR_DECAYS",
    "OPTIMIZERS",
    "SAMPLERS",
    "Stop",
    "Trainer",
    "check_optimizer",
    "cosine_factor",
    "fit",
    "inputs_and_labels",
    "load_checkpoint",
    "make_optimizer",
    "save_checkpoint",
]

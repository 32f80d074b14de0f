"""The five sections of a run config (data, model, loss, optim, train) with their defaults.

Each section is a dataclass whose fields are the keys a config file may give, with their types
and defaults declared once here; :class:`~dmlbook.engine.config.Config` puts them together,
reads and checks them (:func:`~dmlbook.engine.config.load_config`), and re-exports every name of
this module. :class:`ConfigError` is the one error of a bad config. Tests:
``tests/engine/test_config_sections.py``; chapter ``book/14_training_at_scale.ipynb``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..training.optim import OPTIMIZER_DEFAULTS

__all__ = [
    "ConfigError",
    "DataConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "RECALL_KS",
    "TrainConfig",
]

#: The Recall@K sets the papers report per data set (MS, Wang et al. 2019, Tables 3-5).
RECALL_KS: dict[str, tuple[int, ...]] = {
    "cub": (1, 2, 4, 8, 16, 32),
    "cars": (1, 2, 4, 8, 16, 32),
    "sop": (1, 10, 100, 1000),
    "inshop": (1, 10, 20, 30, 40, 50),
}


class ConfigError(ValueError):
    """An invalid configuration; the message names the key and what is wrong."""


@dataclass
class DataConfig:
    """Which data, and how training images are augmented.

    ``root`` is the folder that holds the data sets (as ``$DMLBOOK_DATA``; ``--data`` sets it).
    For image data sets every image is decoded once, resized to ``resize`` (shorter side) into a
    ``uint8`` cache; training takes random resized crops of side ``crop`` (area fraction in
    ``scale``) with horizontal flips, testing the centre crop. ``gallery_split`` selects the
    query/gallery protocol (In-Shop: ``test_split: query``, ``gallery_split: gallery``).
    """

    dataset: str = "synthetic"
    root: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    train_split: str = "train"
    test_split: str = "test"
    gallery_split: str | None = None
    resize: int = 256
    crop: int = 224
    scale: list[float] = field(default_factory=lambda: [0.16, 1.0])
    flip: bool = True
    cache_dir: str | None = None


@dataclass
class ModelConfig:
    """Backbone, head and BatchNorm handling (see :class:`dmlbook.models.EmbeddingModel`).

    ``pretrained``: ``null`` (random init), ``default`` (the papers' ImageNet weights) or a path
    or URL. ``head``: ``linear`` (one Linear layer) or ``multilevel`` (Liu et al.'s Fig. 3, three
    levels of BN-Inception fused to ``3 * dim``, :mod:`dmlbook.models.multilevel`).
    """

    backbone: str = "bn_inception"
    pretrained: str | None = "default"
    backbone_options: dict[str, Any] = field(default_factory=dict)
    dim: int | None = 512
    pooling: str = "max"
    freeze_bn: bool = True
    head: str = "linear"


@dataclass
class LossConfig:
    """``dmlbook.losses.get_loss(name, **params)``."""

    name: str = "multi_similarity"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimConfig:
    """Optimiser and schedule.

    ``milestones``: iterations at which the learning rate is multiplied by ``gamma``; values in
    (0, 1) are fractions of the run (0.6 = at 60 %; they move if a resumed run is lengthened). ``warmup_iters``: linear warm-up from
    ``warmup_factor * lr``. ``freeze_backbone_epochs``: train only the head for that many
    epochs (Liu et al.). ``head_lr_mult``: learning-rate factor of the new head. ``name``,
    ``lr``, ``weight_decay``, ``momentum``/``nesterov`` (SGD; ``momentum: 0`` is plain SGD) and
    ``betas``/``eps`` (Adam, AdamW) go to :func:`dmlbook.training.optim.make_optimizer`, which
    also validates them.
    """

    name: str = "adam"
    lr: float = 1e-5
    weight_decay: float = OPTIMIZER_DEFAULTS["weight_decay"]
    momentum: float = OPTIMIZER_DEFAULTS["momentum"]
    nesterov: bool = OPTIMIZER_DEFAULTS["nesterov"]
    betas: list[float] = field(default_factory=lambda: list(OPTIMIZER_DEFAULTS["betas"]))
    eps: float = OPTIMIZER_DEFAULTS["eps"]
    head_lr_mult: float = 1.0
    milestones: list[int | float] = field(default_factory=list)
    gamma: float = 0.1
    warmup_iters: int = 0
    warmup_factor: float = 0.01
    freeze_backbone_epochs: int = 0
    grad_clip: float | None = None

    def settings(self) -> dict[str, Any]:
        """The keyword settings of :func:`~dmlbook.training.optim.make_optimizer` besides name, lr."""
        keys = ("weight_decay", "momentum", "nesterov", "betas", "eps")
        return {k: getattr(self, k) for k in keys}


@dataclass
class TrainConfig:
    """Length, batches, evaluation, precision and output of a run.

    Give exactly one of ``iterations`` and ``epochs``. An epoch is ``epoch_iters`` batches
    (default: training images // batch_size); evaluations happen at epoch ends (every
    ``eval_every`` epochs and after the last iteration). ``last.pt`` is written at every epoch
    end, every ``checkpoint_every`` iterations and whenever ``checkpoint_minutes`` (default 10;
    ``null``: off) have passed since the last one, so that a killed run on a slow machine loses
    minutes, not an epoch. ``ks`` defaults to the data set's Recall@K set (:data:`RECALL_KS`).
    ``baselines`` prints, beside every evaluation's R@1, the R@1 of a random ranking (chance,
    :func:`dmlbook.evaluate.chance_recall_at_k`) and of the untrained network (the evaluation at
    iteration 0), the two numbers a small CPU result must be read against.
    """

    iterations: int | None = None
    epochs: int | None = None
    epoch_iters: int | None = None
    batch_size: int = 80
    k: int = 5
    eval_every: int = 1
    eval_at_start: bool = True
    ks: list[int] | None = None
    eval_batch_size: int = 256
    seed: int = 0
    device: str = "auto"
    bf16: bool = True
    channels_last: bool = True
    compile: bool = False
    out_dir: str | None = None
    log_every: int = 10
    checkpoint_every: int | None = None
    checkpoint_minutes: float | None = 10.0
    save_best: bool = True
    tensorboard: bool = True
    baselines: bool = False

"""A fair comparison of the book's loss families on real characters (Omniglot), after Musgrave et al.

Musgrave, Belongie and Lim (2020), "A Metric Learning Reality Check" (ECCV), found that most
published gains of new losses shrink to a point or two once every loss gets the same network,
embedding size, optimiser, batches and training length, and its hyper-parameters are chosen on
validation classes disjoint from the test classes, never on the test set. This module fixes that
protocol for the shipped Omniglot copy:

1. **One model, one budget.** :func:`make_model` (``SmallCNN(stride=1)``, 64-d), Adam with a
   cosine decay of the learning rate, P x K batches with Koch et al.'s affine distortions, the
   same number of steps for every loss (:data:`SCALES`), trained by :func:`train_one`.
2. **Every choice on validation folds.** :func:`validation_split` holds out two of the five
   training alphabets, once per fold of :data:`VALIDATION_FOLDS` (:mod:`~dmlbook.studies.fair_folds`);
   each family's declared search (:data:`TRIALS` settings, :data:`FAMILIES`) is trained on the
   other three and scored by MAP@R on the held-out ones; :func:`select_tuned`,
   :func:`select_family` and :func:`select_recipe` (:mod:`~dmlbook.studies.fair_selection`,
   re-exported here) choose by the mean over the folds and refuse a table holding a test column.
3. **Test once, >= 3 seeds.** The frozen settings are trained on all 136 training characters;
   :func:`score` measures the 20-way one-shot error on Lake et al.'s 20 runs (with each run's
   error) and MAP@R and R@1 on the 106 ``test`` characters. :func:`mean_intervals` and
   :func:`paired_intervals` give t-intervals over seeds (runs of one seed share initial weights,
   batches and distortions); :func:`dmlbook.evaluate.oneshot.bootstrap_runs` the interval over the runs.

``bench/omniglot_compare.py`` runs the protocol (resumable, CSV in ``bench/results/``); Chapter
15 reads the result and repeats a short run live. Tests: ``tests/studies/test_fair_comparison.py``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from scipy import stats

from ..core.reproducibility import seed_everything
from ..data import PKSampler, RandomBatchSampler
from ..data.base.dataset import EmbeddedDataset
from ..data.batches.affine import RandomAffine
from ..data.handwritten.omniglot import OneShotRuns
from ..evaluate import retrieval_metrics
from ..evaluate.oneshot import evaluate_one_shot
from ..losses.registry import get_loss
from ..models import SmallCNN, embed
from ..training.in_memory import _to_device, cosine_factor, inputs_and_labels
from ..training.loop import Trainer
from ..training.optim import make_optimizer
from .fair_folds import VALIDATION_ALPHABETS, VALIDATION_FOLDS, validation_split
from .fair_selection import (
    RECIPE_CANDIDATES,
    TEST_COLUMNS,
    VALIDATION_COLUMNS,
    fold_means,
    select_family,
    select_recipe,
    select_tuned,
)

__all__ = [
    "FAMILIES",
    "RECIPE_CANDIDATES",
    "RUN_KEY",
    "SCALES",
    "TEST_COLUMNS",
    "TRIALS",
    "VALIDATION_COLUMNS",
    "VALIDATION_ALPHABETS",
    "VALIDATION_FOLDS",
    "LossFamily",
    "Scale",
    "declared_order",
    "family",
    "fold_means",
    "make_model",
    "mean_intervals",
    "paired_intervals",
    "run_name",
    "score",
    "select_family",
    "select_recipe",
    "select_tuned",
    "train_one",
    "validation_split",
]


@dataclass(frozen=True)
class LossFamily:
    """A loss family of the book, its registry name and the settings tuning tries.

    Attributes
    ----------
    label : str
        How tables name it.
    name : str
        Its :func:`dmlbook.losses.get_loss` name.
    source : str
        Paper and equation.
    grid : tuple of dict
        The declared search: the hyper-parameter settings tried on the validation split, the
        paper's first. Every family of :data:`FAMILIES` has :data:`TRIALS` of them (Musgrave et
        al.'s equal budget); nothing is added after results are seen.
    """

    label: str
    name: str
    source: str
    grid: tuple[Mapping[str, Any], ...] = ({},)

    def build(self, hparams: Mapping[str, Any]) -> torch.nn.Module:
        """A fresh loss module with ``hparams``."""
        return get_loss(self.name, **dict(hparams))


#: The tuning budget of every family: this many settings, each trained once per validation fold
#: (seed 0, the scale's steps).
TRIALS = 3


def _grid(**axes: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Every combination of the axes, the first value of each axis first."""
    combos: list[dict[str, Any]] = [{}]
    for key, values in axes.items():
        combos = [{**c, key: v} for c in combos for v in values]
    return tuple(combos)


#: Every loss family of the book with its declared search: :data:`TRIALS` settings, the paper's
#: first, then one value on either side of it along the family's main hyper-parameter (Pair-E:
#: one step along each of its two; N-pair, which has none, its two other pair constructions).
FAMILIES: tuple[LossFamily, ...] = (
    LossFamily("contrastive", "contrastive", "Wang et al. 2019, Eq. 4", _grid(margin=(0.5, 0.3, 0.7))),
    LossFamily(
        "contrastive (distance)", "contrastive_distance", "Liu et al., Eq. 11",
        _grid(neg_margin=(1.0, 0.8, 1.2)),
    ),
    LossFamily(
        "triplet (semi-hard)", "triplet", "Wang et al. 2019, Eq. 5; mining: Schroff et al. 2015",
        _grid(margin=(0.1, 0.05, 0.2), mining=("semihard",)),
    ),
    LossFamily("lifted", "lifted", "Wang et al. 2019, Eq. 6", _grid(margin=(1.0, 0.5, 2.0))),
    LossFamily("LiftedStruct*", "lifted_star", "Wang et al. 2019, Eq. 16", _grid(beta=(50.0, 20.0, 125.0))),
    LossFamily("binomial", "binomial", "Wang et al. 2019, Eq. 9", _grid(beta=(50.0, 25.0, 10.0))),
    LossFamily("N-pair", "npair", "Liu et al., Eq. 13", ({}, {"sampling": "all"}, {"form": "distance"})),
    LossFamily("BinLifted", "binlifted", "Wang et al. 2019, suppl. Eq. 10", _grid(beta=(50.0, 25.0, 100.0))),
    LossFamily(
        "MS", "multi_similarity", "Wang et al. 2019, Eq. 15",
        ({"mining": True}, {"mining": False}, {"mining": True, "beta": 40.0}),
    ),
    LossFamily(
        "Pair-E", "pair_e", "Liu et al., Eq. 18, 32-33",
        ({"alpha": 0.0, "beta": 2.0}, {"alpha": 2.0, "beta": 2.0}, {"alpha": 0.0, "beta": 10.0}),
    ),
    LossFamily("Triplet-E", "triplet_e", "Liu et al., Eq. 21, 34", _grid(alpha=(40.0, 10.0, 80.0))),
    LossFamily(
        "DRO-KL-G", "dro_kl_g", "DRO paper, Eq. 7",
        tuple({"gamma_pos": g, "gamma_neg": g} for g in (0.1, 1.0, 0.01)),
    ),
    LossFamily(
        "DRO-TopK-PN", "dro", "DRO paper, Eq. 1, Sec. 3.2",
        _grid(uncertainty=("topk_pn",), K=(160, 80, 320)),
    ),
    LossFamily(
        "gradient surgery (best)", "gradient_surgery", "Xuan & Pless, Table 5",
        _grid(direction=("cos_orth",), pair_weight=("lin_ms",), triplet_weight=("cir",), tau=(1.0, 4.0, 16.0)),
    ),
)  # fmt: skip


def family(label: str) -> LossFamily:
    """The :data:`FAMILIES` entry labelled ``label``."""
    for fam in FAMILIES:
        if fam.label == label:
            return fam
    raise ValueError(
        f"unknown loss family {label!r}; known: {', '.join(f.label for f in FAMILIES)}."
    )


@dataclass(frozen=True)
class Scale:
    """One size of the protocol: model width, batches and steps (the same for every loss).

    Attributes
    ----------
    width : int
        ``SmallCNN`` width (channels ``width``, ``2 width``, ``4 width``).
    steps : int
        Updates of every tuning and final run.
    recipe_steps : int
        Updates of the long runs of the best family (the recommended recipe).
    classes, per_class : int
        P and K of the P x K batches.
    lr : float
        Adam's learning rate at the start; it decays along half a cosine to 0 at the last step
        (``fit(lr_decay="cosine")``).
    dim : int
        Embedding size.
    """

    width: int
    steps: int
    recipe_steps: int
    classes: int = 16
    per_class: int = 5
    lr: float = 1e-3
    dim: int = 64
    notes: str = field(default="", compare=False)

    @property
    def batch_size(self) -> int:
        return self.classes * self.per_class


#: ``cpu``: what a shared 2-core machine affords (Chapter 15's numbers: 300 steps cost about 15 s
#: of one core, the recipe's 2,000 about 110 s); ``gpu``: twice the width and the batch, longer
#: runs, for a lent GPU; ``smoke``: seconds, for the tests.
SCALES: dict[str, Scale] = {
    "cpu": Scale(width=32, steps=300, recipe_steps=2000),
    "gpu": Scale(width=64, steps=2000, recipe_steps=10000, classes=32),
    "smoke": Scale(width=2, steps=3, recipe_steps=4, classes=4, per_class=2, dim=8),
}


#: The columns that name one run of the bench (``bench/omniglot_compare.py``'s ledger).
#: ``width`` is the network's, ``fold`` the validation fold of a choosing run (``-`` for a run on
#: the whole training set).
RUN_KEY = ("phase", "loss", "hparams", "seed", "steps", "sampler", "variant", "width", "fold")


def declared_order(tuning: pd.DataFrame) -> pd.DataFrame:
    """Tuning rows sorted as :data:`FAMILIES` declares them: family by family, each family's
    settings in the order of its grid (the paper's first), so that the selection functions'
    ties go to the paper's setting and the first family; rows of other settings last."""
    rank = {
        (f.label, json.dumps(dict(hp), sort_keys=True)): (i, j)
        for i, f in enumerate(FAMILIES)
        for j, hp in enumerate(f.grid)
    }
    key = [
        rank.get(k, (len(FAMILIES), 0)) for k in zip(tuning["loss"], tuning["hparams"], strict=True)
    ]
    order = sorted(range(len(tuning)), key=lambda i: key[i])
    return tuning.iloc[order]


def run_name(run: Mapping[str, Any]) -> str:
    """The file name (no suffix) of one run's saved model and history in the bench's folders:
    phase, family and seed, and a hash of the rest of its :data:`RUN_KEY` values."""
    digest = hashlib.sha1("|".join(str(run[k]) for k in RUN_KEY).encode()).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9]+", "-", f"{run['phase']}-{run['loss']}").strip("-")
    return f"{name}-{digest}-seed{run['seed']}"


def make_model(scale: Scale) -> SmallCNN:
    """The one network of the comparison: ``SmallCNN(in_channels=1, width, dim, stride=1)``."""
    return SmallCNN(in_channels=1, dim=scale.dim, width=scale.width, stride=1)


def train_one(
    fam: LossFamily,
    hparams: Mapping[str, Any],
    train: object,
    scale: Scale,
    *,
    seed: int,
    steps: int | None = None,
    sampler: str = "pk",
    device: str | torch.device = "cpu",
    augment: RandomAffine | None = None,
    evaluate: EmbeddedDataset | None = None,
    every: int = 0,
    checkpoint: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[SmallCNN, pd.DataFrame]:
    """Train the comparison's model with one loss setting; return it and its training history.

    Seeding first makes the initial weights, the batches and the distortions a function of
    ``seed`` alone, so two losses run with one seed differ only by the loss. The run is
    :func:`dmlbook.training.fit`'s with ``epochs=1``, Adam and ``lr_decay="cosine"`` (the same
    batches, distortions and updates), driven here step by step so that a long run can report,
    evaluate and save itself on the way.

    Parameters
    ----------
    evaluate : EmbeddedDataset, optional
        Scored by MAP@R (:func:`score`) before the first step and every ``every`` steps and at
        the end: the validation curve. Never pass test data to a run whose curve chooses.
    every : int
        Steps between evaluations, checkpoints and progress lines (0: none on the way).
    checkpoint : path, optional
        A file written every ``every`` steps (model, optimiser, position, random states); when
        it exists at the start the run continues from it and ends as an uninterrupted run would.
    log : callable, optional
        Receives a progress line every ``every`` steps (e.g. ``print``).

    Returns
    -------
    (SmallCNN, pandas.DataFrame)
        The trained model and one row per step: ``step`` (1-based), ``loss`` (that batch's) and
        ``MAP@R`` on ``evaluate`` where it was scored (NaN elsewhere; step 0 is the untrained
        model's row).
    """
    total = scale.steps if steps is None else int(steps)
    if total < 1 or every < 0:
        raise ValueError(f"steps must be >= 1 and every >= 0, got steps={total}, every={every}.")
    seed_everything(seed)
    model = make_model(scale)
    loss_fn, augment = fam.build(hparams), RandomAffine() if augment is None else augment
    train_x, train_y = inputs_and_labels(train, "train")
    generator = seed_everything(seed)  # as fit seeds itself: the same stream as fit's run
    device = torch.device(device)
    params = _to_device(model, loss_fn, device)
    kind = PKSampler if sampler == "pk" else RandomBatchSampler
    args = (
        (train_y, scale.batch_size, scale.per_class)
        if sampler == "pk"
        else (train_y, scale.batch_size)
    )
    batch_sampler = kind(*args, seed=seed, batches_per_epoch=total)  # type: ignore[operator]
    trainer = Trainer(
        model, loss_fn, make_optimizer(params, "adam", scale.lr), check_finite=True,
        lr_factor=cosine_factor(total),
        evaluator=(lambda: {"MAP@R": score(model, evaluate, device=device)["MAP@R"]}) if evaluate is not None else None,
    )  # fmt: skip
    losses: list[float] = []
    if checkpoint is not None and Path(checkpoint).is_file():
        state = trainer.restore(checkpoint)
        generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        losses = list(state["losses"])
    elif evaluate is not None:
        trainer.evaluate()

    def batches(epoch: int, skip: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        batch_sampler.set_epoch(epoch)
        for idx in itertools.islice(batch_sampler, skip, None):
            yield augment(train_x[idx].to(device), generator), train_y[idx].to(device)

    def on_step(loss: torch.Tensor) -> None:
        losses.append(loss.item())
        i = trainer.pos.iteration
        if every and (i % every == 0 or i == total):
            if evaluate is not None:
                trainer.evaluate(loss=sum(losses[-every:]) / len(losses[-every:]))
                model.train()
            if log is not None:
                log(
                    f"step {i}/{total}, loss {sum(losses[-every:]) / len(losses[-every:]):.4f}, {trainer.seconds:.0f} s"
                )
            if checkpoint is not None and i < total:
                trainer.checkpoint(
                    checkpoint,
                    generator=generator.get_state(),
                    torch_rng=torch.get_rng_state(),
                    losses=losses,
                )
        elif i == total and evaluate is not None:
            trainer.evaluate()

    model.train()
    trainer.run(total, batches, on_step=on_step)
    history = pd.DataFrame({"step": range(1, total + 1), "loss": losses})
    if evaluate is not None:
        scored = pd.DataFrame(trainer.history).rename(columns={"iteration": "step"})
        history = history.merge(scored[["step", "MAP@R"]], on="step", how="outer")
    return model, history.reset_index(drop=True)


def score(
    model: torch.nn.Module,
    test: EmbeddedDataset | None,
    runs: OneShotRuns | None = None,
    *,
    device: str | torch.device | None = None,
) -> dict[str, Any]:
    """``MAP@R`` and ``R@1`` on ``test`` (when given) and, on ``runs`` (when given), the
    ``one-shot error`` with its ``run errors`` (the list of the 20 runs' errors), fractions."""
    out: dict[str, Any] = {}
    if runs is not None:
        result = evaluate_one_shot(model, runs, device=device)
        out.update({"one-shot error": result.error, "run errors": result.errors.tolist()})
    if test is not None:
        metrics = retrieval_metrics(
            embed(model, test, device=device), test.labels, (1,), metrics=("recall", "MAP@R")
        )
        out.update({"MAP@R": metrics["MAP@R"], "R@1": metrics["R@1"]})
    return out


def _t_half_width(values: pd.Series, level: float) -> float:
    n = int(values.count())
    if n < 2:
        return math.nan
    return float(stats.t.ppf(0.5 + level / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))


def mean_intervals(results: pd.DataFrame, metric: str, *, level: float = 0.95) -> pd.DataFrame:
    """Each loss's mean of ``metric`` over seeds with a Student-t interval at ``level``.

    Returns a frame indexed by ``loss`` (first-appearance order) with ``mean``, ``low``,
    ``high``, ``std`` and ``seeds``.
    """
    rows = []
    for label, g in results.groupby("loss", sort=False):
        half = _t_half_width(g[metric], level)
        mean = float(g[metric].mean())
        rows.append((label, mean, mean - half, mean + half, float(g[metric].std(ddof=1)), len(g)))
    out = pd.DataFrame(rows, columns=["loss", "mean", "low", "high", "std", "seeds"])
    return out.set_index("loss")


def paired_intervals(
    results: pd.DataFrame,
    reference: str,
    metric: str,
    *,
    level: float = 0.95,
    lower_is_better: bool = False,
) -> pd.DataFrame:
    """Each loss minus ``reference``, seed by seed, with a Student-t interval of the mean.

    Only seeds run for both losses count. Returns a frame indexed by ``loss`` (every loss but
    the reference) with ``mean``, ``low``, ``high``, ``wins`` (seeds where the loss did better
    than the reference: scored higher, or lower with ``lower_is_better`` for an error) and
    ``seeds``; an interval that excludes 0 is a difference the seeds resolve.
    """
    table = results.pivot_table(index="seed", columns="loss", values=metric, sort=False)
    if reference not in table.columns:
        raise ValueError(f"unknown reference {reference!r}; losses: {', '.join(table.columns)}.")
    rows = []
    for label in [c for c in dict.fromkeys(results["loss"]) if c != reference]:
        diff = (table[label] - table[reference]).dropna()
        half, mean = _t_half_width(diff, level), float(diff.mean())
        wins = int(((diff < 0) if lower_is_better else (diff > 0)).sum())
        rows.append((label, mean, mean - half, mean + half, wins, len(diff)))
    out = pd.DataFrame(rows, columns=["loss", "mean", "low", "high", "wins", "seeds"])
    return out.set_index("loss")

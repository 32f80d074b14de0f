"""A fair comparison of the book's loss families on real characters (Omniglot), after Musgrave et al.

Musgrave, Belongie and Lim (2020), "A Metric Learning Reality Check" (ECCV), found that most
published gains of new losses shrink to a point or two once every loss gets the same network,
embedding size, optimiser, batches and training length, and its hyper-parameters are chosen on
validation classes disjoint from the test classes, never on the test set. This module fixes that
protocol for the shipped Omniglot copy:

1. **One model, one budget.** :func:`make_model` (``SmallCNN(stride=1)``, 64-d), Adam with a
   cosine decay of the learning rate, P x K batches with Koch et al.'s affine distortions
   (:class:`~dmlbook.data.RandomAffine`), the same number of steps for every loss
   (:data:`SCALES`), trained with :func:`dmlbook.training.fit`.
2. **Tuning on training characters.** :func:`validation_split` holds out two of the five training
   alphabets (:data:`VALIDATION_ALPHABETS`); each family's grid (:data:`FAMILIES`) is trained on
   the other three and scored by MAP@R on the held-out characters (Musgrave et al.'s main
   metric); where the best setting lies at an end of the grid, :func:`extension` tries one more
   value beyond it; :func:`select_tuned` keeps the best setting of each family.
3. **Final runs on >= 3 seeds.** The chosen settings are trained on all 136 training characters;
   :func:`score` measures the 20-way one-shot error on Lake et al.'s 20 official runs (20
   evaluation alphabets) and MAP@R and R@1 on the 106 characters of the ``test`` split (3 other
   alphabets). Runs of one seed share initial weights, batches and distortions, so
   :func:`paired_intervals` gives paired differences with 95 % t-intervals; :func:`mean_intervals`
   gives each loss's mean with its interval.

``bench/omniglot_compare.py`` runs the protocol (resumable, CSV in ``bench/results/``); Chapter
15 reads the result and repeats a short run live. Tests: ``tests/studies/test_fair_comparison.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from scipy import stats

from ..data.affine import RandomAffine
from ..data.dataset import EmbeddedDataset
from ..data.omniglot import OneShotRuns
from ..evaluate import retrieval_metrics
from ..losses.registry import get_loss
from ..models import SmallCNN, embed
from ..oneshot import evaluate_one_shot
from ..reproducibility import seed_everything
from ..training.in_memory import fit

__all__ = [
    "FAMILIES",
    "SCALES",
    "VALIDATION_ALPHABETS",
    "LossFamily",
    "Scale",
    "extension",
    "family",
    "make_model",
    "mean_intervals",
    "paired_intervals",
    "score",
    "select_tuned",
    "train_one",
    "validation_split",
]

#: The training alphabets held out for tuning (46 of the 136 characters); the other three train.
VALIDATION_ALPHABETS = ("Balinese", "Early_Aramaic")


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
        Hyper-parameter settings tried on the validation split, the paper's first.
    axis : tuple of str
        The numeric hyper-parameter(s) (moving together) that tuning may extend: when the
        grid's best setting has the largest or smallest value of the axis, one more value beyond
        it is tried (:func:`extension`), so that a family is not held back by where its grid
        happened to end.
    step : {"times", "plus"}
        How that value is reached from the two outermost ones ``a`` (inner) and ``b`` (end):
        ``b * b / a`` or ``b + (b - a)``.
    """

    label: str
    name: str
    source: str
    grid: tuple[Mapping[str, Any], ...] = ({},)
    axis: tuple[str, ...] = ()
    step: str = "times"

    def build(self, hparams: Mapping[str, Any]) -> torch.nn.Module:
        """A fresh loss module with ``hparams``."""
        return get_loss(self.name, **dict(hparams))


def _grid(**axes: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Every combination of the axes, the first value of each axis first."""
    combos: list[dict[str, Any]] = [{}]
    for key, values in axes.items():
        combos = [{**c, key: v} for c in combos for v in values]
    return tuple(combos)


#: Every loss family of the book, with the grid tuning tries (centred on the papers' values) and
#: the axis it may extend by one step.
FAMILIES: tuple[LossFamily, ...] = (
    LossFamily("contrastive", "contrastive", "Wang et al. 2019, Eq. 4", _grid(margin=(0.5, 0.3, 0.7)), ("margin",), "plus"),
    LossFamily(
        "contrastive (distance)", "contrastive_distance", "Liu et al., Eq. 11",
        _grid(neg_margin=(1.0, 0.8, 1.2)), ("neg_margin",), "plus",
    ),
    LossFamily(
        "triplet (semi-hard)", "triplet", "Wang et al. 2019, Eq. 5; mining: Schroff et al. 2015",
        _grid(margin=(0.1, 0.05, 0.2), mining=("semihard",)), ("margin",),
    ),
    LossFamily("lifted", "lifted", "Wang et al. 2019, Eq. 6", _grid(margin=(1.0, 0.5)), ("margin",)),
    LossFamily("LiftedStruct*", "lifted_star", "Wang et al. 2019, Eq. 16", _grid(beta=(50.0, 20.0)), ("beta",)),
    LossFamily("binomial", "binomial", "Wang et al. 2019, Eq. 9", _grid(beta=(50.0, 25.0, 10.0)), ("beta",)),
    LossFamily("N-pair", "npair", "Liu et al., Eq. 13"),
    LossFamily("BinLifted", "binlifted", "Wang et al. 2019, suppl. Eq. 10", _grid(beta=(50.0, 25.0)), ("beta",)),
    LossFamily(
        "MS", "multi_similarity", "Wang et al. 2019, Eq. 15",
        ({"mining": True}, {"mining": False}, {"mining": True, "beta": 40.0}),
    ),
    LossFamily(
        "Pair-E", "pair_e", "Liu et al., Eq. 18, 32-33",
        _grid(alpha=(0.0, 2.0), beta=(2.0, 10.0)), ("beta",),
    ),
    LossFamily("Triplet-E", "triplet_e", "Liu et al., Eq. 21, 34", _grid(alpha=(40.0, 10.0, 80.0)), ("alpha",)),
    LossFamily(
        "DRO-KL-G", "dro_kl_g", "DRO paper, Eq. 7",
        tuple({"gamma_pos": g, "gamma_neg": g} for g in (0.1, 1.0, 0.01)), ("gamma_pos", "gamma_neg"),
    ),
    LossFamily(
        "DRO-TopK-PN", "dro", "DRO paper, Eq. 1, Sec. 3.2",
        _grid(uncertainty=("topk_pn",), K=(160, 80, 320)), ("K",),
    ),
    LossFamily(
        "gradient surgery (best)", "gradient_surgery", "Xuan & Pless, Table 5",
        _grid(direction=("cos_orth",), pair_weight=("lin_ms",), triplet_weight=("cir",), tau=(1.0, 4.0, 16.0)),
        ("tau",),
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


#: ``cpu``: what this machine affords (Chapter 15's numbers); ``gpu``: twice the width, twice the
#: batch and more than three times the steps, for a lent GPU; ``smoke``: seconds, for the tests.
SCALES: dict[str, Scale] = {
    "cpu": Scale(width=32, steps=600, recipe_steps=4000),
    "gpu": Scale(width=64, steps=2000, recipe_steps=10000, classes=32),
    "smoke": Scale(width=2, steps=3, recipe_steps=4, classes=4, per_class=2, dim=8),
}


def make_model(scale: Scale) -> SmallCNN:
    """The one network of the comparison: ``SmallCNN(in_channels=1, width, dim, stride=1)``."""
    return SmallCNN(in_channels=1, dim=scale.dim, width=scale.width, stride=1)


def validation_split(train: EmbeddedDataset) -> tuple[EmbeddedDataset, EmbeddedDataset]:
    """``(fit_part, validation_part)`` of Omniglot's ``train`` split, disjoint in alphabets.

    The validation part holds every drawing of the :data:`VALIDATION_ALPHABETS`; the test
    alphabets and the one-shot runs are never touched.
    """
    alphabet = [train.class_names[int(c)].split("/")[1] for c in train.labels]
    held = torch.tensor([a in VALIDATION_ALPHABETS for a in alphabet])
    if not held.any() or held.all():
        raise ValueError(
            f"the data set holds {'none' if not held.any() else 'only'} of the validation "
            f"alphabets {VALIDATION_ALPHABETS}; pass Omniglot's train split."
        )
    index = torch.arange(len(train))
    return train.subset(index[~held]), train.subset(index[held])


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
) -> SmallCNN:
    """Train the comparison's model with one loss setting; return the trained model.

    Seeding first makes the initial weights, the batches and the distortions a function of
    ``seed`` alone, so two losses run with one seed differ only by the loss.
    """
    seed_everything(seed)
    model = make_model(scale)
    fit(
        model,
        fam.build(hparams),
        train,
        None,
        epochs=1,
        batches_per_epoch=scale.steps if steps is None else steps,
        batch_size=scale.batch_size,
        k=scale.per_class,
        lr=scale.lr,
        optimizer="adam",
        seed=seed,
        device=device,
        progress=False,
        augment=RandomAffine() if augment is None else augment,
        sampler=sampler,
        lr_decay="cosine",
    )
    return model


def score(
    model: torch.nn.Module,
    test: EmbeddedDataset,
    runs: OneShotRuns | None = None,
    *,
    device: str | torch.device | None = None,
) -> dict[str, float]:
    """``one-shot error`` (on ``runs``, when given), ``MAP@R`` and ``R@1`` on ``test``, fractions."""
    metrics = retrieval_metrics(
        embed(model, test, device=device), test.labels, (1,), metrics=("recall", "MAP@R")
    )
    out = {"MAP@R": metrics["MAP@R"], "R@1": metrics["R@1"]}
    if runs is not None:
        out = {"one-shot error": evaluate_one_shot(model, runs, device=device).error, **out}
    return out


def _settings(rows: pd.DataFrame) -> list[dict[str, Any]]:
    return [json.loads(h) for h in rows["hparams"]]


def extension(
    fam: LossFamily, tuning: pd.DataFrame, metric: str = "val MAP@R"
) -> dict[str, Any] | None:
    """The one setting beyond the grid that tuning tries next, or None.

    ``tuning`` holds this family's finished tuning rows (``hparams`` as JSON, ``metric``).
    None when the family has no :attr:`~LossFamily.axis`, some grid setting is not tuned yet,
    or the best grid setting is not at an end of the axis; otherwise the best setting with the
    axis moved one step beyond that end (``step``).
    """
    if not fam.axis:
        return None
    tried = _settings(tuning)
    if any(dict(hp) not in tried for hp in fam.grid):
        return None
    grid = [dict(hp) for hp in fam.grid]
    scores = {
        json.dumps(hp, sort_keys=True): float(v)
        for hp, v in zip(tried, tuning[metric], strict=True)
    }
    best = max(grid, key=lambda hp: scores[json.dumps(hp, sort_keys=True)])
    key, rest = fam.axis[0], {k: v for k, v in best.items() if k not in fam.axis}
    values = sorted(
        {hp[key] for hp in grid if {k: v for k, v in hp.items() if k not in fam.axis} == rest}
    )
    end = best[key]
    if len(values) < 2 or end not in (values[0], values[-1]):
        return None
    inner = values[1] if end == values[0] else values[-2]
    value = end * end / inner if fam.step == "times" else end + (end - inner)
    if value <= 0:
        return None
    value = int(round(value)) if isinstance(end, int) else round(float(value), 6)
    return {**best, **{k: value for k in fam.axis}}


def select_tuned(tuning: pd.DataFrame, metric: str = "val MAP@R") -> dict[str, dict[str, Any]]:
    """The best setting of each family: ``{label: hparams}`` by the largest ``metric``.

    ``tuning`` has one row per tuning run with columns ``loss``, ``hparams`` (JSON) and
    ``metric``; ties go to the setting tried first (the paper's).
    """
    missing = {"loss", "hparams", metric} - set(tuning.columns)
    if missing:
        raise ValueError(f"tuning table lacks column(s) {', '.join(sorted(missing))}.")
    best = {}
    for label, rows in tuning.groupby("loss", sort=False):
        top = rows.iloc[int(rows[metric].to_numpy().argmax())]
        best[str(label)] = json.loads(top["hparams"])
    return best


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

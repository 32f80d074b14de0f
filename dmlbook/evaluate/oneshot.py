"""The one-shot classification protocol of Lake et al. (2015) for an embedding.

In each of the 20 official runs of Omniglot's 20-way task, 20 characters of one evaluation
alphabet are shown once each (the *training* drawings) and 20 other drawings of the same
characters, by other people, are to be classified. A test drawing is assigned the class of the
training drawing nearest to it, and the score is the error rate, averaged over the runs
(Lake, Salakhutdinov and Tenenbaum 2015, Science 350(6266), the one-shot classification task
and its supplementary materials; the repository's ``demo_classification`` does the same with
the Modified Hausdorff Distance). Here "nearest" is measured on embeddings: by cosine
similarity (for L2-normalised embeddings the same ranking as the Euclidean distance,
Wang et al. 2019, Sec. 3) or by Euclidean distance.

It sits next to Recall@K and MAP@R (:mod:`dmlbook.evaluate`): those score retrieval among all test
images, this one scores a single labelled example per class. Runs come from
:func:`dmlbook.data.handwritten.omniglot.one_shot_runs`. Chapter 9 reports it; tests in
``tests/evaluate/test_oneshot.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..data.handwritten.omniglot import OneShotRuns
from ..models import embed

__all__ = [
    "OneShotResult",
    "bootstrap_runs",
    "evaluate_one_shot",
    "nearest_training",
    "one_shot_error",
]

_METRICS = ("cosine", "euclidean")


@dataclass(frozen=True)
class OneShotResult:
    """Error rates of the one-shot task.

    Attributes
    ----------
    errors : Tensor of shape (R,), float64
        Fraction of misclassified test drawings in each run.
    predictions : Tensor of shape (R, Q), int64
        Index of the training drawing chosen for each test drawing.
    """

    errors: torch.Tensor
    predictions: torch.Tensor

    @property
    def error(self) -> float:
        """Mean error rate over the runs (the number Lake et al. report)."""
        return float(self.errors.mean())


def _check_embeddings(train: torch.Tensor, test: torch.Tensor) -> None:
    if not (isinstance(train, torch.Tensor) and isinstance(test, torch.Tensor)):
        raise TypeError("train and test embeddings must be torch tensors of shape (R, n, d).")
    if train.ndim != 3 or test.ndim != 3:
        raise ValueError(
            f"embeddings must have shape (runs, items, dim), got train {tuple(train.shape)} and "
            f"test {tuple(test.shape)}; reshape a flat (runs * items, dim) tensor with .view."
        )
    if train.shape[0] != test.shape[0] or train.shape[2] != test.shape[2]:
        raise ValueError(
            f"train {tuple(train.shape)} and test {tuple(test.shape)} embeddings must have the "
            "same number of runs and the same dimension."
        )
    if train.shape[1] == 0 or test.shape[1] == 0:
        raise ValueError("every run needs at least one training and one test item.")


def nearest_training(
    train: torch.Tensor, test: torch.Tensor, *, metric: str = "cosine"
) -> torch.Tensor:
    """Index of the nearest training item of every test item, run by run.

    Parameters
    ----------
    train : Tensor of shape (R, C, d)
        Embeddings of the training drawings (one per class) of each run.
    test : Tensor of shape (R, Q, d)
        Embeddings of the test drawings.
    metric : {"cosine", "euclidean"}
        Highest cosine similarity, or smallest Euclidean distance. Ties go to the lowest index.

    Returns
    -------
    Tensor of shape (R, Q), int64
    """
    _check_embeddings(train, test)
    if metric not in _METRICS:
        raise ValueError(f"metric must be 'cosine' or 'euclidean', got {metric!r}.")
    a, b = train.double(), test.double()
    if metric == "cosine":
        a = nn.functional.normalize(a, dim=-1)
        b = nn.functional.normalize(b, dim=-1)
        score = b @ a.transpose(1, 2)  # (R, Q, C), higher is nearer
    else:
        score = -torch.cdist(b, a)
    return _first_argmax(score)


def _first_argmax(score: torch.Tensor) -> torch.Tensor:
    """``argmax`` over the last axis that returns the lowest index among ties."""
    best = score.max(dim=-1, keepdim=True).values
    index = torch.arange(score.shape[-1], device=score.device).expand_as(score)
    return torch.where(score == best, index, score.shape[-1]).min(dim=-1).values


def one_shot_error(
    train: torch.Tensor, test: torch.Tensor, answers: torch.Tensor, *, metric: str = "cosine"
) -> OneShotResult:
    """Error rate of nearest-training-item classification, per run (Lake et al. 2015).

    Parameters
    ----------
    train, test : Tensor of shape (R, C, d) and (R, Q, d)
        Embeddings, as for :func:`nearest_training`.
    answers : Tensor of shape (R, Q), int
        ``answers[r, q]`` is the index of the training item of the class of test item ``q``.
    metric : {"cosine", "euclidean"}

    Returns
    -------
    OneShotResult
        ``errors[r]`` = fraction of test items of run ``r`` assigned another class;
        ``.error`` their mean.
    """
    predictions = nearest_training(train, test, metric=metric)
    answers = torch.as_tensor(answers)
    if answers.shape != predictions.shape or answers.dtype.is_floating_point:
        raise ValueError(
            f"answers must be integer class indices of shape {tuple(predictions.shape)}, got "
            f"{answers.dtype} of shape {tuple(answers.shape)}."
        )
    if bool(((answers < 0) | (answers >= train.shape[1])).any()):
        raise ValueError(f"answers must index the {train.shape[1]} training items of a run.")
    wrong = predictions != answers.to(predictions.device)
    return OneShotResult(errors=wrong.double().mean(dim=1).cpu(), predictions=predictions.cpu())


def evaluate_one_shot(
    model: nn.Module | Callable[[torch.Tensor], torch.Tensor] | None,
    runs: OneShotRuns,
    *,
    metric: str = "cosine",
    device: str | torch.device | None = None,
) -> OneShotResult:
    """Embed the drawings of every run with ``model`` and score the one-shot task.

    Parameters
    ----------
    model : nn.Module, callable or None
        An embedding network (run in evaluation mode by :func:`dmlbook.models.embed`), any
        function of a batch of images, or ``None`` for the raw pixels (flattened), the
        baseline a learned embedding has to beat.
    runs : OneShotRuns
        From :func:`dmlbook.data.handwritten.omniglot.one_shot_runs`.
    metric : {"cosine", "euclidean"}
    device : str or torch.device, optional
        Where to run ``model`` (default: where its parameters are).

    Examples
    --------
    >>> from dmlbook.data.handwritten.omniglot import one_shot_runs
    >>> evaluate_one_shot(None, one_shot_runs()).error  # doctest: +SKIP
    """
    if not isinstance(runs, OneShotRuns):
        raise TypeError(
            f"runs must be a OneShotRuns (dmlbook.data.handwritten.omniglot.one_shot_runs()), got "
            f"{type(runs).__name__}."
        )
    r, c = runs.train.shape[:2]
    q = runs.test.shape[1]
    images = torch.cat([runs.train.flatten(0, 1), runs.test.flatten(0, 1)])
    if model is None:
        z = images.flatten(1)
    elif isinstance(model, nn.Module):
        z = embed(model, images, device=device)
    elif callable(model):
        with torch.no_grad():
            z = model(images)
    else:
        raise TypeError(f"model must be an nn.Module, a function or None, got {model!r}.")
    z = z.reshape(len(images), -1)
    return one_shot_error(
        z[: r * c].view(r, c, -1), z[r * c :].view(r, q, -1), runs.answers, metric=metric
    )


def bootstrap_runs(
    errors: Sequence[Sequence[float]] | np.ndarray | torch.Tensor,
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean error and a percentile bootstrap interval over the one-shot runs (test characters).

    The 20 runs are a sample of the evaluation alphabets' characters; a second sample would
    give other errors even for the same trained networks. This resamples the runs with
    replacement, the same draw for every row (every seed, or every seed's difference of two
    losses: a paired interval), takes the mean over rows and drawn runs, and returns the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of that mean over ``resamples`` draws
    (Efron and Tibshirani 1993, percentile interval). The training seeds stay fixed: this is
    the uncertainty of the test sample alone, to set beside the interval over seeds.

    Parameters
    ----------
    errors : array of shape (S, R) or (R,)
        ``errors[s, r]``: the error of seed ``s`` on run ``r``
        (:attr:`OneShotResult.errors`), or differences of two such errors.
    level : float
        In (0, 1).
    resamples : int
        Bootstrap draws (>= 100).
    seed : int
        Seeds the draws (a fixed seed makes the interval reproducible).

    Returns
    -------
    (mean, low, high) : tuple of float
    """
    e = np.atleast_2d(np.asarray(errors, dtype=float))
    if e.ndim != 2 or e.shape[1] < 2 or not np.isfinite(e).all():
        raise ValueError(
            f"errors must be finite, of shape (seeds, runs) with at least 2 runs, got shape "
            f"{np.shape(errors)}; pass OneShotResult.errors of each seed, stacked."
        )
    if not 0 < level < 1 or int(resamples) < 100:
        raise ValueError(f"level must be in (0, 1) and resamples >= 100, got {level}, {resamples}.")
    draws = np.random.default_rng(seed).integers(0, e.shape[1], size=(int(resamples), e.shape[1]))
    per_run = e.mean(axis=0)  # the mean over seeds of each run: resampling runs commutes with it
    means = per_run[draws].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(e.mean()), float(low), float(high)

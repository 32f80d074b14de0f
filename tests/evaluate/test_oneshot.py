"""The one-shot protocol (dmlbook.evaluate.oneshot) against a brute-force reference written here."""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch import nn

from dmlbook.data.handwritten.omniglot import OneShotRuns, one_shot_runs
from dmlbook.evaluate.oneshot import evaluate_one_shot, nearest_training, one_shot_error


def brute_force(train, test, answers, metric="cosine"):
    """Per run: classify each test vector as its nearest training vector; error per run.

    Plain Python loops over runs, test items and training items; the first of equally near
    training items wins. Also returns whether two training items were within 1e-9 of the best
    (a near tie, which rounding may decide either way).
    """
    errors, predictions, near_tie = [], [], False
    for r in range(len(train)):
        wrong, chosen = 0, []
        for q, t in enumerate(test[r]):
            best, best_c = None, None
            keys = []
            for c, x in enumerate(train[r]):
                if metric == "cosine":
                    dot = sum(a * b for a, b in zip(t, x, strict=True))
                    norms = math.sqrt(sum(a * a for a in t)) * math.sqrt(sum(b * b for b in x))
                    key = -dot / max(norms, 1e-12)
                else:
                    key = math.sqrt(sum((a - b) ** 2 for a, b in zip(t, x, strict=True)))
                keys.append(key)
                if best is None or key < best:
                    best, best_c = key, c
            near_tie |= sum(abs(k - best) < 1e-9 for k in keys) > 1
            chosen.append(best_c)
            wrong += best_c != answers[r][q]
        errors.append(wrong / len(test[r]))
        predictions.append(chosen)
    return errors, predictions, near_tie


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 3), st.integers(1, 6), st.integers(1, 6), st.integers(1, 5)),
    metric=st.sampled_from(["cosine", "euclidean"]),
    data=st.data(),
)
def test_matches_brute_force(shape, metric, data):
    runs, ways, queries, dim = shape
    values = hnp.arrays(np.float64, (runs, ways + queries, dim), elements=st.integers(-9, 9))
    x = data.draw(values)
    answers = data.draw(hnp.arrays(np.int64, (runs, queries), elements=st.integers(0, ways - 1)))
    train, test = x[:, :ways], x[:, ways:]
    result = one_shot_error(torch.from_numpy(train), torch.from_numpy(test), answers, metric=metric)
    errors, predictions, near_tie = brute_force(
        train.tolist(), test.tolist(), answers.tolist(), metric
    )
    assume(not near_tie)  # ties: test_ties_go_to_the_lowest_index
    assume(metric == "euclidean" or (np.abs(x).sum(axis=-1) > 0).all())  # zero has no direction
    assert result.predictions.tolist() == predictions
    assert result.errors.tolist() == pytest.approx(errors)
    assert result.error == pytest.approx(sum(errors) / len(errors))


def test_ties_go_to_the_lowest_index():
    train = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    test = torch.tensor([[[2.0, 0.0], [0.0, 3.0]]])
    assert nearest_training(train, test).tolist() == [[0, 2]]
    assert nearest_training(train, test, metric="euclidean").tolist() == [[0, 2]]


def test_raw_pixels_on_the_shipped_runs_match_brute_force():
    runs = one_shot_runs(image_size=7)  # 49 pixels keeps the pure-Python reference quick
    result = evaluate_one_shot(None, runs, metric="euclidean")
    flat = lambda t: t.flatten(2).double().tolist()
    errors, _, _ = brute_force(
        flat(runs.train), flat(runs.test), runs.answers.tolist(), "euclidean"
    )
    assert result.errors.tolist() == pytest.approx(errors)
    assert 0.0 < result.error < 1.0


def test_a_model_is_applied_to_every_image():
    runs = one_shot_runs(image_size=7)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(49, 5))
    result = evaluate_one_shot(model, runs)
    with torch.no_grad():
        train = model(runs.train.flatten(0, 1)).view(20, 20, 5).double().tolist()
        test = model(runs.test.flatten(0, 1)).view(20, 20, 5).double().tolist()
    errors, _, _ = brute_force(train, test, runs.answers.tolist())
    assert result.errors.tolist() == pytest.approx(errors)


def test_a_perfect_embedding_scores_zero():
    """An 'embedding' that knows the answers: one-hot of the class for every image."""
    answers = torch.tensor([[2, 0, 1], [1, 2, 0]])
    eye = torch.eye(3)
    train = eye.expand(2, 3, 3)
    test = eye[answers]
    assert one_shot_error(train, test, answers).error == 0.0
    assert one_shot_error(train, test, answers.flip(1)).error == pytest.approx((2 / 3 + 2 / 3) / 2)


@pytest.mark.parametrize(
    ("train", "test", "answers", "match"),
    [
        (torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3), "shape \\(runs, items, dim\\)"),
        (torch.zeros(1, 3, 4), torch.zeros(2, 3, 4), torch.zeros(1, 3), "same number of runs"),
        (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4), torch.zeros(1, 2), "answers must be"),
        (torch.zeros(1, 3, 4), torch.zeros(1, 3, 4), torch.full((1, 3), 3), "index the 3"),
    ],
)
def test_bad_input(train, test, answers, match):
    with pytest.raises(ValueError, match=match):
        one_shot_error(train, test, answers.long() if "answers must" not in match else answers)


def test_bad_metric_and_runs():
    with pytest.raises(ValueError, match="metric must be"):
        nearest_training(torch.zeros(1, 2, 2), torch.zeros(1, 2, 2), metric="l1")
    with pytest.raises(TypeError, match="OneShotRuns"):
        evaluate_one_shot(None, (torch.zeros(1), torch.zeros(1)))
    runs = OneShotRuns(torch.zeros(1, 2, 1, 2, 2), torch.zeros(1, 2, 1, 2, 2), torch.zeros(1, 2))
    with pytest.raises(TypeError, match="nn.Module, a function or None"):
        evaluate_one_shot("pixels", runs)


def test_bootstrap_over_runs_matches_scipys_percentile_bootstrap():
    """Reference: scipy.stats.bootstrap (percentile method) on the per-run means over seeds."""
    from scipy import stats

    from dmlbook.evaluate.oneshot import bootstrap_runs

    rng = np.random.default_rng(4)
    errors = rng.integers(0, 8, size=(3, 20)) / 20  # 3 seeds x 20 runs, 20 decisions a run
    mean, low, high = bootstrap_runs(errors, resamples=20_000)
    assert mean == pytest.approx(errors.mean())
    ref = stats.bootstrap(
        (errors.mean(axis=0),), np.mean, method="percentile", n_resamples=20_000, random_state=1
    ).confidence_interval
    assert low == pytest.approx(ref.low, abs=0.004) and high == pytest.approx(ref.high, abs=0.004)
    assert bootstrap_runs(errors[0]) == bootstrap_runs(errors[:1])  # one seed, either shape
    assert bootstrap_runs(np.full((2, 20), 0.15)) == pytest.approx((0.15, 0.15, 0.15))
    paired = bootstrap_runs(errors - errors)  # identical losses: a zero-width paired interval
    assert paired == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="shape"):
        bootstrap_runs(np.zeros((2, 1)))
    with pytest.raises(ValueError, match="level"):
        bootstrap_runs(errors, level=1.5)

"""Tests of dmlbook.evaluate: the metrics' definitions on hand-computed cases, the ``metrics=``
selection, the accepted input types, and the cross-check with pytorch-metric-learning.

The chunked pass itself (dmlbook.evaluate.ranking: ties, chunks, bad input, memory) is tested in
tests/evaluate/test_ranking.py.
"""

import math

import numpy as np
import pytest
import torch

from dmlbook.evaluate import (
    map_at_r,
    precision_at_1,
    r_precision,
    recall_at_k,
    retrieval_metrics,
)

# --------------------------------------------------------------------------------------------
# Hand-computed examples
# --------------------------------------------------------------------------------------------


def unit_circle(degrees):
    rad = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([rad.cos(), rad.sin()], dim=1)


def test_hand_computed_one_set():
    # Angles 0, 10, 30, 45, 100 degrees with labels A A B A B. Rankings by angular distance:
    #   q0 (A): 10A 30B 45A 100B -> rel 1 0 1 0, R=2: AP = (1/1)/2 = 0.5,  RP = 1/2
    #   q1 (A): 0A 30B 45A 100B  -> rel 1 0 1 0, R=2: AP = 0.5,           RP = 1/2
    #   q2 (B): 45A 10A 0A 100B  -> rel 0 0 0 1, R=1: AP = 0,             RP = 0, hit at K=4
    #   q3 (A): 30B 10A 0A 100B  -> rel 0 1 1 0, R=2: AP = (1/2)/2 = 0.25, RP = 1/2
    #   q4 (B): 45A 30B 10A 0A   -> rel 0 1 0 0, R=1: AP = 0,             RP = 0, hit at K=2
    x = unit_circle([0, 10, 30, 45, 100])
    y = [0, 0, 1, 0, 1]
    got = retrieval_metrics(x, y, ks=(1, 2, 3, 4))
    assert got == pytest.approx(
        {"R@1": 0.4, "R@2": 0.8, "R@3": 0.8, "R@4": 1.0, "P@1": 0.4, "MAP@R": 0.25, "RP": 0.3}
    )
    assert map_at_r(x, y) == pytest.approx(0.25)
    assert r_precision(x, y) == pytest.approx(0.3)
    assert precision_at_1(x, y) == pytest.approx(0.4)


def test_metrics_selects_what_one_pass_computes():
    # the hand-computed case above: each selection returns exactly its keys, with the same values
    x = unit_circle([0, 10, 30, 45, 100])
    y = [0, 0, 1, 0, 1]
    assert retrieval_metrics(x, y, (2, 4), metrics=("recall",)) == pytest.approx(
        {"R@2": 0.8, "R@4": 1.0}
    )
    assert retrieval_metrics(x, y, metrics=["MAP@R", "P@1"]) == pytest.approx(
        {"P@1": 0.4, "MAP@R": 0.25}
    )
    assert retrieval_metrics(x, y, metrics="RP") == pytest.approx({"RP": 0.3})
    assert recall_at_k(x, y, (1, 3)) == pytest.approx({1: 0.4, 3: 0.8})
    with pytest.raises(
        ValueError, match=r"metrics must name some of recall, P@1, MAP@R, RP.*'R@1'"
    ):
        retrieval_metrics(x, y, metrics=("R@1",))
    with pytest.raises(ValueError, match="metrics must name"):
        retrieval_metrics(x, y, metrics=())


def test_hand_computed_query_gallery():
    # Gallery at 0, 20, ..., 100 degrees with labels A B A B A B, so R = 3 for a query of A.
    #   query at 0 (A):  nearest 0A 20B 40A 60B 80A 100B -> rel 1 0 1 0 1 0
    #                    AP = (1/1 + 2/3)/3 = 5/9, RP = 2/3, hit at K=1
    #   query at 95 (A): nearest 100B 80A 60B 40A 20B 0A -> rel 0 1 0 1 0 1
    #                    AP = (1/2)/3 = 1/6,       RP = 1/3, hit at K=2
    gallery = unit_circle([0, 20, 40, 60, 80, 100])
    gallery_labels = [0, 1, 0, 1, 0, 1]
    queries = unit_circle([0, 95])
    got = retrieval_metrics(
        queries, [0, 0], ks=(1, 2), gallery=gallery, gallery_labels=gallery_labels
    )
    assert got["R@1"] == pytest.approx(0.5)
    assert got["R@2"] == pytest.approx(1.0)
    assert got["MAP@R"] == pytest.approx((5 / 9 + 1 / 6) / 2)
    assert got["RP"] == pytest.approx((2 / 3 + 1 / 3) / 2)


def test_singleton_queries_excluded_from_averages():
    x = unit_circle([0, 10, 90, 180])
    # q0 and q1 retrieve each other; q2 and q3 are singletons and do not count (not as misses).
    assert recall_at_k(x, [0, 0, 1, 2], ks=(1,)) == {1: 1.0}
    # In query/gallery mode a query whose label is absent from the gallery is left out too.
    got = recall_at_k(
        x, [0, 1, 2, 3], ks=(1,), gallery=unit_circle([5, 100]), gallery_labels=[0, 1]
    )
    assert got == {1: 0.5}  # q0 hits, q1 (label 1, nearest is 0) misses, q2/q3 excluded


def test_input_types_and_options():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, generator=gen)
    y = torch.randint(0, 8, (50,), generator=gen)
    ref = recall_at_k(x, y)
    assert list(ref) == [1, 2, 4, 8]
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in ref.values())
    assert recall_at_k(x.numpy(), y.tolist()) == ref
    assert recall_at_k(x.double(), y) == pytest.approx(ref)
    assert recall_at_k(x.requires_grad_(), y, device="cpu") == ref
    assert recall_at_k(x, y, ks=4) == {4: ref[4]}
    assert recall_at_k(x, y, ks=(np.int64(2), 2)) == {2: ref[2]}
    assert recall_at_k(x.half(), y, ks=(1,))[1] == pytest.approx(ref[1], abs=0.1)
    # normalize=False with pre-normalised rows gives the same ranking.
    unit = x.detach() / x.detach().norm(dim=1, keepdim=True)
    assert recall_at_k(unit, y, normalize=False) == pytest.approx(ref)
    assert precision_at_1(x, y) == ref[1]


# --------------------------------------------------------------------------------------------
# Cross-check with pytorch-metric-learning
# --------------------------------------------------------------------------------------------


def test_matches_pytorch_metric_learning():
    # PML's AccuracyCalculator needs faiss for its default k-NN; an exact CustomKNN over
    # CosineSimilarity (which normalises the rows) replaces it. Mapping of the names:
    #   PML precision_at_1             == our precision_at_1 == R@1
    #   PML mean_average_precision_at_r == our map_at_r ("MAP@R")
    #   PML r_precision                 == our r_precision ("RP")
    # k="max_bin_count" makes PML retrieve R neighbours; PML drops lone queries as we do, and
    # removes the query itself by index when the reference is the query set. Tie-free data.
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    calc = AccuracyCalculator(
        include=("precision_at_1", "mean_average_precision_at_r", "r_precision"),
        k="max_bin_count",
        device=torch.device("cpu"),
        knn_func=CustomKNN(CosineSimilarity()),
        kmeans_func=lambda x, n: None,
    )
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(400, 16, generator=gen)
    y = torch.randint(0, 60, (400,), generator=gen)  # some classes of one member
    pml = calc.get_accuracy(x, y)
    ours = retrieval_metrics(x, y, chunk_size=97)
    assert ours["P@1"] == pytest.approx(pml["precision_at_1"], abs=1e-6)
    assert ours["MAP@R"] == pytest.approx(pml["mean_average_precision_at_r"], abs=1e-6)
    assert ours["RP"] == pytest.approx(pml["r_precision"], abs=1e-6)

    g = torch.randn(300, 16, generator=gen)
    gy = torch.randint(0, 50, (300,), generator=gen)  # labels 50..59 absent from the gallery
    pml = calc.get_accuracy(x, y, g, gy, ref_includes_query=False)
    ours = retrieval_metrics(x, y, gallery=g, gallery_labels=gy, chunk_size=128)
    assert ours["P@1"] == pytest.approx(pml["precision_at_1"], abs=1e-6)
    assert ours["MAP@R"] == pytest.approx(pml["mean_average_precision_at_r"], abs=1e-6)
    assert ours["RP"] == pytest.approx(pml["r_precision"], abs=1e-6)

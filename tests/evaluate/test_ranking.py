"""Tests of dmlbook.evaluate.ranking, the one chunked pass behind every retrieval metric: against a
plain brute-force reference on inputs full of exact ties (chunking, the blocked top-m search,
query / gallery), the tie and self-exclusion rules, bad input, and memory (the N x N matrix is
never built).

The metrics' definitions on hand-computed cases, the ``metrics=`` selection and the cross-check with
pytorch-metric-learning are in tests/test_evaluate.py (dmlbook.evaluate).
"""

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from dmlbook.evaluate import (
    map_at_r,
    precision_at_1,
    r_precision,
    ranking,
    recall_at_k,
    retrieval_metrics,
)

# --------------------------------------------------------------------------------------------
# Brute-force reference: full N x M score matrix, one full stable sort per query.
# --------------------------------------------------------------------------------------------


def brute_force(x, y, ks, gallery=None, gallery_labels=None, normalize=True):
    """Every metric from its definition (Musgrave et al. 2020), query by query.

    Candidates are sorted by (score descending, relevant first); queries without a positive are
    skipped. Returns None when no query has a positive.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    one_set = gallery is None
    g = x if one_set else np.asarray(gallery, dtype=np.float64)
    gy = y if one_set else np.asarray(gallery_labels)
    if normalize:
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        g = g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)
    scores = x @ g.T
    recall = {k: 0.0 for k in dict.fromkeys(ks)}
    ap_sum = rp_sum = 0.0
    n_valid = 0
    for i in range(len(x)):
        candidates = np.array([j for j in range(len(g)) if not (one_set and j == i)])
        s = scores[i, candidates]
        rel = gy[candidates] == y[i]
        order = np.lexsort((~rel, -s))  # primary: score descending; then relevant first
        seq = rel[order]
        r = int(seq.sum())
        if r == 0:
            continue
        n_valid += 1
        for k in recall:
            recall[k] += float(seq[:k].any())
        precision = np.cumsum(seq) / np.arange(1, len(seq) + 1)
        ap_sum += float((precision[:r] * seq[:r]).sum()) / r
        rp_sum += float(seq[:r].sum()) / r
    if n_valid == 0:
        return None
    out = {f"R@{k}": recall[k] / n_valid for k in ks}
    out["P@1"] = out["R@1"] if 1 in ks else None
    out["MAP@R"] = ap_sum / n_valid
    out["RP"] = rp_sum / n_valid
    return out


def check_all_against_reference(x, y, ks, chunk_size, normalize, gallery=None, gallery_labels=None):
    kw = dict(
        gallery=gallery, gallery_labels=gallery_labels, chunk_size=chunk_size, normalize=normalize
    )
    ref = brute_force(x, y, ks, gallery, gallery_labels, normalize)
    if ref is None:
        for fn in (precision_at_1, map_at_r, r_precision):
            with pytest.raises(ValueError, match="no query has a positive"):
                fn(x, y, **kw)
        with pytest.raises(ValueError, match="no query has a positive"):
            retrieval_metrics(x, y, ks, **kw)
        return
    got = retrieval_metrics(x, y, ks, **kw)
    assert list(got) == [f"R@{k}" for k in dict.fromkeys(ks)] + ["P@1", "MAP@R", "RP"]
    for key in got:
        if ref.get(key) is not None:
            assert got[key] == pytest.approx(ref[key], abs=1e-12), key
    rec = recall_at_k(x, y, ks, **kw)
    assert rec == pytest.approx({k: ref[f"R@{k}"] for k in ks}, abs=1e-12)
    assert precision_at_1(x, y, **kw) == pytest.approx(got["P@1"], abs=1e-12)
    assert map_at_r(x, y, **kw) == pytest.approx(ref["MAP@R"], abs=1e-12)
    assert r_precision(x, y, **kw) == pytest.approx(ref["RP"], abs=1e-12)
    if 1 in ks:
        assert got["P@1"] == pytest.approx(ref["R@1"], abs=1e-12)


# --------------------------------------------------------------------------------------------
# Property tests. Scores must be computed exactly for tie handling to be well defined, so the
# embeddings are small integers with normalize=False (exact dot products in float32 and float64),
# or signed, power-of-two-scaled axis vectors with normalize=True (exact after normalisation).
# Both give many exact ties, duplicate rows and zero rows; labels give singleton classes.
# --------------------------------------------------------------------------------------------


chunk_st = st.one_of(st.integers(1, 7), st.just(1024))


# Block size of the blocked top-m search; None keeps the default (plain topk on these small inputs).
block_st = st.sampled_from([None, 1, 2, 3])


@contextlib.contextmanager
def blocked_search(block):
    """Context in which the blocked top-m search runs even on tiny rows."""
    with pytest.MonkeyPatch.context() as mp:
        if block is not None:
            mp.setattr(ranking, "_BLOCK", block)
            mp.setattr(ranking, "_BLOCKED_MIN_RATIO", 1)
        yield


@st.composite
def integer_embeddings(draw, n, d):
    values = draw(st.lists(st.integers(-2, 2), min_size=n * d, max_size=n * d))
    return np.array(values, dtype=np.float64).reshape(n, d)


@st.composite
def axis_embeddings(draw, n, d):
    x = np.zeros((n, d))
    for i in range(n):
        axis = draw(st.integers(-1, d - 1))  # -1: a zero row
        if axis >= 0:
            x[i, axis] = draw(st.sampled_from([-4.0, -1.0, 0.5, 1.0, 2.0]))
    return x


@st.composite
def one_set_case(draw, kind):
    n = draw(st.integers(2, 20))
    d = draw(st.integers(1, 3))
    x = draw(integer_embeddings(n, d) if kind == "int" else axis_embeddings(n, d))
    n_classes = draw(st.integers(1, n))
    y = draw(st.lists(st.integers(0, n_classes - 1), min_size=n, max_size=n))
    ks = draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=4))
    return x, np.array(y), ks


@st.composite
def gallery_case(draw, kind):
    n = draw(st.integers(1, 12))
    m = draw(st.integers(1, 16))
    d = draw(st.integers(1, 3))
    emb = integer_embeddings if kind == "int" else axis_embeddings
    x, g = draw(emb(n, d)), draw(emb(m, d))
    y = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    gy = draw(st.lists(st.integers(0, 4), min_size=m, max_size=m))  # label 5: not in gallery
    ks = draw(st.lists(st.integers(1, m), min_size=1, max_size=4))
    return x, np.array(y), g, np.array(gy), ks


@settings(max_examples=80, deadline=None)
@given(one_set_case("int"), chunk_st, st.sampled_from([torch.float32, torch.float64]), block_st)
def test_one_set_matches_brute_force_with_ties(case, chunk_size, dtype, block):
    x, y, ks = case
    x_t = torch.tensor(x, dtype=dtype)
    with blocked_search(block):
        check_all_against_reference(x_t, y, ks, chunk_size, normalize=False)


@settings(max_examples=60, deadline=None)
@given(one_set_case("axis"), chunk_st)
def test_one_set_normalized_matches_brute_force_with_ties(case, chunk_size):
    x, y, ks = case
    check_all_against_reference(torch.tensor(x), y, ks, chunk_size, normalize=True)


@settings(max_examples=80, deadline=None)
@given(gallery_case("int"), chunk_st, block_st)
def test_query_gallery_matches_brute_force_with_ties(case, chunk_size, block):
    x, y, g, gy, ks = case
    with blocked_search(block):
        check_all_against_reference(
            torch.tensor(x), y, ks, chunk_size, False, gallery=torch.tensor(g), gallery_labels=gy
        )


@settings(max_examples=100, deadline=None)
@given(st.data(), st.integers(1, 5), st.integers(1, 70), st.integers(1, 6))
def test_blocked_top_values_equal_topk(data, rows, width, block):
    # The blocked search must return exactly torch.topk's values, ties and -inf included.
    values = data.draw(st.lists(st.integers(-3, 3), min_size=rows * width, max_size=rows * width))
    scores = torch.tensor(values, dtype=torch.float32).reshape(rows, width)
    scores[scores == -3] = float("-inf")  # as the removed positives are
    m = data.draw(st.integers(1, width))
    with blocked_search(block):
        got = ranking._top_values(scores, m)
    assert torch.equal(got, torch.topk(scores, m, dim=1).values)


@settings(max_examples=50, deadline=None)
@given(gallery_case("axis"), chunk_st)
def test_query_gallery_normalized_matches_brute_force_with_ties(case, chunk_size):
    x, y, g, gy, ks = case
    check_all_against_reference(
        torch.tensor(x), y, ks, chunk_size, True, gallery=torch.tensor(g), gallery_labels=gy
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 40))
def test_random_float_embeddings_match_brute_force(seed, chunk_size):
    # Tie-free float32 data with the default normalize=True, a larger N and several chunks.
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(60, 5, generator=gen)
    y = torch.randint(0, 12, (60,), generator=gen)
    check_all_against_reference(x, y.numpy(), [1, 2, 4, 8, 59], chunk_size, normalize=True)


# --------------------------------------------------------------------------------------------
# Ties and self-exclusion, by hand
# --------------------------------------------------------------------------------------------


def test_duplicates_are_positives_self_excluded_by_index():
    # Rows 0 and 1 are identical with one label: each is the other's positive at the same score
    # as the query itself. Excluding by value or by rank position would lose it.
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    y = [7, 7, 8, 9]  # classes 8 and 9 are singletons: those queries are left out
    got = retrieval_metrics(x, y, ks=(1,))
    assert got == {"R@1": 1.0, "P@1": 1.0, "MAP@R": 1.0, "RP": 1.0}


def test_tie_between_positive_and_negative_favours_positive():
    x = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [0.0, 1.0]])
    y = [0, 1, 0, 1]
    # q0: positive 2 and negative 1 tie at cosine 1 -> hit. q2 likewise. q1: positive 3 at 0,
    # negatives 0 and 2 at 1 -> pos_1 = 3. q3: positive 1 at 0 ties negatives 0 and 2 -> hit.
    assert recall_at_k(x, y, ks=(1, 2, 3)) == {1: 0.75, 2: 0.75, 3: 1.0}
    assert map_at_r(x, y) == pytest.approx(0.75)


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


X = torch.randn(6, 3, generator=torch.Generator().manual_seed(2))


Y = [0, 0, 1, 1, 2, 2]


def test_rejects_length_mismatch():
    with pytest.raises(ValueError, match="one label per embedding"):
        recall_at_k(X, Y[:5])
    with pytest.raises(ValueError, match="one label per embedding"):
        map_at_r(X, Y, gallery=X, gallery_labels=Y[:4])


def test_rejects_k_larger_than_candidates():
    with pytest.raises(ValueError, match=r"K=6 but each query has only 5 candidates.*ks <= 5"):
        recall_at_k(X, Y, ks=(1, 6))
    with pytest.raises(ValueError, match=r"K=8 but each query has only 4 candidates.*ks <= 4"):
        retrieval_metrics(X, Y, gallery=X[:4], gallery_labels=Y[:4])


@pytest.mark.parametrize(
    ("ks", "phrase"),
    [((), "ks is empty"), ((0, 1), "K >= 1"), ((-2,), "K >= 1"), ((1.5,), "positive integers")],
)
def test_rejects_bad_ks(ks, phrase):
    with pytest.raises(ValueError, match=phrase):
        recall_at_k(X, Y, ks=ks)
    with pytest.raises(ValueError, match=phrase):
        retrieval_metrics(X, Y, ks=ks)


def test_rejects_bool_ks_and_bad_chunk_size():
    with pytest.raises(ValueError, match="positive integers"):
        recall_at_k(X, Y, ks=(True,))
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        recall_at_k(X, Y, chunk_size=0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_rejects_non_finite_embeddings(bad):
    x = X.clone()
    x[3, 1] = bad
    with pytest.raises(ValueError, match="NaN or infinite values in rows 3"):
        recall_at_k(x, Y)
    with pytest.raises(ValueError, match="gallery contain NaN or infinite"):
        map_at_r(X, Y, gallery=x, gallery_labels=Y)


def test_rejects_gallery_without_labels():
    with pytest.raises(ValueError, match="gallery was given without gallery_labels"):
        recall_at_k(X, Y, gallery=X)
    with pytest.raises(ValueError, match="gallery_labels was given without gallery"):
        recall_at_k(X, Y, gallery_labels=Y)


def test_rejects_dimension_mismatch():
    with pytest.raises(ValueError, match="dimension 3 but gallery has dimension 2"):
        r_precision(X, Y, gallery=X[:, :2], gallery_labels=Y)


def test_huge_values_normalized_safely_or_rejected():
    # Squares of 1e30 overflow float32; normalisation must not turn such rows into zeros.
    assert retrieval_metrics(X * 1e30, Y, ks=(1, 2)) == retrieval_metrics(X, Y, ks=(1, 2))
    with pytest.raises(ValueError, match="can overflow.*normalize=True"):
        recall_at_k(X * 1e30, Y, ks=(1, 2), normalize=False)


def test_rejects_no_positive_at_all():
    with pytest.raises(ValueError, match="no query has a positive: every class has a single"):
        recall_at_k(X, [0, 1, 2, 3, 4, 5], ks=(1,))
    with pytest.raises(ValueError, match="no query label occurs among gallery_labels"):
        map_at_r(X, Y, gallery=X, gallery_labels=[9] * 6)
    with pytest.raises(ValueError, match="at least two embeddings"):
        map_at_r(X[:1], [0])


# --------------------------------------------------------------------------------------------
# Memory: the N x N matrix is never built
# --------------------------------------------------------------------------------------------


class LargestTensor(TorchDispatchMode):
    """Record the largest number of elements of any tensor an aten op returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.slow
def test_large_input_is_processed_in_chunks():
    n, d, chunk = 20_000, 64, 512
    gen = torch.Generator().manual_seed(3)
    centers = torch.randn(4_000, d, generator=gen)
    y = torch.arange(n) % 4_000  # 5 items per class, SOP-like
    x = centers[y] + 0.3 * torch.randn(n, d, generator=gen)
    with LargestTensor() as probe:
        got = retrieval_metrics(x, y, chunk_size=chunk)
    # Every tensor created (scores included) is at most chunk x N: 1/39 of the N x N matrix.
    assert probe.largest <= chunk * n
    assert got["R@1"] > 0.95 and got["MAP@R"] > 0.9


def test_one_set_recall_uses_symmetric_tiles_and_agrees_with_full_rows():
    """Recall@K of one set (tiles of S above the diagonal, counted both ways) equals the R@K of
    the full-row pass; its largest tensor is the embeddings or one chunk x chunk tile. (The two
    passes round dot products in different kernels, so a near-tie within one rounding error may
    flip one query on another BLAS: at most one query's difference is allowed.)"""
    n, d, chunk = 6_000, 32, 256
    gen = torch.Generator().manual_seed(5)
    centers = torch.randn(1_000, d, generator=gen)
    y = torch.randint(0, 1_000, (n,), generator=gen)  # classes of 0 to 15 items, unsorted
    x = centers[y] + 0.8 * torch.randn(n, d, generator=gen)
    ks = (1, 2, 4, 8, 16)
    with LargestTensor() as probe:
        rec = recall_at_k(x, y, ks, chunk_size=chunk)
    assert probe.largest <= max(n * d, chunk * chunk)
    full = retrieval_metrics(x, y, ks, chunk_size=chunk)  # MAP@R too: the full-row pass
    assert rec == pytest.approx({k: full[f"R@{k}"] for k in ks}, abs=1.01 / n)
    assert 0.2 < rec[1] < rec[16] < 1.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(500, 16, generator=gen)
    y = torch.randint(0, 50, (500,), generator=gen)
    cpu = retrieval_metrics(x, y, chunk_size=128)
    assert retrieval_metrics(x.cuda(), y.cuda(), chunk_size=128) == pytest.approx(cpu, abs=1e-6)
    assert retrieval_metrics(x, y, chunk_size=128, device="cuda") == pytest.approx(cpu, abs=1e-6)

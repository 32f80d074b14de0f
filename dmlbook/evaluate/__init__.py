"""Retrieval metrics: Recall@K, Precision@1, MAP@R and R-precision, computed in chunks.

Every query is ranked against a gallery by cosine similarity and the ranking is scored against the
class labels. Two settings are supported:

* **One set** (``gallery=None``; CUB-200, Cars-196, SOP): every item is a query against all the
  *other* items. The query itself is excluded *by index*, so an exact duplicate of the query with
  the same label still counts as a positive.
* **Query / gallery** (``gallery=...``; In-Shop): the queries are ranked against a separate
  gallery, nothing is excluded, and the positives of a query are the gallery items with its label.

Ties
----
Scores can tie (duplicate images, quantised embeddings). The ranking is defined by sorting the
candidates by (score descending, relevant first), which makes the sequence of relevant / irrelevant
items unique. With the positives' scores of a query sorted, ``p_1 >= p_2 >= ... >= p_R``, positive
``k`` then sits at rank

.. math:: \\mathrm{pos}_k = k + \\#\\{\\text{negatives with score} > p_k\\},

and the metrics are (Musgrave et al. 2020, "A Metric Learning Reality Check", Sec. 3.2):

* Recall@K: 1 if ``pos_1 <= K`` (some positive among the first K), else 0;
* Precision@1 = Recall@1;
* R-precision: ``#{k : pos_k <= R} / R``;
* MAP@R: ``(1/R) * sum_{k : pos_k <= R} k / pos_k``,

with ``R`` the number of positives of the query, each averaged over the queries.

Queries without any positive (the only member of their class, or a label absent from the gallery)
have no defined value and are left out of every average. If no query has a positive, a
``ValueError`` is raised.

Cost
----
The full N x M similarity matrix is never built. Queries are processed ``chunk_size`` rows at a
time: one matrix product ``S = Q_chunk G^T``, a gather of each query's positive scores, and one
top-m search over the negatives (a max over blocks of columns, then ``topk`` within the best
blocks; see ``_top_values``); no full sort and no N x M mask. Only counts below ``max(ks)``
(Recall@K) or below ``R`` (MAP@R, R-precision) matter, so the top ``m = max(max(ks), R_max)``
negatives of each query suffice: a count that reaches ``m`` is already too large to matter.
Recall@K and Precision@1 of one set (no gallery) need only the number of negatives above each
query's best positive, and ``S`` is then symmetric: each ``chunk_size x chunk_size`` tile above
the diagonal is computed once and counted along its rows and its columns, which halves the
products (``bench/bench_floor.py`` times it against the full product plus top-k). The memory is
``O(chunk_size * (M + R_max))`` (one chunk of scores, 245 MB for 1024 x 60,000
in float32), and the time is dominated by the matrix product. Scores are computed in float32
(float64 if an input is float64).

A zero embedding row has cosine similarity 0 with everything (it is not an error).

API
---
:func:`retrieval_metrics` computes any of the metrics (``metrics=`` names them, :data:`METRICS`)
in one pass; :func:`recall_at_k`, :func:`precision_at_1`, :func:`map_at_r` and
:func:`r_precision` are that call for one metric. :func:`chance_recall_at_k` is the Recall@K of a
random ranking, the floor every trained number should be read against. The pass itself is
:func:`dmlbook.evaluate.ranking.ranked_metrics`. Chapters 1, 5-7 and 9 use these; tests in
``tests/test_evaluate.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from .ranking import check_ks, ranked_metrics

__all__ = [
    "METRICS",
    "chance_recall_at_k",
    "recall_at_k",
    "precision_at_1",
    "map_at_r",
    "r_precision",
    "retrieval_metrics",
]

ArrayLike = torch.Tensor | np.ndarray
LabelsLike = torch.Tensor | np.ndarray | list

#: The metrics :func:`retrieval_metrics` computes: ``"recall"`` (``R@K`` for every K of ``ks``),
#: ``"P@1"``, ``"MAP@R"`` and ``"RP"`` (R-precision).
METRICS: tuple[str, ...] = ("recall", "P@1", "MAP@R", "RP")


def retrieval_metrics(
    embeddings: ArrayLike,
    labels: LabelsLike,
    ks: Iterable[int] | int = (1, 2, 4, 8),
    *,
    metrics: Iterable[str] = METRICS,
    gallery: ArrayLike | None = None,
    gallery_labels: LabelsLike | None = None,
    chunk_size: int = 1024,
    normalize: bool = True,
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """Retrieval metrics of ranking every query against the gallery, in one pass over the chunks.

    Recall@K is 1 for a query whose best positive ranks within the first K (Song et al. 2016;
    Musgrave et al. 2020, Sec. 3.2), Precision@1 equals Recall@1, MAP@R is
    ``(1/R) * sum_{k : pos_k <= R} k / pos_k`` (Musgrave et al. 2020, Eq. 1) and R-precision
    ``#{k : pos_k <= R} / R``; each is averaged over the queries that have a positive.

    Parameters
    ----------
    embeddings : Tensor or ndarray of shape (N, d)
        Query embeddings (and, when ``gallery`` is None, also the gallery).
    labels : Tensor, ndarray or list of shape (N,)
        Integer class id of every query.
    ks : iterable of int, or int
        The values of K for ``"recall"``; each must be a positive integer no larger than the
        number of candidates of a query (``N - 1`` for one set, ``M`` with a gallery).
    metrics : iterable of str
        Which of :data:`METRICS` to compute (default all). MAP@R and R-precision rank all R
        positives of a query, Recall@K and Precision@1 only the best one.
    gallery : Tensor or ndarray of shape (M, d), optional
        Separate gallery (In-Shop style). When omitted, every item is ranked against all others
        and the query itself is excluded by index.
    gallery_labels : Tensor, ndarray or list of shape (M,), optional
        Class ids of the gallery; required with ``gallery``.
    chunk_size : int
        Number of query rows processed at once; memory is ``chunk_size * M`` scores.
    normalize : bool
        L2-normalise the rows first, so that the score is the cosine similarity (and the ranking
        equals the Euclidean ranking of the normalised vectors). With ``False`` the raw dot
        product ranks the candidates.
    device : torch.device or str, optional
        Where to compute; defaults to the device of ``embeddings``.

    Returns
    -------
    dict of str to float
        ``"R@K"`` for every K in ``ks`` (with ``"recall"``), then ``"P@1"``, ``"MAP@R"`` and
        ``"RP"`` as requested, each a fraction in [0, 1].

    Raises
    ------
    ValueError
        On mismatched lengths or dimensions, non-finite embeddings, bad ``ks``, ``metrics`` or
        ``chunk_size``, a gallery without labels, or when no query has any positive.
    """
    wanted = _check_metrics(metrics)
    ks_t = check_ks(ks) if "recall" in wanted else ()
    ks_all = ks_t if "P@1" not in wanted or 1 in ks_t else (*ks_t, 1)
    out = ranked_metrics(
        embeddings,
        labels,
        ks_all,
        gallery,
        gallery_labels,
        chunk_size,
        normalize,
        device,
        positive_ranks="MAP@R" in wanted or "RP" in wanted,
    )
    result = {f"R@{k}": out[f"R@{k}"] for k in ks_t}
    if "P@1" in wanted:
        result["P@1"] = out["R@1"]
    for name in ("MAP@R", "RP"):
        if name in wanted:
            result[name] = out[name]
    return result


def _check_metrics(metrics: Iterable[str]) -> set[str]:
    if isinstance(metrics, str):
        metrics = (metrics,)
    wanted = set(metrics)
    unknown = sorted(wanted - set(METRICS))
    if unknown or not wanted:
        raise ValueError(
            f"metrics must name some of {', '.join(METRICS)}; got {sorted(wanted)!r}"
            + (f" ({', '.join(map(repr, unknown))} unknown)." if unknown else ".")
        )
    return wanted


def recall_at_k(
    embeddings: ArrayLike,
    labels: LabelsLike,
    ks: Iterable[int] | int = (1, 2, 4, 8),
    *,
    gallery: ArrayLike | None = None,
    gallery_labels: LabelsLike | None = None,
    chunk_size: int = 1024,
    normalize: bool = True,
    device: torch.device | str | None = None,
) -> dict[int, float]:
    """Recall@K: the fraction of queries with at least one positive among their K nearest.

    A query is a hit at K when ``pos_1 = 1 + #{negatives scoring strictly above its best
    positive} <= K`` (Musgrave et al. 2020, Sec. 3.2; the usual "Recall@K" of Song et al. 2016).
    Ties are broken in favour of the positive (see the module docstring). Parameters as in
    :func:`retrieval_metrics`.

    Returns
    -------
    dict of int to float
        ``{K: recall}`` with values in [0, 1], averaged over the queries that have a positive.
    """
    out = retrieval_metrics(
        embeddings,
        labels,
        ks,
        metrics=("recall",),
        gallery=gallery,
        gallery_labels=gallery_labels,
        chunk_size=chunk_size,
        normalize=normalize,
        device=device,
    )
    return {int(key[2:]): value for key, value in out.items()}


def _one(metric: str, embeddings: ArrayLike, labels: LabelsLike, **options: object) -> float:
    return retrieval_metrics(embeddings, labels, metrics=(metric,), **options)[metric]


def precision_at_1(
    embeddings: ArrayLike,
    labels: LabelsLike,
    *,
    gallery: ArrayLike | None = None,
    gallery_labels: LabelsLike | None = None,
    chunk_size: int = 1024,
    normalize: bool = True,
    device: torch.device | str | None = None,
) -> float:
    """Precision@1: the fraction of queries whose nearest candidate is a positive.

    Equal to Recall@1 (Musgrave et al. 2020, Sec. 3.2); a tie between the best positive and a
    negative counts as a hit. Parameters as in :func:`retrieval_metrics`.
    """
    return _one("P@1", embeddings, labels, gallery=gallery, gallery_labels=gallery_labels,
                chunk_size=chunk_size, normalize=normalize, device=device)  # fmt: skip


def map_at_r(
    embeddings: ArrayLike,
    labels: LabelsLike,
    *,
    gallery: ArrayLike | None = None,
    gallery_labels: LabelsLike | None = None,
    chunk_size: int = 1024,
    normalize: bool = True,
    device: torch.device | str | None = None,
) -> float:
    """MAP@R: mean average precision over the first R results (Musgrave et al. 2020, Eq. 1).

    For a query with R positives, ``MAP@R = (1/R) * sum_{i=1}^{R} P(i) * rel(i)``, where
    ``P(i)`` is the precision among the first ``i`` results and ``rel(i)`` is 1 if result ``i``
    is a positive. Equivalently ``(1/R) * sum_{k : pos_k <= R} k / pos_k``. Parameters as in
    :func:`retrieval_metrics`.
    """
    return _one("MAP@R", embeddings, labels, gallery=gallery, gallery_labels=gallery_labels,
                chunk_size=chunk_size, normalize=normalize, device=device)  # fmt: skip


def r_precision(
    embeddings: ArrayLike,
    labels: LabelsLike,
    *,
    gallery: ArrayLike | None = None,
    gallery_labels: LabelsLike | None = None,
    chunk_size: int = 1024,
    normalize: bool = True,
    device: torch.device | str | None = None,
) -> float:
    """R-precision: the fraction of positives among the first R results (Musgrave et al. 2020).

    ``RP = #{positives among the R nearest} / R`` with R the number of positives of the query.
    Parameters as in :func:`retrieval_metrics`.
    """
    return _one("RP", embeddings, labels, gallery=gallery, gallery_labels=gallery_labels,
                chunk_size=chunk_size, normalize=normalize, device=device)  # fmt: skip


def chance_recall_at_k(
    labels: LabelsLike,
    ks: Iterable[int] | int = (1, 2, 4, 8),
    *,
    gallery_labels: LabelsLike | None = None,
) -> dict[int, float]:
    """Expected Recall@K of a ranking drawn uniformly at random: what "no learning" scores.

    A query with ``p`` positives among ``n`` candidates misses at K when all K candidates it is
    shown are negatives, which for a random ranking happens with the hypergeometric probability
    ``C(n - p, K) / C(n, K)``; Recall@K is one minus it, averaged over the queries with a
    positive (as :func:`recall_at_k` averages). One set (``gallery_labels=None``): ``n = N - 1``
    and ``p`` = the query's class size minus one; with a gallery, ``n = M`` and ``p`` = the
    gallery items of the query's class.

    Returns
    -------
    dict of int to float
        ``{K: expected recall}`` in [0, 1].
    """
    ks_t = check_ks(ks)
    query = np.asarray(torch.as_tensor(labels).cpu()).ravel()
    pool = (
        query
        if gallery_labels is None
        else np.asarray(torch.as_tensor(gallery_labels).cpu()).ravel()
    )
    classes, counts = np.unique(pool, return_counts=True)
    size = dict(zip(classes.tolist(), counts.tolist(), strict=True))
    n = pool.size - (1 if gallery_labels is None else 0)
    p = np.array([size.get(c, 0) for c in query.tolist()]) - (1 if gallery_labels is None else 0)
    p = p[p > 0]
    if p.size == 0 or max(ks_t) > n:
        raise ValueError(
            "no query has a positive"
            if p.size == 0
            else f"K = {max(ks_t)} exceeds the {n} candidates"
        )
    from scipy.special import gammaln

    def log_choose(a: np.ndarray, b: int) -> np.ndarray:
        return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)

    out = {}
    for k in ks_t:
        miss = np.where(n - p >= k, np.exp(log_choose(n - p, k) - log_choose(np.array(n), k)), 0.0)
        out[k] = float((1.0 - miss).mean())
    return out

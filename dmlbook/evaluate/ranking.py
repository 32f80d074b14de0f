"""The chunked ranking pass behind every retrieval metric of :mod:`dmlbook.evaluate`.

One pass over the queries, ``chunk_size`` rows at a time, computes the ranks that Recall@K needs
(negatives above the best positive) and, when asked, the ranks of all R positives that MAP@R and
R-precision need; the cost and the tie rule are explained in :mod:`dmlbook.evaluate`. Recall@K
(and Precision@1) of one set take a cheaper route: ``S = X X^T`` is symmetric, so
:func:`_negatives_above_symmetric` computes each tile above the diagonal once and counts, in both
directions, the negatives above each item's best positive: half the products, the same numbers
(ties counted as hits), the same code on a CPU and a GPU. Tested in
``tests/evaluate/test_ranking.py`` against a brute-force reference.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from ..core.similarity import l2_normalize
from ..core.validation import as_embeddings, as_labels, check_same_length

__all__ = ["ranked_metrics", "check_ks"]

ArrayLike = torch.Tensor | np.ndarray
LabelsLike = torch.Tensor | np.ndarray | list

# The top-m scores of a row are found by a max over blocks of _BLOCK columns, a topk of the m best
# blocks, and a topk within them; used when the gallery has at least _BLOCKED_MIN_RATIO * m * _BLOCK
# columns (otherwise a plain topk of the row). Module constants so that tests can shrink them.
_BLOCK = 128
_BLOCKED_MIN_RATIO = 4

# Show a progress bar only for long runs: at least this many scores (about 10 s on two CPU cores).
_PROGRESS_MIN_SCORES = 2**30


@dataclass
class _Prepared:
    queries: torch.Tensor  # (N, d)
    gallery: torch.Tensor  # (M, d)
    query_class: torch.Tensor  # (N,) class index into `counts`
    order: torch.Tensor  # (M,) gallery indices sorted by class
    counts: torch.Tensor  # (C,) gallery items per class
    starts: torch.Tensor  # (C,) offset of each class in `order`
    one_set: bool


def check_ks(ks: Iterable[int] | int) -> tuple[int, ...]:
    """Return ``ks`` as a tuple of distinct positive ints, in the given order."""
    if isinstance(ks, bool):
        raise ValueError(f"ks must be positive integers, got {ks!r}.")
    if isinstance(ks, int | np.integer):
        ks = (int(ks),)
    try:
        items = list(ks)
    except TypeError:
        raise ValueError(
            f"ks must be a positive integer or an iterable of them, got {type(ks).__name__}."
        ) from None
    if not items:
        raise ValueError("ks is empty; pass at least one K, e.g. ks=(1, 2, 4, 8).")
    out: list[int] = []
    for k in items:
        if isinstance(k, bool):
            raise ValueError(f"ks must be positive integers, got {k!r} in ks={items!r}.")
        try:
            k_int = operator.index(k)
        except TypeError:
            raise ValueError(
                f"ks must be positive integers, got {k!r} ({type(k).__name__}) in ks={items!r}."
            ) from None
        if k_int < 1:
            raise ValueError(
                f"ks must be positive integers (K >= 1), got K={k_int} in ks={items!r}."
            )
        if k_int not in out:
            out.append(k_int)
    return tuple(out)


def _prepare(
    embeddings: ArrayLike,
    labels: LabelsLike,
    gallery: ArrayLike | None,
    gallery_labels: LabelsLike | None,
    chunk_size: int,
    normalize: bool,
    device: torch.device | str | None,
) -> _Prepared:
    """Validate the inputs and build the class index of the gallery."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}.")
    x = as_embeddings(embeddings, "embeddings")
    y = as_labels(labels, "labels")
    check_same_length(x, y, "embeddings", "labels")
    if gallery is None and gallery_labels is not None:
        raise ValueError(
            "gallery_labels was given without gallery; pass the gallery embeddings too, or drop "
            "gallery_labels to rank every item against all others."
        )
    if gallery is not None:
        if gallery_labels is None:
            raise ValueError(
                "gallery was given without gallery_labels; pass gallery_labels (one class id per "
                "gallery row) so that the positives of each query are known."
            )
        g = as_embeddings(gallery, "gallery")
        gy = as_labels(gallery_labels, "gallery_labels")
        check_same_length(g, gy, "gallery", "gallery_labels")
        if g.shape[1] != x.shape[1]:
            raise ValueError(
                f"embeddings have dimension {x.shape[1]} but gallery has dimension {g.shape[1]}; "
                "queries and gallery must come from the same embedding model."
            )
    else:
        g, gy = x, y

    dev = torch.device(device) if device is not None else x.device
    dtype = torch.promote_types(torch.promote_types(x.dtype, g.dtype), torch.float32)
    one_set = gallery is None
    x = x.detach().to(device=dev, dtype=dtype)
    g = x if one_set else g.detach().to(device=dev, dtype=dtype)
    if normalize:
        x = _normalize_rows(x)
        g = x if one_set else _normalize_rows(g)
    else:
        _check_no_overflow(x, g)

    # Map labels to class indices 0..C-1 shared by queries and gallery, then list the gallery
    # items of each class contiguously: class c owns order[starts[c] : starts[c] + counts[c]].
    # This bookkeeping on N integers is done in numpy, whose sorts are far faster than torch's on
    # the CPU; the results are moved to the compute device.
    y_np = y.cpu().numpy()
    both = y_np if one_set else np.concatenate([y_np, gy.cpu().numpy()])
    _, inverse = np.unique(both, return_inverse=True)
    inverse = inverse.reshape(-1)
    query_class, gallery_class = inverse[: len(y_np)], inverse[len(y_np) :]
    if one_set:
        gallery_class = query_class
    order = np.argsort(gallery_class, kind="stable")
    counts = np.bincount(gallery_class, minlength=int(inverse.max()) + 1)
    starts = np.cumsum(counts) - counts

    def to_dev(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(dev)

    return _Prepared(
        x,
        g.contiguous(),
        to_dev(query_class),
        to_dev(order),
        to_dev(counts),
        to_dev(starts),
        one_set,
    )


def _normalize_rows(x: torch.Tensor) -> torch.Tensor:
    """L2-normalise rows, dividing by the largest entry first so that no square overflows."""
    scale = x.abs().amax(dim=1, keepdim=True)
    return l2_normalize(x / torch.where(scale > 0, scale, torch.ones_like(scale)))


def _check_no_overflow(x: torch.Tensor, g: torch.Tensor) -> None:
    """Raise unless every dot product is finite (``|<x, g>| <= |x| |g|``, Cauchy-Schwarz)."""
    bound = float(x.norm(dim=1).max()) * float(g.norm(dim=1).max())
    if not bound < torch.finfo(x.dtype).max:
        raise ValueError(
            f"with normalize=False the dot products of these embeddings can overflow "
            f"{x.dtype} (row norms up to {float(x.norm(dim=1).max()):.3g}); pass "
            "normalize=True, or rescale the embeddings."
        )


def _top_values(scores: torch.Tensor, m: int) -> torch.Tensor:
    """The ``m`` largest values of every row of ``scores``, sorted descending.

    Equal to ``torch.topk(scores, m, dim=1).values``, but faster on long rows: one max over
    blocks of ``_BLOCK`` columns (a single vectorised pass), then a topk restricted to the ``m``
    blocks with the largest maxima (plus the columns left over after the last full block).
    Exact, ties included: if a block outside the chosen ones holds a value ``v``, each of the
    ``m`` chosen blocks holds a value ``>= v``, so for any threshold the chosen blocks contain
    at least ``min(m, #values above it)`` values above it, and their top ``m`` is the row's.
    """
    rows, width = scores.shape
    block = _BLOCK
    n_blocks = width // block
    if n_blocks <= m or width < _BLOCKED_MIN_RATIO * m * block:
        return torch.topk(scores, m, dim=1, largest=True, sorted=True).values
    blocks = scores.as_strided((rows, n_blocks, block), (scores.stride(0), block, 1))
    best = blocks.amax(dim=2).topk(m, dim=1, sorted=False).indices  # (rows, m)
    candidates = blocks.gather(1, best[:, :, None].expand(-1, -1, block)).reshape(rows, m * block)
    if n_blocks * block < width:
        candidates = torch.cat([candidates, scores[:, n_blocks * block :]], dim=1)
    return torch.topk(candidates, m, dim=1, largest=True, sorted=True).values


def _class_members(p: _Prepared, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gallery indices of the class of each query ``lo..hi-1`` and which of them are positives.

    ``same_class`` is ``(rows, width)``, padded by repeating the class's last member; ``member``
    marks the real entries, less the query itself in the one-set setting (excluded by index,
    never by value).
    """
    dev = p.queries.device
    cls = p.query_class[lo:hi]
    count = p.counts[cls]
    width = max(int(count.max()), 1)
    slot = torch.arange(width, device=dev)
    member = slot[None, :] < count[:, None]
    last = (count - 1).clamp_min(0)
    flat = p.starts[cls][:, None] + torch.minimum(slot[None, :], last[:, None])
    same_class = p.order[flat.clamp_max(p.gallery.shape[0] - 1)]  # (rows, width)
    if p.one_set:
        query_index = torch.arange(lo, hi, device=dev)
        member &= same_class != query_index[:, None]
    return same_class, member


def _ap_and_rp(
    pos_scores: torch.Tensor, neg_top: torch.Tensor, n_pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Average precision over the first R results and R-precision of each query of a chunk.

    With ``pos_k = k + #{negatives above p_k}`` the rank of the k-th positive,
    ``AP = (1/R) sum_{k : pos_k <= R} k / pos_k`` and ``RP = #{k : pos_k <= R} / R``
    (Musgrave et al. 2020, Eq. 1). ``neg_top`` holds the top negatives, descending, at least R.
    """
    dev = pos_scores.device
    pos_sorted = torch.sort(pos_scores, dim=1, descending=True).values
    # Negatives strictly above p_k: with -neg_top ascending, this is the number of entries
    # < -p_k. Exact up to n_top >= R, beyond which pos_k > R anyway.
    above_k = torch.searchsorted(
        neg_top.neg().contiguous(), pos_sorted.neg().contiguous(), side="left"
    )
    k = torch.arange(1, pos_scores.shape[1] + 1, device=dev)
    rank = k[None, :] + above_k  # pos_k, the rank of the k-th positive
    # Positive k is among the first R iff pos_k <= R (which implies k <= R, and also rules out
    # the -inf padding, whose rank exceeds R).
    in_first_r = rank <= n_pos[:, None]
    r_safe = n_pos.clamp_min(1).to(torch.float64)
    rp = in_first_r.sum(1, dtype=torch.float64) / r_safe
    precision_at_pos = k[None, :].to(torch.float64) / rank  # k / pos_k
    ap = torch.where(in_first_r, precision_at_pos, 0.0).sum(1) / r_safe
    return ap, rp


def _check_candidates(ks: tuple[int, ...], m_gallery: int, one_set: bool) -> None:
    """Every query needs a candidate to rank, and at least ``max(ks)`` of them."""
    n_candidates = m_gallery - 1 if one_set else m_gallery
    if n_candidates < 1:
        raise ValueError(
            "a single item has no other item to be ranked against; pass at least two embeddings."
        )
    if ks and max(ks) > n_candidates:
        where = "N - 1 others" if one_set else "the gallery size"
        raise ValueError(
            f"K={max(ks)} but each query has only {n_candidates} candidates ({where}); "
            f"use ks <= {n_candidates}."
        )


def _no_positive_error(one_set: bool) -> ValueError:
    """The error for labels under which no query has a positive to retrieve."""
    where = (
        "every class has a single member, so no item has another of its class to retrieve"
        if one_set
        else "no query label occurs among gallery_labels"
    )
    return ValueError(
        f"no query has a positive: {where}. Retrieval metrics are undefined; check that the "
        "labels are right (and, with a gallery, that gallery_labels use the same class ids)."
    )


def _symmetric_tiles(x: torch.Tensor, cls: list[int], block: int, band: bool):
    """The tiles ``(lo, hi, c_lo, c_hi, S[lo:hi, c_lo:c_hi])`` of ``S = X X^T`` on or above the
    diagonal, each computed once into one reused buffer (rows of ``x`` in class order, ``cls``
    their class ids). ``band=True`` yields only the tiles in which some class has both rows and
    columns (the same-class pairs all lie there), in the same arithmetic as the full sweep."""
    n = x.shape[0]
    tile = torch.empty(min(block, n), min(block, n), dtype=x.dtype, device=x.device)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        for c_lo in range(lo, n, block):
            c_hi = min(c_lo + block, n)
            if band and cls[hi - 1] < cls[c_lo]:
                break
            yield (
                lo,
                hi,
                c_lo,
                c_hi,
                torch.mm(x[lo:hi], x[c_lo:c_hi].T, out=tile[: hi - lo, : c_hi - c_lo]),
            )


def _negatives_above_symmetric(p: _Prepared, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per item of one set: the score of its best positive, and the number of negatives scoring
    strictly above it.

    ``S = X X^T`` is symmetric, so each tile on or above the diagonal is computed once and read
    twice: along its rows for the queries of its row block, along its columns for those of its
    column block. The items are taken in class order, so that the pairs of one class (positives,
    and each item with itself) fall in the band of tiles where the row and column classes
    overlap. A first sweep over that band finds each item's best positive (the query itself
    excluded by index); the second sweep over all tiles sets the band's same-class pairs to
    ``-inf`` by label and counts the rest above the best positive. Both read the scores of the
    same products, so a tie between a positive and a negative stays a tie (a hit).
    Memory: one tile and its flags, ``O(block^2 + N d)``.
    """
    x, n = p.queries[p.order], p.queries.shape[0]  # p.order lists the set class by class
    cls = p.query_class[p.order]
    cls_host = cls.cpu().tolist()
    neg_inf = float("-inf")
    best = torch.full((n,), neg_inf, dtype=x.dtype, device=x.device)
    flags = torch.empty(min(block, n), min(block, n), dtype=torch.bool, device=x.device)
    for lo, hi, c_lo, c_hi, s in _symmetric_tiles(x, cls_host, block, band=True):
        same = torch.eq(cls[lo:hi, None], cls[None, c_lo:c_hi], out=flags[: hi - lo, : c_hi - c_lo])
        if c_lo == lo:
            same.fill_diagonal_(False)
        s = s.masked_fill_(~same, neg_inf)
        torch.maximum(best[lo:hi], s.amax(dim=1), out=best[lo:hi])
        torch.maximum(best[c_lo:c_hi], s.amax(dim=0), out=best[c_lo:c_hi])
    # Comparisons are written as 0./1. in the scores' dtype and summed as floats: several times
    # faster than summing bools on CPUs, and exact (a tile's counts are at most `block`; the
    # running counts are float64, exact up to 2^53).
    above = torch.zeros(n, dtype=torch.float64, device=x.device)
    ones = torch.empty(flags.shape, dtype=x.dtype, device=x.device)
    for lo, hi, c_lo, c_hi, s in _symmetric_tiles(x, cls_host, block, band=False):
        f = ones[: hi - lo, : c_hi - c_lo]
        if cls_host[hi - 1] >= cls_host[c_lo]:  # a class spans both: mask its pairs
            same = flags[: hi - lo, : c_hi - c_lo]
            s.masked_fill_(torch.eq(cls[lo:hi, None], cls[None, c_lo:c_hi], out=same), neg_inf)
        above[lo:hi] += torch.gt(s, best[lo:hi, None], out=f).sum(dim=1)
        if c_lo != lo:
            above[c_lo:c_hi] += torch.gt(s, best[None, c_lo:c_hi], out=f).sum(dim=0)

    def unsort(v: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(v).index_copy_(0, p.order, v)

    return unsort(best), unsort(above.long())


def _recall_one_set(p: _Prepared, ks: tuple[int, ...], chunk_size: int) -> dict[str, float]:
    """Recall@K of one set through the symmetric tiles (half the products of the full pass)."""
    best, above = _negatives_above_symmetric(p, chunk_size)
    has_pos = best > float("-inf")
    n_valid = int(has_pos.sum())
    if n_valid == 0:
        raise _no_positive_error(True)
    ks_t = torch.tensor(ks, device=above.device, dtype=torch.long)
    hits = ((above[:, None] < ks_t[None, :]) & has_pos[:, None]).sum(0, dtype=torch.float64)
    return {f"R@{k}": float(hits[i]) / n_valid for i, k in enumerate(ks)}


def ranked_metrics(
    embeddings: ArrayLike,
    labels: LabelsLike,
    ks: tuple[int, ...],
    gallery: ArrayLike | None,
    gallery_labels: LabelsLike | None,
    chunk_size: int,
    normalize: bool,
    device: torch.device | str | None,
    *,
    positive_ranks: bool,
) -> dict[str, float]:
    """The chunked pass: ``R@K`` for every K in ``ks`` and, with ``positive_ranks``, MAP@R and RP.

    ``positive_ranks`` ranks all R positives of every query (MAP@R, R-precision); without it only
    the best positive is ranked (Recall@K, Precision@1), which needs the top ``max(ks)``
    negatives instead of the top ``max(max(ks), R)``.
    """
    p = _prepare(embeddings, labels, gallery, gallery_labels, chunk_size, normalize, device)
    n, m_gallery = p.queries.shape[0], p.gallery.shape[0]
    _check_candidates(ks, m_gallery, p.one_set)
    if p.one_set and ks and not positive_ranks:
        with torch.no_grad():
            return _recall_one_set(p, ks, int(chunk_size))
    max_k = max(ks) if ks else 0
    dev = p.queries.device
    ks_t = torch.tensor(ks, device=dev, dtype=torch.long)

    n_valid = 0
    hits = torch.zeros(len(ks), dtype=torch.float64, device=dev)
    ap_sum = torch.zeros((), dtype=torch.float64, device=dev)
    rp_sum = torch.zeros((), dtype=torch.float64, device=dev)
    gallery_t = p.gallery.T
    chunk_size = int(chunk_size)
    buffer = torch.empty(min(chunk_size, n), m_gallery, dtype=p.queries.dtype, device=dev)
    neg_inf = float("-inf")

    n_chunks = -(-n // chunk_size)
    steps = range(0, n, chunk_size)
    if n_chunks > 1 and n * m_gallery >= _PROGRESS_MIN_SCORES:
        steps = tqdm(steps, total=n_chunks, desc="retrieval metrics", unit="chunk", leave=False)

    with torch.no_grad():
        for lo in steps:
            hi = min(lo + chunk_size, n)
            rows = hi - lo
            scores = torch.mm(p.queries[lo:hi], gallery_t, out=buffer[:rows])  # (rows, M)

            same_class, member = _class_members(p, lo, hi)
            n_pos = member.sum(1)  # R of each query
            has_pos = n_pos > 0
            n_valid += int(has_pos.sum())

            pos_scores = scores.gather(1, same_class).masked_fill_(~member, neg_inf)
            # Remove the positives (and the query itself) so that the rest are the negatives.
            scores.scatter_(1, same_class, neg_inf)
            n_top = max(max_k, int(n_pos.max()) if positive_ranks else 0)
            n_top = min(max(n_top, 1), m_gallery)
            neg_top = _top_values(scores, n_top)  # (rows, n_top), descending

            if ks:
                best_pos = pos_scores.max(dim=1).values
                # Negatives strictly above the best positive, exact up to n_top >= max(ks).
                above = (neg_top > best_pos[:, None]).sum(1)
                hit = (above[:, None] < ks_t[None, :]) & has_pos[:, None]
                hits += hit.sum(0, dtype=torch.float64)

            if positive_ranks:
                ap, rp = _ap_and_rp(pos_scores, neg_top, n_pos)
                rp_sum += torch.where(has_pos, rp, 0.0).sum()
                ap_sum += torch.where(has_pos, ap, 0.0).sum()

    if n_valid == 0:
        raise _no_positive_error(p.one_set)
    out: dict[str, float] = {}
    for i, k in enumerate(ks):
        out[f"R@{k}"] = float(hits[i]) / n_valid
    if positive_ranks:
        out["MAP@R"] = float(ap_sum) / n_valid
        out["RP"] = float(rp_sum) / n_valid
    return out

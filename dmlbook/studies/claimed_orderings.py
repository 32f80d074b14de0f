"""The seed papers' claimed orderings of loss families, beside what a fair comparison measures.

Each paper prints its loss above others, and says so in its text: Wang et al. (2019) put MS
weighting above binomial deviance ("increases the Recall@1 by 1.3% over Binomial") and above
LiftedStruct*, binomial deviance above the other single-similarity losses, and BinLifted *below*
binomial deviance (Table 2, Cars-196); Liu et al. put Pair-E and Triplet-E above MS (Table IV,
CUB-200-2011), the DRO paper puts DRO-TopK-PN above MS (Table 1) and DRO-KL-G above its own MS
run (Table 2), and Xuan and Pless put their best designed gradient above MS (Table 5). Every
such pair among the families of :data:`dmlbook.studies.fair_comparison.FAMILIES` is listed in
:data:`ORDERINGS` by the rows of ``dmlbook/data/paper_results.csv`` it compares (the numbers are
read from there, never typed here). A gap of a table that no sentence of the paper claims (such
as BinLifted's 0.7 points over LiftedStruct*) is not an ordering.

The family "MS" runs as tuning chose it (Chapter 15: without MS mining), so Wang et al.'s rows
for it are "MS weighting" (their MS without mining); the other papers print only MS with its
mining (Eq. 11-12), and :attr:`Ordering.note` says so beside those rows. :func:`orderings_beside` sets each beside the paired
difference measured on Omniglot and says whether it holds, is reversed, or is not resolved by
the seeds (its 95 % interval contains 0).

Chapter 15 prints it; tests in ``tests/studies/test_claimed_orderings.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .fair_comparison import paired_intervals

__all__ = ["ORDERINGS", "Ordering", "orderings_beside"]


@dataclass(frozen=True)
class Ordering:
    """A paper's "A above B": two rows of one results table and the families they stand for."""

    paper: str
    table: str
    dataset: str
    better: str  # method of the row printed higher
    worse: str
    better_family: str  # label in fair_comparison.FAMILIES
    worse_family: str
    note: str = ""  # where the paper's row and the family as run differ


_MINES = "paper's MS mines pairs (Eq. 11-12); the MS run here does not"


ORDERINGS: tuple[Ordering, ...] = (
    Ordering("wang2019_ms", "Table 2", "Cars-196", "MS weighting", "Binomial", "MS", "binomial"),
    Ordering("wang2019_ms", "Table 2", "Cars-196", "MS weighting", "LiftedStruct*", "MS", "LiftedStruct*"),
    Ordering("wang2019_ms", "Table 2", "Cars-196", "Binomial", "LiftedStruct*", "binomial", "LiftedStruct*"),
    Ordering("wang2019_ms", "Table 2", "Cars-196", "Binomial", "BinLifted", "binomial", "BinLifted"),
    Ordering("liu_gpw", "Table IV", "CUB-200-2011", "Multi-similarity loss [35]", "N-pair loss [27]", "MS", "N-pair", _MINES),
    Ordering("liu_gpw", "Table IV", "CUB-200-2011", "Pair-E (a,b,d = 0,2,1024)", "Multi-similarity loss [35]", "Pair-E", "MS", _MINES),
    Ordering("liu_gpw", "Table IV", "CUB-200-2011", "Triplet-E (a,d = 40,1024)", "Multi-similarity loss [35]", "Triplet-E", "MS", _MINES),
    Ordering("dro", "Table 1", "CUB-200-2011", "DRO-TopK-PN_M", "MS(Wang et al. (2019))", "DRO-TopK-PN", "MS", _MINES),
    Ordering("dro", "Table 2", "CUB-200-2011", "DRO-KL-G gamma=0.1", "MS", "DRO-KL-G", "MS", _MINES),
    Ordering("xuan2020", "Table 5", "CUB-200-2011", "Ours(B384)", "MS [19]", "gradient surgery (best)", "MS", _MINES),
)  # fmt: skip


def _printed(papers: pd.DataFrame, o: Ordering, method: str, metric: str) -> float:
    rows = papers[
        (papers.paper == o.paper) & (papers.table == o.table) & (papers.dataset == o.dataset)
        & (papers.method == method) & (papers.metric == metric)
    ]  # fmt: skip
    if len(rows) != 1:
        raise KeyError(
            f"paper_results.csv has {len(rows)} rows for {o.paper} {o.table} {o.dataset} "
            f"{method!r} {metric}; an ordering must name exactly one."
        )
    return float(rows["value"].iloc[0])


def orderings_beside(
    papers: pd.DataFrame,
    results: pd.DataFrame,
    *,
    metric: str = "one-shot error",
    lower_is_better: bool = True,
    orderings: tuple[Ordering, ...] = ORDERINGS,
) -> pd.DataFrame:
    """Each claimed "A above B" with the paper's R@1 gap and the gap measured here.

    Parameters
    ----------
    papers : DataFrame
        :func:`dmlbook.papers.paper_results.load_paper_results`.
    results : DataFrame
        Final runs: ``loss`` (family labels), ``seed`` and ``metric``.
    metric : str
        The measured metric compared (fractions).
    lower_is_better : bool
        True for an error; the measured gap is then ``B - A``, so that a positive gap always
        means "A is better", as in the paper.

    Returns
    -------
    DataFrame
        One row per ordering: ``paper``, ``table``, ``claim`` ("A > B", families),
        ``paper rows`` (the rows compared, where they are not named as the families),
        ``paper R@1 gap`` (points), ``measured gap``, ``low``, ``high`` (points, 95 % paired
        t-interval over the seeds both families ran), ``seeds``, ``verdict``: "holds" (interval
        above 0), "reversed" (below 0) or "not resolved", and ``note``.
    """
    rows = []
    for o in orderings:
        gap = _printed(papers, o, o.better, "R@1") - _printed(papers, o, o.worse, "R@1")
        pair = results[results["loss"].isin([o.better_family, o.worse_family])]
        diff = paired_intervals(pair, o.worse_family, metric).loc[o.better_family]
        sign = -100.0 if lower_is_better else 100.0
        mean, low, high = (sign * diff[c] for c in ("mean", "low", "high"))
        low, high = min(low, high), max(low, high)
        verdict = "holds" if low > 0 else "reversed" if high < 0 else "not resolved"
        rows.append(
            {
                "paper": o.paper, "table": f"{o.table}, {o.dataset}",
                "claim": f"{o.better_family} > {o.worse_family}",
                "paper rows": f"{o.better} > {o.worse}", "paper R@1 gap": round(gap, 1),
                "measured gap": mean, "low": low, "high": high, "seeds": int(diff["seeds"]),
                "verdict": verdict, "note": o.note,
            }
        )  # fmt: skip
    return pd.DataFrame(rows)

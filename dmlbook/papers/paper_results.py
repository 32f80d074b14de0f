"""The seed papers' results tables as data, and the checks a careful reader makes on them.

``dmlbook/data/paper_results.csv`` holds every number of the results tables of the four seed
papers that have them (Wang et al. 2019, Tables 2-5 and supplement Tables 1-2; Liu et al.,
Tables I-V and the values printed in their Fig. 4-5; the DRO paper, Tables 1-4 and the mean its
Sec. 6.2 states for Fig. 4; Xuan and Pless, Tables 2-5 and appendix Tables 1-3), one row per
number, as printed in the OCR text (``note`` says where the reading is uncertain). Two
companion files record what the papers say about those numbers:

- ``paper_quotes.csv``: a row of one table that quotes a row of another (same data set and
  metric), e.g. the DRO paper's "MS" row against Wang et al.'s MS^512 row.
- ``paper_claims.csv``: an improvement stated in a paper's text ("improves Recall@1 by 1.3%"),
  with the two rows it compares.
- ``paper_statements.csv``: a comparison stated in words ("v1 performs much better than v0"),
  as the pairs of rows it compares and the verdict the text asserts; :func:`check_statements`
  computes each verdict from the rows.

The checks (``recall_not_monotone``, ``compare_quotes``, ``check_claims``) return tables of what
they found; ``versus`` computes the comparisons a chapter states in words ("beats", "ties",
"rises") from the rows, so that the words cannot drift from the numbers; ``measured_beside``
sets this book's own measurements (``bench/results``) beside the papers'. The appendix notebook ``book/90_papers_numbers.ipynb`` prints them all; tests in
``tests/papers/test_paper_results.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[1] / "data"
COLUMNS = (
    "paper",
    "table",
    "dataset",
    "method",
    "backbone",
    "dim",
    "batch",
    "metric",
    "value",
    "std",
    "note",
)
PAPERS = {
    "wang2019_ms": "Wang, Han, Huang, Dong, Scott: Multi-Similarity Loss with General Pair "
    "Weighting for Deep Metric Learning (CVPR 2019)",
    "liu_gpw": "Liu, Cheng, Wang, Su: The General Pair-based Weighting Loss for Deep Metric "
    "Learning",
    "dro": "A Simple and Effective Framework for Pairwise Deep Metric Learning (anonymous, "
    "under review; the DRO paper)",
    "xuan2020": "Xuan, Pless: Dissecting the impact of different loss functions with gradient "
    "surgery",
}
DATASETS = ("CUB-200-2011", "Cars-196", "SOP", "In-Shop")
ROW_KEY = ["paper", "table", "dataset", "method", "backbone", "dim", "batch"]


def _read(name: str, path: Path | None) -> pd.DataFrame:
    path = Path(path) if path is not None else DATA / name
    return pd.read_csv(path, comment="#", dtype=str, keep_default_na=False)


def load_paper_results(path: Path | None = None) -> pd.DataFrame:
    """The results table, validated: one row per printed number.

    ``value`` and ``std`` are floats (percent; ``std`` NaN where none is printed), ``k`` is the
    integer of ``metric`` (``R@K``). Raises ``ValueError`` naming the CSV line of a bad row.
    """
    df = _read("paper_results.csv", path)
    if tuple(df.columns) != COLUMNS:
        raise ValueError(f"paper_results.csv: columns must be {', '.join(COLUMNS)}")
    line = df.index + 5  # four comment/header lines, 1-based
    problems = []
    bad_paper = ~df["paper"].isin(list(PAPERS))
    problems += [
        f"line {n}: unknown paper {p!r}"
        for n, p in zip(line[bad_paper], df.paper[bad_paper], strict=True)
    ]
    bad_data = ~df["dataset"].isin(DATASETS)
    problems += [
        f"line {n}: unknown data set {d!r}"
        for n, d in zip(line[bad_data], df.dataset[bad_data], strict=True)
    ]
    k = pd.to_numeric(df["metric"].str.extract(r"^R@(\d+)$")[0], errors="coerce")
    problems += [
        f"line {n}: metric must be R@K, got {m!r}"
        for n, m in zip(line[k.isna()], df.metric[k.isna()], strict=True)
    ]
    value = pd.to_numeric(df["value"], errors="coerce")
    bad_value = value.isna() | (value < 0) | (value > 100)
    problems += [
        f"line {n}: value {v!r} is not a percentage"
        for n, v in zip(line[bad_value], df.value[bad_value], strict=True)
    ]
    if problems:
        raise ValueError("paper_results.csv: " + "; ".join(problems[:10]))
    df["value"] = value
    df["std"] = pd.to_numeric(df["std"].replace("", np.nan))
    df["k"] = k.astype(int)
    return df


def recall_not_monotone(df: pd.DataFrame) -> pd.DataFrame:
    """Rows where Recall@K falls as K grows (it cannot: the top-K lists are nested).

    Returns one row per violation: the row's key, the two K and their values.
    """
    found = []
    for key, group in df.groupby(ROW_KEY, sort=False):
        group = group.sort_values("k")
        ks, values = group["k"].to_numpy(), group["value"].to_numpy()
        for i in np.flatnonzero(np.diff(values) < 0):
            found.append(
                dict(zip(ROW_KEY, key, strict=True))
                | {
                    "k_low": ks[i],
                    "value_low": values[i],
                    "k_high": ks[i + 1],
                    "value_high": values[i + 1],
                }
            )
    return pd.DataFrame(found, columns=[*ROW_KEY, "k_low", "value_low", "k_high", "value_high"])


def _row(df: pd.DataFrame, paper: str, table: str, method: str, dim: str = "") -> pd.DataFrame:
    sel = (df.paper == paper) & (df.table == table) & (df.method == method)
    if dim:
        sel &= df.dim == dim
    if not sel.any():
        raise KeyError(f"no row {paper} / {table} / {method!r}{' / dim ' + dim if dim else ''}")
    return df[sel]


def compare_quotes(df: pd.DataFrame, quotes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every number a paper quotes from another, beside the other's number.

    ``quotes`` (default ``paper_quotes.csv``) lists quoting and source rows; each is matched on
    data set and metric. Returns one row per compared number with ``equal`` (to the printed
    precision, 0.05).
    """
    quotes = _read("paper_quotes.csv", None) if quotes is None else quotes
    out = []
    for q in quotes.itertuples(index=False):
        a = _row(df, q.paper, q.table, q.method, q.dim)
        b = _row(df, q.source_paper, q.source_table, q.source_method, q.source_dim)
        both = a.merge(b, on=["dataset", "metric", "k"], suffixes=("", "_source"))
        for r in both.itertuples(index=False):
            out.append(
                {
                    "quoting": f"{q.paper} {q.table}: {q.method}",
                    "source": f"{q.source_paper} {q.source_table}: {q.source_method}"
                    + (f" (d={q.source_dim})" if q.source_dim else ""),
                    "dataset": r.dataset,
                    "metric": r.metric,
                    "quoted": r.value,
                    "source_value": r.value_source,
                    "equal": abs(r.value - r.value_source) < 0.05,
                }
            )
    return pd.DataFrame(out)


def check_claims(df: pd.DataFrame, claims: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each improvement stated in a paper's text against the difference of its table rows.

    ``claims`` (default ``paper_claims.csv``): the claim's wording, the two rows (``from`` and
    ``to``) and the stated difference in points. The tolerance is half a unit of the stated
    precision ("by 7%": 0.5; "by 1.3%": 0.05). Returns the claims with ``table_difference`` and
    ``holds``.
    """
    claims = _read("paper_claims.csv", None) if claims is None else claims
    out = []
    for c in claims.itertuples(index=False):

        def value(table: str, method: str, dim: str, c=c) -> float:
            rows = _row(df, c.paper, table, method, dim)
            rows = rows[(rows.dataset == c.dataset) & (rows.metric == c.metric)]
            if len(rows) != 1:
                raise KeyError(
                    f"{c.paper} {table} {method!r}: {len(rows)} values of {c.dataset} {c.metric}"
                )
            return float(rows.value.iloc[0])

        low = value(c.from_table, c.from_method, c.from_dim)
        high = value(c.to_table, c.to_method, c.to_dim)
        decimals = len(c.stated.partition(".")[2])
        difference = round(high - low, 2)
        out.append(
            {
                "paper": c.paper,
                "where": c.where,
                "claim": c.claim,
                "from": f"{c.from_method} {low}",
                "to": f"{c.to_method} {high}",
                "stated": float(c.stated),
                "table_difference": difference,
                "holds": abs(difference - float(c.stated)) <= 0.5 * 10.0**-decimals + 1e-9,
            }
        )
    return pd.DataFrame(out)


#: Two printed numbers closer than this are a tie (half a unit of the papers' one decimal).
TIE = 0.05


def verdict(value: float, baseline: float) -> str:
    """``"beats"``, ``"ties"`` or ``"loses to"``: ``value`` against ``baseline`` as printed."""
    if abs(value - baseline) < TIE:
        return "ties"
    return "beats" if value > baseline else "loses to"


def trend(values: list[float]) -> str:
    """``"rises"``, ``"falls"``, ``"flat"`` or ``"not monotone"``: a sequence of printed numbers."""
    steps = [b - a for a, b in zip(values, values[1:], strict=False)]
    if all(abs(d) < TIE for d in steps):
        return "flat"
    if all(d > -TIE for d in steps):
        return "rises"
    if all(d < TIE for d in steps):
        return "falls"
    return "not monotone"


def versus(
    df: pd.DataFrame,
    paper: str,
    table: str,
    baseline: str,
    *,
    metric: str = "R@1",
    datasets: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """Every method of one table against one of its rows, with the verdict in words.

    Returns one row per (data set, method other than ``baseline``): ``value``, ``baseline``
    (its value), ``difference`` (points) and ``verdict`` (:func:`verdict`).
    """
    rows = df[(df.paper == paper) & (df.table == table) & (df.metric == metric)]
    if datasets is not None:
        rows = rows[rows.dataset.isin(datasets)]
    if not (rows.method == baseline).any():
        raise KeyError(f"no row {paper} / {table} / {baseline!r} at {metric}")
    out = []
    for dataset, group in rows.groupby("dataset", sort=False):
        base = group[group.method == baseline]
        if base.empty:
            continue
        b = float(base.value.iloc[0])
        for r in group[group.method != baseline].itertuples():
            out.append(
                {
                    "dataset": dataset,
                    "method": r.method,
                    "value": r.value,
                    "baseline": b,
                    "difference": round(r.value - b, 2),
                    "verdict": verdict(r.value, b),
                }
            )
    return pd.DataFrame(out)


def _value_at(df: pd.DataFrame, paper: str, spec: str, dataset: str, metric: str) -> float:
    """The value of ``table|method[|dim[|batch]]`` of ``paper`` on ``dataset`` at ``metric``."""
    table, method, dim, batch = ([*spec.split("|"), "", ""])[:4]
    sel = (df.paper == paper) & (df.table == table) & (df.method == method)
    sel &= (df.dataset == dataset) & (df.metric == metric)
    if dim:
        sel &= df.dim == dim
    if batch:
        sel &= df.batch == batch
    if int(sel.sum()) != 1:
        raise KeyError(f"{paper} {spec!r} on {dataset} {metric}: {int(sel.sum())} values, need 1")
    return float(df[sel].value.iloc[0])


def check_statements(df: pd.DataFrame, statements: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each comparison a paper states in words, computed from its rows.

    ``statements`` (default ``paper_statements.csv``) gives, per compared pair of rows, the
    statement's wording, the rows (``table|method[|dim[|batch]]``) and the verdict the text
    asserts. Returns them with both values, the computed :func:`verdict` and ``holds``.
    """
    statements = _read("paper_statements.csv", None) if statements is None else statements
    out = []
    for s in statements.itertuples(index=False):
        a = _value_at(df, s.paper, s.row, s.dataset, s.metric)
        b = _value_at(df, s.paper, s.against, s.dataset, s.metric)
        out.append(
            {
                "paper": s.paper,
                "where": s.where,
                "statement": s.statement,
                "dataset": s.dataset,
                "row": s.row.split("|", 1)[1],
                "against": s.against.split("|", 1)[1],
                "value": a,
                "against value": b,
                "difference": round(a - b, 2),
                "says": s.says,
                "magnitude": magnitude_words(s.statement),
                "computed": verdict(a, b),
                "holds": verdict(a, b) == s.says,
            }
        )
    return pd.DataFrame(out)


#: Words by which a statement says *how far* one row is from another; the verdict tests only the
#: direction, so :func:`magnitudes` sets each beside the differences it covers.
MAGNITUDE = re.compile(
    r"\b(much|greatly|significantly|significant|slightly|a little|big|substantial|some)\b",
    re.IGNORECASE,
)


def magnitude_words(statement: str) -> str:
    """The words of magnitude in ``statement``, lower case, joined by ", " ("" if none)."""
    return ", ".join(m.group(0).lower() for m in MAGNITUDE.finditer(statement))


def magnitudes(checked: pd.DataFrame) -> pd.DataFrame:
    """Each statement with a word of magnitude, beside the differences (points) it covers.

    ``checked`` is :func:`check_statements`' table. Returns one row per statement and data set:
    the word(s), the number of compared pairs and the smallest and largest difference. The
    papers define none of the words, so the table is for the reader to judge, not a verdict.
    """
    rows = checked[checked.magnitude != ""]
    keys = ["paper", "where", "statement", "dataset", "magnitude"]
    out = rows.groupby(keys, sort=False).difference.agg(["count", "min", "max"]).reset_index()
    return out.rename(columns={"count": "pairs", "min": "smallest", "max": "largest"})


def measured_beside(df: pd.DataFrame, ablation_csv: Path) -> pd.DataFrame:
    """Wang et al.'s Table 2 beside this book's re-run on ``synthetic`` (Chapter 10's ablation).

    ``ablation_csv`` is ``bench/results/ms_ablation.csv`` (recalls as fractions, several seeds);
    the book's column is the mean over seeds in percent. The other small-scale re-runs are read
    in their chapters (:data:`SMALL_SCALE`); the papers' own conditions need a GPU run
    (``dmlbook.engine``, Chapter 14's configs).
    """
    ours = pd.read_csv(ablation_csv, comment="#")
    ours = ours[ours.study == "table2"]
    metrics = [c for c in ours.columns if c.startswith("R@")]
    mean = ours.groupby("variant")[metrics].mean().mul(100).round(1)
    runs = ours.groupby("variant").size()
    paper = df[(df.paper == "wang2019_ms") & (df.table == "Table 2")]
    wide = paper.pivot(index="method", columns="metric", values="value")[metrics]
    wide = wide.loc[paper.method.unique()]
    joined = wide.merge(mean, how="left", left_index=True, right_index=True, suffixes=("", " book"))
    joined["book runs"] = runs.reindex(joined.index).fillna(0).astype(int)
    return joined.rename(columns={m: f"{m} paper" for m in metrics})


#: The tables (or figures) this book re-runs at small scale, never under the paper's conditions
#: (CPU data sets, small networks from scratch), and where: ``(paper, table) -> what``.
SMALL_SCALE = {
    ("wang2019_ms", "Table 2"): "every row on synthetic, 5 seeds (bench/results/ms_ablation.csv; 10.7)",
    ("liu_gpw", "Table II"): "its three rows on Omniglot, 3 seeds (15.6)",
    ("liu_gpw", "Table III"): "pair-based p,q = 0,0, v0 against v1, on synthetic (11.6)",
    ("liu_gpw", "Table IV"): "MS > N-pair, Pair-E > MS, Triplet-E > MS on Omniglot (15.5)",
    ("liu_gpw", "Fig. 5"): "MS v1, MS v2 and the pair-based loss on synthetic (11.6)",
    ("dro", "Table 1"): "DRO-TopK-PN > MS on Omniglot (15.5)",
    ("dro", "Table 2"): "DRO-KL-G at the four gamma against LS and MS on Omniglot (12.7)",
    ("dro", "Table 4"): "In-Shop's half of Table 2's design: run as Table 2 on Omniglot (12.7)",
    ("xuan2020", "Table 2"): "the four directions on Omniglot (13.7)",
    ("xuan2020", "Table 3"): "the pair weights with e^cos, three with e^euc, on Omniglot (13.7)",
    ("xuan2020", "Table 4"): "T^cos, T^cir and the selections with P^con on Omniglot (13.7)",
    ("xuan2020", "Table 5"): "the best combination > MS on Omniglot (15.5)",
}  # fmt: skip


def planned(df: pd.DataFrame) -> pd.DataFrame:
    """How many printed numbers per paper and table, and what this book has measured of them.

    A table of :data:`SMALL_SCALE` has a small-scale counterpart in a chapter (its rows or
    orderings, on a CPU data set: a check of the claim's shape, not of the number); every other
    table needs a GPU run on the benchmark (``configs/``, Chapter 14), and none has run.
    """
    counts = df.groupby(["paper", "table"], sort=False).size().rename("numbers").reset_index()
    counts["this book"] = [
        "small scale: " + SMALL_SCALE[key]
        if key in SMALL_SCALE
        else "not measured: needs a GPU run on the benchmark (configs/, Chapter 14)"
        for key in zip(counts.paper, counts.table, strict=True)
    ]
    return counts

"""The Table 2 ablation study of Wang et al. 2019: the paper's numbers beside measured ones.

Chapter: ``book/10_multi_similarity.ipynb``, 10.7 "Table 2, re-run on `synthetic`", which reads
``bench/results/ms_ablation.csv`` (written by ``bench/ms_ablation.py``). The losses of the rows
are :mod:`dmlbook.losses.ablation`. Tests: ``tests/studies/test_ms_ablation.py``.

* :data:`PAPER_TABLE_2` and :func:`paper_table_2`: the paper's Recall@K (Cars-196, 64-d);
* :func:`read_ablation_csv`: a results file with its ``#`` header lines;
* :func:`summarize_ablation`: mean +- std over seeds beside the paper, with ranks.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..losses.ablation import TABLE_2, table_2_names, table_2_variant

__all__ = ["PAPER_TABLE_2", "paper_table_2", "read_ablation_csv", "summarize_ablation"]

#: Wang et al. 2019, Table 2: Recall@1, 2, 4, 8 (%) on Cars-196, embedding size 64.
PAPER_TABLE_2: dict[str, tuple[float, float, float, float]] = {
    "Binomial": (71.9, 80.0, 86.4, 91.0),
    "LiftedStruct*": (69.7, 79.3, 86.2, 91.0),
    "MS mining": (67.0, 77.4, 84.7, 90.0),
    "BinLifted": (70.4, 79.5, 86.2, 91.1),
    "MS weighting": (73.2, 81.5, 87.6, 92.6),
    "Binomial_m": (74.6, 83.8, 89.7, 94.1),
    "LiftedStruct*_m": (72.2, 81.7, 88.0, 92.4),
    "MS": (77.3, 85.3, 90.5, 94.2),
}

_KS = (1, 2, 4, 8)


def paper_table_2() -> pd.DataFrame:
    """Wang et al. 2019, Table 2 as a table: index the variant, columns ``sim``, ``R@1`` .. ``R@8``."""
    rows = [
        {
            "variant": v.name,
            "sim": v.similarities,
            **dict(zip([f"R@{k}" for k in _KS], PAPER_TABLE_2[v.name], strict=True)),
        }
        for v in TABLE_2
    ]
    return pd.DataFrame(rows).set_index("variant")


def summarize_ablation(results: pd.DataFrame, ks: tuple[int, ...] = _KS) -> pd.DataFrame:
    """Mean +- std over seeds of an ablation run, beside the paper's Table 2.

    Parameters
    ----------
    results : DataFrame
        One row per (variant, seed) with columns ``variant`` (Table 2 names; the ``loss`` column
        of :func:`dmlbook.studies.compare_losses` is accepted instead) and ``R@K``
        (fractions in [0, 1] or percentages; fractions are converted to %).
    ks : tuple of int
        The ``K`` to show.

    Returns
    -------
    DataFrame
        Index: the variants in Table 2 order (those present). Columns: ``sim``, ``seeds``, and
        for each ``K`` the measured ``R@K`` as ``"mean ± std"`` (percent, one decimal) beside the
        paper's ``R@K (paper)``; plus ``rank`` (by measured mean R@1, 1 = best) and
        ``rank (paper)``. The numeric means and stds are in ``frame.attrs["mean"]`` and
        ``frame.attrs["std"]``.
    """
    if "variant" not in results.columns and "loss" in results.columns:
        results = results.rename(columns={"loss": "variant"})
    if "variant" not in results.columns:
        raise ValueError(
            "results needs a 'variant' column with Table 2 names (or the 'loss' column of "
            "dmlbook.studies.compare_losses)."
        )
    missing = [f"R@{k}" for k in ks if f"R@{k}" not in results.columns]
    if missing:
        raise ValueError(f"results lacks the columns {missing}.")
    df = results.copy()
    df["variant"] = [table_2_variant(n).name for n in df["variant"]]
    cols = [f"R@{k}" for k in ks]
    if float(df[cols].to_numpy().max()) <= 1.0:
        df[cols] = df[cols] * 100.0
    order = [n for n in table_2_names() if n in set(df["variant"])]
    grouped = df.groupby("variant")[cols]
    mean = grouped.mean().loc[order]
    std = grouped.std(ddof=1).fillna(0.0).loc[order]
    count = grouped.size().loc[order]
    paper = paper_table_2().loc[order]
    out = pd.DataFrame(index=pd.Index(order, name="variant"))
    out["sim"] = paper["sim"]
    out["seeds"] = count
    for c in cols:
        out[c] = [f"{m:.1f} ± {s:.1f}" for m, s in zip(mean[c], std[c], strict=True)]
        if c in paper.columns:
            out[f"{c} (paper)"] = paper[c].map(lambda x: f"{x:.1f}")
    out["rank"] = mean[cols[0]].rank(ascending=False, method="min").astype(int)
    if cols[0] in paper.columns:
        out["rank (paper)"] = paper[cols[0]].rank(ascending=False, method="min").astype(int)
    out.attrs["mean"] = mean
    out.attrs["std"] = std
    return out


def read_ablation_csv(path: str | Path) -> pd.DataFrame:
    """Read a results file written by ``bench/ms_ablation.py``.

    Parameters
    ----------
    path : str or Path
        A CSV whose leading ``#`` lines describe the machine and the protocol.

    Returns
    -------
    DataFrame
        One row per run (columns ``study``, ``variant``, ``dim``, ``seed``, ``epochs``,
        ``train_loss``, ``R@1`` .. ``R@8``, ...); ``frame.attrs["header"]`` holds the ``#`` lines
        (without the ``#``).

    Raises
    ------
    FileNotFoundError
        With the command that produces the file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; run `python bench/ms_ablation.py` from the repository root "
            "to produce it."
        )
    header = []
    with path.open() as fh:
        for line in fh:
            if not line.startswith("#"):
                break
            header.append(line[1:].strip())
    frame = pd.read_csv(path, comment="#")
    frame.attrs["header"] = header
    return frame

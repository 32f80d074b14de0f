"""The Table 2 study (:mod:`dmlbook.studies.ms_ablation`): the paper's numbers, reading and
summarising measured results.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dmlbook.losses import (
    TABLE_2,
    table_2_names,
)
from dmlbook.studies.ms_ablation import (
    PAPER_TABLE_2,
    paper_table_2,
    read_ablation_csv,
    summarize_ablation,
)


def test_table_2_names_and_paper_numbers():
    assert table_2_names() == (
        "Binomial", "LiftedStruct*", "MS mining", "BinLifted",
        "MS weighting", "Binomial_m", "LiftedStruct*_m", "MS",
    )  # fmt: skip
    assert set(PAPER_TABLE_2) == set(table_2_names())
    paper = paper_table_2()
    assert paper.loc["MS", "R@1"] == 77.3 and paper["R@1"].idxmax() == "MS"
    assert paper.loc["MS mining", "R@1"] == paper["R@1"].min()
    assert (paper[["R@1", "R@2", "R@4", "R@8"]].diff(axis=1).iloc[:, 1:] > 0).all().all()
    assert [v.similarities for v in TABLE_2] == ["S", "N", "P", "SN", "SN", "SP", "NP", "SNP"]


def test_summarize_ablation_beside_the_paper():
    rows = [
        {
            "variant": n,
            "seed": s,
            "R@1": 0.5 + 0.01 * i + 0.001 * s,
            "R@2": 0.6,
            "R@4": 0.7,
            "R@8": 0.8,
        }
        for i, n in enumerate(table_2_names())
        for s in range(3)
    ]
    out = summarize_ablation(pd.DataFrame(rows))
    assert list(out.index) == list(table_2_names())
    assert out.loc["MS", "R@1"] == "57.1 ± 0.1" and out.loc["MS", "R@1 (paper)"] == "77.3"
    assert out.loc["MS", "rank"] == 1 and out.loc["MS", "rank (paper)"] == 1
    assert out.loc["Binomial", "seeds"] == 3
    assert out.attrs["mean"].loc["MS", "R@1"] == pytest.approx(57.1)
    # the frame of dmlbook.studies.compare_losses (column "loss") is accepted too
    other = pd.DataFrame(rows).rename(columns={"variant": "loss"})
    assert summarize_ablation(other).equals(out)
    with pytest.raises(ValueError, match="variant"):
        summarize_ablation(pd.DataFrame({"x": [1]}))


def test_read_ablation_csv(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("# machine X\n# protocol Y\nvariant,seed,R@1\nMS,0,0.5\n")
    frame = read_ablation_csv(path)
    assert frame.attrs["header"] == ["machine X", "protocol Y"]
    assert list(frame.columns) == ["variant", "seed", "R@1"] and frame.loc[0, "R@1"] == 0.5
    with pytest.raises(FileNotFoundError, match="ms_ablation.py"):
        read_ablation_csv(tmp_path / "missing.csv")

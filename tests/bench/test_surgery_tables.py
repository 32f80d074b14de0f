"""``bench/surgery_tables.py``: the committed result Chapter 13 reads, and the script that wrote it.

The committed file must hold every cell of the script's ``CELLS`` for seeds 0 and 1, labelled
with the paper's table and method (which ``paper_results.csv`` must know, or the chapter prints
"-" beside it); the script resumes (a run already in the file is not trained again) and one fresh
run reproduces its committed row to float32 drift. Cost: one 4-epoch MLP run, about 2 s.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from dmlbook.papers.paper_results import load_paper_results

BENCH = Path(__file__).resolve().parents[2] / "bench"
COMMITTED = BENCH / "results" / "surgery_tables_cpu.csv"


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(BENCH))  # the script imports bench/machine.py
    spec = importlib.util.spec_from_file_location("surgery_tables", BENCH / "surgery_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCH))


def test_the_committed_file_has_every_cell_and_seed_with_the_papers_labels(script):
    rows = pd.read_csv(COMMITTED, comment="#")
    assert sorted(zip(rows["loss"], rows["seed"], strict=True)) == sorted(
        (cell, seed) for cell in script.CELLS for seed in (0, 1)
    )
    for row in rows.itertuples():
        _, table, method = script.CELLS[row.loss]
        assert (row.table, row.method) == (table, method)
    assert rows["R@1"].between(0, 1).all()
    paper = load_paper_results().query("paper == 'xuan2020' and dataset == 'Cars-196'")
    known = set(zip(paper.table, paper.method, strict=True))
    assert {(t, m) for _, t, m in script.CELLS.values()} <= known
    assert COMMITTED.read_text().count("\n# ") >= 1  # the machine of each invocation


def test_it_resumes_and_a_fresh_run_reproduces_the_committed_row(script, tmp_path):
    out = tmp_path / "runs.csv"
    argv = ["--cells", "e^cos", "--seeds", "0", "--out", str(out)]
    assert script.main(argv) == 0
    fresh = pd.read_csv(out, comment="#")
    committed = pd.read_csv(COMMITTED, comment="#").set_index(["loss", "seed"])["R@1"]
    assert len(fresh) == 1
    assert abs(fresh["R@1"].iloc[0] - committed[("e^cos", 0)]) < 0.03  # float32 across CPUs
    assert script.main(argv) == 0  # resumed: nothing left to train
    assert len(pd.read_csv(out, comment="#")) == 1 and out.read_text().count("\n# ") == 2

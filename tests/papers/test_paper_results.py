"""The seed papers' results as data (dmlbook/data/paper_results.csv) and the checks on them."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlbook.papers import paper_results as pr

ROOT = Path(__file__).resolve().parents[2]
HEADER = ",".join(pr.COLUMNS)

# The results tables each paper prints (read off the seeds' captions), and how many rows each
# prints for a data set (Xuan and Pless's Tables 3-4 print two columns per row: 12 and 14):
# an independent count that catches a lost row.
TABLES = {
    ("wang2019_ms", "Table 2"): 8,
    ("wang2019_ms", "Table 3"): 10,
    ("wang2019_ms", "Table 4"): 7,
    ("wang2019_ms", "Table 5"): 10,
    ("wang2019_ms", "Supp. Table 1"): 5,
    ("wang2019_ms", "Supp. Table 2"): 7,
    ("liu_gpw", "Table I"): 4,
    ("liu_gpw", "Table II"): 3,
    ("liu_gpw", "Table III"): 44,
    ("liu_gpw", "Table IV"): 18,
    ("liu_gpw", "Table V"): 17,
    ("dro", "Table 1"): 14,
    ("dro", "Table 2"): 6,
    ("dro", "Table 3"): 11,
    ("dro", "Table 4"): 6,  # MS, LS and DRO-KL-G at four gammas
    ("xuan2020", "Table 2"): 4,
    ("xuan2020", "Table 3"): 12,
    ("xuan2020", "Table 4"): 14,
    ("xuan2020", "Table 5"): 14,
    # learning-rate sweeps: rows x 4 learning rates per data set
    ("xuan2020", "Appendix Table 1"): 4 * 4,
    ("xuan2020", "Appendix Table 2"): 12 * 4,
    ("xuan2020", "Appendix Table 3"): 10 * 4,
    # figures whose values are printed or stated: Liu et al.'s Fig. 4 (4 losses x 6 sizes) and
    # Fig. 5 (3 losses), the DRO paper's five-run mean of Sec. 6.2 (Fig. 4)
    ("liu_gpw", "Fig. 4"): 4 * 6,
    ("liu_gpw", "Fig. 5"): 3,
    ("dro", "Supp. Fig. 4"): 1,
}

# Spot checks typed from the papers (not from the CSV): paper, table, data set, method, dim,
# batch, metric, value.
SPOT = [
    ("wang2019_ms", "Table 3", "CUB-200-2011", "MS", "512", "", "R@1", 65.7),
    ("wang2019_ms", "Table 3", "Cars-196", "MS", "64", "", "R@32", 98.2),
    ("wang2019_ms", "Table 2", "Cars-196", "LiftedStruct*_m", "64", "", "R@1", 72.2),
    ("wang2019_ms", "Supp. Table 2", "SOP", "MS", "512", "1000", "R@1", 78.35),
    ("liu_gpw", "Table V", "SOP", "Pair-E (a,b,d = 2,10,1024)", "1024", "320", "R@1", 80.9),
    ("dro", "Table 3", "In-Shop", "DRO-TopK-PN_M", "1024", "640", "R@1", 91.3),
    ("xuan2020", "Table 5", "Cars-196", "Ours(B384)", "64", "384", "R@1", 86.5),
    ("xuan2020", "Table 5", "In-Shop", "Ours(B256)", "512", "256", "R@1", 92.2),
    ("liu_gpw", "Fig. 4", "CUB-200-2011", "Pair-E (a,b = 0,2)", "512", "80", "R@1", 68.6),
    ("liu_gpw", "Fig. 5", "CUB-200-2011", "MS loss (v2)", "512", "80", "R@1", 67.6),
]


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return pr.load_paper_results()


def test_every_table_is_there_with_all_its_methods(results):
    per_dataset = results.drop_duplicates(pr.ROW_KEY).groupby(["paper", "table", "dataset"]).size()
    assert per_dataset.groupby(["paper", "table"]).max().to_dict() == TABLES


def test_rows_are_well_formed(results):
    assert set(results.metric) <= {
        f"R@{k}" for k in (1, 2, 4, 8, 10, 16, 20, 30, 32, 40, 50, 100, 1000)
    }
    assert results.value.between(0, 100).all()
    assert not results.duplicated(pr.ROW_KEY + ["metric"]).any(), "one number per row and metric"
    stds = 8 + 23 + 27 + 2 * 4 * (4 + 12 + 10)
    assert results["std"].notna().sum() == stds, "Xuan and Pless's Tables 2-4 and appendix: std"


@pytest.mark.parametrize(
    ("paper", "table", "dataset", "method", "dim", "batch", "metric", "value"), SPOT
)
def test_spot_values(results, paper, table, dataset, method, dim, batch, metric, value):
    key = (paper, table, dataset, method, dim, batch, metric)
    columns = [*pr.ROW_KEY[:4], "dim", "batch", "metric"]
    row = results[(results[columns] == pd.Series(key, index=columns)).all(axis=1)]
    assert list(row.value) == [value]


@pytest.mark.slow
def test_the_wheel_ships_the_data(tmp_path):
    """A non-editable install has the papers' tables and the Omniglot copy (package data).

    The wheel is built from a clean copy of the sources, so that neither a stale ``build/`` or
    ``*.egg-info`` of the checkout can supply the files nor the build leaves them behind.
    """
    for name in (
        "paper_results.csv",
        "paper_quotes.csv",
        "paper_claims.csv",
        "paper_statements.csv",
    ):
        assert (pr.DATA / name).is_file()
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "dmlbook", src / "dmlbook", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(src)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("dmlbook-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("paper_results.csv", "paper_quotes.csv", "paper_claims.csv",
                 "paper_statements.csv", "omniglot28.npz", "OMNIGLOT_LICENSE"):  # fmt: skip
        assert f"dmlbook/data/{name}" in names, f"the wheel lacks dmlbook/data/{name}"


def write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "results.csv"
    path.write_text("# a\n# b\n# c\n" + HEADER + "\n" + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("wang2019_ms,T,CUB-200-2011,MS,,,,mAP,50,,", "line 5: metric must be R@K, got 'mAP'"),
        ("wang2019_ms,T,CUB-200-2011,MS,,,,R@1,150,,", "line 5: value '150' is not a percentage"),
        ("wang2019_ms,T,CUB-200-2011,MS,,,,R@1,x,,", "line 5: value 'x'"),
        ("nobody,T,CUB-200-2011,MS,,,,R@1,50,,", "line 5: unknown paper 'nobody'"),
        ("wang2019_ms,T,MNIST,MS,,,,R@1,50,,", "line 5: unknown data set 'MNIST'"),
    ],
)
def test_bad_rows_are_refused_with_their_line(tmp_path, row, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        pr.load_paper_results(write(tmp_path, [row]))


def table(values: list[float], ks: list[int]) -> pd.DataFrame:
    lines = [f"dro,T,SOP,m,,,,R@{k},{v},," for k, v in zip(ks, values, strict=True)]
    return pd.DataFrame(
        [dict(zip(pr.COLUMNS, line.split(","), strict=True)) for line in lines]
    ).assign(value=values, k=ks)


@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=2, max_size=6, unique=True))
def test_monotonicity_check_flags_exactly_the_falls(values):
    ks = [1, 2, 4, 8, 16, 32][: len(values)]
    falls = pr.recall_not_monotone(table(values, ks))
    expected = [(ks[i], ks[i + 1]) for i in range(len(values) - 1) if values[i + 1] < values[i]]
    assert list(zip(falls.k_low, falls.k_high, strict=True)) == expected


def test_quotes_are_compared_number_by_number():
    a = table([50.0, 60.0], [1, 2]).assign(paper="dro", method="quoting")
    b = table([50.0, 61.0], [1, 2]).assign(paper="wang2019_ms", method="source")
    quotes = pd.DataFrame(
        [
            dict(
                paper="dro",
                table="T",
                method="quoting",
                dim="",
                source_paper="wang2019_ms",
                source_table="T",
                source_method="source",
                source_dim="",
            )
        ]
    )
    out = pr.compare_quotes(pd.concat([a, b]), quotes)
    assert list(out.equal) == [True, False] and list(out.source_value) == [50.0, 61.0]


@pytest.mark.parametrize(
    ("stated", "low", "high", "holds"),
    [
        ("7", 49.2, 57.4, False),
        ("7", 49.2, 56.5, True),
        ("1.3", 71.9, 73.2, True),
        ("2.7", 87.3, 89.7, False),
    ],
)
def test_claims_hold_to_their_stated_precision(stated, low, high, holds):
    df = pd.concat([table([low], [1]).assign(method="a"), table([high], [1]).assign(method="b")])
    claims = pd.DataFrame(
        [
            dict(
                paper="dro",
                where="Sec. 1",
                claim="c",
                dataset="SOP",
                metric="R@1",
                from_table="T",
                from_method="a",
                from_dim="",
                to_table="T",
                to_method="b",
                to_dim="",
                stated=stated,
            )
        ]
    )
    assert pr.check_claims(df, claims).holds.tolist() == [holds]


def test_the_checks_run_on_the_real_file(results):
    # Liu et al. Table III (CUB R@16) and the DRO paper Table 4 (gamma = 0.01, R@20 > R@30)
    assert len(pr.recall_not_monotone(results)) == 2
    quotes = pr.compare_quotes(results)
    assert len(quotes) > 200 and quotes.equal.mean() > 0.9
    claims = pr.check_claims(results)
    assert len(claims) == 18 and claims.holds.sum() == 14
    # Wang et al.'s introduction: "+5.0%" over ABE on CUB; Table 3 gives 65.7 - 60.6 = 5.1
    abe = claims[claims.claim.str.contains(r"\+5\.0%")].iloc[0]
    assert abe.table_difference == 5.1 and not abe.holds


def test_measured_beside_is_the_mean_of_the_books_runs(results):
    path = ROOT / "bench" / "results" / "ms_ablation.csv"
    with path.open() as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    ms = [float(r["R@1"]) for r in rows if r["study"] == "table2" and r["variant"] == "MS"]
    beside = pr.measured_beside(results, path)
    assert beside.loc["MS", "R@1 book"] == round(100 * sum(ms) / len(ms), 1)
    assert beside.loc["MS", "R@1 paper"] == 77.3 and beside.loc["MS", "book runs"] == len(ms)
    assert list(beside.index[:2]) == ["Binomial", "LiftedStruct*"]


@pytest.mark.parametrize(
    ("value", "baseline", "expected"),
    [(56.4, 56.8, "loses to"), (56.8, 56.8, "ties"), (57.0, 56.8, "beats"), (56.82, 56.8, "ties")],
)
def test_verdict_in_words(value, baseline, expected):
    assert pr.verdict(value, baseline) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([71.40, 73.82, 75.61, 76.63, 77.59, 78.19, 78.35], "rises"),  # Wang suppl. Table 2
        ([64.75, 65.07, 65.65, 65.43, 64.60], "not monotone"),  # Wang suppl. Table 1
        ([3.0, 2.0, 2.0], "falls"),
        ([1.0, 1.0], "flat"),
    ],
)
def test_trend_in_words(values, expected):
    assert pr.trend(values) == expected


def test_versus_reads_the_dro_papers_table_2_against_ls(results):
    """The DRO paper's Table 2 at R@1: gamma = 1 and 0.001 lose to LS on CUB (56.4, 56.7 < 56.8),
    gamma = 0.1 ties it; on Cars every gamma beats LS (typed from the paper, not the CSV)."""
    v = pr.versus(results, "dro", "Table 2", "LS")
    cub = v[v.dataset == "CUB-200-2011"].set_index("method")
    gammas = [m for m in cub.index if m.startswith("DRO-KL-G")]
    assert [cub.loc[m, "verdict"] for m in gammas] == ["loses to", "ties", "beats", "loses to"]
    assert (
        list(cub.loc[gammas, "value"]) == [56.4, 56.8, 57.0, 56.7] and cub.baseline.iloc[0] == 56.8
    )
    cars = v[v.dataset == "Cars-196"].set_index("method")
    assert (cars.loc[gammas, "verdict"] == "beats").all()
    with pytest.raises(KeyError, match="no row dro / Table 2 / 'LT'"):
        pr.versus(results, "dro", "Table 2", "LT")


def test_statements_in_words_against_their_rows(results):
    """Every stated comparison evaluates; the ones that fail are those read off the tables by
    hand (typed here from the seeds, not from the CSV)."""
    st = pr.check_statements(results)
    assert len(st) == 120
    failed = st[~st.holds]
    found = {(r.paper, r.where, r.dataset, r.row, r.against) for r in failed.itertuples()}
    expected = {
        # CUB rises from batch 20 to 80 before it falls (64.75, 65.07, 65.65, 65.43, 64.60)
        ("wang2019_ms", "supplement Sec. 4", "CUB-200-2011", "MS|512|40", "MS|512|20"),
        ("wang2019_ms", "supplement Sec. 4", "CUB-200-2011", "MS|512|80", "MS|512|40"),
        # MS 55.6 < LS 56.8 (CUB), 79.8 < 82.6 (In-Shop); gamma = 0.001 56.7 < LS 56.8 (CUB)
        ("dro", "Sec. 4.2.1", "CUB-200-2011", "MS", "LS"),
        ("dro", "Sec. 4.2.1", "In-Shop", "MS", "LS"),
        ("dro", "Sec. 4.2.1", "CUB-200-2011", "DRO-KL-G gamma=0.001", "LS"),
        # e^euc, lr 0.05: P^sig-ms 67.7 < P^sig 68.0
        ("xuan2020", "Sec. 5.2", "Cars-196", "pair weight P^sig-ms, direction e^euc, T^con, lr 0.05",
         "pair weight P^sig, direction e^euc, T^con, lr 0.05"),
    }  # fmt: skip
    assert found == expected
    liu = st[st.paper == "liu_gpw"]
    assert liu.holds.all() and len(liu) == 54
    # Xuan & Pless, Sec. 8, is about the *default form* (P^con, T^con): Table 2 and the learning
    # rates of appendix Table 1, e.g. In-Shop lr 4.0: e^cos 83.3 against e^euc 82.0
    sec8 = st[st["where"] == "Sec. 8"]
    assert sec8.statement.str.startswith("In its default form,").all() and len(sec8) == 10
    assert sec8.row.str.contains("P^con, T^con", regex=False).all() and sec8.holds.all()
    lr4 = sec8[sec8.row.str.endswith("lr 4.0")].iloc[0]
    assert (lr4.value, lr4["against value"], lr4.difference) == (83.3, 82.0, 1.3)
    # appendix Sec. 3: lin-ms above sig-ms in all 16 cells of appendix Table 2; the closest,
    # In-Shop e^cos lr 0.5, 86.5 against 86.4
    lin = st[st.statement.str.contains("lin-ms pair weight performs better")]
    assert len(lin) == 16 and lin.holds.all() and lin.difference.min() == 0.1


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("v1 performs much better than v0", "much"),
        ("freezing the batch-normalization (BN) layers truly can greatly improve", "greatly"),
        ("achieves a little worse results", "a little"),
        (
            "the performance on the SOP benefits from large batch-sizes significantly",
            "significantly",
        ),
        ("has a consistently big improvement", "big"),
        ("MS loss (v2) performs better than MS loss (v1)", ""),
        ("Bigger muchness", ""),  # words, not substrings
    ],
)
def test_magnitude_words_are_found_as_words(statement, words):
    assert pr.magnitude_words(statement) == words


def test_magnitudes_set_each_word_beside_its_differences(results):
    """Liu et al.'s "v1 performs much better than v0" covers six Table III pairs; the differences
    typed from the seed (65.5 - 63.4 for p,q = 0,0 is the smallest pair-based one)."""
    mags = pr.magnitudes(pr.check_statements(results))
    assert set(mags.magnitude) >= {"much", "greatly", "a little", "significantly", "big"}
    v1 = mags[mags.statement == "v1 performs much better than v0"].iloc[0]
    assert v1.pairs == 6 and v1.smallest <= 2.1 <= v1.largest
    sig = mags[mags.statement.str.contains("significantly")].iloc[0]
    assert sig.dataset == "SOP" and sig.pairs == 6


def test_planned_credits_every_small_scale_rerun(results):
    plan = pr.planned(results).set_index(["paper", "table"])["this book"]
    small = plan[plan.str.startswith("small scale")]
    assert set(small.index) == set(pr.SMALL_SCALE)
    for key in [("liu_gpw", "Table III"), ("dro", "Table 2"), ("xuan2020", "Table 4")]:
        assert key in small.index
    assert plan.loc[("wang2019_ms", "Table 5")].startswith("not measured")


def test_a_statement_needs_exactly_one_row(results):
    bad = pd.DataFrame(
        [["dro", "x", "y", "CUB-200-2011", "R@1", "Table 2|MS", "Table 2|NOPE", "beats"]],
        columns=["paper", "where", "statement", "dataset", "metric", "row", "against", "says"],
    )
    with pytest.raises(KeyError, match="'Table 2\\|NOPE' on CUB-200-2011 R@1: 0 values"):
        pr.check_statements(results, bad)


def test_one_setting_three_spreads_in_xuan_and_pless_appendix(results):
    """e^cos, P^con, T^con on In-Shop appears in appendix Tables 1-3 with the same means; the
    spreads, typed from the seed: Tables 1 and 2 print 0.3, 0.2, 0.4, 0.3 at lr 0.5-4.0, Table 3
    0.1, 0.3, 0.2, 0.4 (Chapter 13's erratum: at least one column is misprinted)."""
    x = results[(results.paper == "xuan2020") & (results.dataset == "In-Shop")]
    bases = {
        "Appendix Table 1": "direction e^cos, P^con, T^con",
        "Appendix Table 2": "pair weight P^con, direction e^cos, T^con",
        "Appendix Table 3": "triplet weight T^con, pair weight P^con",
    }
    spreads = {
        table: [
            float(x[(x.table == table) & (x.method == f"{base}, lr {lr}")]["std"].iloc[0])
            for lr in ("0.5", "1.0", "2.0", "4.0")
        ]
        for table, base in bases.items()
    }
    assert spreads["Appendix Table 1"] == spreads["Appendix Table 2"] == [0.3, 0.2, 0.4, 0.3]
    assert spreads["Appendix Table 3"] == [0.1, 0.3, 0.2, 0.4]
    assert spreads["Appendix Table 3"][1:] == spreads["Appendix Table 1"][:-1]  # shifted one row

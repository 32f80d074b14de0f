"""``bench/omniglot_compare.py`` at the smoke scale: every phase runs, writes rows, resumes, stops.

Run in this process (the script's ``main(argv)``) with two families and two seeds, so the test
costs seconds; the GPU check (``tests/bench/test_gpu_check.py``) runs it as a subprocess too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SUBSET = ["--smoke", "--losses", "MS", "N-pair", "--seeds", "0", "1"]


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(BENCH))  # the script imports bench/machine.py
    spec = importlib.util.spec_from_file_location("omniglot_compare", BENCH / "omniglot_compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def first(script, tmp_path_factory):
    out = tmp_path_factory.mktemp("omniglot_compare")
    assert script.main([*SUBSET, "--out-dir", str(out)]) == 0
    return out


def rows(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "runs.csv", comment="#")


@pytest.mark.slow
def test_every_phase_writes_its_rows(first):
    table = rows(first)
    counts = table.groupby("phase").size().to_dict()
    # tuning: MS's 3 settings + N-pair's 1; final: 2 families x 2 seeds; Table II: 3 rows x 2
    # seeds; long, recipe and its ablation: the better of the two, 2 seeds each
    assert counts == {
        "tune": 4,
        "final": 4,
        "sampler": 6,
        "long": 2,
        "recipe": 2,
        "recipe-shifts": 2,
    }
    scored = table[table.phase.isin(["final", "sampler", "long"])]
    for metric in ("one-shot error", "MAP@R", "R@1"):
        assert scored[metric].between(0, 1).all()
    recipe = table[table.phase.str.startswith("recipe")]  # trained on test too: one-shot error only
    assert recipe["one-shot error"].between(0, 1).all() and recipe["MAP@R"].isna().all()
    assert table.loc[table.phase == "tune", "val MAP@R"].between(0, 1).all()
    assert set(table.loc[table.phase == "sampler", "sampler"]) == {"random", "pk"}
    best = table[table.phase == "final"].groupby("loss")["one-shot error"].mean().idxmin()
    for phase in ("long", "recipe", "recipe-shifts"):
        assert set(table.loc[table.phase == phase, "loss"]) == {best}
        assert (table.loc[table.phase == phase, "steps"] == 4).all()
    text = (first / "runs.csv").read_text()
    assert text.count("# ") == 1 and "load average" in text  # the machine and load, once per call
    assert "## final" in (first / "summary.md").read_text()


@pytest.mark.slow
def test_a_second_call_resumes_with_nothing_left(script, first, capsys):
    before = len(rows(first))
    assert script.main([*SUBSET, "--out-dir", str(first)]) == 0
    assert len(rows(first)) == before
    assert "0 run(s) finished in this invocation" in capsys.readouterr().out


@pytest.mark.slow
def test_tuned_settings_come_from_another_file_and_a_spent_budget_stops(
    script, first, tmp_path, capsys
):
    out = tmp_path / "gpu"
    args = [*SUBSET, "--phases", "final", "--use-tuned", str(first / "runs.csv")]
    assert script.main([*args, "--out-dir", str(out), "--budget-s", "1e-9"]) == 0
    assert "time budget is spent" in capsys.readouterr().out
    assert rows(out).empty
    assert script.main([*args, "--out-dir", str(out)]) == 0
    table = rows(out)
    assert set(table.phase) == {"final"} and len(table) == 4  # no tuning here
    tuned = rows(first)
    assert set(table.hparams) <= set(tuned.loc[tuned.phase == "tune", "hparams"])


def test_bad_options_say_what_is_wrong(script, tmp_path, capsys):
    with pytest.raises(SystemExit):
        script.main(["--smoke", "--losses", "ArcFace", "--out-dir", str(tmp_path)])
    assert "unknown --losses 'ArcFace'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main(["--smoke", "--use-tuned", str(tmp_path / "none.csv")])
    assert "no such file" in capsys.readouterr().err

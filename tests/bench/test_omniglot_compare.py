"""``bench/omniglot_compare.py`` at the smoke scale: every phase runs, chooses on validation rows
only, writes its rows, models and histories, resumes, reproduces a run into a new folder, stops.

Run in this process (the script's ``main(argv)``) with two families and two seeds, so the test
costs seconds; the GPU check (``tests/bench/test_gpu_check.py``) runs it as a subprocess too.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dmlbook.studies import fair_comparison as fc

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
    out = tmp_path_factory.mktemp("omniglot_compare") / "runs"
    assert script.main([*SUBSET, "--out", str(out)]) == 0
    return out


def rows(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "runs.csv", comment="#", dtype={"fold": str})


@pytest.mark.slow
def test_every_phase_writes_its_rows_models_and_histories(first):
    table = rows(first)
    counts = table.groupby("phase").size().to_dict()
    # tuning: 3 settings x 2 families x 2 folds; recipe-val: 4 candidates of the chosen family
    # x 2 folds; final: 2 families x 2 seeds; Table II: 3 rows x 2 seeds; the recipe: 2 seeds
    assert counts == {"tune": 12, "recipe-val": 8, "final": 4, "sampler": 6, "recipe": 2}
    assert set(table.loc[table.phase.isin(["tune", "recipe-val"]), "fold"]) == {"0", "1"}
    assert set(table.loc[~table.phase.isin(["tune", "recipe-val"]), "fold"]) == {"-"}
    assert set(table.loc[table.phase == "recipe-val", "width"]) == {2, 4}  # 1 and 2 x smoke's
    choosing = table[table.phase.isin(["tune", "recipe-val"])]
    assert choosing[list(fc.TEST_COLUMNS)].isna().all().all()  # no test score on a choosing run
    assert choosing["val MAP@R"].between(0, 1).all()
    tested = table[table.phase.isin(["final", "sampler", "recipe"])]
    for errors, mean in zip(tested["run errors"], tested["one-shot error"], strict=True):
        assert len(json.loads(errors)) == 20 and np.mean(json.loads(errors)) == pytest.approx(mean)
    tune = table.loc[table.phase == "tune", list(fc.VALIDATION_COLUMNS)]
    chosen = fc.select_family(tune)
    assert set(table.loc[table.phase.isin(["recipe-val", "recipe"]), "loss"]) == {chosen}
    assert len(list((first / "models").glob("*.pt"))) == len(table)
    histories = sorted((first / "histories").glob("recipe-val-*.csv"))
    assert len(histories) == 8 and "MAP@R" in pd.read_csv(histories[0]).columns
    assert set(table.loc[table.phase == "recipe-val", "steps"]) == {4, 8}  # 1 and 2 x smoke's
    assert not list((first / "checkpoints").glob("*.pt"))  # removed once a run is recorded
    text = (first / "runs.csv").read_text()
    assert text.count("# ") == 1 and "load average" in text  # the machine and load, once per call
    assert "instruction set" in text and "torch CPU capability" in text
    summary = (first / "summary.md").read_text()
    assert (
        "validation-chosen family" in summary and "bootstrap interval over the 20 runs" in summary
    )
    assert "on each of 2 class-disjoint validation folds" in summary  # the design line
    assert "per fold and mean" in summary and "validation-chosen recipe" in summary


def test_choices_read_validation_columns_only(script):
    """Test scores written into tuning rows (as a leak would) change no choice; the choice is
    the mean over both folds (fold 1 alone would choose N-pair and MS's first setting)."""
    tune = pd.DataFrame(
        {"phase": "tune", "loss": (["MS"] * 3 + ["N-pair"] * 3) * 2, "seed": 0, "steps": 3,
         "width": 2, "variant": "affine/fit", "val R@1": 0.5, "fold": ["0"] * 6 + ["1"] * 6,
         "val MAP@R": [0.1, 0.5, 0.2, 0.25, 0.1, 0.1] + [0.3, 0.1, 0.2, 0.33, 0.1, 0.1],
         "hparams": [json.dumps(hp, sort_keys=True) for f in ("MS", "N-pair") for hp in fc.family(f).grid] * 2}
    ).reindex(columns=script.COLUMNS)  # fmt: skip
    # means by hand: MS 0.2, 0.3, 0.2; N-pair 0.29, 0.1, 0.1
    families = [fc.family("MS"), fc.family("N-pair")]
    clean = script.Choices(tune, fc.SCALES["smoke"], families)
    leaked = tune.assign(**{"one-shot error": [0.9, 0.9, 0.9, 0.0, 0.0, 0.0] * 2, "MAP@R": 0.5})
    poisoned = script.Choices(leaked, fc.SCALES["smoke"], families)
    assert clean.family == poisoned.family == "MS"
    assert clean.tuned == poisoned.tuned and clean.tuned["MS"] == dict(fc.family("MS").grid[1])
    assert (
        script.Choices(tune.iloc[:11], fc.SCALES["smoke"], families).family is None
    )  # a fold short


@pytest.mark.slow
def test_a_resumed_call_has_nothing_left_and_a_used_folder_is_refused(script, first, capsys):
    before = (first / "runs.csv").read_text()
    with pytest.raises(SystemExit):
        script.main([*SUBSET, "--out", str(first)])
    assert "is not empty" in capsys.readouterr().err
    assert script.main([*SUBSET, "--out", str(first), "--resume"]) == 0
    assert len(rows(first)) == before.count("\n") - 2  # columns and one header line
    assert "0 run(s) finished in this invocation" in capsys.readouterr().out


@pytest.mark.slow
def test_one_phase_and_seed_reproduce_into_a_new_folder(script, first, tmp_path, capsys):
    ledger = (first / "runs.csv").read_text()
    out = tmp_path / "again"
    args = [*SUBSET[:4], "--phases", "recipe", "--seeds", "1", "--choices", str(first / "runs.csv")]
    assert script.main([*args, "--out", str(out)]) == 0
    again = rows(out)
    assert len(again) == 1 and set(again.phase) == {"recipe"}
    stored = rows(first).query("phase == 'recipe' and seed == 1").iloc[0]
    assert again["one-shot error"].iloc[0] == stored["one-shot error"]  # the same run, here
    assert again["run errors"].iloc[0] == stored["run errors"]
    assert (first / "runs.csv").read_text() == ledger  # the source ledger is untouched


@pytest.mark.slow
def test_carried_final_rows_are_copied_not_retrained(script, first, tmp_path, capsys):
    out = tmp_path / "carried"
    source = first / "runs.csv"
    args = [*SUBSET, "--phases", "final", "--choices", str(source), "--carry", str(source)]
    assert script.main([*args, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count(": carried over") == 4 and "0 run(s) finished in this invocation" in text
    again, stored = rows(out), rows(first).query("phase == 'final'")
    assert len(again) == 4 and list(again["run errors"]) == list(stored["run errors"])
    assert "carried over from" in (out / "runs.csv").read_text()
    assert again["device"].str.endswith(", carried over").all()
    assert "4 carried over from an earlier run" in (out / "summary.md").read_text()
    assert not (out / "models").is_dir()  # nothing trained


@pytest.mark.slow
def test_a_spent_budget_stops(script, first, tmp_path, capsys):
    out = tmp_path / "cut"
    args = [*SUBSET, "--phases", "final", "--choices", str(first / "runs.csv"), "--out", str(out)]
    assert script.main([*args, "--budget-s", "1e-9"]) == 0
    assert "time budget is spent" in capsys.readouterr().out
    assert rows(out).empty


def test_bad_options_say_what_is_wrong(script, tmp_path, capsys):
    with pytest.raises(SystemExit):
        script.main(["--smoke", "--losses", "ArcFace", "--out", str(tmp_path / "a")])
    assert "unknown --losses 'ArcFace'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main(
            ["--smoke", "--choices", str(tmp_path / "none.csv"), "--out", str(tmp_path / "b")]
        )
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main(["--smoke"])
    assert "--out DIR is required" in capsys.readouterr().err


def test_a_claimed_run_is_skipped_until_its_process_is_gone(script, tmp_path):
    assert script.claim(tmp_path, "run-a")  # this process takes it
    assert not script.claim(tmp_path, "run-a")  # a living process holds it
    assert not script.busy(tmp_path)  # only this process holds runs
    (tmp_path / "claims" / "run-b").write_text("999999999")  # no such process: interrupted
    assert script.claim(tmp_path, "run-b")
    script.release(tmp_path, "run-a")
    assert script.claim(tmp_path, "run-a")
    row = dict.fromkeys(fc.RUN_KEY, "x") | {"phase": "final", "loss": "LiftedStruct*", "seed": 2}
    assert script.slug(row) == fc.run_name(row) and fc.run_name(row).startswith(
        "final-LiftedStruct-"
    )
    assert fc.run_name(row).endswith("-seed2") and fc.run_name(
        row | {"variant": "y"}
    ) != fc.run_name(row)

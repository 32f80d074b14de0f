"""Tests of the ``dmlbook`` command line: datasets, prepare, recall, train and evaluate."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml
from tiny_run import tiny_config

from dmlbook.cli import main
from dmlbook.evaluate import retrieval_metrics

# Single-threaded CPU math: identical results in this process and in subprocesses.
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def config_file(tmp_path):
    cfg = tiny_config(
        tmp_path / "run",
        loss={"name": "contrastive"},
        train={"iterations": 4, "epoch_iters": 2, "ks": [1, 2]},
    )
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_datasets_lists_builtin_and_missing_benchmarks(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("DMLBOOK_DATA", raising=False)
    monkeypatch.setenv("DMLBOOK_CACHE", str(tmp_path / "cache"))
    code, out, err = run(["datasets"], capsys)
    assert code == 0 and err == ""
    assert "digits/train: 901 samples" in out
    assert "synthetic/test: 3,000 samples" in out
    assert "cub: not available: No folder for data set 'cub'" in out


def test_prepare_builtin_with_options(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DMLBOOK_CACHE", str(tmp_path / "cache"))
    code, out, _ = run(
        ["prepare", "synthetic", "--option", "num_classes=8", "--option", "images_per_class=3"],
        capsys,
    )
    assert code == 0
    assert out.splitlines()[0].startswith("synthetic/train: 12 samples, 4 classes")
    code, _, err = run(["prepare", "synthetic", "--option", "num_classes"], capsys)
    assert code == 2 and "key=value" in err
    code, _, err = run(["prepare", "inshop"], capsys)
    assert code == 2 and "error" in err  # no direct download for In-Shop: the message says why


def test_recall_one_set_and_query_gallery(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 4)).astype(np.float32), np.repeat(np.arange(10), 3)
    g, gy = rng.normal(size=(20, 4)).astype(np.float32), np.repeat(np.arange(10), 2)
    for name, arr in {"x": x, "y": y, "g": g, "gy": gy}.items():
        np.save(tmp_path / f"{name}.npy", arr)
    code, out, _ = run(["recall", tmp_path / "x.npy", tmp_path / "y.npy", "--ks", "1", "2"], capsys)
    expected = retrieval_metrics(x, y, (1, 2))
    assert code == 0 and f"{100 * expected['R@1']:6.2f}" in out.splitlines()[0]
    code, out, _ = run(
        ["recall", tmp_path / "x.npy", tmp_path / "y.npy", "--gallery", tmp_path / "g.npy",
         "--gallery-labels", tmp_path / "gy.npy", "--ks", "1"],
        capsys,
    )  # fmt: skip
    expected = retrieval_metrics(x, y, (1,), gallery=g, gallery_labels=gy)
    assert code == 0 and f"{100 * expected['R@1']:6.2f}" in out.splitlines()[0]
    code, _, err = run(
        ["recall", tmp_path / "x.npy", tmp_path / "y.npy", "--gallery", tmp_path / "g.npy"], capsys
    )
    assert code == 2 and "--gallery-labels" in err
    code, _, err = run(["recall", tmp_path / "nope.npy", tmp_path / "y.npy"], capsys)
    assert code == 2 and "does not exist" in err


def test_train_then_evaluate_then_resume(config_file, tmp_path, capsys):
    code, out, err = run(["train", "--config", config_file, "--quiet"], capsys)
    assert code == 0, err
    assert "iter      4 (epoch 2)" in out and "TEST split" in out
    run_dir = tmp_path / "run"
    assert (run_dir / "best.pt").is_file() and (run_dir / "metrics.csv").is_file()
    code, out, err = run(["evaluate", run_dir / "best.pt", "--device", "cpu"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[0] == "R@1" and lines[-1].startswith("note: best checkpoint")
    code, out, err = run(
        ["train", "--config", config_file, "--set", "train.iterations=6", "--resume", "--quiet"],
        capsys,
    )
    assert code == 0, err
    assert "resumed at iteration 4" in out
    assert "iter      6 (epoch 3)" in out


def test_train_errors_exit_2_with_a_message(config_file, tmp_path, capsys):
    code, _, err = run(["train", "--config", config_file, "--set", "optim.lrr=1"], capsys)
    assert code == 2 and "unknown key 'optim.lrr'. Did you mean 'lr'?" in err
    code, _, err = run(["train", "--config", tmp_path / "none.yaml"], capsys)
    assert code == 2 and "does not exist" in err
    code, _, err = run(["train", "--config", "ms_cub_bninceptio"], capsys)
    assert code == 2 and "Shipped configs (by name): gs_cars_resnet50" in err
    code, _, err = run(["train", "--config", config_file, "--data", tmp_path / "nowhere"], capsys)
    assert code == 2 and "data folder" in err
    code, _, err = run(["evaluate", tmp_path / "none.pt"], capsys)
    assert code == 2 and "does not exist" in err


def test_dry_run_prints_the_checked_config(config_file, capsys):
    code, out, _ = run(
        ["train", "--config", config_file, "--set", "optim.lr=3e-5", "--dry-run"], capsys
    )
    assert code == 0
    values = yaml.safe_load(out)
    assert values["optim"]["lr"] == 3e-5 and values["train"]["batch_size"] == 16


def test_console_script_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "dmlbook.cli", "train", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "--config" in out.stdout and "--resume" in out.stdout

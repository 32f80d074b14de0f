"""Tests of dmlbook.engine.run_folder: a run folder is writable, locked, and cleaned of its own files only.

Each check fails before anything is trained, so these tests cost little: the runs that pass the
checks are the tiny run of ``tests/tiny_run.py`` (a few seconds on one thread).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from filelock import FileLock
from tiny_run import tiny_config

from dmlbook.cli import main
from dmlbook.engine import ConfigError, load_config, train
from dmlbook.engine import trainer as trainer_module
from dmlbook.engine.run_folder import LOCK_NAME, RunFolderBusy, check_writable

pytestmark = pytest.mark.usefixtures("one_thread")


def _refuse_to_build(cfg):
    raise AssertionError("the run folder must be checked before anything is built")


def test_a_second_run_in_the_same_folder_stops_at_once(tmp_path, monkeypatch, capsys):
    cfg = load_config(tiny_config(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(trainer_module, "build_loss", _refuse_to_build)
    with FileLock(tmp_path / "run" / LOCK_NAME):  # as another dmlbook train would hold it
        with pytest.raises(RunFolderBusy, match="another dmlbook train is running in"):
            train(cfg, progress=False)
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(tiny_config(tmp_path / "run")))
        assert main(["train", "--config", str(path), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dmlbook train: error: another dmlbook train is running in")
        assert len(err.splitlines()) == 1 and "train.out_dir" in err
    assert not list((tmp_path / "run").glob("*.pt"))


def test_only_the_runs_own_temporary_files_are_removed(tmp_path):
    out = tmp_path / "shared-tmp"  # as train.out_dir: /tmp would be
    out.mkdir()
    others = [out / ".mine.tmp", out / ".x.1234.tmp", out / ".last.pt.tmp"]
    for p in others:
        p.write_text("another program's")
    stale = out / ".last.pt.k2j3h4.tmp"  # left by a dmlbook train killed while writing
    stale.write_bytes(b"half a checkpoint")
    train(load_config(tiny_config(out, train={"iterations": 4})), progress=False, verbose=False)
    assert all(p.read_text() == "another program's" for p in others)
    assert not stale.exists()


def test_a_folder_that_cannot_be_written_is_found_before_training(tmp_path, monkeypatch):
    monkeypatch.setattr(trainer_module, "build_loss", _refuse_to_build)
    if Path("/proc/self").is_dir():  # exists, and takes no new file even from root
        with pytest.raises(OSError, match=r"the run folder /proc/self cannot be written .*out_dir"):
            train(load_config(tiny_config(Path("/proc/self"))), progress=False)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(OSError, match="cannot be written"):
        check_writable(blocked / "run")


@pytest.mark.parametrize("name", ["../../X", "a/b", "..", "", "~root"])
def test_run_names_stay_under_runs(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    values = tiny_config(tmp_path / "unused")
    values["name"] = name
    del values["train"]["out_dir"]
    with pytest.raises(ConfigError, match="must be a plain folder name"):
        load_config(values)
    assert list(tmp_path.iterdir()) == []

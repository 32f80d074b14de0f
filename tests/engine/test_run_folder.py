"""Tests of dmlbook.engine.run_folder: a run folder is writable, locked, never overwritten, and
cleaned of its own files only.

Each check fails before anything is trained, so these tests cost little: the runs that pass the
checks are the tiny run of ``tests/tiny_run.py`` (a few seconds on one thread).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from filelock import FileLock
from tiny_run import tiny_config

from dmlbook.cli import main
from dmlbook.engine import ConfigError, load_config, run_loop, train
from dmlbook.engine.run_folder import (
    LOCK_NAME,
    RunFolderBusy,
    RunFolderTaken,
    check_writable,
    run_folder,
)
from dmlbook.training import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def _refuse_to_build(cfg):
    raise AssertionError("the run folder must be checked before anything is built")


def test_a_second_run_in_the_same_folder_stops_at_once(tmp_path, monkeypatch, capsys):
    cfg = load_config(tiny_config(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(run_loop, "build_loss", _refuse_to_build)
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
    monkeypatch.setattr(run_loop, "build_loss", _refuse_to_build)
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


# ------------------------------------------------------------------------------------------
# A fresh run never overwrites another (issue 45)
# ------------------------------------------------------------------------------------------


def _old_run(out: Path) -> dict[str, bytes]:
    """The files a finished run leaves (their content does not matter to the check)."""
    out.mkdir(parents=True)
    files = {name: f"old {name}".encode() for name in ("last.pt", "best.pt", "metrics.csv")}
    files["run.json"] = (
        b'{"name": "old", "iteration": 12, "total_iterations": 12, "complete": true}'
    )
    for name, data in files.items():
        (out / name).write_bytes(data)
    return files


def test_a_fresh_run_into_a_folder_holding_a_run_stops_with_the_choices(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "run"
    old = _old_run(out)
    monkeypatch.setattr(run_loop, "build_loss", _refuse_to_build)
    cfg = load_config(tiny_config(out, train={"seed": 1}))  # another seed, as --set would give
    for resume in (False, "auto"):  # "auto" finds no last.pt to continue: also a fresh run
        (out / "last.pt").unlink(missing_ok=resume == "auto")
        with pytest.raises(RunFolderTaken, match=r"already holds a run \(run 'old', iteration 12 "
                           r"of 12, complete; .*nothing was trained or overwritten"):  # fmt: skip
            train(cfg, resume=resume, progress=False)
    (out / "last.pt").write_bytes(old["last.pt"])
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny_config(out)))
    assert main(["train", "--config", str(path), "--set", "train.seed=1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("dmlbook train: error: the run folder")
    for choice in (str(out), "--resume", "--set train.out_dir=DIR", "--overwrite",
                   str(out / "previous-run-1"), "nothing is deleted"):  # fmt: skip
        assert choice in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in old} == old
    assert not (out / "previous-run-1").exists()


def test_overwrite_moves_the_old_run_aside_and_keeps_it_whole(tmp_path, capsys):
    out = tmp_path / "run"
    old = _old_run(out)
    (out / "tensorboard").mkdir()
    (out / "notes.txt").write_text("the user's own file")  # not a run file: left where it is
    (out / "previous-run-1").mkdir()  # taken: the next number is used
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tiny_config(out, train={"iterations": 4})))
    argv = ["train", "--config", str(path), "--quiet", "--overwrite"]
    assert main([*argv, "--resume"]) == 2  # a fresh run or a resumed one, not both
    assert "give one of them (--overwrite or --resume)" in capsys.readouterr().err
    assert main(argv) == 0
    moved = out / "previous-run-2"
    assert {p.name: p.read_bytes() for p in moved.iterdir() if p.is_file()} == old
    assert (moved / "tensorboard").is_dir() and (out / "notes.txt").is_file()
    assert load_checkpoint(out / "last.pt")["position"]["iteration"] == 4  # the new run
    assert json.loads((out / "run.json").read_text())["name"] == "tiny"


def test_resuming_the_folders_own_run_is_not_a_fresh_run(tmp_path):
    steps = ["optim.milestones=[2]"]  # whole iterations: a longer run keeps the schedule
    cfg = load_config(tiny_config(tmp_path / "run", train={"iterations": 4}), steps)
    train(cfg, progress=False, verbose=False)
    longer = load_config(tiny_config(tmp_path / "run", train={"iterations": 8}), steps)
    assert (
        train(longer, resume=True, progress=False, verbose=False).history.iloc[-1]["iteration"] == 8
    )
    with pytest.raises(RunFolderTaken):  # another run's last.pt into this folder: not its own
        other = tmp_path / "elsewhere.pt"
        other.write_bytes((tmp_path / "run" / "last.pt").read_bytes())
        train(longer, resume=other, progress=False, verbose=False)


def test_deleting_the_lock_file_lets_no_second_run_in(tmp_path):
    """The folder itself is locked (flock on its open descriptor): the lock file can go."""
    out = tmp_path / "run"
    with run_folder(out):
        (out / LOCK_NAME).unlink()  # a careless `rm .dmlbook-train.lock` while run A trains
        with pytest.raises(RunFolderBusy, match="another dmlbook train is running in"):
            with run_folder(out):
                pass
    with run_folder(out):  # released with the run
        pass

"""Tests of dmlbook.training.checkpoint: atomic files, checkpoints and their clear errors."""

from __future__ import annotations

import csv
import errno
import json
import resource
from pathlib import Path

import pytest
import torch

from dmlbook.training.checkpoint import (
    FORMAT,
    atomic_write,
    load_checkpoint,
    save_checkpoint,
    write_csv,
    write_json,
)


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "f.bin"
    atomic_write(target, lambda f: f.write(b"old"))

    def broken(f):
        f.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(target, broken)
    assert target.read_bytes() == b"old"
    assert list(tmp_path.iterdir()) == [target]


def test_a_checkpoint_round_trips_with_its_format_tag(tmp_path):
    model = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([1.5])}
    path = save_checkpoint(tmp_path / "run" / "last.pt", {"model": model, "position": {"i": 3}})
    assert path == tmp_path / "run" / "last.pt"  # the folder is created
    data = torch.load(path, weights_only=True)  # read back by torch itself, not our reader
    assert data["format"] == FORMAT == "dmlbook-checkpoint/1"
    loaded = load_checkpoint(path)
    assert loaded["position"] == {"i": 3} and loaded.keys() == data.keys()
    assert all(torch.equal(loaded["model"][k], v) for k, v in model.items())
    assert save_checkpoint(tmp_path / "again.pt", loaded) and load_checkpoint(tmp_path / "again.pt")


def test_a_flipped_bit_inside_a_weight_is_a_damaged_checkpoint(tmp_path):
    """``torch.load`` reads a checkpoint whose tensor bytes changed (its structure is intact);
    the CRC-32 that ``torch.save``'s zip keeps for each record refuses the file in one line."""
    weight = torch.arange(64, dtype=torch.float64) * 1.25 + 1000.0  # bytes found in the file
    path = save_checkpoint(tmp_path / "last.pt", {"model": {"w": weight}, "position": {"i": 1}})
    raw = bytearray(path.read_bytes())
    at = bytes(raw).find(weight.numpy().tobytes())
    assert at > 0, "the weight's bytes are stored as they are"
    raw[at + 8 * 40 + 3] ^= 0x10  # one bit of element 40
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(bytes(raw))
    assert not torch.equal(torch.load(damaged, weights_only=True)["model"]["w"], weight)
    with pytest.raises(ValueError, match=r"damaged.pt cannot be read \(BadZipFile: Bad CRC-32 for "
                       r"record '.*data/0'\): it is truncated, damaged .*start the run again"):  # fmt: skip
        load_checkpoint(damaged)
    assert torch.equal(load_checkpoint(path)["model"]["w"], weight)  # the whole file reads


def test_foreign_and_damaged_files_get_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint '.*none.pt' does not exist"):
        load_checkpoint(tmp_path / "none.pt")
    torch.save({"conv.weight": torch.zeros(2)}, tmp_path / "weights.pt")  # bare weights
    with pytest.raises(
        ValueError, match="not a dmlbook checkpoint .*dmlbook.models.load_pretrained"
    ):
        load_checkpoint(tmp_path / "weights.pt")
    torch.save({"format": FORMAT, "model": None}, tmp_path / "empty.pt")
    with pytest.raises(ValueError, match="damaged dmlbook checkpoint .* holds no model"):
        load_checkpoint(tmp_path / "empty.pt")
    (tmp_path / "note.pt").write_text("a note\n")
    with pytest.raises(ValueError, match="cannot be read .* Use another checkpoint of the run"):
        load_checkpoint(tmp_path / "note.pt")


def test_a_full_disk_is_one_oserror_and_keeps_the_old_file(tmp_path):
    """torch.save reports a full disk as a RuntimeError of its zip writer, caused by ENOSPC."""
    target = atomic_write(tmp_path / "last.pt", lambda f: f.write(b"old"))

    def full(f):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as err:
            raise RuntimeError("PytorchStreamWriter failed writing file data/0") from err

    with pytest.raises(OSError, match=f"no space left on the device of {tmp_path} while writing "
                       "last.pt; last.pt keeps its previous version") as caught:  # fmt: skip
        atomic_write(target, full)
    assert caught.value.errno == errno.ENOSPC
    assert target.read_bytes() == b"old" and list(tmp_path.iterdir()) == [target]


def test_csv_and_json_run_files(tmp_path):
    rows = [{"iteration": 4, "R@1": 0.5, "extra": "dropped"}, {"R@1": 0.75, "iteration": 8}]
    write_csv(tmp_path / "metrics.csv", rows, ["iteration", "R@1"])
    with open(tmp_path / "metrics.csv", newline="") as f:
        assert list(csv.reader(f)) == [["iteration", "R@1"], ["4", "0.5"], ["8", "0.75"]]
    write_json(tmp_path / "run.json", {"out_dir": Path("runs/x"), "complete": True})
    text = (tmp_path / "run.json").read_text()
    assert json.loads(text) == {"out_dir": "runs/x", "complete": True}
    assert text.startswith('{\n  "out_dir"')  # indented, paths as strings


def test_a_file_size_limit_is_one_oserror_and_keeps_the_old_file(tmp_path):
    """EFBIG (``ulimit -f``, or FAT32's 4 GiB) as torch.save meets it: a RuntimeError of its zip
    writer caused by ``OSError(EFBIG)``. Checked for real under a 1 MiB limit on this process
    (Python ignores SIGXFSZ, so the write fails with EFBIG instead of killing it)."""
    target = save_checkpoint(tmp_path / "last.pt", {"model": {"w": torch.zeros(4)}})
    old = target.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        with pytest.raises(OSError) as caught:
            save_checkpoint(target, {"model": {"w": torch.zeros(1 << 20)}})  # 4 MiB
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert caught.value.errno == errno.EFBIG
    assert str(caught.value) == (
        f"last.pt is larger than the file system of {tmp_path} or this process's file-size "
        "limit allows (File too large); last.pt keeps its previous version (nothing is lost "
        "before it). Raise the limit (ulimit -f unlimited) or move the run folder "
        "(train.out_dir) to a file system that takes large files (FAT32 stops at 4 GiB)."
    )
    assert target.read_bytes() == old and list(tmp_path.iterdir()) == [target]

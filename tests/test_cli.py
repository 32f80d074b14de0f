"""Tests of the ``dmlbook`` command line: datasets, prepare, recall, train and evaluate."""

from __future__ import annotations

import errno
import io
import os
import shlex
import signal
import subprocess
import sys
import urllib.error
import zipfile

import numpy as np
import pytest
import torch
import yaml
from tiny_run import tiny_config

from dmlbook.cli import main
from dmlbook.engine import load_config, run_loop, train
from dmlbook.evaluate import retrieval_metrics
from dmlbook.training import checkpoint as checkpoint_module
from dmlbook.training import load_checkpoint

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


@pytest.mark.slow
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
    steps = ["--set", "optim.milestones=[2]"]  # whole iterations: the run may be extended
    code, out, err = run(["train", "--config", config_file, *steps, "--quiet"], capsys)
    assert code == 0, err
    assert "iter      4 (epoch 2)" in out and "TEST split" in out
    run_dir = tmp_path / "run"
    assert (run_dir / "best.pt").is_file() and (run_dir / "metrics.csv").is_file()
    code, out, err = run(["evaluate", run_dir / "best.pt", "--device", "cpu"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    best = torch.load(run_dir / "best.pt", weights_only=False)["best"]["iteration"]
    header = f"checkpoint {run_dir / 'best.pt'} (run tiny, iteration {best}): "
    assert lines[0].startswith(header) and "images; device cpu" in lines[0], lines[0]
    assert lines[0].split(": ")[1].startswith("synthetic test, 48 images")  # 8 classes x 6
    assert lines[1].split()[0] == "R@1" and lines[-1].startswith("note: best checkpoint")
    code, out, err = run(
        ["train", "--config", config_file, *steps, "--set", "train.iterations=6", "--resume",
         "--quiet"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "resumed at iteration 4" in out
    assert "iter      6 (epoch 3)" in out
    # damaged checkpoints: one line naming the file and the fix, never a traceback (issue 29)
    good = (run_dir / "last.pt").read_bytes()
    damaged = {"truncated": good[: len(good) // 2], "empty": b"", "text": b"a note\n",
               "random": bytes(range(256)) * 16}  # fmt: skip
    for kind, data in damaged.items():
        bad = tmp_path / f"{kind}.pt"
        bad.write_bytes(data)
        for argv in (["evaluate", bad], ["train", "--config", config_file, "--resume", bad]):
            code, out, err = run(argv, capsys)
            assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
            assert err.startswith(f"dmlbook {argv[0]}: error: {bad} cannot be read (")
            assert "Use another checkpoint of the run" in err
    code, _, err = run(["train", "--config", config_file, "--resume", run_dir / "best.pt"], capsys)
    assert code == 2 and "holds no training position" in err and "best.pt keeps" in err


def test_train_errors_exit_2_with_a_message(config_file, tmp_path, capsys):
    code, _, err = run(["train", "--config", config_file, "--set", "optim.lrr=1"], capsys)
    assert code == 2 and "unknown key 'optim.lrr'. Did you mean 'lr'?" in err
    code, _, err = run(["train", "--config", tmp_path / "none.yaml"], capsys)
    assert code == 2 and "does not exist" in err
    code, _, err = run(["train", "--config", "ms_cub_bninceptio"], capsys)
    assert code == 2 and "Shipped configs (by name): " in err and "ms_cub_bninception, " in err
    code, _, err = run(["train", "--config", config_file, "--data", tmp_path / "nowhere"], capsys)
    assert code == 2 and "data folder" in err
    code, _, err = run(["evaluate", tmp_path / "none.pt"], capsys)
    assert code == 2 and "does not exist" in err


class _Sending(torch.nn.Module):
    """A loss that sends ``sig`` to its own process at its ``at``-th call."""

    def __init__(self, loss: torch.nn.Module, at: int, sig: int) -> None:
        super().__init__()
        self.loss, self.at, self.sig, self.calls = loss, at, sig, 0

    def forward(self, emb: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.at:
            os.kill(os.getpid(), self.sig)
        return self.loss(emb, y)


@pytest.fixture
def stop_signals_restored():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def test_sighup_stops_like_ctrl_c_exit_129_with_the_resume_command(
    config_file, tmp_path, capsys, monkeypatch, stop_signals_restored
):
    real = run_loop.build_loss
    monkeypatch.setattr(run_loop, "build_loss", lambda cfg: _Sending(real(cfg), 3, signal.SIGHUP))
    argv = ["train", "--config", str(config_file), "--set", "train.iterations=8", "--quiet"]
    code, out, err = run(argv, capsys)
    assert code == 129, err  # 128 + SIGHUP, as the shell reports a process SIGHUP killed
    command = shlex.join(["dmlbook", *argv[:-1], "--resume"])
    assert "stopped at iteration 3 of 8: the exact position is saved in" in out
    assert out.splitlines()[-3].endswith(f"Resume with: {command}")
    assert "best.pt holds the final model" not in out and "(so far: the run was stopped" in out
    monkeypatch.setattr(run_loop, "build_loss", real)
    code, out, err = run(shlex.split(command)[1:] + ["--quiet"], capsys)
    assert code == 0 and "resumed at iteration 3" in out and "(so far" not in out


def test_full_disk_is_one_line_and_loses_nothing_before_the_last_checkpoint(
    config_file, tmp_path, capsys, monkeypatch
):
    """The second last.pt meets a full disk: the first stays, the message says how to resume,
    and the resumed run ends with the weights of an uninterrupted one."""
    real_open, writes = checkpoint_module._open_temp, []

    class FullDisk(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    def open_temp(path):
        f, tmp = real_open(path)
        writes.append(path.name)
        if path.name == "last.pt" and writes.count("last.pt") == 2:
            f.close()
            return FullDisk(), tmp
        return f, tmp

    monkeypatch.setattr(checkpoint_module, "_open_temp", open_temp)
    argv = ["train", "--config", str(config_file), "--set", "train.iterations=6", "--quiet"]
    code, out, err = run(argv, capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(
        f"dmlbook train: error: no space left on the device of {tmp_path / 'run'}"
    )
    command = shlex.join(["dmlbook", *argv[:-1], "--resume"])
    assert "last.pt keeps its previous version" in err and err.rstrip().endswith(command)
    assert load_checkpoint(tmp_path / "run" / "last.pt")["position"]["iteration"] == 2
    assert not list((tmp_path / "run").glob(".*.tmp"))
    monkeypatch.setattr(checkpoint_module, "_open_temp", real_open)
    assert run(shlex.split(command)[1:] + ["--quiet"], capsys)[0] == 0
    ref = tiny_config(tmp_path / "ref", loss={"name": "contrastive"},
                      train={"iterations": 6, "epoch_iters": 2, "ks": [1, 2]})  # fmt: skip
    train(load_config(ref), progress=False, verbose=False)
    a, b = (load_checkpoint(p / "last.pt")["model"] for p in (tmp_path / "ref", tmp_path / "run"))
    assert all(torch.equal(a[k], b[k]) for k in a)


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


# ------------------------------------------------------------------------------------------
# fast --help, CLI spelling of fixes, data already on disk (issues 19, 20)
# ------------------------------------------------------------------------------------------

_IMPORTS_AFTER_HELP = """
import sys
from dmlbook.cli import main
for argv in (["--help"], ["prepare", "--help"], ["train", "--help"], ["prepare", "nope"]):
    try:
        main(argv)
    except SystemExit:
        pass
print(sorted(m for m in ("torch", "numpy", "PIL") if m in sys.modules))
"""


def test_help_and_argument_errors_import_no_torch():
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS_AFTER_HELP], capture_output=True, text=True
    )  # no timeout: a busy machine may take long, and nothing here can hang
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "invalid choice: 'nope'" in out.stderr


def test_subcommand_help_lists_choices_and_examples(capsys):
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    out = capsys.readouterr().out
    assert "one of: cars, cub, digits, inshop, omniglot, omniglot_full, sop, synthetic" in " ".join(
        out.split()
    )
    assert "--allow-partial" in out and "--skip-bad-images" in out and "examples:" in out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--set data.options.allow_partial=true" in out
    assert "train.out_dir: runs/<name> under the current folder by default" in out
    assert "one of h100_sxm, h100_pcie, h200_sxm, a100_sxm_80gb, a100_sxm_40gb" in out
    with pytest.raises(SystemExit):
        main(["train", "--config", "x", "--dry-run", "--gpu", "h100"])
    assert "invalid choice: 'h100' (choose from 'h100_sxm'" in capsys.readouterr().err


def test_cli_spelling_rewrites_every_python_fix():
    from dmlbook.cli import cli_spelling
    from dmlbook.data.base.errors import ALLOW_PARTIAL, SKIP_BAD, prepare_call

    python = f"pass {ALLOW_PARTIAL}, or {SKIP_BAD}; {prepare_call('cub')}; root='/path/to/X'"
    prep = cli_spelling(python, "prepare")
    assert prep == (
        "pass --allow-partial, or --skip-bad-images; dmlbook prepare cub --data DIR; --data DIR"
    )
    assert "--set data.options.allow_partial=true" in cli_spelling(python, "train")
    strict = f"Replace these files, or pass {SKIP_BAD} to leave them out."
    assert cli_spelling(strict, "train") == (
        "Replace these files, or delete them and add --set data.options.allow_partial=true."
    )
    assert cli_spelling(strict, "prepare").endswith("pass --skip-bad-images to leave them out.")
    for spelled in (prep, cli_spelling(python, "train")):
        assert "=True" not in spelled and "data_dir" not in spelled and "root=" not in spelled


def _cub_copy(folder, classes=(1, 2, 101), per_class=2):
    """A tiny hand-extracted CUB copy: the three list files and a few JPEGs."""
    from PIL import Image

    rows, labels, image_id = [], [], 0
    for c in classes:
        for k in range(per_class):
            image_id += 1
            rel = f"{c:03d}.Bird_{c}/Bird_{c}_{k}.jpg"
            (folder / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((20, 24, 3), 10 * k + c % 200, np.uint8)).save(
                folder / "images" / rel
            )
            rows.append(f"{image_id} {rel}")
            labels.append(f"{image_id} {c}")
    (folder / "images.txt").write_text("\n".join(rows) + "\n")
    (folder / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (folder / "classes.txt").write_text(
        "\n".join(f"{c} {c:03d}.Bird_{c}" for c in range(1, 201)) + "\n"
    )
    return folder


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Every download URL points nowhere: a test passes only if nothing is downloaded."""
    from dmlbook.data.fetch import download

    gone = (tmp_path / "no-such-server" / "x.tgz").as_uri()
    for name, resources in list(download.RESOURCES.items()):
        monkeypatch.setitem(
            download.RESOURCES, name, tuple(r.__class__(gone, r.md5, r.filename) for r in resources)
        )
    monkeypatch.setenv("DMLBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DMLBOOK_DATA", raising=False)


def test_prepare_uses_a_hand_extracted_copy(tmp_path, capsys, no_network):
    _cub_copy(tmp_path / "data" / "CUB_200_2011")
    code, out, err = run(["prepare", "cub", "--data", tmp_path / "data", "--no-cache"], capsys)
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "checking the copy in" in out and "nothing to download" in out
    assert "Pass --allow-partial to load it anyway" in err and "allow_partial=True" not in err
    assert "Missing classes (98 of 100): 003.Bird_3, 004.Bird_4" in err
    assert "5,794" not in err  # the classification-split note does not apply to 4 images
    code, out, err = run(
        ["prepare", "cub", "--data", tmp_path / "data", "--allow-partial", "--cache", "16"], capsys
    )
    assert code == 0, err
    assert out.splitlines()[1:] == [
        "cub/train: 4 images, 2 classes, 2-2 per class, cached 16x16 (crop)",
        "cub/test: 2 images, 1 classes, 2-2 per class, cached 16x16 (crop)",
    ]
    assert not (tmp_path / "data" / "downloads").exists()
    cached = list((tmp_path / "cache" / "images").iterdir())
    assert cached and not [p for p in cached if p.suffix == ".lock"]


def test_prepare_a_corrupt_image_strict_then_skipped(tmp_path, capsys, no_network):
    copy = _cub_copy(tmp_path / "CUB_200_2011")
    bad = copy / "images" / "002.Bird_2" / "Bird_2_1.jpg"
    bad.write_bytes(b"not a jpeg")
    argv = ["prepare", "cub", "--data", copy, "--allow-partial", "--cache", "16"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "Cannot decode 1 of 4 images" in err and str(bad) in err
    assert "pass --skip-bad-images to leave them out" in err
    code, out, err = run([*argv, "--skip-bad-images"], capsys)
    assert code == 0, err
    assert "cub/train: 3 images, 2 classes, 1-2 per class, cached 16x16 (crop)" in out
    assert "warning: cub/train: leaving out 1 of 4 images that cannot be decoded" in err
    assert str(bad) in err and "--skip-bad-images" in err
    code, _, err = run(
        ["prepare", "cub", "--data", copy, "--skip-bad-images", "--no-cache"], capsys
    )
    assert code == 2 and "drop --no-cache" in err


def test_prepare_refuses_a_data_folder_that_does_not_exist(tmp_path, capsys, no_network):
    code, out, err = run(["prepare", "cub", "--data", tmp_path / "does/not/exist"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith(f"dmlbook prepare: error: --data {tmp_path / 'does/not/exist'}: no such")
    assert "mkdir -p" in err and not (tmp_path / "does").exists()


def test_prepare_offline_is_one_line(tmp_path, capsys, no_network):
    (tmp_path / "empty").mkdir()
    code, out, err = run(["prepare", "cub", "--data", tmp_path / "empty"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("dmlbook prepare: error: Could not download")
    assert "CUB_200_2011.tgz by hand" in err and "dmlbook prepare cub --data DIR again" in err
    code, _, err = run(["prepare", "cub"], capsys)
    assert code == 2 and "pass --data DIR" in err
    code, _, err = run(["prepare", "digits", "--allow-partial"], capsys)
    assert code == 2 and "--allow-partial applies to the data sets read from disk" in err
    code, _, err = run(["prepare", "digits", "--data", tmp_path], capsys)
    assert code == 2 and "--data applies to the data sets read from disk" in err


def test_allow_partial_from_a_config(config_file, capsys):
    code, out, _ = run(
        ["train", "--config", config_file, "--set", "data.options.allow_partial=true",
         "--dry-run"],
        capsys,
    )  # fmt: skip
    assert code == 0
    assert yaml.safe_load(out)["data"]["options"]["allow_partial"] is True


def test_engine_errors_are_one_line(config_file, capsys, monkeypatch):
    import dmlbook.engine

    def refuse(cfg, **kwargs):  # e.g. --resume with no checkpoint to resume from
        raise ValueError("nothing to resume from: run/last.pt does not exist;\nstart without it.")

    monkeypatch.setattr(dmlbook.engine, "train", refuse)
    code, out, err = run(["train", "--config", config_file, "--resume", "--quiet"], capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == (
        "dmlbook train: error: nothing to resume from: run/last.pt does not exist; "
        "start without it.\n"
    )


def test_omniglot_full_offline_says_how_in_cli_terms(capsys, tmp_path, monkeypatch):
    code, _, err = run(["prepare", "omniglot_full", "--data", tmp_path], capsys)
    assert code == 2 and "download=True" not in err and "load_dataset" not in err
    assert "dmlbook prepare omniglot_full --data DIR --option download=true" in err

    def offline(url, *args, **kwargs):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("dmlbook.data.handwritten.omniglot.fetch", offline)
    code, _, err = run(
        ["prepare", "omniglot_full", "--data", tmp_path, "--option", "download=true"], capsys
    )
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "Could not download" in err and "Offline? Download images_background.zip by hand" in err


_MODULES_AFTER_RUN = """
import runpy, sys
sys.argv = ["dmlbook"] + sys.argv[1:]
try:
    runpy.run_module("dmlbook", run_name="__main__")
except SystemExit as stop:
    code = stop.code
print(code, sorted(m for m in ("torch", "numpy", "PIL") if m in sys.modules))
"""


@pytest.mark.parametrize(
    "argv, status, stream, text",
    [
        (["--help"], "0", "stdout", "usage: dmlbook"),
        (["prepare", "nope"], "2", "stderr", "invalid choice: 'nope'"),
        (["recall"], "2", "stderr", "the following arguments are required"),
    ],
)
def test_python_m_dmlbook_answers_without_torch(argv, status, stream, text):
    """``python -m dmlbook`` (the ``__main__`` module) parses, helps and rejects without torch."""
    out = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER_RUN, *argv],
        capture_output=True,
        text=True,
    )  # no timeout: a busy machine may take long, and nothing here can hang
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == f"{status} []"
    assert text in getattr(out, stream)


@pytest.mark.parametrize(
    "text, extra, names",
    [
        ("name: d\noptim: {lr: 0.003}\noptim: {lr: 0.5}\n", [], "line 3: the key 'optim' is given twice"),
        ("name: d\nloss:\n  params:\n    a: " + "[" * 1000 + "]" * 1000 + "\n", [], "line 4: lists and mappings are nested"),
        ("utf-16", [], "is not UTF-8 text (it is UTF-16)"),
        ("name: d\n", ["--set", f"train.iterations={10**30}"], "train.iterations must be a positive integer of at most"),
        ("name: d\n", ["--set", "optim.milestones=[1.5]"], "optim.milestones must be increasing"),
    ],
    ids=["key-twice", "1000-deep", "utf-16", "iterations-1e30", "milestone-1.5"],
)  # fmt: skip
def test_a_bad_config_fails_the_dry_run_in_one_line(tmp_path, capsys, text, extra, names):
    """Issue 45: each of these passed `--dry-run` (rc 0) or ended in a traceback before."""
    path = tmp_path / "bad.yaml"
    if text == "utf-16":
        path.write_text("name: d\ntrain: {iterations: 10}\n", encoding="utf-16")
    else:
        path.write_text(text + "train: {iterations: 10}\n")
    code, out, err = run(["train", "--config", path, *extra, "--dry-run"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("dmlbook train: error: ") and names in err
    if not extra:
        assert str(path) in err  # the file is named


def test_a_damaged_omniglot_zip_is_one_line_in_cli_terms(capsys, tmp_path):
    """Issue 45: a release zip with a flipped byte was a zipfile traceback (Bad CRC-32)."""
    path = tmp_path / "images_background.zip"
    with zipfile.ZipFile(path, "w") as zf:  # stored: the flipped byte fails the CRC-32
        zf.writestr("images_background/Alpha/character01/0101_01.png", bytes(range(200)))
        info = zf.getinfo("images_background/Alpha/character01/0101_01.png")
    data = bytearray(path.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + 100] ^= 0xFF
    path.write_bytes(bytes(data))
    code, _, err = run(["prepare", "omniglot_full", "--data", tmp_path], capsys)
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"dmlbook prepare: error: {path} is damaged: its member ")
    assert "Bad CRC-32" in err and f"Delete {path} and fetch images_background.zip again: " in err
    assert "dmlbook prepare omniglot_full --data DIR --option download=true" in err

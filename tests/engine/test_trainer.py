"""Tests of dmlbook.engine.trainer: runs, checkpoints, interrupts and resumption.

Runs are tiny (a narrow ResNet-18 on 32 px ``synthetic`` images, or on a generated CUB-layout
folder for the image pipeline) and single-threaded, so that an interrupted-and-resumed run can be
compared bit for bit with an uninterrupted one.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from PIL import Image
from tiny_run import tiny_config

from dmlbook.core.reproducibility import seed_everything
from dmlbook.engine import (
    TEST_SELECTION_NOTE,
    ConfigError,
    NothingToResume,
    evaluate_checkpoint,
    load_config,
    run_loop,
    selection_note,
    train,
)
from dmlbook.engine.build import build_model
from dmlbook.training import load_checkpoint

# Single-threaded CPU math: identical results in this process and in subprocesses.
pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(tmp_path: Path, **sections: dict) -> dict:
    return tiny_config(tmp_path / "run", **sections)


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_run_writes_metrics_checkpoints_and_the_test_selection_note(tmp_path, capsys):
    result = train(load_config(tiny(tmp_path)), progress=False)
    out = result.out_dir
    assert {p.name for p in out.iterdir()} >= {
        "last.pt", "best.pt", "metrics.csv", "train_log.csv", "run.json",
    }  # fmt: skip
    hist = pd.read_csv(out / "metrics.csv")
    assert list(hist["iteration"]) == [0, 4, 8, 12]
    assert list(hist.columns) == [
        "iteration", "epoch", "loss", "lr", "R@1", "R@2", "R@4", "MAP@R", "RP", "seconds", "best",
    ]  # fmt: skip
    assert hist["best"].sum() == 1 and np.isnan(hist["loss"][0])
    assert hist["lr"].tolist() == pytest.approx([1e-3, 1e-3, 1e-4, 1e-4])  # x0.1 at 50 %
    log = pd.read_csv(out / "train_log.csv")
    assert list(log["iteration"]) == [2, 4, 6, 8, 10, 12] and np.isfinite(log["loss"]).all()
    meta = json.loads((out / "run.json").read_text())
    assert meta["complete"] and meta["best"]["selected_on"] == "test"
    assert meta["best"]["note"] == TEST_SELECTION_NOTE
    best_row = hist[hist["best"]].iloc[0]
    assert meta["best"]["iteration"] == best_row["iteration"]
    assert best_row["R@1"] == hist["R@1"].max()
    printed = capsys.readouterr().out
    assert "TEST split" in printed and "iter     12 (epoch 3)" in printed
    assert best_row["iteration"] != 12  # the note is printed because best.pt is not the last
    assert selection_note(load_checkpoint(out / "best.pt")) == TEST_SELECTION_NOTE
    assert selection_note(load_checkpoint(out / "last.pt")) is None  # the final model
    # best.pt evaluates to the recorded numbers
    again = evaluate_checkpoint(out / "best.pt", device="cpu")
    assert again["R@1"] == pytest.approx(best_row["R@1"], abs=1e-12)
    # a longer run learns: R@1 rises above its value at initialisation
    longer = train(load_config(tiny(tmp_path / "longer"), ["train.iterations=40"]), progress=False)
    assert longer.history["R@1"].iloc[-1] > longer.history["R@1"].iloc[0]


class _Interrupting(torch.nn.Module):
    """Wraps a loss; at its ``at``-th call sends ``sig`` (Ctrl-C by default) to its own process,
    or raises KeyboardInterrupt (``hard``: what a second signal does)."""

    def __init__(
        self, loss: torch.nn.Module, at: int, hard: bool = False, sig: int = signal.SIGINT
    ) -> None:
        super().__init__()
        self.loss, self.at, self.hard, self.sig, self.calls = loss, at, hard, sig, 0

    def forward(self, emb: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.at:
            if self.hard:  # as a second Ctrl-C: stops inside the iteration
                raise KeyboardInterrupt
            os.kill(os.getpid(), self.sig)  # a first signal: the iteration completes
        return self.loss(emb, y)


@pytest.fixture
def sigint_default():
    """Give SIGINT Python's default handler for the test, whatever the suite was started with.

    Under ``nohup`` or ``&`` from a non-interactive shell the suite inherits SIGINT *ignored*;
    the test must not depend on that. The disposition the suite started with is restored after.
    """
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield signal.default_int_handler
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("hard", [False, True], ids=["ctrl-c", "ctrl-c-twice"])
def test_interrupt_then_resume_equals_uninterrupted(
    tmp_path, monkeypatch, capsys, hard, sigint_default
):
    ref = train(load_config(tiny(tmp_path / "a")), progress=False, verbose=False)
    real = run_loop.build_loss
    monkeypatch.setattr(
        run_loop, "build_loss", lambda cfg: _Interrupting(real(cfg), at=7, hard=hard)
    )
    cfg = load_config(tiny(tmp_path / "b"))
    stopped = train(cfg, progress=False, verbose=False)
    assert stopped.interrupted and signal.getsignal(signal.SIGINT) is sigint_default
    state = load_checkpoint(stopped.out_dir / "last.pt")
    if hard:  # the epoch-end checkpoint of epoch 1 is kept
        assert "interrupted inside iteration 7" in capsys.readouterr().out
        assert state["position"]["iteration"] == 4 and state["position"]["batch"] == 0
    else:  # iteration 7 completed, position saved mid-epoch
        assert "stopped at iteration 7" in capsys.readouterr().out
        assert state["position"]["iteration"] == 7 and state["position"]["batch"] == 3
    monkeypatch.setattr(run_loop, "build_loss", real)
    resumed = train(cfg, resume=True, progress=False, verbose=False)
    assert not resumed.interrupted
    assert_same_weights(weights(ref.out_dir / "last.pt"), weights(resumed.out_dir / "last.pt"))
    cols = ["iteration", "loss", "R@1", "MAP@R"]
    pd.testing.assert_frame_equal(ref.history[cols], resumed.history[cols])
    pd.testing.assert_frame_equal(
        ref.log[["iteration", "loss"]], resumed.log[["iteration", "loss"]]
    )


def _train_in_a_subprocess(tmp_path: Path, iterations: int) -> tuple[subprocess.Popen, Path]:
    """``dmlbook train`` of a tiny run in a child process, returned once its first checkpoint
    exists. No deadline: the child cannot finish first (it has far more iterations than a busy
    machine could do meanwhile), so the wait ends however slow the machine is."""
    cfg = tiny(tmp_path, train={"iterations": iterations, "epoch_iters": 4})
    cfg["optim"]["milestones"] = []  # a constant lr, whatever the total
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    cmd = [sys.executable, "-m", "dmlbook.cli", "train", "--config", str(path), "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not (tmp_path / "run" / "run.json").exists():
        assert proc.poll() is None, proc.communicate()[1].decode()
        time.sleep(0.01)
    return proc, path


def _resume_and_compare(tmp_path: Path, path: Path, done: int, argv: list[str] | None = None):
    """Resume the run to the end of the epoch after next and compare it with an uninterrupted
    run of as many iterations (the stop may come at any iteration: the machine may be busy)."""
    total = (done // 4 + 2) * 4
    if argv is None:
        resumed = train(load_config(path, [f"train.iterations={total}"]), resume=True,
                        progress=False, verbose=False)  # fmt: skip
        assert resumed.history["iteration"].iloc[0] == 0  # the history before the stop is kept
    else:
        from dmlbook.cli import main

        assert main([*argv, "--set", f"train.iterations={total}", "--quiet"]) == 0
    ref_cfg = tiny(tmp_path / "ref", train={"iterations": total, "epoch_iters": 4})
    ref_cfg["optim"]["milestones"] = []
    ref = train(load_config(ref_cfg), progress=False, verbose=False)
    assert_same_weights(weights(ref.out_dir / "last.pt"), weights(tmp_path / "run" / "last.pt"))
    hist = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert list(hist["iteration"]) == list(range(0, total + 1, 4))
    assert np.array_equal(hist["R@1"].to_numpy(), ref.history["R@1"].to_numpy())


@pytest.mark.slow
def test_kill_9_mid_epoch_then_resume(tmp_path):
    proc, path = _train_in_a_subprocess(tmp_path, iterations=100_000)
    os.kill(proc.pid, signal.SIGKILL)  # no chance to clean up or save anything
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    state = load_checkpoint(tmp_path / "run" / "last.pt")  # complete despite the kill
    done = state["position"]["iteration"]
    assert done % 4 == 0 and done >= 4 and state["position"]["batch"] == 0
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert not meta["complete"]  # run.json is written after last.pt
    _resume_and_compare(tmp_path, path, done)


@pytest.mark.slow
def test_sigterm_saves_the_exact_position_exits_143_and_prints_the_resume_command(tmp_path):
    """What SLURM, Kubernetes and torchrun send to stop or preempt a job: like a Ctrl-C."""
    proc, path = _train_in_a_subprocess(tmp_path, iterations=100_000)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = (x.decode() for x in proc.communicate())
    assert proc.returncode == 143, err
    state = load_checkpoint(tmp_path / "run" / "last.pt")
    done = state["position"]["iteration"]
    assert f"stopped at iteration {done} of 100000" in out and "Traceback" not in err
    command = f"dmlbook train --config {path} --resume"
    assert any(line.endswith(f"Resume with: {command}") for line in out.splitlines()), out
    assert "best.pt holds the final model" not in out
    assert json.loads((tmp_path / "run" / "run.json").read_text())["interrupted"]
    _resume_and_compare(tmp_path, path, done, argv=shlex.split(command)[1:])


_SECOND_SIGTERM_WHILE_SAVING = """
import os, signal, sys
from dmlbook.engine import run_loop
real_checkpoint, real_step = run_loop.EngineRun.checkpoint, run_loop.EngineRun.after_step

def after_step(self, loss):
    real_step(self, loss)
    if self.trainer.pos.iteration == 6:
        os.kill(os.getpid(), signal.SIGTERM)  # the first: stop after this iteration

def checkpoint(self, interrupted=False):
    if interrupted:
        os.kill(os.getpid(), signal.SIGTERM)  # the second, during the final checkpoint
    real_checkpoint(self, interrupted)

run_loop.EngineRun.after_step, run_loop.EngineRun.checkpoint = after_step, checkpoint
from dmlbook.cli import main
sys.exit(main(["train", "--config", sys.argv[1], "--quiet"]))
"""


def test_a_second_sigterm_during_the_final_checkpoint_lets_it_finish(tmp_path):
    """Issue 45: it used to kill the process (the default handler was back) before the
    "stopped" line, leaving the previous last.pt; now the position of the stop is saved."""
    cfg = tiny(tmp_path, train={"iterations": 100, "epoch_iters": 8, "eval_at_start": False})
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    proc = subprocess.run(
        [sys.executable, "-c", _SECOND_SIGTERM_WHILE_SAVING, str(path)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 143, proc.stderr
    assert "SIGTERM: the position is being saved; the run stops once it is written." in proc.stdout
    assert (
        f"stopped at iteration 6 of 100: the exact position is saved in {tmp_path / 'run' / 'last.pt'}"
        in proc.stdout
    )
    assert load_checkpoint(tmp_path / "run" / "last.pt")["position"]["iteration"] == 6


def test_resume_refuses_a_changed_config(tmp_path):
    with pytest.raises(NothingToResume, match=r"nothing to resume from: the run folder .*run "
                       r"holds no last.pt .* drop --resume \(in Python: resume=False\)"):  # fmt: skip
        train(load_config(tiny(tmp_path)), resume=True, progress=False)
    assert not (tmp_path / "run").exists()  # nothing was started
    train(load_config(tiny(tmp_path)), resume="auto", progress=False, verbose=False)  # fresh
    with pytest.raises(ConfigError, match=r"cannot resume.*optim.lr: 0.001 -> 0.01"):
        train(load_config(tiny(tmp_path), ["optim.lr=1e-2"]), resume=True, progress=False)
    before = (tmp_path / "run" / "last.pt").read_bytes()
    with pytest.raises(ConfigError, match=r"another run length: optim.milestones \[0.5\] .* at "
                       r"iterations \[8\] instead of \[6\]"):  # fmt: skip
        train(load_config(tiny(tmp_path), ["train.iterations=16"]), resume=True, progress=False)
    assert (tmp_path / "run" / "last.pt").read_bytes() == before  # refused before any step
    steps = ["optim.milestones=[6]", "train.out_dir=" + str(tmp_path / "whole")]  # iterations
    train(load_config(tiny(tmp_path), steps), progress=False, verbose=False)
    longer = load_config(tiny(tmp_path), [*steps, "train.iterations=16"])
    more = train(longer, resume=True, progress=False)
    assert list(more.history["iteration"]) == [0, 4, 8, 12, 16]
    auto = train(longer, resume="auto")
    assert list(auto.history["iteration"]) == [0, 4, 8, 12, 16]  # complete: nothing retrained
    with pytest.raises(FileNotFoundError):
        train(load_config(tiny(tmp_path)), resume=tmp_path / "none.pt", progress=False)


def test_checkpoints_by_time_inside_an_epoch(tmp_path, monkeypatch, capsys):
    saved = []
    real = run_loop.EngineRun.checkpoint

    def spy(run, interrupted=False):
        saved.append((run.trainer.pos.iteration, run.trainer.pos.batch))
        real(run, interrupted)

    monkeypatch.setattr(run_loop.EngineRun, "checkpoint", spy)
    first = train(load_config(tiny(tmp_path / "a"), ["train.iterations=4"]), progress=False)
    assert saved == [(4, 0)]  # default: every 10 minutes, so only the epoch end here
    best = first.history.loc[first.history["best"], "iteration"].item()
    printed = capsys.readouterr().out  # the test-selection note only where best.pt is not last
    assert ("TEST split" in printed) == (best != 4) and f"best: iteration {best}," in printed
    saved.clear()
    minutes = ["train.iterations=4", "train.checkpoint_minutes=1e-9"]  # always due
    train(load_config(tiny(tmp_path / "b"), minutes), progress=False, verbose=False)
    assert saved == [(1, 1), (2, 2), (3, 3), (4, 4), (4, 0)]
    with pytest.raises(ConfigError, match="train.checkpoint_minutes must be a positive number"):
        load_config(tiny(tmp_path), ["train.checkpoint_minutes=0"])


def test_frozen_backbone_epochs_and_frozen_bn(tmp_path):
    cfg = load_config(
        tiny(tmp_path),
        ["train.iterations=null", "train.epochs=1", "optim.freeze_backbone_epochs=1"]
        + ["optim.head_lr_mult=10"],
    )
    seed_everything(cfg.train.seed)
    initial = build_model(cfg).state_dict()
    result = train(cfg, progress=False, verbose=False)
    assert list(result.history["iteration"]) == [0, 4]  # one epoch of epoch_iters = 4
    trained = weights(result.out_dir / "last.pt")
    for k, v in initial.items():
        if k.startswith("backbone."):  # weights and BatchNorm statistics untouched
            assert torch.equal(trained[k], v), k
    assert not torch.equal(trained["embedding.weight"], initial["embedding.weight"])
    groups = load_checkpoint(tmp_path / "run" / "last.pt")["optimizer"]["param_groups"]
    assert [g["base_lr"] for g in groups] == pytest.approx([1e-3, 1e-2])

    cfg = load_config(tiny(tmp_path / "bn"), ["train.iterations=4", "model.freeze_bn=true"])
    trained = weights(train(cfg, progress=False, verbose=False).out_dir / "last.pt")
    assert torch.equal(trained["backbone.bn1.running_mean"], initial["backbone.bn1.running_mean"])
    assert not torch.equal(trained["backbone.bn1.weight"], initial["backbone.bn1.weight"])


def test_bf16_autocast_channels_last_compile_and_tensorboard(tmp_path, monkeypatch):
    compiled, scalars = [], []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: compiled.append(m) or m)

    class Writer:
        def __init__(self, log_dir):
            self.log_dir = log_dir

        def add_scalar(self, tag, value, step):
            scalars.append((tag, step))

        def close(self):
            pass

    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = Writer
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    overrides = [
        "train.bf16=true", "train.channels_last=true", "train.compile=true",
        "train.tensorboard=true", "train.iterations=4",
    ]  # fmt: skip
    result = train(load_config(tiny(tmp_path), overrides), progress=False, verbose=False)
    assert len(compiled) == 1 and np.isfinite(result.log["loss"]).all()
    assert ("train/loss", 2) in scalars and ("eval/R@1", 4) in scalars
    assert json.loads((result.out_dir / "run.json").read_text())["tensorboard"]


@pytest.mark.slow
def test_real_torch_compile_trains_like_eager_and_checkpoints_plain_keys(tmp_path, monkeypatch):
    """torch.compile (Inductor, compiled here with the CPU's C++ compiler; about 30 s) gives the
    eager run's losses and a checkpoint without the compiled wrapper's ``_orig_mod.`` prefix.

    Inductor's on-disk cache lives in its own folder here: the machine-wide one may hold kernels
    compiled under another ``ATEN_CPU_CAPABILITY``, which Inductor reused and which gave NaN
    embeddings when the suite ran with ``ATEN_CPU_CAPABILITY=avx2`` (issue 46's settings) after a
    run with the machine's defaults."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    overrides = ["train.iterations=4", "train.epoch_iters=2", "optim.milestones=[2]"]
    eager = train(load_config(tiny(tmp_path / "eager"), overrides), progress=False, verbose=False)
    cfg = load_config(tiny(tmp_path / "compiled"), [*overrides, "train.compile=true"])
    compiled = train(cfg, progress=False, verbose=False)
    assert compiled.log["loss"].to_numpy() == pytest.approx(
        eager.log["loss"].to_numpy(), rel=1e-3, abs=1e-4
    )
    state = weights(compiled.out_dir / "last.pt")
    assert list(state) == list(weights(eager.out_dir / "last.pt"))
    assert not any(k.startswith("_orig_mod.") for k in state)
    resumed = train(load_config(tiny(tmp_path / "compiled"), [*overrides[1:], "train.iterations=6",
                                                            "train.compile=true"]),
                    resume=True, progress=False, verbose=False)  # fmt: skip
    assert resumed.log["iteration"].max() == 6


def test_nan_loss_is_reported_with_the_iteration(tmp_path, monkeypatch):
    class NaNLoss(torch.nn.Module):
        def forward(self, emb, y):
            return emb.sum() * float("nan")

    monkeypatch.setattr(run_loop, "build_loss", lambda cfg: NaNLoss())
    with pytest.raises(FloatingPointError, match="before iteration 2; lower optim.lr"):
        train(load_config(tiny(tmp_path)), progress=False, verbose=False)


# ------------------------------------------------------------------------------------------
# the whole image pipeline: files in the official layout -> cache -> train -> evaluate -> resume
# ------------------------------------------------------------------------------------------


def write_cub(root: Path, classes: list[int], per_class: int = 6) -> None:
    """A tiny CUB_200_2011 folder: images.txt, image_class_labels.txt, images/NNN.Name/*.jpg."""
    images, labels = [], []
    for c in classes:
        for j in range(per_class):
            n = len(images) + 1
            rel = f"{c:03d}.Bird_{c}/Bird_{c}_{j}.jpg"
            rng = np.random.default_rng(n)
            colour = np.array([(37 * c) % 256, (91 * c) % 256, (53 * c) % 256])
            pixels = np.clip(colour + rng.integers(-40, 40, (30, 40, 3)), 0, 255)
            (root / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels.astype(np.uint8)).save(root / "images" / rel, quality=90)
            images.append(f"{n} {rel}")
            labels.append(f"{n} {c}")
    (root / "images.txt").write_text("\n".join(images) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")


def test_image_pipeline_end_to_end(tmp_path, capsys):
    data_dir = tmp_path / "data"
    write_cub(data_dir / "CUB_200_2011", [1, 2, 3, 4, 101, 102, 103, 104])
    data = {
        "dataset": "cub",
        "options": {"allow_partial": True},
        "resize": 36,
        "crop": 32,
        "cache_dir": str(tmp_path / "cache"),
    }
    short = {"iterations": 6, "epoch_iters": 3, "batch_size": 8, "k": 2, "bf16": True}
    base = tiny(
        tmp_path, data=data, train=dict(short, channels_last=True), optim={"milestones": [5]}
    )
    cfg = load_config(base, data_dir=data_dir)
    first = train(cfg, progress=False)
    assert "24 train / 24 test images" in capsys.readouterr().out
    assert len(list((tmp_path / "cache").rglob("*.npy"))) == 2  # decoded once per split
    metrics = evaluate_checkpoint(first.out_dir / "best.pt", device="cpu")
    best = first.history[first.history["best"]].iloc[0]
    assert metrics["R@1"] == pytest.approx(best["R@1"], abs=1e-12)
    more = copy.deepcopy(base)
    more["train"]["iterations"] = 9
    resumed = train(load_config(more, data_dir=data_dir), resume=True, progress=False)
    assert list(resumed.history["iteration"]) == [0, 3, 6, 9]
    straight = copy.deepcopy(more)
    straight["train"]["out_dir"] = str(tmp_path / "straight")
    ref = train(load_config(straight, data_dir=data_dir), progress=False, verbose=False)
    assert_same_weights(weights(ref.out_dir / "last.pt"), weights(resumed.out_dir / "last.pt"))


def test_cub_cpu_config_runs_as_is_and_prints_chance_and_untrained(tmp_path, capsys):
    """configs/cub_cpu_resnet18_half.yaml as a student runs it (on a 48-image course subset)."""
    data_dir = tmp_path / "data"
    write_cub(data_dir / "CUB_200_2011", [1, 2, 3, 4, 101, 102, 103, 104])
    overrides = [
        "data.options.allow_partial=true", f"data.cache_dir={tmp_path / 'cache'}",
        f"train.out_dir={tmp_path / 'run'}", "train.iterations=2", "train.epoch_iters=1",
        "train.batch_size=8", "train.k=2", "train.tensorboard=false", "train.ks=[1,2,4,8]",
    ]  # fmt: skip
    cfg = load_config("cub_cpu_resnet18_half", overrides=overrides, data_dir=data_dir)
    assert (cfg.data.crop, cfg.model.backbone_options, cfg.model.pretrained) == (
        64,
        {"width": 32},
        None,
    )
    assert cfg.train.device == "cpu" and cfg.train.baselines
    train(cfg, progress=False)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("iter")]
    assert len(lines) == 3
    untrained = lines[0].split("R@1 ")[1].split()[0]
    # 4 test classes of 6 images: a random ranking finds a positive first with p = 5 / 23
    for line in lines:
        assert line.endswith(f"[R@1: chance {100 * 5 / 23:.1f}, untrained {untrained}]")

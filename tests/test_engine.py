"""Tests of dmlbook.engine: config schema, schedule, the training loop, checkpoints and resumption.

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

from dmlbook.data import register_dataset, synthetic
from dmlbook.data.registry import _REGISTRY
from dmlbook.engine import (
    RECALL_KS,
    TEST_SELECTION_NOTE,
    Config,
    ConfigError,
    NothingToResume,
    compare_on_benchmark,
    evaluate_checkpoint,
    find_config,
    load_checkpoint,
    load_config,
    plan_benchmark,
    selection_note,
    train,
)
from dmlbook.engine import trainer as trainer_module
from dmlbook.engine.build import build_model, lr_factor, milestones
from dmlbook.engine.checkpoint import atomic_write
from dmlbook.engine.data import normalization
from dmlbook.engine.runtime import STOP_SIGNALS, exit_status, graceful_interrupt
from dmlbook.evaluate import retrieval_metrics
from dmlbook.losses import ContrastiveLoss, TripletLoss
from dmlbook.models.pretrained import InputSpec
from dmlbook.reproducibility import seed_everything
from dmlbook.studies.results import as_results, paired_differences

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


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


# ------------------------------------------------------------------------------------------
# config
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_are_valid(path):
    cfg = load_config(path)
    assert cfg.name == path.stem
    assert cfg.ks == cfg.train.ks or cfg.ks == RECALL_KS.get(cfg.data.dataset, cfg.ks)
    from dmlbook.engine.build import build_loss

    build_loss(cfg)


def test_headline_configs_follow_the_recipes():
    cub = load_config(ROOT / "configs/ms_cub_bninception.yaml")
    assert (cub.train.batch_size, cub.train.k, cub.model.dim) == (80, 5, 512)
    assert (cub.optim.lr, cub.optim.weight_decay, cub.train.iterations) == (3e-5, 5e-4, 3000)
    assert milestones(cub, 3000) == [1200, 2400] and cub.ks == (1, 2, 4, 8, 16, 32)
    assert cub.model.freeze_bn and cub.model.pooling == "max" and cub.data.crop == 227
    sop = load_config(ROOT / "configs/ms_sop_bninception.yaml")
    assert sop.train.batch_size == 1000 and sop.ks == (1, 10, 100, 1000)
    inshop = load_config(ROOT / "configs/ms_inshop_bninception.yaml")
    assert inshop.ks == (1, 10, 20, 30, 40, 50)
    assert (inshop.data.test_split, inshop.data.gallery_split) == ("query", "gallery")
    liu = load_config(ROOT / "configs/liu_cub_bninception.yaml")
    assert (liu.optim.head_lr_mult, liu.optim.freeze_backbone_epochs, liu.train.epochs) == (
        10,
        5,
        20,
    )


def test_config_errors_are_clear(tmp_path):
    base = tiny(tmp_path)
    with pytest.raises(ConfigError, match=r"unknown key 'optim.lrr'\. Did you mean 'lr'\?"):
        load_config(base, ["optim.lrr=0.1"])
    with pytest.raises(ConfigError, match=r"unknown key 'trian'\. Did you mean 'train'\?"):
        load_config(dict(base, trian={}))
    with pytest.raises(ConfigError, match=r"train.k must be an integer, got 'four'"):
        load_config(base, ["train.k=four"])
    with pytest.raises(ConfigError, match=r"optim.lr must be a number, got \[1\]"):
        load_config(base, ["optim.lr=[1]"])
    with pytest.raises(ConfigError, match="not a multiple of train.k=4; use e.g. 16 or 20"):
        load_config(base, ["train.batch_size=18"])
    with pytest.raises(ConfigError, match="exactly one of train.iterations and train.epochs"):
        load_config(base, ["train.epochs=3"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="Shipped configs \\(by name\\): .*ms_cub_bninception, "):
        load_config("ms_cub_bninceptoin")

    with pytest.raises(ConfigError, match="--set expects"):
        load_config(base, ["optim.lr"])
    with pytest.raises(ConfigError, match="model.pooling"):
        load_config(base, ["model.pooling=sum"])
    with pytest.raises(ConfigError, match="data folder .* does not exist"):
        train(load_config(base, data_dir=tmp_path / "nowhere"), progress=False)
    with pytest.raises(ConfigError, match="loss: unknown loss 'multi_sim'"):
        train(load_config(base, ["loss.name=multi_sim"]), progress=False)


def test_shipped_configs_load_by_bare_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_config("ms_cub_bninception") == ROOT / "configs" / "ms_cub_bninception.yaml"
    assert load_config("liu_cub_bninception").name == "liu_cub_bninception"
    (tmp_path / "mine.yaml").write_text("name: mine\ntrain: {iterations: 5}\n")
    assert load_config("mine.yaml").name == "mine"  # ordinary paths work as before
    with pytest.raises(ConfigError, match="does not exist"):
        find_config("configs/ms_cub_bninception")  # a path without suffix is not a name


def test_yaml_floats_overrides_and_toml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tiny(tmp_path)).replace("0.001", "1e-3"))
    cfg = load_config(path, ["optim.weight_decay=5e-4", "train.ks=[1, 2]", "loss.params.beta=40"])
    assert cfg.optim.lr == 1e-3 and cfg.optim.weight_decay == 5e-4  # "1e-3" read as a float
    assert cfg.ks == (1, 2) and cfg.loss.params == {"beta": 40}
    toml = tmp_path / "c.toml"
    toml.write_text('name = "t"\n[train]\niterations = 5\n[optim]\nlr = 2e-4\n')
    cfg = load_config(toml)
    assert cfg.train.iterations == 5 and cfg.optim.lr == 2e-4
    assert load_config({"train": {"epochs": 2}}).ks == (1, 2, 4, 8)
    assert isinstance(cfg, Config) and cfg.to_dict()["optim"]["lr"] == 2e-4


def test_lr_schedule_ms_official_and_warmup(tmp_path):
    cfg = load_config(tiny(tmp_path), ["optim.milestones=[0.4, 0.8]"])
    steps = milestones(cfg, 3000)
    assert steps == [1200, 2400]
    factors = [lr_factor(i, steps, 0.1, 0, 1.0) for i in (0, 1199, 1200, 2399, 2400, 2999)]
    assert factors == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])
    assert lr_factor(0, [], 0.1, 10, 0.01) == pytest.approx(0.01)
    assert lr_factor(5, [], 0.1, 10, 0.0) == pytest.approx(0.5)
    assert lr_factor(10, [], 0.1, 10, 0.0) == 1.0
    with pytest.raises(ConfigError, match="beyond"):
        milestones(load_config(tiny(tmp_path), ["optim.milestones=[5000]"]), 3000)


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


# ------------------------------------------------------------------------------------------
# training runs
# ------------------------------------------------------------------------------------------


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
    longer = train(load_config(tiny(tmp_path), ["train.iterations=40"]), progress=False)
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


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("previous", [signal.default_int_handler, signal.SIG_IGN, signal.SIG_DFL])
def test_graceful_interrupt_restores_the_handler_it_found(previous, sig):
    """SIGTERM and SIGHUP (SLURM, Kubernetes, torchrun, a closed terminal) stop like Ctrl-C."""
    assert {signal.SIGINT, signal.SIGTERM, signal.SIGHUP} <= set(STOP_SIGNALS)
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    for s in STOP_SIGNALS:
        signal.signal(s, previous)
    try:
        with graceful_interrupt() as stop:
            assert signal.getsignal(sig) not in (previous, None)
            os.kill(os.getpid(), sig)  # a first signal only asks to stop
            assert stop["requested"] and stop["signal"] == sig
            with pytest.raises(KeyboardInterrupt):  # a second one stops at once
                os.kill(os.getpid(), sig)
        assert all(signal.getsignal(s) is previous for s in STOP_SIGNALS)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    assert exit_status(signal.SIGINT) == 130 and exit_status(signal.SIGTERM) == 143
    assert exit_status(signal.SIGHUP) == 129 and exit_status(None) == 0


@pytest.mark.parametrize("hard", [False, True], ids=["ctrl-c", "ctrl-c-twice"])
def test_interrupt_then_resume_equals_uninterrupted(
    tmp_path, monkeypatch, capsys, hard, sigint_default
):
    ref = train(load_config(tiny(tmp_path / "a")), progress=False, verbose=False)
    real = trainer_module.build_loss
    monkeypatch.setattr(
        trainer_module, "build_loss", lambda cfg: _Interrupting(real(cfg), at=7, hard=hard)
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
    monkeypatch.setattr(trainer_module, "build_loss", real)
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


def test_resume_refuses_a_changed_config(tmp_path):
    with pytest.raises(NothingToResume, match=r"nothing to resume from: the run folder .*run "
                       r"holds no last.pt .* drop --resume \(in Python: resume=False\)"):  # fmt: skip
        train(load_config(tiny(tmp_path)), resume=True, progress=False)
    assert not (tmp_path / "run").exists()  # nothing was started
    train(load_config(tiny(tmp_path)), resume="auto", progress=False, verbose=False)  # fresh
    with pytest.raises(ConfigError, match=r"cannot resume.*optim.lr: 0.001 -> 0.01"):
        train(load_config(tiny(tmp_path), ["optim.lr=1e-2"]), resume=True, progress=False)
    more = train(load_config(tiny(tmp_path), ["train.iterations=16"]), resume=True, progress=False)
    assert list(more.history["iteration"]) == [0, 4, 8, 12, 16]
    auto = train(load_config(tiny(tmp_path), ["train.iterations=16"]), resume="auto")
    assert list(auto.history["iteration"]) == [0, 4, 8, 12, 16]  # complete: nothing retrained
    with pytest.raises(FileNotFoundError):
        train(load_config(tiny(tmp_path)), resume=tmp_path / "none.pt", progress=False)


def test_checkpoints_by_time_inside_an_epoch(tmp_path, monkeypatch, capsys):
    saved = []
    real = trainer_module._Run.checkpoint

    def spy(run, interrupted=False):
        saved.append((run.trainer.pos.iteration, run.trainer.pos.batch))
        real(run, interrupted)

    monkeypatch.setattr(trainer_module._Run, "checkpoint", spy)
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


def test_real_torch_compile_trains_like_eager_and_checkpoints_plain_keys(tmp_path):
    """torch.compile (Inductor, compiled here with the CPU's C++ compiler; about 30 s) gives the
    eager run's losses and a checkpoint without the compiled wrapper's ``_orig_mod.`` prefix."""
    overrides = ["train.iterations=4", "train.epoch_iters=2"]
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

    monkeypatch.setattr(trainer_module, "build_loss", lambda cfg: NaNLoss())
    with pytest.raises(FloatingPointError, match="before iteration 2; lower optim.lr"):
        train(load_config(tiny(tmp_path)), progress=False, verbose=False)


@pytest.fixture
def query_gallery_dataset():
    """A registered data set with train / query / gallery splits (the In-Shop protocol)."""

    def load(split: str, **_: object):
        ds = synthetic.load(
            "train" if split == "train" else "test", num_classes=16, images_per_class=6, cache=False
        )
        if split == "train":
            return ds
        return ds.subset(torch.arange(len(ds))[(torch.arange(len(ds)) % 2) == (split == "query")])

    register_dataset("qg_tiny", load, splits=("train", "query", "gallery"))
    yield "qg_tiny"
    _REGISTRY.pop("qg_tiny")


def test_query_gallery_protocol(tmp_path, query_gallery_dataset):
    data = {"dataset": "qg_tiny", "options": {}, "test_split": "query", "gallery_split": "gallery"}
    result = train(load_config(tiny(tmp_path, data=data)), progress=False, verbose=False)
    meta = json.loads((result.out_dir / "run.json").read_text())
    assert meta["best"]["selected_on"] == "query/gallery"
    assert (meta["test_images"], meta["gallery_images"]) == (24, 24)
    # recompute the last row independently: embed both splits, rank queries against the gallery
    cfg = result.config
    model = build_model(cfg, pretrained=False)
    model.load_state_dict(weights(result.out_dir / "last.pt"))
    model.eval()
    spec = InputSpec()
    with torch.no_grad():
        q, g = (_REGISTRY["qg_tiny"].loader(s) for s in ("query", "gallery"))
        norm = normalization(spec)
        eq, eg = (model(norm((d.inputs * 255).round())) for d in (q, g))
    expected = retrieval_metrics(eq, q.labels, (1, 2, 4), gallery=eg, gallery_labels=g.labels)
    last = result.history.iloc[-1]
    for key in ("R@1", "R@2", "R@4", "MAP@R"):
        assert last[key] == pytest.approx(expected[key], abs=1e-9), key


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


# ------------------------------------------------------------------ several losses, one recipe


def test_compare_on_benchmark_swaps_only_the_loss_and_resumes(tmp_path):
    base = tiny(tmp_path)
    base["train"].pop("out_dir")
    losses = {
        "contrastive (m=0.3)": ContrastiveLoss(margin=0.3),
        "MS": ("multi_similarity", {"beta": 40.0}),
    }
    plan = plan_benchmark(
        losses, base, out_root=tmp_path / "cmp", overrides=["train.iterations=4"],
        run_overrides={"MS": ["train.k=2"]},
    )  # fmt: skip
    assert not (tmp_path / "cmp").exists()  # planning trains nothing
    assert plan.drop(columns=["config", "out_dir"]).to_dict("index") == {
        ("contrastive (m=0.3)", 0): {"loss": "contrastive", "hyper-parameters": "margin=0.3",
                                     "batch": "4 x 4", "length": "4 iterations"},
        ("MS", 0): {"loss": "multi_similarity", "hyper-parameters": "beta=40.0",
                    "batch": "8 x 2", "length": "4 iterations"},
    }  # fmt: skip
    table = compare_on_benchmark(plan, progress=False)
    assert list(table.index) == list(plan.index)
    assert not table.attrs["interrupted"]
    for _, row in table.iterrows():
        run = json.loads((Path(row["out_dir"]) / "run.json").read_text())
        assert run["complete"] and row["iterations"] == 4
        assert Path(row["out_dir"]).parent.parent == tmp_path / "cmp"
        last = pd.read_csv(Path(row["out_dir"]) / "metrics.csv").iloc[-1]
        assert row[["R@1", "R@2", "R@4", "MAP@R"]].to_list() == pytest.approx(
            last[["R@1", "R@2", "R@4", "MAP@R"]].to_list()
        )
    configs = {label: json.loads((Path(r["out_dir"]) / "run.json").read_text())["config"]
               for (label, _), r in table.iterrows()}  # fmt: skip
    loss = configs["contrastive (m=0.3)"]["loss"]
    # a module travels with every hyper-parameter (describe_loss), its backward path included
    assert loss == {"name": "contrastive", "params": {"margin": 0.3}}
    assert configs["MS"]["loss"] == {"name": "multi_similarity", "params": {"beta": 40.0}}
    assert (configs["contrastive (m=0.3)"]["train"]["k"], configs["MS"]["train"]["k"]) == (4, 2)
    runs = as_results(table, loss="label")  # the package's results layout
    assert list(runs.columns[:6]) == ["loss", "seed", "R@1", "R@2", "R@4", "MAP@R"]
    assert paired_differences(runs, "MS", "R@1").loc["contrastive (m=0.3)", "mean"] == (
        pytest.approx(table["R@1"].iloc[0] - table["R@1"].iloc[1])
    )
    checkpoint = Path(table.iloc[0]["out_dir"]) / "last.pt"
    stamp = checkpoint.stat().st_mtime_ns
    again = compare_on_benchmark(plan, progress=False)
    assert checkpoint.stat().st_mtime_ns == stamp  # finished runs are not trained again
    pd.testing.assert_frame_equal(again, table)


def test_plan_benchmark_rejects_bad_entries(tmp_path):
    base = tiny(tmp_path)
    kw = {"out_root": tmp_path / "cmp"}
    with pytest.raises(ValueError, match="non-empty"):
        plan_benchmark({}, base, **kw)
    with pytest.raises(TypeError, match="registered loss module, a registry name"):
        plan_benchmark({"x": 3}, base, **kw)
    with pytest.raises(ValueError, match="unknown loss 'tripplet'"):
        plan_benchmark({"x": "tripplet"}, base, **kw)
    with pytest.raises(ValueError, match="not in losses"):
        plan_benchmark({"x": "triplet"}, base, run_overrides={"y": ["train.k=2"]}, **kw)

    class Unregistered(ContrastiveLoss):
        pass

    with pytest.raises(ValueError, match="not in the loss registry"):
        plan_benchmark({"x": Unregistered()}, base, **kw)
    with pytest.raises(ConfigError, match="run 'x' \\(seed 0\\)"):
        plan_benchmark({"x": "triplet"}, base, overrides=["train.batch_size=-3"], **kw)
    with pytest.raises(TypeError, match="plan_benchmark"):
        compare_on_benchmark(pd.DataFrame({"a": [1]}))


def test_shipped_benchmark_plans_check_without_data():
    plan = plan_benchmark(
        {"triplet": TripletLoss(0.1, mining="semihard"), "N-pair": "npair"},
        "liu_cub_bninception", out_root="~/runs", seeds=(0, 1),
        run_overrides={"N-pair": ["train.k=2"]},
    )  # fmt: skip
    assert plan.loc[("triplet", 1), "hyper-parameters"] == "mining=semihard"
    assert plan.loc[("N-pair", 0), "batch"] == "40 x 2"
    assert plan.loc[("triplet", 0), "length"] == "20 epochs"
    assert plan.loc[("N-pair", 1), "out_dir"] == "~/runs/N-pair/seed1"
    assert plan.loc[("N-pair", 1), "config"].train.seed == 1


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

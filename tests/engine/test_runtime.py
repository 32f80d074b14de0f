"""Tests of dmlbook.engine.runtime: stop signals, the resume check, the running loss mean."""

from __future__ import annotations

import math
import os
import signal

import pytest
import torch
from tiny_run import tiny_config

from dmlbook.engine import ConfigError, load_config
from dmlbook.engine.runtime import (
    STOP_SIGNALS,
    Mean,
    check_resumable,
    exit_status,
    graceful_interrupt,
)


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


def test_a_further_signal_waits_while_the_final_checkpoint_is_written(capsys):
    """Issue 45: a second SIGTERM during the final checkpoint must not cut it (and the line
    after it) short; the run still stops, with the signal of the first one."""
    with graceful_interrupt() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop["requested"] and stop["signal"] == signal.SIGTERM
        stop["saving"] = True  # what the trainer sets before its final checkpoint
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:  # caught here: pytest would end the whole session on it
            pytest.fail("a signal during the final checkpoint stopped it at once")
        assert stop["signal"] == signal.SIGTERM
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "SIGTERM: stopping after this iteration (send it again to stop at once).",
        "SIGTERM: the position is being saved; the run stops once it is written.",
        "Ctrl-C: the position is being saved; the run stops once it is written.",
    ]


def test_resuming_checks_only_what_changes_the_learning(tmp_path):
    base = tiny_config(tmp_path / "run")
    saved = load_config(base).to_dict()
    # the run's length, device, logging and output may change between a run and its resumption
    check_resumable(saved, load_config(base, ["train.iterations=40", "train.device=auto"]))
    old = dict(saved, train={k: v for k, v in saved["train"].items() if k != "baselines"})
    check_resumable(old, load_config(base))  # a key added to the schema later: its default
    with pytest.raises(
        ConfigError, match="cannot resume.*optim.lr: 0.001 -> 0.01; train.k: 4 -> 2"
    ):
        check_resumable(saved, load_config(base, ["optim.lr=0.01", "train.k=2"]))
    with pytest.raises(ConfigError, match=r"train.baselines: False -> True"):
        check_resumable(old, load_config(base, ["train.baselines=true"]))


def test_the_running_mean_of_the_loss():
    mean = Mean(torch.device("cpu"))
    assert math.isnan(mean.pop(0, 1e-3))  # nothing added yet
    for value in (1.0, 2.0, 4.5):
        mean.add(torch.tensor(value, requires_grad=True))
    assert mean.state() == [7.5, 3.0]
    again = Mean(torch.device("cpu"))
    again.load(mean.state())  # what a checkpoint saves mid-interval
    assert mean.pop(3, 1e-3) == again.pop(3, 1e-3) == 2.5 and mean.popped == 3
    assert mean.state() == [0.0, 0.0]
    mean.add(torch.tensor(float("inf")))
    with pytest.raises(FloatingPointError, match="became inf before iteration 7; lower optim.lr"):
        mean.pop(7, 0.05)

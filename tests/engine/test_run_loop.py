"""Tests of dmlbook.engine.run_loop: one engine run's batches, built from a tiny config.

The end-to-end runs (checkpoints, interrupts, resumption) are in ``tests/engine/test_trainer.py``;
here one :class:`EngineRun` is built without training, a second of the same config beside it.
"""

from __future__ import annotations

import pytest
import torch
from tiny_run import tiny_config

from dmlbook.engine import load_config
from dmlbook.engine.distributed import distributed
from dmlbook.engine.run_loop import EngineRun

pytestmark = pytest.mark.usefixtures("one_thread")


def epoch_batches(run: EngineRun, epoch: int, skip: int = 0) -> list[tuple[torch.Tensor, ...]]:
    return [(x.clone(), y.clone()) for x, y in run.batches(epoch, skip)]


def test_an_epochs_batches_depend_on_the_seed_and_the_epoch_alone(tmp_path):
    """The resumption promise: epoch ``e`` replays the same augmented PK batches in any run of the
    config, whatever ran before it; another epoch draws other ones."""
    cfg = load_config(tiny_config(tmp_path / "run"))
    with distributed("cpu") as (ctx, device):
        first = EngineRun(cfg, None, False, ctx, device)
        second = EngineRun(cfg, None, False, ctx, device)
        epoch_batches(first, 0)  # the first run has drawn epoch 0 already, the second has not
        one, again = epoch_batches(first, 1), epoch_batches(second, 1)
        other = epoch_batches(second, 2)
        resumed = epoch_batches(second, 1, skip=2)
    assert first.total == cfg.train.iterations and len(one) == first.epoch_iters
    for (x, y), (x2, y2) in zip(one, again, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    assert any(not torch.equal(y, y2) for (_, y), (_, y2) in zip(one, other, strict=True))
    # resumed after two batches of the epoch: the same classes and images, batch for batch
    assert all(torch.equal(y, y2) for (_, y), (_, y2) in zip(one[2:], resumed, strict=True))
    assert all(len(set(y.tolist())) == cfg.train.batch_size // cfg.train.k for _, y in one)

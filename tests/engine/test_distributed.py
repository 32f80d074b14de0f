"""Two processes (gloo, CPU) against one: the same loss, gradients, updates, metrics and resumes.

One spawn of two processes (``torch.multiprocessing``, gloo over a rendezvous file) does all the
multi-process work of this module, and the tests compare its results with the same computations
done here in one process, on the same global batches:

* one :class:`~dmlbook.training.Trainer` step under DistributedDataParallel with the
  embeddings gathered (:func:`dmlbook.engine.distributed.gather_batch`), for MS (Wang et al.
  2019, Eq. 11-15, with its mining) and the batch-hard triplet loss (Hermans et al. 2017):
  the loss, every parameter gradient and the updated parameters of both ranks equal those of one
  process holding the whole batch;
* an engine run (:func:`dmlbook.engine.train`) of 4 iterations on two ranks (sharded evaluation,
  rank-0 checkpoints), resumed to 6 iterations on one process, equals an uninterrupted
  one-process run of 6 iterations (frozen BatchNorm and deterministic crops, so the processes
  compute exactly what one process computes).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tiny_run import tiny_config
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dmlbook.engine import train
from dmlbook.engine.config import config_from_dict
from dmlbook.engine.distributed import DistContext, gather_batch, gather_rows, shard_bounds
from dmlbook.losses import get_loss
from dmlbook.training import Trainer, load_checkpoint

WORLD = 2
LOSSES = {
    "multi_similarity": {"alpha": 2.0, "beta": 40.0, "margin": 0.5, "epsilon": 0.1},
    "triplet": {"margin": 0.2, "mining": "batch_hard"},
}
P, K = 6, 4  # global batch 24: each rank holds 3 classes x 4 images


def _problem() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A small embedding network without BatchNorm, and one global P x K batch."""
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.Tanh(), nn.Linear(32, 16))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    x = torch.randn(P * K, 3, 4, 4, generator=g)
    y = torch.arange(P).repeat_interleave(K)
    return model, x, y


def _one_step(rank: int | None) -> dict[str, dict[str, object]]:
    """A Trainer step per loss: on the whole batch (rank None) or on a rank's slice under DDP."""
    out = {}
    for name, params in LOSSES.items():
        model, x, y = _problem()
        forward: nn.Module = model
        if rank is not None:
            lo, hi = rank * P * K // WORLD, (rank + 1) * P * K // WORLD
            x, y, forward = x[lo:hi], y[lo:hi], DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        gather = gather_batch if rank is not None else None
        trainer = Trainer(model, get_loss(name, **params), opt, forward=forward, gather=gather)
        loss = trainer.step(x, y)
        out[name] = {
            "loss": float(loss),
            "grads": [p.grad.clone() for p in model.parameters()],
            "params": [p.detach().clone() for p in model.parameters()],
        }
    return out


def _run_config(out_dir: Path) -> dict:
    """The tiny engine run, made rank-independent: frozen BN, whole 32 px images, no flips."""
    return tiny_config(
        out_dir,
        model={"freeze_bn": True},
        data={"scale": [1.0, 1.0], "flip": False},
        optim={"milestones": [3]},
        train={"iterations": 6, "epoch_iters": 2, "log_every": 1, "checkpoint_minutes": None},
    )


def _worker(rank: int, init: str, folder: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=WORLD)
    try:
        torch.save(_one_step(rank), Path(folder) / f"step{rank}.pt")
        ctx = DistContext(rank, WORLD)
        n = 7
        rows = torch.arange(n * 2.0).reshape(n, 2)
        start, end = shard_bounds(n, ctx)
        torch.save(gather_rows(rows[start:end], n, ctx), Path(folder) / f"rows{rank}.pt")
        values = _run_config(Path(folder) / "run")
        values["train"]["iterations"] = 4
        train(config_from_dict(values), progress=False, verbose=False)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    """The folder where the two-process spawn left its results."""
    folder = tmp_path_factory.mktemp("dist")
    init = f"file://{folder / 'rendezvous'}"
    mp.spawn(_worker, args=(init, str(folder)), nprocs=WORLD, join=True)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_two_processes_take_the_step_of_one(two_ranks, loss, one_thread):
    one = _one_step(None)[loss]
    for rank in range(WORLD):
        got = torch.load(two_ranks / f"step{rank}.pt")[loss]
        assert got["loss"] == pytest.approx(one["loss"], rel=1e-6, abs=1e-7)
        assert one["loss"] > 0  # a loss with active pairs, so the gradients below are not all 0
        for g2, g1 in zip(got["grads"], one["grads"], strict=True):
            torch.testing.assert_close(g2, g1, rtol=1e-5, atol=1e-7)
        for p2, p1 in zip(got["params"], one["params"], strict=True):
            torch.testing.assert_close(p2, p1, rtol=1e-5, atol=1e-7)
    assert any(g.abs().max() > 1e-4 for g in one["grads"])


@pytest.mark.slow
def test_gather_rows_restores_the_order(two_ranks):
    expected = torch.arange(14.0).reshape(7, 2)
    for rank in range(WORLD):
        assert torch.equal(torch.load(two_ranks / f"rows{rank}.pt"), expected)


@pytest.mark.slow
def test_checkpoint_of_two_ranks_resumes_on_one(two_ranks, tmp_path, one_thread):
    run = two_ranks / "run"
    saved = load_checkpoint(run / "last.pt")
    assert saved["world_size"] == WORLD and saved["position"]["iteration"] == 4
    assert len(saved["rng"]["augment_ranks"]) == WORLD
    assert not any(k.startswith("module.") for k in saved["model"])  # the bare model, no DDP
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    for name in ("last.pt", "best.pt"):
        (resumed_dir / name).write_bytes((run / name).read_bytes())
    values = _run_config(resumed_dir)
    resumed = train(config_from_dict(copy.deepcopy(values)), resume=True, progress=False,
                    verbose=False)  # fmt: skip
    values["train"]["out_dir"] = str(tmp_path / "whole")
    whole = train(config_from_dict(values), progress=False, verbose=False)
    # Two ranks for 4 iterations, then one: the same losses, metrics and weights as one rank.
    assert resumed.log["loss"].tolist() == pytest.approx(whole.log["loss"].tolist(), rel=1e-5)
    metrics = ["R@1", "R@2", "R@4", "MAP@R"]
    assert resumed.history[metrics].to_numpy() == pytest.approx(
        whole.history[metrics].to_numpy(), abs=1e-6
    )
    a = load_checkpoint(resumed_dir / "last.pt")["model"]
    b = load_checkpoint(tmp_path / "whole" / "last.pt")["model"]
    for key in b:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-6)


def test_a_torch_without_the_differentiable_all_gather_is_named_before_any_work(monkeypatch):
    """torch < 2.4 has no all_gather_tensor_autograd: a run on two processes stops at once,
    saying what to do; a run on one process does not need it."""
    import dmlbook.engine.distributed as d

    monkeypatch.setattr(d, "_all_gather", None)
    monkeypatch.setattr(d, "_current", lambda: DistContext(0, 1))
    with d.distributed("cpu") as (ctx, _):  # one process: nothing to gather
        assert not ctx.enabled
    monkeypatch.setattr(d, "_current", lambda: DistContext(0, 2))
    with pytest.raises(d.TorchTooOld, match=r"torch 2\.4\): upgrade torch .* or train on one"):
        with d.distributed("cpu"):
            pytest.fail("the body must not run")

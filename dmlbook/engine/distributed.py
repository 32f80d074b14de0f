"""Several processes, one run: ``torchrun``, DistributedDataParallel and the global P x K batch.

Under ``torchrun --nproc-per-node N`` (any number of nodes) every process runs
:func:`dmlbook.engine.train` on one device; PyTorch's own engine does the work:

* :func:`distributed` joins the process group that ``torchrun`` describes (``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``; NCCL on GPUs, gloo on CPUs) and gives each process its device;
* :func:`wrap_model` wraps the model in :class:`~torch.nn.parallel.DistributedDataParallel`,
  which averages parameter gradients over the processes;
* :class:`~dmlbook.data.batches.sampler.DistributedPKSampler` gives each process ``P / N`` of the ``P``
  classes of the global batch (``train.batch_size = P x K`` is the global batch);
* :func:`gather_batch` concatenates every process's embeddings and labels, so that the loss sees
  the whole global batch and every cross-process pair, and sends the gradients back to the
  process that computed each embedding;
* :func:`gather_rows` and :func:`shard_bounds` shard evaluation and put it back together.

Why the gradients are exactly those of one process on the whole batch. Every process computes
the same loss :math:`L` on the gathered batch :math:`E = [E_0; \\dots; E_{N-1}]`. The backward
of the differentiable all-gather (``torch.distributed._functional_collectives.all_gather_single``,
which PyTorch 2.13 names as the successor of ``torch.distributed.nn.functional.all_gather``) is a
reduce-scatter that sums, over the processes, the gradients each computed for the slice
:math:`E_r`, so process :math:`r` receives :math:`N \\, \\partial L / \\partial E_r` and
back-propagates it through its own images only.
DistributedDataParallel then averages the parameter gradients over the :math:`N` processes:
:math:`\\frac{1}{N} \\sum_r N \\, \\frac{\\partial L}{\\partial E_r} \\frac{\\partial E_r}
{\\partial \\theta} = \\frac{\\partial L}{\\partial \\theta}`, the gradient of one process
holding the whole batch. (pytorch-metric-learning's ``DistributedLossWrapper`` rests on the same
differentiable all-gather; this module is written from PyTorch's primitives.)

Not equivalent: BatchNorm layers that are trained (``model.freeze_bn: false``) normalise with
each process's own images, as under any DistributedDataParallel run; the papers' recipes freeze
BatchNorm (MS, Liu et al.), for which the processes agree exactly.

Tests: ``tests/engine/test_distributed.py`` (two gloo processes against one); Chapter 14,
Section 14.10.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .build import resolve_device

__all__ = [
    "DistContext",
    "agree",
    "distributed",
    "gather_batch",
    "gather_objects",
    "gather_rows",
    "process_group_backend",
    "shard_bounds",
    "wrap_model",
]


@dataclass(frozen=True)
class DistContext:
    """This process's place in the run: ``rank`` of ``world_size``, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        """More than one process takes part."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files and prints."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else default
    except ValueError as err:
        raise ValueError(
            f"environment variable {name}={value!r} is not an integer; it is set by torchrun "
            "(launch with torchrun --nproc-per-node N ...)."
        ) from err


def _current() -> DistContext:
    """The context of an initialised process group (or of a single process)."""
    if not (dist.is_available() and dist.is_initialized()):
        return DistContext()
    rank = dist.get_rank()
    return DistContext(rank, dist.get_world_size(), _env_int("LOCAL_RANK", rank))


@contextlib.contextmanager
def distributed(device: str = "auto") -> Iterator[tuple[DistContext, torch.device]]:
    """Join the run ``torchrun`` started (if any); yield this process's context and device.

    With ``WORLD_SIZE`` in the environment (``torchrun`` sets it, to 1 as well) and no process
    group yet, the group is created (NCCL for CUDA devices, gloo otherwise) and destroyed on
    exit; a one-process ``torchrun`` run thus joins the same kind of group as a larger one (the
    model is wrapped and batches gathered only when there are several processes). A group the caller created
    (e.g. a test's ``init_process_group``) is used as it is. Under several processes a CUDA
    device without an index becomes ``cuda:LOCAL_RANK``: one GPU per process.

    Parameters
    ----------
    device : str
        ``train.device``: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
    """
    created = False
    dev = resolve_device(device)
    launched = "WORLD_SIZE" in os.environ and _env_int("WORLD_SIZE", 1) >= 1
    if not (dist.is_available() and dist.is_initialized()) and launched:
        if dev.type == "cuda" and dev.index is None:
            torch.cuda.set_device(_env_int("LOCAL_RANK", 0))
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        created = True
    ctx = _current()
    if ctx.enabled:
        check_all_gather()  # before any work, not at the first batch
    if ctx.enabled and dev.type == "cuda":
        if dev.index is None:
            dev = torch.device("cuda", ctx.local_rank)
        torch.cuda.set_device(dev)
    try:
        yield ctx, dev
    finally:
        if created:
            dist.destroy_process_group()


def process_group_backend() -> str | None:
    """The backend of this process's group (``"nccl"``, ``"gloo"``), or None without one."""
    if dist.is_available() and dist.is_initialized():
        return str(dist.get_backend())
    return None


def wrap_model(
    model: nn.Module, ctx: DistContext, device: torch.device, *, find_unused: bool = False
) -> nn.Module:
    """``model`` itself for one process, else ``DistributedDataParallel(model)``.

    ``find_unused=True`` is needed when parameters stop receiving gradients during the run
    (``optim.freeze_backbone_epochs``: the backbone is frozen for the first epochs).
    """
    if not ctx.enabled:
        return model
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=find_unused)


#: The differentiable all-gather along dim 0: ``all_gather_single`` from torch 2.13 on, the same
#: collective as ``all_gather_tensor_autograd`` before (torch 2.11 has only the latter). The
#: latter came into PyTorch in April 2024 (pull request 123989), after 2.3 was branched; with an
#: older torch there is none, and a run on several processes stops with ``TorchTooOld``.
_all_gather = getattr(funcol, "all_gather_single", None) or getattr(
    funcol, "all_gather_tensor_autograd", None
)


class TorchTooOld(RuntimeError):
    """This PyTorch has no differentiable all-gather, which a run on several processes needs."""


def check_all_gather() -> None:
    """Raise :class:`TorchTooOld`, saying what to do, if this torch cannot gather a batch."""
    if _all_gather is None:
        raise TorchTooOld(
            f"training on several processes gathers every process's embeddings with PyTorch's "
            f"differentiable all-gather, which torch {torch.__version__} does not have (it came "
            "with torch 2.4): upgrade torch (pip install -U torch), or train on one process"
        )


def gather_batch(
    embeddings: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every process's ``(embeddings, labels)`` concatenated in rank order; gradients flow back.

    The embeddings go through PyTorch's differentiable all-gather (``all_gather_single`` of
    ``torch.distributed._functional_collectives``; before torch 2.13, the same module's
    ``all_gather_tensor_autograd``), whose backward returns to each process the sum over
    processes of the gradients of its slice (see the module docstring for why this, with
    DistributedDataParallel's average, is exact). Every process
    must hold the same number of rows (:class:`~dmlbook.data.batches.sampler.DistributedPKSampler`
    guarantees it). With one process (no group) the inputs come back unchanged.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return embeddings, labels
    check_all_gather()
    group = dist.group.WORLD
    gathered = _all_gather(embeddings.contiguous(), 0, group)
    all_labels = _all_gather(labels.contiguous(), 0, group)
    return funcol.wait_tensor(gathered), funcol.wait_tensor(all_labels)


def shard_bounds(n: int, ctx: DistContext) -> tuple[int, int]:
    """``[start, end)`` of this process's contiguous share of ``n`` items (rank order)."""
    return n * ctx.rank // ctx.world_size, n * (ctx.rank + 1) // ctx.world_size


def gather_rows(rows: torch.Tensor, n: int, ctx: DistContext) -> torch.Tensor:
    """Put the shards of :func:`shard_bounds` back together: the ``(n, ...)`` tensor on every rank.

    Shards differ in length by at most one row; they are padded for the all-gather and trimmed.
    """
    if not ctx.enabled:
        return rows
    bounds = [shard_bounds(n, DistContext(r, ctx.world_size)) for r in range(ctx.world_size)]
    sizes = [end - start for start, end in bounds]
    if rows.shape[0] != sizes[ctx.rank]:
        raise ValueError(
            f"rank {ctx.rank} holds {rows.shape[0]} rows, but its shard of {n} has "
            f"{sizes[ctx.rank]}; shard with shard_bounds."
        )
    padded = rows.new_zeros((max(sizes), *rows.shape[1:]))
    padded[: rows.shape[0]] = rows
    parts = [torch.empty_like(padded) for _ in range(ctx.world_size)]
    dist.all_gather(parts, padded)
    return torch.cat([p[:s] for p, s in zip(parts, sizes, strict=True)])


def gather_objects(obj: Any, ctx: DistContext) -> list[Any]:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank (``[obj]`` for one process)."""
    if not ctx.enabled:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def agree(flags: list[bool], ctx: DistContext) -> list[bool]:
    """Each flag true on every rank if it is true on any rank (one small all-reduce).

    Decisions that lead to collective operations (a checkpoint due by the clock, a Ctrl-C)
    must be taken by all processes at the same iteration, or the run would hang.
    """
    if not ctx.enabled:
        return list(flags)
    t = torch.tensor([float(f) for f in flags])
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]

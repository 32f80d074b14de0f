"""The training loop of the package, as one small object: :class:`Trainer`.

Both training paths run it: :func:`dmlbook.training.fit` (the chapters, in-memory data) and
:func:`dmlbook.engine.train` (config-driven runs with checkpoints). The whole loop is
:meth:`Trainer.run`::

    while iteration < total:
        epoch += 1
        for each batch (x, y) of the epoch:          (batches(epoch, skip) is the caller's)
            step(x, y): lr from the schedule -> embeddings (bf16 autocast if asked)
                        -> [gather across processes] -> loss (float32) -> backward
                        -> clip -> optimiser step
            iteration += 1; on_step(loss)
        on_epoch_end(epoch)                          (evaluate, checkpoint: the caller's)

:meth:`Trainer.evaluate` appends one row to :attr:`Trainer.history`; :meth:`Trainer.checkpoint`
and :meth:`Trainer.restore` save and reload the model, loss, optimiser, position and history, so
that a resumed run continues exactly where it stopped.

Tests: ``tests/training/test_loop.py`` (and through fit and train, ``tests/training/test_in_memory.py``
and ``tests/engine/test_trainer.py``). Chapter 14 shows the loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .checkpoint import load_checkpoint, save_checkpoint

__all__ = ["Position", "Stop", "Trainer"]

Batches = Callable[[int, int], Iterable[tuple[torch.Tensor, torch.Tensor]]]


class Stop(Exception):
    """Raised between two iterations when ``should_stop()`` says so (a first Ctrl-C)."""


@dataclass
class Position:
    """Where a run stands: updates done, epochs completed, batches done in the current epoch."""

    iteration: int = 0
    epoch: int = 0
    batch: int = 0


class Trainer:
    """A model, its loss and optimiser, and the position of the run.

    Parameters
    ----------
    model : nn.Module
        Trained in place.
    loss_fn : callable
        ``loss_fn(embeddings, labels) -> scalar tensor``; an ``nn.Module`` loss may have
        parameters, which the optimiser must hold.
    optimizer : torch.optim.Optimizer
        Every group keeps its starting learning rate as ``base_lr`` (added if missing).
    evaluator : callable, optional
        ``evaluator() -> {metric: value}``, called by :meth:`evaluate`.
    lr_factor : callable, optional
        ``lr_factor(iteration) -> factor``: each group's ``lr = base_lr * factor`` before the
        update; ``None`` keeps the learning rate constant.
    grad_clip : float, optional
        Clip the gradient norm of all optimised parameters to this value.
    bf16 : bool
        Embeddings under bfloat16 autocast (the loss is always computed in float32).
    forward : callable, optional
        What computes the embeddings (e.g. ``torch.compile(model)``); default ``model``.
    check_finite : bool
        Check every loss before its backward pass (one device synchronisation per step) and raise
        :class:`FloatingPointError` naming the epoch and batch. Off, a caller checks running
        means instead (:class:`~dmlbook.engine.runtime.Mean`).
    lr_name : str
        How the learning rate is called in that error message (``"lr"``, ``"optim.lr"``).
    gather : callable, optional
        ``gather(embeddings, labels) -> (embeddings, labels)`` applied before the loss: under
        several processes, :func:`dmlbook.engine.distributed.gather_batch` (the loss then sees
        the global batch).
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        optimizer: torch.optim.Optimizer,
        *,
        evaluator: Callable[[], dict[str, float]] | None = None,
        lr_factor: Callable[[int], float] | None = None,
        grad_clip: float | None = None,
        bf16: bool = False,
        forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
        check_finite: bool = False,
        lr_name: str = "lr",
        gather: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
        | None = None,
    ) -> None:
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.evaluator, self.lr_factor, self.grad_clip = evaluator, lr_factor, grad_clip
        self.bf16, self.check_finite, self.lr_name = bf16, check_finite, lr_name
        self.gather = gather
        self.forward = model if forward is None else forward  # a compiled module has no bool()
        self.params = [p for g in optimizer.param_groups for p in g["params"]]
        for g in optimizer.param_groups:
            g.setdefault("base_lr", g["lr"])
        self.device = next((p.device for p in self.params), torch.device("cpu"))
        self.pos = Position()
        self.history: list[dict[str, Any]] = []
        self.started = time.perf_counter()

    @property
    def lr(self) -> float:
        """The current learning rate of the first parameter group."""
        return self.optimizer.param_groups[0]["lr"]

    @property
    def seconds(self) -> float:
        """Wall time of the run so far, including the time before a restore."""
        return time.perf_counter() - self.started

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One update on the batch ``(x, y)``; returns the detached (float32) loss."""
        if self.lr_factor is not None:
            factor = self.lr_factor(self.pos.iteration)
            for g in self.optimizer.param_groups:
                g["lr"] = g["base_lr"] * factor
        with torch.autocast(self.device.type, torch.bfloat16, enabled=self.bf16):
            emb = self.forward(x)
        emb = emb.float()  # the loss in float32, outside autocast
        if self.gather is not None:
            emb, y = self.gather(emb, y)
        loss = self.loss_fn(emb, y)
        self._check(loss)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        self.optimizer.step()
        return loss.detach()

    def _check(self, loss: object) -> None:
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            got = (
                f"shape {tuple(loss.shape)}"
                if isinstance(loss, torch.Tensor)
                else type(loss).__name__
            )
            raise TypeError(
                f"loss_fn must return a scalar tensor, got {got}; reduce it with .mean()."
            )
        if self.check_finite and not math.isfinite(value := loss.item()):
            raise FloatingPointError(
                f"loss became {value} at epoch {self.pos.epoch + 1}, batch {self.pos.batch + 1}; "
                f"lower {self.lr_name} (now {self.lr:g}), set grad_clip, or check the inputs and "
                "the loss."
            )

    def evaluate(self, loss: float = math.nan) -> dict[str, Any]:
        """Append (and return) a history row: position, ``loss``, ``lr``, metrics, ``seconds``.

        ``loss`` is the caller's summary of the training loss since the last row (NaN before
        training).
        """
        row: dict[str, Any] = {
            "iteration": self.pos.iteration,
            "epoch": self.pos.epoch,
            "loss": loss,
            "lr": self.lr,
        }
        if self.evaluator is not None:
            row.update(self.evaluator())
        row["seconds"] = self.seconds
        self.history.append(row)
        return row

    def run(
        self,
        total: int,
        batches: Batches,
        *,
        on_step: Callable[[torch.Tensor], None] | None = None,
        on_epoch_end: Callable[[int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Train until ``total`` iterations are done, epoch by epoch, from the current position.

        ``batches(epoch, skip)`` yields the batches of ``epoch`` (1-based) after the first
        ``skip`` (non-zero when a run resumes inside an epoch). ``on_step(loss)`` follows every
        update, ``on_epoch_end(epoch)`` every completed epoch. :class:`Stop` is raised before
        an update when ``should_stop()`` is true.
        """
        while self.pos.iteration < total:
            epoch = self.pos.epoch + 1
            self.model.train()
            before = self.pos.iteration
            for x, y in batches(epoch, self.pos.batch):
                if should_stop is not None and should_stop():
                    raise Stop
                loss = self.step(x, y)
                self.pos.iteration += 1
                self.pos.batch += 1
                if on_step is not None:
                    on_step(loss)
                if self.pos.iteration >= total:
                    break
            if self.pos.iteration == before and self.pos.batch == 0:
                raise RuntimeError(f"epoch {epoch} has no batches; check the batch source.")
            self.pos.epoch, self.pos.batch = epoch, 0
            if on_epoch_end is not None:
                on_epoch_end(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Model, loss, optimiser (with each group's ``base_lr``), position and history."""
        loss_state = self.loss_fn.state_dict() if isinstance(self.loss_fn, nn.Module) else {}
        return {
            "model": self.model.state_dict(),
            "loss": loss_state,
            "optimizer": self.optimizer.state_dict(),
            "base_lrs": [g["base_lr"] for g in self.optimizer.param_groups],
            "position": {**asdict(self.pos), "elapsed": self.seconds},
            "history": self.history,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (the clock continues from the saved ``elapsed``)."""
        self.model.load_state_dict(state["model"])
        if isinstance(self.loss_fn, nn.Module):
            self.loss_fn.load_state_dict(state["loss"])
        self.optimizer.load_state_dict(state["optimizer"])
        for g, base in zip(self.optimizer.param_groups, state["base_lrs"], strict=True):
            g["base_lr"] = base
        position = dict(state["position"])
        self.started = time.perf_counter() - position.pop("elapsed", 0.0)
        self.pos = Position(**position)
        self.history = list(state["history"])

    def checkpoint(self, path: str | Path, **extra: Any) -> Path:
        """Write :meth:`state_dict` and ``extra`` entries to ``path`` atomically."""
        return save_checkpoint(path, {**self.state_dict(), **extra})

    def restore(self, path: str | Path) -> dict[str, Any]:
        """Load a :meth:`checkpoint` file into this trainer; return the whole file's dict."""
        state = load_checkpoint(path)
        self.load_state_dict(state)
        return state

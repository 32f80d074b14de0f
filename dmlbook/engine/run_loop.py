"""One engine run in progress: the pieces a config builds, its loop, logs and checkpoints.

:class:`EngineRun` holds what :func:`dmlbook.engine.trainer.train` builds from a config (model,
loss, optimiser, PK sampler, evaluation splits; or restores from ``last.pt``) around the
package's one loop, :class:`~dmlbook.training.loop.Trainer`, and adds what a long run needs:
the seeded, augmented batches of each epoch, ``train_log.csv`` rows, Recall@K at epoch ends
(``best.pt`` when R@1 rose), ``last.pt`` at the exact position, and a clean stop on the first
signal. ``train`` (the folder, resumption and the report) is the module that uses it.

Tests: ``tests/engine/test_run_loop.py``; the runs end to end in ``tests/engine/test_trainer.py``.
"""

from __future__ import annotations

import itertools
import math
import signal
import time
from collections.abc import Iterator
from typing import Any

import torch
from tqdm import tqdm

from ..core.progress import progress_disabled
from ..core.reproducibility import seed_everything
from ..data.batches.sampler import DistributedPKSampler
from ..evaluate import chance_recall_at_k
from ..training.checkpoint import save_checkpoint, write_csv, write_json
from ..training.loop import Stop, Trainer
from .build import build_loss, build_model, build_optimizer, lr_factor, milestones
from .config import Config, ConfigError
from .data import build_splits
from .distributed import (
    DistContext,
    agree,
    gather_batch,
    gather_objects,
    process_group_backend,
    wrap_model,
)
from .evaluation import evaluate_model
from .run_result import TEST_SELECTION_NOTE
from .runtime import Mean, format_row, graceful_interrupt, tensorboard

__all__ = ["LOG_COLUMNS", "EngineRun"]

LOG_COLUMNS = ["iteration", "epoch", "loss", "lr", "images_per_s", "seconds"]


class EngineRun:
    """One engine run: a :class:`Trainer` plus its run folder, logs and best checkpoint."""

    def __init__(
        self,
        cfg: Config,
        state: dict[str, Any] | None,
        verbose: bool,
        ctx: DistContext,
        device: torch.device,
    ) -> None:
        t, o = cfg.train, cfg.optim
        self.cfg, self.verbose, self.out, self.ctx = cfg, verbose and ctx.is_main, cfg.out_dir, ctx
        self.device = device
        loss_fn = build_loss(cfg)  # fails fast on a bad loss name or hyper-parameter
        seed_everything(t.seed)
        self.model = model = build_model(cfg, pretrained=state is None)
        self.splits = build_splits(cfg, device, model.input_spec)
        model.to(device)
        loss_fn.to(device)
        if t.channels_last:
            model.to(memory_format=torch.channels_last)
        self.sampler = DistributedPKSampler(
            self.splits.train.labels,
            t.batch_size,
            t.k,
            rank=ctx.rank,
            world_size=ctx.world_size,
            seed=t.seed,
            batches_per_epoch=t.epoch_iters,
        )
        self.epoch_iters = len(self.sampler)
        self.total = t.iterations or t.epochs * self.epoch_iters
        steps = milestones(cfg, self.total)
        if state is not None:
            self._check_schedule_kept(state["config"], steps)
        ddp = wrap_model(model, ctx, device, find_unused=o.freeze_backbone_epochs > 0)
        self.trainer = Trainer(
            model,
            loss_fn,
            build_optimizer(cfg, model, loss_fn),
            evaluator=self._metrics,
            lr_factor=lambda i: lr_factor(i, steps, o.gamma, o.warmup_iters, o.warmup_factor),
            grad_clip=o.grad_clip,
            bf16=t.bf16,
            forward=torch.compile(ddp) if t.compile else ddp,
            lr_name="optim.lr",
            gather=gather_batch if ctx.enabled else None,
        )
        # Evaluation runs the bare model: DistributedDataParallel syncs buffers at every forward,
        # which would hang when the shards' numbers of batches differ.
        self.eval_forward = model if ctx.enabled else self.trainer.forward
        self.epoch_loss = Mean(device)  # mean training loss of the current epoch
        self.window = Mean(device)  # mean training loss since the last log row
        self.log: list[dict[str, Any]] = []
        self.best: dict[str, Any] | None = None
        self.generator = torch.Generator()  # all augmentation randomness; seeded per epoch
        self.augment_state = self.generator.get_state()
        self.resume_augment = None
        self.stop_now = False  # a Ctrl-C agreed by every process (see after_step)
        self.stop_flag = {"requested": False}  # graceful_interrupt's flag, set by run()
        if state is not None:
            self.trainer.load_state_dict(state)
            self.log = state["log"]
            self.best = state.get("best_record", state.get("best"))
            self.epoch_loss.load(state["epoch_loss"])
            self.window.load(state["window"])
            saved = state["rng"].get("augment_ranks", [state["rng"]["augment"]])
            # Another number of processes: the batches are the same, the draws are re-seeded.
            self.resume_augment = saved[ctx.rank] if len(saved) == ctx.world_size else None
            torch.set_rng_state(state["rng"]["torch"])
        self.tb = tensorboard(cfg, self.out) if ctx.is_main else None
        self.bar: tqdm | None = None  # made by run()
        self.last_save = self.tick = time.perf_counter()

    def _check_schedule_kept(self, saved: dict[str, Any], steps: list[int]) -> None:
        """Refuse a resumption whose new length moves the step decay: fractional milestones are
        taken of the run's length, so a longer run would raise the learning rate back up."""
        t = saved.get("train", {})
        before = milestones(self.cfg, t.get("iterations") or t["epochs"] * self.epoch_iters)
        if before != steps:
            raise ConfigError(
                f"cannot resume with another run length: optim.milestones "
                f"{self.cfg.optim.milestones} are fractions of the run, so the learning rate "
                f"would step at iterations {steps} instead of {before}, where the run stepped so "
                "far. Keep train.iterations and train.epochs as they were, or start a fresh run."
            )

    # ---------------------------------------------------------------- the loop's parts

    def batches(self, epoch: int, skip: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The PK batches of ``epoch`` after the first ``skip``, augmented on the device."""
        self.sampler.set_epoch(epoch)
        rank_offset = 1_000_000_007 * self.ctx.rank  # rank 0 draws as a single process does
        self.generator.manual_seed(self.cfg.train.seed * 1_000_003 + epoch + rank_offset)
        if skip and self.resume_augment is not None:  # resuming inside this epoch
            self.generator.set_state(self.resume_augment)
        self.resume_augment = None
        self.augment_state = self.generator.get_state()
        if self.cfg.optim.freeze_backbone_epochs:
            self.model.freeze_backbone(epoch <= self.cfg.optim.freeze_backbone_epochs)
        todo = itertools.islice(self.sampler, skip, None)  # skip batches already done
        yield from self.splits.train.train_batches(todo, self.generator)

    def after_step(self, loss: torch.Tensor) -> None:
        """Running means, a log row every ``log_every``, a checkpoint when one is due."""
        t, pos = self.cfg.train, self.trainer.pos
        self.augment_state = self.generator.get_state()  # after this batch's draws, for resuming
        self.window.add(loss)
        self.epoch_loss.add(loss)
        self.bar.update(1)
        if pos.iteration % t.log_every == 0 or pos.iteration == self.total:
            self.log_row(pos.epoch + 1)
        minutes = t.checkpoint_minutes
        due_by_time = minutes is not None and time.perf_counter() - self.last_save >= 60 * minutes
        if self.ctx.enabled:  # every process must stop or checkpoint at the same iteration
            due_by_time, self.stop_now = agree([due_by_time, self.stop_flag["requested"]], self.ctx)
        if due_by_time or (t.checkpoint_every and pos.iteration % t.checkpoint_every == 0):
            self.checkpoint()

    def log_row(self, epoch: int) -> None:
        now, lr, it = time.perf_counter(), self.trainer.lr, self.trainer.pos.iteration
        value = self.window.pop(it, lr)
        self.log.append({
            "iteration": it, "epoch": epoch, "loss": value, "lr": lr,
            "seconds": round(self.trainer.seconds, 3),
            "images_per_s": round(self.cfg.train.batch_size * self.window.popped / (now - self.tick), 1),
        })  # fmt: skip
        self.tick = now
        if self.tb is not None:
            self.tb.add_scalar("train/loss", value, it)
            self.tb.add_scalar("train/lr", lr, it)
        self.bar.set_postfix(loss=f"{value:.4f}", refresh=False)

    def end_epoch(self, epoch: int) -> None:
        mean = self.epoch_loss.pop(self.trainer.pos.iteration, self.trainer.lr)
        if epoch % self.cfg.train.eval_every == 0 or self.trainer.pos.iteration >= self.total:
            self.evaluate(mean)
        self.checkpoint()
        self.tick = time.perf_counter()  # images/s counts training time only

    def _metrics(self) -> dict[str, float]:
        t = self.cfg.train
        kw = {"batch_size": t.eval_batch_size, "bf16": t.bf16, "forward": self.eval_forward}
        return evaluate_model(self.model, self.splits, self.cfg.ks, ctx=self.ctx, **kw)

    def evaluate(self, loss: float) -> None:
        """A metrics row; ``best.pt`` when R@1 rose (and ``train.save_best``)."""
        row = self.trainer.evaluate(loss)
        row["seconds"] = round(row["seconds"], 3)
        metrics = {k: v for k, v in row.items() if k.startswith("R@") or k in ("MAP@R", "RP")}
        row["best"] = False
        if self.cfg.train.save_best and (
            self.best is None or metrics["R@1"] > self.best["metrics"]["R@1"]
        ):
            for r in self.trainer.history:
                r["best"] = False
            row["best"] = True
            self.best = {  # the same on every process: the metrics are computed by all
                "iteration": row["iteration"],
                "epoch": row["epoch"],
                "metrics": metrics,
                "selected_on": "query/gallery" if self.splits.gallery is not None else "test",
                "note": TEST_SELECTION_NOTE,
            }
            if self.ctx.is_main:
                save_checkpoint(
                    self.out / "best.pt",
                    {
                        "config": self.cfg.to_dict(),
                        "model": self.model.state_dict(),
                        "best": self.best,
                    },
                )
        if self.tb is not None:
            for key, value in metrics.items():
                self.tb.add_scalar(f"eval/{key}", value, row["iteration"])
        if self.verbose:
            tqdm.write(format_row(row, self.cfg.ks) + self.baselines(row))

    def checkpoint(self, interrupted: bool = False) -> None:
        """``last.pt`` (the exact position), then the CSV files and ``run.json``; rank 0 writes.

        Every process must call it (the augmentation states of all processes are gathered).
        """
        augment_ranks = gather_objects(self.augment_state, self.ctx)
        self.last_save = time.perf_counter()
        if not self.ctx.is_main:
            return
        rng = {"augment": self.augment_state, "torch": torch.get_rng_state()}
        if self.ctx.enabled:
            rng["augment_ranks"] = augment_ranks
        self.trainer.checkpoint(
            self.out / "last.pt",
            config=self.cfg.to_dict(),
            epoch_loss=self.epoch_loss.state(),
            window=self.window.state(),
            log=self.log,
            best_record=self.best,
            rng=rng,
            world_size=self.ctx.world_size,
        )
        self.last_save = time.perf_counter()
        self.write_files(interrupted)

    def write_files(self, interrupted: bool) -> None:
        cfg, splits, it = self.cfg, self.splits, self.trainer.pos.iteration
        metric_cols = [f"R@{k}" for k in cfg.ks] + ["MAP@R", "RP"]
        cols = ["iteration", "epoch", "loss", "lr", *metric_cols, "seconds", "best"]
        write_csv(self.out / "metrics.csv", self.trainer.history, cols)
        write_csv(self.out / "train_log.csv", self.log, LOG_COLUMNS)
        write_json(self.out / "run.json", {
            "name": cfg.name, "config": cfg.to_dict(), "device": str(self.device),
            "torch": torch.__version__, "iteration": it, "total_iterations": self.total,
            "epoch_iters": self.epoch_iters, "complete": it >= self.total,
            "interrupted": interrupted, "train_images": len(splits.train),
            "test_images": len(splits.test),
            "gallery_images": None if splits.gallery is None else len(splits.gallery),
            "best": self.best, "tensorboard": self.tb is not None,
            "world_size": self.ctx.world_size, "process_group": process_group_backend(),
        })  # fmt: skip

    def baselines(self, row: dict[str, Any]) -> str:
        """``"  [R@1: chance c, untrained u]"`` with ``train.baselines``, else ``""``."""
        if not self.cfg.train.baselines:
            return ""
        s = self.splits
        gallery = None if s.gallery is None else s.gallery.labels
        chance = chance_recall_at_k(s.test.labels, 1, gallery_labels=gallery)[1]
        first = self.trainer.history[0] if self.trainer.history else row
        untrained = f"{100 * first['R@1']:.1f}" if first["iteration"] == 0 else "not measured"
        return f"  [R@1: chance {100 * chance:.1f}, untrained {untrained}]"

    # ---------------------------------------------------------------- the run

    def describe(self, resumed: bool) -> str:
        cfg, s, it = self.cfg, self.splits, self.trainer.pos.iteration
        return (
            f"run {cfg.name}: {len(s.train):,} train / {len(s.test):,} test images"
            + ("" if s.gallery is None else f" / {len(s.gallery):,} gallery")
            + f"; {cfg.model.backbone} -> {self.model.dim}-d, loss {cfg.loss.name}; "
            f"{self.total:,} iterations of {cfg.train.batch_size} ({self.epoch_iters} per epoch)"
            + (
                f"; {self.ctx.world_size} processes of {self.sampler.local_batch_size} images"
                if self.ctx.enabled
                else ""
            )
            + (f"; resumed at iteration {it:,}" if resumed else "")
            + ("; already complete" if it >= self.total else "")
        )

    def loop(self, stop: dict[str, Any]) -> None:
        """The evaluation before training (a fresh run), then the loop to the end or a stop."""
        if self.trainer.pos.iteration == 0 and not self.trainer.history:
            if self.cfg.train.eval_at_start:
                self.evaluate(math.nan)
        self.tick = time.perf_counter()
        self.trainer.run(
            self.total, self.batches, on_step=self.after_step, on_epoch_end=self.end_epoch,
            should_stop=lambda: self.stop_now if self.ctx.enabled else stop["requested"],
        )  # fmt: skip

    def run(self, progress: bool | None, resume_command: str) -> int | None:
        """Train to the end, or to a stop signal; return the signal's number (None: the end)."""
        pos, out = self.trainer.pos, self.out
        self.bar = tqdm(
            total=self.total, initial=pos.iteration, desc=self.cfg.name, unit="it",
            disable=progress_disabled(progress) or not self.ctx.is_main,
        )  # fmt: skip
        stop: dict[str, Any] = {"requested": False, "signal": None}
        try:
            with graceful_interrupt() as stop:
                self.stop_flag = stop
                try:
                    self.loop(stop)
                except Stop:  # a first stop signal: stopped between two iterations
                    stop["saving"] = True  # a further signal now waits for the checkpoint
                    self.checkpoint(interrupted=True)
                    if self.ctx.is_main:
                        tqdm.write(
                            f"stopped at iteration {pos.iteration} of {self.total}: the exact "
                            f"position is saved in {out / 'last.pt'}. Resume with: {resume_command}"
                        )
                    return stop["signal"] or signal.SIGINT
        except KeyboardInterrupt:  # a second signal: stopped inside an iteration, nothing saved
            if self.ctx.is_main:
                tqdm.write(
                    f"interrupted inside iteration {pos.iteration + 1}; {out / 'last.pt'} keeps the "
                    "last checkpointed position (epoch end, checkpoint_every or checkpoint_minutes). "
                    f"Resume with: {resume_command}"
                )
            return stop["signal"] or signal.SIGINT
        except OSError as err:  # a full disk, a folder made read-only meanwhile ...
            again = OSError(f"{err} Then resume with: {resume_command}")
            again.errno = err.errno
            raise again from err
        finally:
            self.bar.close()
            if self.tb is not None:
                self.tb.close()
        return None

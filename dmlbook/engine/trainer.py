"""The engine's training loop: iteration-based, config-driven, resumable.

::

    build model, loss, optimiser, PK sampler from the config      (or restore them from last.pt)
    evaluate once before training                                  -> metrics.csv, iteration 0
    while iteration < total:
        epoch += 1                         (an epoch = epoch_iters PK batches; seeded by epoch)
        for each PK batch:
            x = augmented batch on the device; embeddings under bf16 autocast
            loss (float32) -> backward -> lr = base_lr * lr_factor(iteration) -> step
        every eval_every epochs and at the end: Recall@K on the test split; best.pt if R@1 rose
        last.pt written atomically (kill -9 loses at most the current epoch)

The batches of epoch ``e`` depend only on ``(seed, e)`` and the augmentation generator is saved
with the checkpoint, so a resumed run replays exactly what an uninterrupted run would have done.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm import tqdm

from ..data import PKSampler
from ..progress import progress_disabled
from ..reproducibility import seed_everything
from .build import build_loss, build_model, build_optimizer, lr_factor, milestones, resolve_device
from .checkpoint import load_checkpoint, save_checkpoint, write_csv, write_json
from .config import Config, load_config
from .data import build_splits
from .evaluation import evaluate_model
from .runtime import Mean, Stop, check_resumable, format_row, graceful_interrupt, tensorboard

__all__ = ["RunResult", "train", "TEST_SELECTION_NOTE"]

#: Printed and stored whenever a best checkpoint is chosen by a test-split metric.
TEST_SELECTION_NOTE = (
    "best checkpoint selected by R@1 on the TEST split, as the public codes (MS, Proxy-Anchor) "
    "do; this is optimistic, not a held-out result. Compare last.pt for an honest number."
)


@dataclass
class RunResult:
    """What :func:`train` returns.

    Attributes
    ----------
    history : DataFrame
        One row per evaluation: iteration, epoch, loss, lr, R@K..., MAP@R, RP, seconds, best.
    log : DataFrame
        One row per ``log_every`` iterations: iteration, epoch, loss, lr, images_per_s, seconds.
    best : dict or None
        ``{"iteration", "epoch", "metrics", "selected_on", "note"}`` of ``best.pt``.
    out_dir : Path
        Holds ``last.pt``, ``best.pt``, ``metrics.csv``, ``train_log.csv``, ``run.json``.
    interrupted : bool
        True if Ctrl-C stopped the run (``last.pt`` then holds the exact position).
    config : Config
    """

    history: pd.DataFrame
    log: pd.DataFrame
    best: dict[str, Any] | None
    out_dir: Path
    interrupted: bool
    config: Config


def train(
    config: Config | str | Path,
    *,
    resume: bool | str | Path = False,
    progress: bool | None = None,
    verbose: bool = True,
) -> RunResult:
    """Train the run described by ``config``; write checkpoints, CSV logs and ``run.json``.

    Parameters
    ----------
    config : Config, str or Path
        A :class:`Config` or a config file (see :func:`dmlbook.engine.load_config`).
    resume : bool, str or Path
        ``True``: continue from ``<out_dir>/last.pt`` if it exists (else start fresh); a path:
        continue from that checkpoint (it must exist).
    progress : bool, optional
        Progress bar; default on unless ``TQDM_DISABLE`` is set.
    verbose : bool
        Print one line per evaluation (rounded, no timings) and the best-checkpoint note.

    Returns
    -------
    RunResult

    Raises
    ------
    ConfigError
        For an invalid config (before anything is trained) or an incompatible checkpoint.
    FloatingPointError
        When the loss becomes NaN or infinite.
    """
    cfg = config if isinstance(config, Config) else load_config(config)
    cfg.validate()
    out = cfg.out_dir
    for stale in out.glob(".*.tmp"):  # left by a process killed while writing
        stale.unlink(missing_ok=True)
    state = None
    if resume:
        path = out / "last.pt" if resume is True else Path(resume)
        if resume is not True or path.is_file():
            state = load_checkpoint(path)
            check_resumable(state["config"], cfg)
    t, o = cfg.train, cfg.optim
    device = resolve_device(t.device)
    loss_fn = build_loss(cfg)  # fails fast on a bad loss name or hyper-parameter
    seed_everything(t.seed)
    model = build_model(cfg, pretrained=state is None)
    splits = build_splits(cfg, device, model.input_spec)
    model.to(device)
    loss_fn.to(device)
    if t.channels_last:
        model.to(memory_format=torch.channels_last)
    opt = build_optimizer(cfg, model, loss_fn)
    sampler = PKSampler(
        splits.train.labels, t.batch_size, t.k, seed=t.seed, batches_per_epoch=t.epoch_iters
    )
    epoch_iters = len(sampler)
    total = t.iterations or t.epochs * epoch_iters
    steps = milestones(cfg, total)
    ks = cfg.ks

    # Position and records; restored from the checkpoint when resuming.
    pos: dict[str, Any] = {"iteration": 0, "epoch": 0, "batch": 0, "elapsed": 0.0}
    history: list[dict[str, Any]] = []
    log: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    epoch_loss = Mean(device)  # mean training loss of the current epoch
    gen_state = None
    if state is not None:
        model.load_state_dict(state["model"])
        loss_fn.load_state_dict(state["loss"])
        opt.load_state_dict(state["optimizer"])
        for g, base in zip(opt.param_groups, state["base_lrs"], strict=True):
            g["base_lr"] = base
        pos.update(state["position"])
        history, log, best = state["history"], state["log"], state["best"]
        epoch_loss.load(state["epoch_loss"])
        gen_state = state["rng"]["augment"]
        torch.set_rng_state(state["rng"]["torch"])
    forward = torch.compile(model) if t.compile else model
    tb = tensorboard(cfg, out)
    start = time.perf_counter() - pos["elapsed"]
    eval_kw = {"batch_size": t.eval_batch_size, "bf16": t.bf16, "forward": forward}
    selected_on = "query/gallery" if splits.gallery is not None else "test"

    def lr_now() -> float:
        return opt.param_groups[0]["lr"]

    def write_files(interrupted: bool = False) -> None:
        metric_cols = [f"R@{k}" for k in ks] + ["MAP@R", "RP"]
        cols = ["iteration", "epoch", "loss", "lr", *metric_cols, "seconds", "best"]
        write_csv(out / "metrics.csv", history, cols)
        write_csv(
            out / "train_log.csv",
            log,
            ["iteration", "epoch", "loss", "lr", "images_per_s", "seconds"],
        )
        write_json(
            out / "run.json",
            {
                "name": cfg.name,
                "config": cfg.to_dict(),
                "device": str(device),
                "torch": torch.__version__,
                "iteration": pos["iteration"],
                "total_iterations": total,
                "epoch_iters": epoch_iters,
                "complete": pos["iteration"] >= total,
                "interrupted": interrupted,
                "train_images": len(splits.train),
                "test_images": len(splits.test),
                "gallery_images": None if splits.gallery is None else len(splits.gallery),
                "best": best,
                "tensorboard": tb is not None,
            },
        )

    def checkpoint(interrupted: bool = False) -> None:
        pos["elapsed"] = time.perf_counter() - start
        save_checkpoint(
            out / "last.pt",
            {
                "config": cfg.to_dict(),
                "model": model.state_dict(),
                "loss": loss_fn.state_dict(),
                "optimizer": opt.state_dict(),
                "base_lrs": [g["base_lr"] for g in opt.param_groups],
                "position": dict(pos),
                "epoch_loss": epoch_loss.state(),
                "window": window.state(),
                "history": history,
                "log": log,
                "best": best,
                "rng": {"augment": rng["augment"], "torch": torch.get_rng_state()},
            },
        )
        write_files(interrupted)

    def evaluate(loss: float) -> None:
        nonlocal best
        metrics = evaluate_model(model, splits, ks, **eval_kw)
        row = {"iteration": pos["iteration"], "epoch": pos["epoch"], "loss": loss, "lr": lr_now()}
        row.update(metrics)
        row["seconds"] = round(time.perf_counter() - start, 3)
        row["best"] = False
        if t.save_best and (best is None or metrics["R@1"] > best["metrics"]["R@1"]):
            for r in history:
                r["best"] = False
            row["best"] = True
            best = {
                "iteration": pos["iteration"],
                "epoch": pos["epoch"],
                "metrics": metrics,
                "selected_on": selected_on,
                "note": TEST_SELECTION_NOTE,
            }
            save_checkpoint(
                out / "best.pt",
                {"config": cfg.to_dict(), "model": model.state_dict(), "best": best},
            )
        history.append(row)
        if tb is not None:
            for key, value in metrics.items():
                tb.add_scalar(f"eval/{key}", value, pos["iteration"])
        if verbose:
            tqdm.write(format_row(row, ks))

    generator = torch.Generator()  # all augmentation randomness; seeded per epoch
    rng = {"augment": generator.get_state()}

    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One update at iteration ``pos["iteration"]``; returns the (float32) loss."""
        factor = lr_factor(pos["iteration"], steps, o.gamma, o.warmup_iters, o.warmup_factor)
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * factor
        with torch.autocast(device.type, torch.bfloat16, enabled=t.bf16):
            emb = forward(x)
        loss = loss_fn(emb.float(), y)  # the loss in float32, outside autocast
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if o.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        rng["augment"] = generator.get_state()  # after this batch's draws, for resuming
        return loss.detach()

    if verbose:
        tqdm.write(
            f"run {cfg.name}: {len(splits.train):,} train / {len(splits.test):,} test images"
            + ("" if splits.gallery is None else f" / {len(splits.gallery):,} gallery")
            + f"; {cfg.model.backbone} -> {model.dim}-d, loss {cfg.loss.name}; {total:,} "
            f"iterations of {t.batch_size} ({epoch_iters} per epoch)"
            + (f"; resumed at iteration {pos['iteration']:,}" if state is not None else "")
            + ("; already complete" if pos["iteration"] >= total else "")
        )
    interrupted = False
    bar = tqdm(
        total=total,
        initial=pos["iteration"],
        desc=cfg.name,
        unit="it",
        disable=progress_disabled(progress),
    )
    window = Mean(device)  # mean training loss since the last log row
    if state is not None:
        window.load(state["window"])
    try:
        with graceful_interrupt() as stop:
            if pos["iteration"] == 0 and not history and t.eval_at_start:
                evaluate(math.nan)
            tick = time.perf_counter()
            while pos["iteration"] < total:
                epoch = pos["epoch"] + 1
                sampler.set_epoch(epoch)
                generator.manual_seed(t.seed * 1_000_003 + epoch)
                if pos["batch"] and gen_state is not None:  # resuming inside this epoch
                    generator.set_state(gen_state)
                gen_state = None
                rng["augment"] = generator.get_state()
                if cfg.optim.freeze_backbone_epochs:
                    model.freeze_backbone(epoch <= cfg.optim.freeze_backbone_epochs)
                model.train()
                todo = itertools.islice(sampler, pos["batch"], None)  # skip batches already done
                for b, (x, y) in enumerate(
                    splits.train.train_batches(todo, generator), pos["batch"]
                ):
                    if stop["requested"]:
                        raise Stop
                    loss = train_step(x, y)
                    window.add(loss)
                    epoch_loss.add(loss)
                    pos["iteration"] += 1
                    pos["batch"] = b + 1
                    bar.update(1)
                    if pos["iteration"] % t.log_every == 0 or pos["iteration"] == total:
                        now = time.perf_counter()
                        value = window.pop(pos["iteration"], lr_now())
                        log.append({
                            "iteration": pos["iteration"], "epoch": epoch, "loss": value,
                            "lr": lr_now(), "seconds": round(now - start, 3),
                            "images_per_s": round(t.batch_size * window.popped / (now - tick), 1),
                        })  # fmt: skip
                        tick = now
                        if tb is not None:
                            tb.add_scalar("train/loss", value, pos["iteration"])
                            tb.add_scalar("train/lr", lr_now(), pos["iteration"])
                        bar.set_postfix(loss=f"{value:.4f}", refresh=False)
                    if t.checkpoint_every and pos["iteration"] % t.checkpoint_every == 0:
                        checkpoint()
                    if pos["iteration"] >= total:
                        break
                pos["epoch"], pos["batch"] = epoch, 0
                mean = epoch_loss.pop(pos["iteration"], lr_now())
                if epoch % t.eval_every == 0 or pos["iteration"] >= total:
                    evaluate(mean)
                checkpoint()
                tick = time.perf_counter()  # images/s counts training time only
    except Stop:  # Ctrl-C once: stopped between two iterations, the exact position is saved
        interrupted = True
        checkpoint(interrupted=True)
        tqdm.write(
            f"stopped at iteration {pos['iteration']}: the exact position is saved in "
            f"{out / 'last.pt'}; train again with resume to continue."
        )
    except KeyboardInterrupt:  # Ctrl-C twice: stopped inside an iteration, nothing saved
        interrupted = True
        tqdm.write(
            f"interrupted inside iteration {pos['iteration'] + 1}; {out / 'last.pt'} keeps the "
            "last completed epoch (or checkpoint_every) position; train again with resume."
        )
    finally:
        bar.close()
        if tb is not None:
            tb.close()
    if verbose and best is not None:
        tqdm.write(
            f"best: iteration {best['iteration']}, R@1 {100 * best['metrics']['R@1']:.1f} "
            f"-- note: {TEST_SELECTION_NOTE}"
        )
    return RunResult(
        history=pd.DataFrame(history),
        log=pd.DataFrame(log),
        best=best,
        out_dir=out,
        interrupted=interrupted,
        config=cfg,
    )

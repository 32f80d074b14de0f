"""Run-time helpers of the training loop: resumption checks, loss means, stop signals, logging.

Tests: ``tests/engine/test_runtime.py``.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from ..training.checkpoint import load_checkpoint
from .config import Config, ConfigError

__all__ = [
    "Mean",
    "NothingToResume",
    "check_resumable",
    "format_row",
    "STOP_SIGNALS",
    "exit_status",
    "graceful_interrupt",
    "resume_path",
    "resume_state",
    "tensorboard",
]

# Keys that may change between a run and its resumption (they do not alter what is learnt).
_RESUMABLE = {
    "description", "data.root", "data.cache_dir", "train.iterations", "train.epochs",
    "train.eval_every", "train.eval_batch_size", "train.log_every", "train.checkpoint_every",
    "train.checkpoint_minutes",
    "train.device", "train.compile", "train.bf16", "train.channels_last", "train.tensorboard",
    "train.save_best", "train.out_dir",
}  # fmt: skip


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("options", "params", "backbone_options"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_resumable(saved: dict[str, Any], cfg: Config) -> None:
    """Raise :class:`ConfigError` if ``cfg`` changes what a checkpoint of ``saved`` learnt."""
    old, new = _flat(saved), _flat(cfg.to_dict())
    # A key added to the schema after the checkpoint was written had its default value then.
    defaults = _flat(Config().to_dict())
    old.update({k: defaults[k] for k in new.keys() - old.keys() if k in defaults})
    changed = [
        k for k in sorted(set(old) | set(new)) if k not in _RESUMABLE and old.get(k) != new.get(k)
    ]
    if changed:
        listing = "; ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed[:6])
        raise ConfigError(
            f"cannot resume: the checkpoint was trained with another config ({listing}). Restore "
            "these values, or start a fresh run in another train.out_dir."
        )


class NothingToResume(FileNotFoundError):
    """``resume=True`` (``--resume``) but the run folder holds no ``last.pt``."""


def resume_path(cfg: Config, resume: bool | str | Path, overwrite: bool = False) -> Path | None:
    """The checkpoint a run continues from, or None for a fresh run; checked before anything is
    created (``resume`` and ``overwrite`` as :func:`dmlbook.engine.train` takes them).

    Raises
    ------
    NothingToResume
        For ``resume=True`` when the run folder holds no ``last.pt``.
    ValueError
        For ``overwrite`` (a fresh run) with ``resume``.
    """
    if overwrite not in (True, False):
        raise TypeError(f"overwrite must be True or False, got {overwrite!r}.")
    if overwrite and resume not in (False, None):
        raise ValueError(
            "overwrite starts a fresh run (the old one is moved aside), resume continues one: "
            "give one of them (--overwrite or --resume)."
        )
    if resume is False or resume is None:
        return None
    path = cfg.out_dir / "last.pt" if resume in (True, "auto") else Path(resume)
    if resume == "auto" and not path.is_file():
        return None
    if resume is True and not path.is_file():
        raise NothingToResume(
            f"nothing to resume from: the run folder {cfg.out_dir} holds no last.pt (no run of "
            f"{cfg.name!r} was checkpointed there; check train.out_dir). To start a fresh run, "
            "drop --resume (in Python: resume=False)."
        )
    return path


def resume_state(cfg: Config, path: Path | None) -> dict[str, Any] | None:
    """The checkpoint at ``path`` (from :func:`resume_path`), checked against ``cfg``."""
    if path is None:
        return None
    state = load_checkpoint(path)
    missing = [k for k in ("position", "optimizer", "rng", "log") if k not in state]
    if missing:
        raise ValueError(
            f"{path} holds no training position ({', '.join(missing)} missing): a best.pt keeps "
            "the model only. Resume from the run's last.pt (--resume without a path)."
        )
    check_resumable(state["config"], cfg)
    return state


class Mean:
    """Running mean of scalar losses kept on the device (no synchronisation per iteration)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.sum, self.n, self.popped = torch.zeros((), device=device, dtype=torch.float64), 0, 0

    def add(self, loss: torch.Tensor) -> None:
        self.sum += loss.detach()
        self.n += 1

    def pop(self, iteration: int, lr: float) -> float:
        """The mean so far (NaN if empty), then reset; raise if the loss is not finite."""
        value = float(self.sum) / self.n if self.n else math.nan
        if self.n and not math.isfinite(value):
            raise FloatingPointError(
                f"the loss became {value} before iteration {iteration}; lower optim.lr (now "
                f"{lr:g}), set optim.grad_clip, or check the data."
            )
        self.popped = self.n
        self.sum.zero_()
        self.n = 0
        return value

    def state(self) -> list[float]:
        return [float(self.sum), float(self.n)]

    def load(self, state: list[float]) -> None:
        self.sum.fill_(state[0])
        self.n = int(state[1])


#: The signals that stop a run gracefully: Ctrl-C, and what SLURM, Kubernetes and torchrun send
#: to stop or preempt a job (SIGTERM), or a closed terminal (SIGHUP).
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def exit_status(signum: int | None) -> int:
    """The shell's exit status of a run stopped by ``signum``: 128 + its number (130 for Ctrl-C,
    143 for SIGTERM, 129 for SIGHUP); 0 for a run that was not stopped."""
    return 0 if signum is None else 128 + int(signum)


@contextlib.contextmanager
def graceful_interrupt() -> Iterator[dict[str, Any]]:
    """A first SIGINT (Ctrl-C), SIGTERM or SIGHUP asks the loop to stop after the current
    iteration (the flag's ``"requested"``; ``"signal"`` records which); a second one raises
    ``KeyboardInterrupt`` at once, unless the caller set the flag's ``"saving"`` (the final
    checkpoint of a stopped run is being written): then it waits for the checkpoint, with a
    line. Only in the main thread (signals go there). The handlers found are restored on exit."""
    flag: dict[str, Any] = {"requested": False, "signal": None, "saving": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(signum: int, frame: object) -> None:
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if flag["saving"]:  # stopping already: the position is being written, let it finish
            tqdm.write(f"{name}: the position is being saved; the run stops once it is written.")
            return
        if flag["requested"]:
            raise KeyboardInterrupt
        flag["requested"], flag["signal"] = True, signum
        tqdm.write(f"{name}: stopping after this iteration (send it again to stop at once).")

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
    try:
        yield flag
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


def tensorboard(cfg: Config, out: Path) -> Any:
    """A ``SummaryWriter`` under ``out/tensorboard`` if asked for and installed, else None."""
    if not cfg.train.tensorboard:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return None
    return SummaryWriter(str(out / "tensorboard"))


def format_row(row: dict[str, Any], ks: tuple[int, ...]) -> str:
    """One evaluation as a line of rounded numbers (no timings: printed output is reproducible)."""
    loss = "   -  " if math.isnan(row["loss"]) else f"{row['loss']:.4f}"
    recall = "  ".join(f"R@{k} {100 * row[f'R@{k}']:.1f}" for k in ks)
    return f"iter {row['iteration']:>6} (epoch {row['epoch']}): loss {loss}  {recall}  MAP@R {100 * row['MAP@R']:.1f}"

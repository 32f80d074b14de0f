"""One training loop for every chapter: PK batches, a pair loss, Recall@K after each epoch.

The whole loop is :func:`fit`, short enough to read in one sitting::

    seed everything
    evaluate once before training              -> the epoch-0 row
    for each epoch:
        for each PK batch (P classes x K samples):
            loss = loss_fn(model(x), y); step the optimiser
        evaluate Recall@K on the test split    -> one row of the history

Chapters swap the loss (and sometimes the model or data) and call :func:`fit` unchanged, so that
differences in the returned tables come from the loss alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from .models.embedding import check_positive_int, embed
from .progress import progress_disabled
from .reproducibility import seed_everything

__all__ = ["fit", "inputs_and_labels", "make_optimizer", "OPTIMIZERS"]

#: Optimiser names accepted by :func:`fit`.
OPTIMIZERS = ("adam", "adamw", "sgd")

Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


def make_optimizer(
    params: Sequence[nn.Parameter], name: str, lr: float, weight_decay: float = 0.0
) -> torch.optim.Optimizer:
    """Build the optimiser called ``name``: ``"adam"``, ``"adamw"`` or ``"sgd"`` (momentum 0.9).

    Raises
    ------
    ValueError
        For an unknown name.
    """
    key = str(name).lower()
    if key == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if key == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if key == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    raise ValueError(f"Unknown optimizer {name!r}; use one of {', '.join(OPTIMIZERS)}.")


def inputs_and_labels(data: object, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``(inputs, labels)`` tensors of a data set, checked.

    Parameters
    ----------
    data : dataset or (inputs, labels)
        A dmlbook data set (``.inputs`` and ``.labels``, e.g. from
        :func:`dmlbook.data.load_dataset`) or a pair of array-likes.
    name : str
        What to call it in an error message (``"train"``, ``"test"``).

    Returns
    -------
    inputs, labels : Tensor
        Floating-point inputs as float32 (other dtypes, e.g. uint8 images, unchanged) and the
        labels as int64.

    Raises
    ------
    TypeError
        For anything else.
    ValueError
        If the labels are not a 1-D integer tensor with one entry per input.
    """
    if isinstance(data, tuple | list) and len(data) == 2:
        inputs, labels = data
    elif hasattr(data, "inputs") and hasattr(data, "labels"):
        inputs, labels = data.inputs, data.labels
    else:
        raise TypeError(
            f"{name} must be a dataset with .inputs and .labels (dmlbook.data.load_dataset) or an "
            f"(inputs, labels) pair, got {type(data).__name__}."
        )
    inputs, labels = torch.as_tensor(inputs), torch.as_tensor(labels)
    if labels.ndim != 1 or torch.is_floating_point(labels):
        raise ValueError(
            f"{name}.labels must be a 1-D tensor of integer class ids, got dtype {labels.dtype} "
            f"and shape {tuple(labels.shape)}."
        )
    if inputs.shape[0] != labels.shape[0]:
        raise ValueError(
            f"{name} has {inputs.shape[0]} inputs but {labels.shape[0]} labels; pass one label "
            "per input."
        )
    if torch.is_floating_point(inputs) and inputs.dtype != torch.float32:
        inputs = inputs.float()
    return inputs, labels.long()


def _check_args(
    model: object, loss_fn: object, epochs: int, lr: float, eval_every: int, ks: Sequence[int]
) -> tuple[int, ...]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if not callable(loss_fn):
        raise TypeError(
            "loss_fn must be callable as loss_fn(embeddings, labels) -> scalar tensor, "
            f"got {type(loss_fn).__name__}."
        )
    check_positive_int(epochs, "epochs")
    check_positive_int(eval_every, "eval_every")
    if not (isinstance(lr, int | float) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}.")
    ks = (ks,) if isinstance(ks, int) else tuple(ks)
    if not ks:
        raise ValueError("ks must name at least one K for Recall@K, e.g. ks=(1, 2, 4, 8).")
    return tuple(check_positive_int(k, "each K in ks") for k in ks)


def _loss_value(loss: object, epoch: int, batch: int, lr: float) -> float:
    """Return the loss as a float; raise if it is not a scalar tensor or not finite."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        got = (
            f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss).__name__
        )
        raise TypeError(f"loss_fn must return a scalar tensor, got {got}; reduce it with .mean().")
    value = loss.item()
    if not math.isfinite(value):
        raise FloatingPointError(
            f"loss became {value} at epoch {epoch}, batch {batch}; lower lr (now {lr:g}), "
            "set grad_clip, or check the inputs and the loss."
        )
    return value


def fit(
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    train: object,
    test: object | None = None,
    *,
    epochs: int = 10,
    batch_size: int = 60,
    k: int = 5,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    optimizer: str = "adam",
    eval_every: int = 1,
    ks: Sequence[int] = (1, 2, 4, 8),
    seed: int = 0,
    device: str | torch.device = "cpu",
    progress: bool | None = None,
    batches_per_epoch: int | None = None,
    augment: Augment | None = None,
    grad_clip: float | None = None,
) -> pd.DataFrame:
    """Train ``model`` with ``loss_fn`` on PK batches and record Recall@K on ``test``.

    Parameters
    ----------
    model : nn.Module
        Maps a batch of inputs to embeddings of shape (B, d); trained in place. ``fit`` does not
        initialise it: for a reproducible run build it right after ``dmlbook.setup()`` (or
        ``dmlbook.seed_everything(seed)``), so that its initial weights are fixed too.
    loss_fn : callable
        ``loss_fn(embeddings, labels) -> scalar`` (for example
        :class:`dmlbook.losses.ContrastiveLoss`). Parameters of a loss that is an ``nn.Module``
        are trained together with the model.
    train, test : dataset or (inputs, labels)
        Objects with ``.inputs`` and ``.labels`` (:func:`dmlbook.data.load_dataset`). ``test`` is
        embedded with :func:`dmlbook.models.embed` and scored by
        :func:`dmlbook.evaluate.recall_at_k` (each test sample queries all the others).
    epochs : int
        Passes over the PK sampler.
    batch_size, k : int
        Every batch holds ``batch_size / k`` classes with ``k`` samples each
        (:class:`dmlbook.data.PKSampler`), so every sample has ``k - 1`` positives in its batch.
    lr, weight_decay : float
        Learning rate and L2 penalty of the optimiser.
    optimizer : {"adam", "adamw", "sgd"}
        ``"sgd"`` uses momentum 0.9.
    eval_every : int
        Evaluate every this many epochs; the last epoch is always evaluated.
    ks : sequence of int
        The ``K`` of Recall@K.
    seed : int
        Seeds Python, NumPy and torch before anything random happens here, the PK sampler and
        the generator handed to ``augment``.
    device : str or torch.device
        Where the model and each batch go. Datasets stay where they are.
    progress : bool, optional
        Show a tqdm bar over all training batches. ``None`` (default): on, unless the environment
        variable ``TQDM_DISABLE`` is set; ``False``: silent.
    batches_per_epoch : int, optional
        Batches in one epoch; default: as many as the sampler needs to visit the data once.
    augment : callable, optional
        ``augment(x, generator) -> x`` applied to every training batch (not to ``test``).
    grad_clip : float, optional
        Clip the gradient norm of all trained parameters to this value before each step.

    Returns
    -------
    pandas.DataFrame
        One row per evaluation, the first (``epoch = 0``) before any training. Columns: ``epoch``,
        ``loss`` (mean training loss over that epoch; NaN for epoch 0), ``R@K`` for each ``K`` in
        ``ks`` (fractions in [0, 1]; only when ``test`` is given) and ``seconds`` (wall time since
        the call began, evaluation included). ``frame.attrs`` holds ``interrupted`` (bool),
        ``epochs_done`` (completed epochs) and the main settings.

    Raises
    ------
    FloatingPointError
        When the loss becomes NaN or infinite; the message names the epoch and batch.
    ValueError, TypeError
        For bad arguments, before any training.

    Notes
    -----
    Pressing Ctrl-C (``KeyboardInterrupt``) stops training cleanly: the rows recorded so far are
    returned with ``attrs["interrupted"] = True`` and the model keeps the weights it had reached.
    On a CPU two calls with the same seed and identically initialised models return identical
    histories, except for the ``seconds`` column.
    """
    from .data import PKSampler  # imported here: dmlbook.data is a sibling module
    from .evaluate import recall_at_k

    ks = _check_args(model, loss_fn, epochs, lr, eval_every, ks)
    train_x, train_y = inputs_and_labels(train, "train")
    test_x, test_y = inputs_and_labels(test, "test") if test is not None else (None, None)
    if grad_clip is not None and not (math.isfinite(grad_clip) and grad_clip > 0):
        raise ValueError(f"grad_clip must be a positive number or None, got {grad_clip!r}.")
    if augment is not None and not callable(augment):
        raise TypeError(f"augment must be callable as augment(x, generator), got {augment!r}.")

    start = time.perf_counter()
    generator = seed_everything(seed)
    device = torch.device(device)
    model.to(device)
    params = list(model.parameters())
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
        seen = {id(p) for p in params}
        params += [p for p in loss_fn.parameters() if id(p) not in seen]
    opt = make_optimizer(params, optimizer, lr, weight_decay)
    sampler = PKSampler(train_y, batch_size, k, seed=seed, batches_per_epoch=batches_per_epoch)
    n_batches = len(sampler)
    was_training = model.training

    rows: list[dict[str, float]] = []

    def record(epoch: int, loss: float) -> dict[str, float]:
        row = {"epoch": epoch, "loss": loss}
        if test_x is not None:
            emb = embed(model, test_x, device=device)
            recall = recall_at_k(emb, test_y, ks)
            row.update({f"R@{kk}": float(recall[kk]) for kk in ks})
        row["seconds"] = time.perf_counter() - start
        rows.append(row)
        return row

    interrupted, epoch, batch = False, 0, 0
    bar = tqdm(
        total=epochs * n_batches, desc="fit", unit="batch", disable=progress_disabled(progress)
    )
    try:
        record(0, math.nan)
        for epoch in range(1, epochs + 1):
            sampler.set_epoch(epoch)
            model.train()
            total = 0.0
            for batch, idx in enumerate(sampler, start=1):
                x, y = train_x[idx].to(device), train_y[idx].to(device)
                if augment is not None:
                    x = augment(x, generator)
                loss = loss_fn(model(x), y)
                value = _loss_value(loss, epoch, batch, lr)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, grad_clip)
                opt.step()
                total += value
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{total / batch:.4f}", refresh=False)
            if epoch % eval_every == 0 or epoch == epochs:
                row = record(epoch, total / n_batches)
                if "R@1" in row:
                    bar.set_postfix(epoch=epoch, loss=f"{row['loss']:.4f}", R1=f"{row['R@1']:.3f}")
    except KeyboardInterrupt:
        interrupted = True
        bar.close()
        print(
            f"fit interrupted at epoch {epoch}, batch {batch}: returning the {len(rows)} "
            "evaluation(s) recorded so far; the model keeps its current weights."
        )
    finally:
        bar.close()
        model.train(was_training)

    columns = ["epoch", "loss"] + ([f"R@{kk}" for kk in ks] if test_x is not None else [])
    history = pd.DataFrame(rows, columns=columns + ["seconds"])
    history["epoch"] = history["epoch"].astype(int)
    history.attrs.update(
        interrupted=interrupted,
        epochs_done=max(epoch - 1, 0) if interrupted else epochs,
        seed=seed,
        optimizer=str(optimizer).lower(),
        lr=float(lr),
        batch_size=int(batch_size),
        k=int(k),
        loss=type(loss_fn).__name__,
    )
    return history

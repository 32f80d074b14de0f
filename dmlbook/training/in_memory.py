"""Training for every chapter: PK batches, a pair loss, Recall@K after each epoch.

:func:`fit` runs the package's one training loop, :class:`dmlbook.training.loop.Trainer` (the
one the engine's benchmark runs use too), on in-memory data::

    seed everything
    evaluate once before training              -> the epoch-0 row
    for each epoch:
        for each PK batch (P classes x K samples):
            loss = loss_fn(model(x), y); step the optimiser       (Trainer.step)
        evaluate Recall@K on the test split    -> one row of the history

Chapters swap the loss (and sometimes the model or data) and call :func:`fit` unchanged, so that
differences in the returned tables come from the loss alone. The optimiser comes from the one
factory, :func:`dmlbook.training.optim.make_optimizer`.

Tests: ``tests/training/test_in_memory.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm

from ..core.progress import progress_disabled
from ..core.reproducibility import seed_everything
from ..core.validation import is_integer
from ..data import PKSampler, RandomBatchSampler
from ..evaluate import recall_at_k
from ..models.embedding import check_positive_int, embed
from .loop import Trainer
from .optim import check_optimizer, make_optimizer

__all__ = [
    "EVAL_BATCH_CPU",
    "LR_DECAYS",
    "SAMPLERS",
    "cosine_factor",
    "fit",
    "inputs_and_labels",
]

#: How :func:`fit` builds its batches: ``"pk"`` (P classes x K samples, the default of every
#: pair-based recipe) or ``"random"`` (uniform over the samples, Liu et al.'s Table II baseline).
SAMPLERS = ("pk", "random")
#: Learning-rate schedules of :func:`fit`: ``None`` (constant) or ``"cosine"`` (from ``lr`` down
#: to 0 over all updates, half a cosine period; Loshchilov and Hutter 2017, SGDR, Eq. 5 without
#: restarts).
LR_DECAYS = (None, "cosine")
#: Test samples per forward pass when :func:`fit` evaluates on a CPU (on a GPU, :func:`embed`'s
#: default of 512). The batch size bounds memory, not the result (the embeddings are the same bit
#: for bit); a batch whose activations fit in a core's cache is cheaper: the chapters' SmallCNN
#: embeds the 3,000 synthetic test images in about 0.18 s of CPU at 128 per batch against 0.28 s
#: at 512 (AVX2 kernels, 2 threads; with AVX-512 0.13 s against 0.19 s), and a chapter
#: evaluates 36 times.
EVAL_BATCH_CPU = 128


def cosine_factor(total: int) -> Callable[[int], float]:
    """``factor(i) = (1 + cos(pi i / total)) / 2``: 1 at the first update, towards 0 at the last."""
    return lambda i: 0.5 * (1.0 + math.cos(math.pi * i / total))


Augment = Callable[[torch.Tensor, torch.Generator], torch.Tensor]


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
    model: object,
    loss_fn: object,
    epochs: int,
    eval_every: int,
    ks: Sequence[int],
    grad_clip: float | None,
    augment: object,
    sampler: object,
    lr_decay: object,
) -> tuple[int, ...]:
    """Raise on a bad argument of :func:`fit`; return ``ks`` as a tuple."""
    if lr_decay not in LR_DECAYS:
        raise ValueError(f"lr_decay must be None or 'cosine', got {lr_decay!r}.")
    if sampler not in SAMPLERS:
        raise ValueError(
            f"sampler must be one of {', '.join(map(repr, SAMPLERS))}, got {sampler!r}."
        )
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    if not callable(loss_fn):
        raise TypeError(
            "loss_fn must be callable as loss_fn(embeddings, labels) -> scalar tensor, "
            f"got {type(loss_fn).__name__}."
        )
    check_positive_int(epochs, "epochs")
    check_positive_int(eval_every, "eval_every")
    if grad_clip is not None and not (math.isfinite(grad_clip) and grad_clip > 0):
        raise ValueError(f"grad_clip must be a positive number or None, got {grad_clip!r}.")
    if augment is not None and not callable(augment):
        raise TypeError(f"augment must be callable as augment(x, generator), got {augment!r}.")
    ks = (ks,) if is_integer(ks) else tuple(ks)
    if not ks:
        raise ValueError("ks must name at least one K for Recall@K, e.g. ks=(1, 2, 4, 8).")
    return tuple(check_positive_int(k, "each K in ks") for k in ks)


def _to_device(model: nn.Module, loss_fn: object, device: torch.device) -> list[nn.Parameter]:
    """Move the model (and a module loss) to ``device``; return every parameter to train."""
    model.to(device)
    params = list(model.parameters())
    if isinstance(loss_fn, nn.Module):
        loss_fn.to(device)
        seen = {id(p) for p in params}
        params += [p for p in loss_fn.parameters() if id(p) not in seen]
    return params


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
    momentum: float = 0.9,
    nesterov: bool = False,
    sampler: str = "pk",
    lr_decay: str | None = None,
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
        embedded with :func:`dmlbook.models.embed` (on a CPU :data:`EVAL_BATCH_CPU` samples at a
        time) and scored by :func:`dmlbook.evaluate.recall_at_k` (each test sample queries all
        the others).
    epochs : int
        Passes over the PK sampler.
    batch_size, k : int
        Every batch holds ``batch_size / k`` classes with ``k`` samples each
        (:class:`dmlbook.data.PKSampler`), so every sample has ``k - 1`` positives in its batch.
        ``k`` is unused with ``sampler="random"``.
    lr, weight_decay : float
        Learning rate and L2 penalty of the optimiser.
    optimizer : {"adam", "adamw", "sgd"}
        Built by :func:`dmlbook.training.optim.make_optimizer`.
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
    momentum, nesterov : float, bool
        SGD only: ``momentum=0`` is plain SGD (the default 0.9 is the papers' SGD setting).
    sampler : {"pk", "random"}
        ``"pk"``: :class:`~dmlbook.data.PKSampler`; ``"random"``:
        :class:`~dmlbook.data.RandomBatchSampler`, ``batch_size`` samples regardless of class
        (Liu et al., Table II), so many anchors have no positive in their batch.
    lr_decay : {None, "cosine"}
        ``None`` keeps ``lr``; ``"cosine"`` lowers it along half a cosine to 0 at the last of the
        ``epochs * batches_per_epoch`` updates (:func:`cosine_factor`).

    Returns
    -------
    pandas.DataFrame
        One row per evaluation, the first (``epoch = 0``) before any training. Columns: ``epoch``,
        ``loss`` (mean training loss over that epoch; NaN for epoch 0), ``R@K`` for each ``K`` in
        ``ks`` (fractions in [0, 1]; only when ``test`` is given) and ``seconds`` (wall time since
        the call began, evaluation included). ``frame.attrs`` holds ``interrupted`` (bool),
        ``epochs_done`` (completed epochs), ``step_loss`` (the loss of every training batch, in
        order: ``epochs * batches_per_epoch`` floats, a training curve finer than the epochs)
        and the main settings.

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
    ks = _check_args(model, loss_fn, epochs, eval_every, ks, grad_clip, augment, sampler, lr_decay)
    settings = {"weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov}
    check_optimizer(optimizer, lr, **settings)  # before any work
    train_x, train_y = inputs_and_labels(train, "train")
    test_x, test_y = inputs_and_labels(test, "test") if test is not None else (None, None)

    generator = seed_everything(seed)
    device = torch.device(device)
    params = _to_device(model, loss_fn, device)
    batch_sampler = (
        PKSampler(train_y, batch_size, k, seed=seed, batches_per_epoch=batches_per_epoch)
        if sampler == "pk"
        else RandomBatchSampler(train_y, batch_size, seed=seed, batches_per_epoch=batches_per_epoch)
    )
    n_batches = len(batch_sampler)
    eval_batch = {"batch_size": EVAL_BATCH_CPU} if device.type == "cpu" else {}  # else embed's

    def recall() -> dict[str, float]:
        if test_x is None:
            return {}
        embeddings = embed(model, test_x, device=device, **eval_batch)
        scores = recall_at_k(embeddings, test_y, ks)
        return {f"R@{kk}": float(scores[kk]) for kk in ks}

    opt = make_optimizer(params, optimizer, lr, **settings)
    trainer = Trainer(
        model, loss_fn, opt, evaluator=recall, grad_clip=grad_clip, check_finite=True,
        lr_factor=cosine_factor(epochs * n_batches) if lr_decay == "cosine" else None,
    )  # fmt: skip

    def batches(epoch: int, skip: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        batch_sampler.set_epoch(epoch)
        for idx in itertools.islice(batch_sampler, skip, None):
            x, y = train_x[idx].to(device), train_y[idx].to(device)
            yield (x if augment is None else augment(x, generator)), y

    sums = {"loss": 0.0}  # training loss summed over the current epoch
    step_loss: list[float] = []  # every batch's loss, in order (a training curve at no cost)

    def after_step(loss: torch.Tensor) -> None:
        step_loss.append(loss.item())
        sums["loss"] += step_loss[-1]
        bar.update(1)
        bar.set_postfix(
            epoch=trainer.pos.epoch + 1, loss=f"{sums['loss'] / trainer.pos.batch:.4f}",
            refresh=False,
        )  # fmt: skip

    def end_epoch(epoch: int) -> None:
        mean, sums["loss"] = sums["loss"] / n_batches, 0.0
        if epoch % eval_every == 0 or epoch == epochs:
            row = trainer.evaluate(mean)
            if "R@1" in row:
                bar.set_postfix(epoch=epoch, loss=f"{mean:.4f}", R1=f"{row['R@1']:.3f}")

    was_training, interrupted = model.training, False
    bar = tqdm(
        total=epochs * n_batches, desc="fit", unit="batch", disable=progress_disabled(progress)
    )
    try:
        trainer.evaluate()
        trainer.run(epochs * n_batches, batches, on_step=after_step, on_epoch_end=end_epoch)
    except KeyboardInterrupt:
        interrupted = True
        bar.close()
        print(
            f"fit interrupted at epoch {trainer.pos.epoch + 1}, batch {trainer.pos.batch + 1}: "
            f"returning the {len(trainer.history)} evaluation(s) recorded so far; the model "
            "keeps its current weights."
        )
    finally:
        bar.close()
        model.train(was_training)

    columns = ["epoch", "loss"] + ([f"R@{kk}" for kk in ks] if test_x is not None else [])
    history = pd.DataFrame(trainer.history, columns=columns + ["seconds"])
    history["epoch"] = history["epoch"].astype(int)
    history.attrs.update(
        interrupted=interrupted,
        epochs_done=trainer.pos.epoch,
        step_loss=step_loss,
        seed=seed,
        optimizer=str(optimizer).lower(),
        lr=float(lr),
        batch_size=int(batch_size),
        k=int(k),
        sampler=sampler,
        lr_decay=lr_decay,
        loss=type(loss_fn).__name__,
    )
    return history

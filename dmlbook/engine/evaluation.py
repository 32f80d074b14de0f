"""Evaluation of the engine: embed the test split (and gallery) and score Recall@K and MAP@R.

One set (CUB, Cars, SOP): every test image queries all the other test images. Query/gallery
(In-Shop): the query split is ranked against the gallery split. The embeddings stay on the device
and :func:`dmlbook.evaluate.retrieval_metrics` ranks them in chunks there (60,000 x 512 on a GPU in
well under a second). Under several processes (``ctx``), each embeds a contiguous shard of every
split and the shards are gathered (:func:`dmlbook.engine.distributed.gather_rows`), so every
process scores the same full embedding matrix.

Tests: ``tests/engine/test_evaluation.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from ..evaluate import retrieval_metrics
from ..training.checkpoint import load_checkpoint
from .build import build_model, resolve_device
from .config import Config, config_from_dict
from .data import Splits, build_splits
from .distributed import DistContext, gather_rows, shard_bounds

__all__ = ["embed_source", "evaluate_model", "evaluate_checkpoint"]


def embed_source(
    model: nn.Module,
    source: object,
    *,
    batch_size: int = 256,
    bf16: bool = False,
    forward: nn.Module | None = None,
    ctx: DistContext | None = None,
) -> torch.Tensor:
    """Embeddings (N, d), float32 on the source's device, of a source's eval batches, in order.

    The model is put in eval mode for the pass and back into its previous mode afterwards. With
    a multi-process ``ctx`` each process embeds its shard (:func:`shard_bounds`) and every
    process gets all N rows back (:func:`gather_rows`).
    """
    forward = model if forward is None else forward  # not `or`: a compiled module has no bool()
    device = source.device
    was_training = model.training
    model.eval()
    sharded = ctx is not None and ctx.enabled
    bounds = shard_bounds(len(source), ctx) if sharded else None
    chunks = []
    try:
        with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=bf16):
            for x in source.eval_batches(batch_size, bounds):
                chunks.append(forward(x).float())
    finally:
        model.train(was_training)
    if not sharded:
        return torch.cat(chunks)
    mine = torch.cat(chunks) if chunks else torch.empty(0, 0, device=device)
    return gather_rows(mine, len(source), ctx)


def evaluate_model(
    model: nn.Module,
    splits: Splits,
    ks: tuple[int, ...],
    *,
    batch_size: int = 256,
    bf16: bool = False,
    forward: nn.Module | None = None,
    ctx: DistContext | None = None,
) -> dict[str, float]:
    """Recall@K (``"R@K"``), ``"MAP@R"`` and ``"RP"`` on the test split (queries vs gallery).

    Values are fractions in [0, 1] (see :func:`dmlbook.evaluate.retrieval_metrics`). ``ctx``:
    shard the embedding over the processes of a run (every process gets the same metrics).
    """
    kw = {"batch_size": batch_size, "bf16": bf16, "forward": forward, "ctx": ctx}
    queries = embed_source(model, splits.test, **kw)
    labels = splits.test.labels.to(queries.device)
    if splits.gallery is None:
        metrics = retrieval_metrics(queries, labels, ks)
    else:
        gallery = embed_source(model, splits.gallery, **kw)
        metrics = retrieval_metrics(
            queries, labels, ks, gallery=gallery, gallery_labels=splits.gallery.labels
        )
    return {k: v for k, v in metrics.items() if k != "P@1"}  # P@1 equals R@1


def evaluate_checkpoint(
    path: str | Path,
    *,
    data_dir: str | Path | None = None,
    device: str = "auto",
    ks: tuple[int, ...] | None = None,
    batch_size: int | None = None,
    describe: Callable[[str], object] | None = None,
) -> dict[str, float]:
    """Load a checkpoint of :func:`dmlbook.engine.train` and evaluate it on its test split.

    Parameters
    ----------
    path : str or Path
        ``best.pt`` or ``last.pt`` of a run.
    data_dir : str or Path, optional
        The folder holding the data sets, if not the one recorded in the checkpoint's config.
    device : str
        ``"auto"``, ``"cpu"`` or ``"cuda"``.
    ks : tuple of int, optional
        Default: the run's Recall@K set.
    batch_size : int, optional
        Default: the run's ``train.eval_batch_size``.
    describe : callable, optional
        Called, before the (long) embedding pass, with one line saying what is evaluated: the
        checkpoint, the run and iteration it holds, the data set, split and image count, the
        device (``dmlbook evaluate`` prints it as its header).

    Returns
    -------
    dict of str to float
        As :func:`evaluate_model`.
    """
    state = load_checkpoint(path)
    values = state["config"]
    if data_dir is not None:
        values["data"]["root"] = str(data_dir)
    cfg = config_from_dict(values)
    dev = resolve_device(device)
    model = build_model(cfg, pretrained=False)
    model.load_state_dict(state["model"])
    model.to(dev)
    splits = build_splits(cfg, dev, model.input_spec, train=False)
    if describe is not None:
        describe(_header(path, state, cfg, splits, dev))
    return evaluate_model(
        model,
        splits,
        tuple(ks) if ks else cfg.ks,
        batch_size=batch_size or cfg.train.eval_batch_size,
        bf16=cfg.train.bf16,
    )


def _header(path: str | Path, state: dict, cfg: Config, splits: Splits, device: object) -> str:
    """``checkpoint runs/x/best.pt (run x, iteration 3000): cub test, 5,924 images; cpu``."""
    at = (state.get("best") or state.get("position") or {}).get("iteration")  # best.pt, last.pt
    where = f"run {cfg.name}" + (f", iteration {at}" if at is not None else "")
    images = f"{cfg.data.dataset} {cfg.data.test_split}, {len(splits.test.labels):,} images"
    if splits.gallery is not None:
        gallery = f"{cfg.data.gallery_split}, {len(splits.gallery.labels):,} images"
        images = f"queries {images} against gallery {gallery}"
    return f"checkpoint {path} ({where}): {images}; device {device}"

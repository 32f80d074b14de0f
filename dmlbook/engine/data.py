"""Batches for the engine: a split becomes a *source* that yields ready model inputs on the device.

Every split ends up as ``uint8`` RGB images of one size, and the same batched transforms of
:mod:`dmlbook.data.batches.augment` turn them into model inputs on the device:

* image files (:class:`~dmlbook.data.ImageListDataset`: CUB, Cars, SOP, In-Shop) are decoded once
  into the memory-mapped cache (:meth:`~dmlbook.data.ImageListDataset.cached`, short side
  ``data.resize``, centre square), read two batches ahead in a background thread;
* in-memory splits (:class:`~dmlbook.data.EmbeddedDataset`: ``synthetic``), images in ``[0, 1]``,
  are converted to ``uint8`` once.

Training batches get a random resized crop of side ``data.crop`` (area fraction in
``data.scale``) and a random horizontal flip (:class:`~dmlbook.data.TrainTransform`); evaluation
batches the centre crop (:class:`~dmlbook.data.EvalTransform`). Both normalise as the backbone
expects (:class:`~dmlbook.models.pretrained.InputSpec`: RGB/ImageNet statistics for ResNet,
BGR/0-255/Caffe means for BN-Inception). All randomness comes from the generator passed in, so a
batch's augmentation is a function of the generator state that checkpoints save.

Tests: ``tests/engine/test_data.py`` (and through whole runs, ``tests/engine/test_trainer.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from ..core.validation import is_integer
from ..data import EvalTransform, Normalization, TrainTransform, dataset_info, load_dataset
from ..models.pretrained import InputSpec
from .config import Config, ConfigError

__all__ = ["Source", "Splits", "build_splits", "normalization"]


def normalization(spec: InputSpec) -> Normalization:
    """The :class:`dmlbook.data.Normalization` of a backbone's input spec."""
    return Normalization(spec.color, spec.scale, spec.mean, spec.std)


class _TensorImages:
    """In-memory ``(N, 3, H, W)`` images in ``[0, 1]`` as ``uint8``, read like the image cache."""

    def __init__(self, dataset: object) -> None:
        inputs = dataset.inputs
        if inputs.ndim != 4 or inputs.shape[1] != 3:
            raise ConfigError(
                f"data set {getattr(dataset, 'name', '?')!r} has inputs of shape "
                f"{tuple(inputs.shape[1:])}; the engine's backbones need RGB images (3, H, W)."
            )
        self.images = (inputs.clamp(0, 1) * 255).round().to(torch.uint8)
        self.labels = dataset.labels
        self.describe = dataset.describe

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def batches(
        self, index_batches: Iterable[torch.Tensor] | int, *, device: torch.device
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor, None]]:
        if is_integer(index_batches):
            n, size = len(self), int(index_batches)
            index_batches = (torch.arange(i, min(i + size, n)) for i in range(0, n, size))
        for idx in index_batches:
            yield self.images[idx].to(device), self.labels[idx].to(device), None


class Source:
    """A split ready for the engine: ``labels``, augmented training batches, eval batches.

    Parameters
    ----------
    dataset : EmbeddedDataset or ImageListDataset
        The split as :func:`dmlbook.data.load_dataset` returns it.
    cfg : Config
        ``data.resize`` (cache size), ``data.crop``, ``data.scale``, ``data.flip``,
        ``data.cache_dir`` and ``train.channels_last`` are used.
    device : torch.device
        Where batches go.
    spec : InputSpec
        The backbone's input normalisation.
    train : bool
        Build the training transform (else only the evaluation one).
    """

    def __init__(
        self, dataset: object, cfg: Config, device: torch.device, spec: InputSpec, *, train: bool
    ) -> None:
        d = cfg.data
        if hasattr(dataset, "inputs"):
            self.images = _TensorImages(dataset)
        elif hasattr(dataset, "cached"):
            self.images = dataset.cached(d.resize, cache_dir=d.cache_dir)
        else:
            raise ConfigError(f"data set {d.dataset!r} gives neither tensors nor image files.")
        self.labels = self.images.labels
        self.device = device
        norm = normalization(spec)
        self.augment = (
            TrainTransform(d.crop, scale=tuple(d.scale), flip=d.flip, normalization=norm)
            if train
            else None
        )
        self.center = EvalTransform(d.crop, normalization=norm)
        self.memory_format = (
            torch.channels_last if cfg.train.channels_last else torch.contiguous_format
        )

    def __len__(self) -> int:
        return len(self.images)

    def describe(self) -> str:
        return self.images.describe()

    def train_batches(
        self, index_batches: Iterable[torch.Tensor], generator: torch.Generator
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(inputs, labels)`` on the device for each index batch, augmented with ``generator``."""
        for images, labels, regions, *_ in self.images.batches(index_batches, device=self.device):
            x = self.augment(images, generator, regions=regions)
            yield x.contiguous(memory_format=self.memory_format), labels

    def eval_batches(
        self, batch_size: int, bounds: tuple[int, int] | None = None
    ) -> Iterator[torch.Tensor]:
        """All images in order (or those in ``[start, end)``), centre-cropped and normalised,
        ``batch_size`` at a time."""
        order: int | Iterator[torch.Tensor] = batch_size
        if bounds is not None:  # one process's shard of a multi-process evaluation
            start, end = bounds
            order = (
                torch.arange(i, min(i + batch_size, end)) for i in range(start, end, batch_size)
            )
        for images, _, regions, *_ in self.images.batches(order, device=self.device):
            x = self.center(images, regions=regions)
            yield x.contiguous(memory_format=self.memory_format)


@dataclass
class Splits:
    """The sources of a run: ``train``, ``test`` (the queries) and an optional ``gallery``."""

    train: Source | None
    test: Source
    gallery: Source | None = None


def _resolve_root(dataset: str, data_dir: str | Path | None) -> str | None:
    """The data set's own folder under ``data_dir`` (its conventional name or an alias)."""
    if data_dir is None:
        return None
    base = Path(data_dir).expanduser()
    if not base.is_dir():
        raise ConfigError(
            f"data folder {str(data_dir)!r} (--data / data.root) does not exist; pass the folder "
            "that holds the data sets."
        )
    loader = dataset_info(dataset).loader
    if isinstance(loader, str):
        module = importlib.import_module(loader.partition(":")[0])
        for name in (getattr(module, "FOLDER", None), *getattr(module, "ALIASES", ())):
            if name and (base / name).is_dir():
                return str(base / name)
    return str(base)


def _load(cfg: Config, split: str) -> object:
    info = dataset_info(cfg.data.dataset)
    if split not in info.splits:
        raise ConfigError(
            f"data set {info.name!r} has no split {split!r}; its splits are "
            f"{', '.join(info.splits)} (data.train_split / test_split / gallery_split)."
        )
    options = dict(cfg.data.options)
    accepted = info.options()
    root = _resolve_root(info.name, cfg.data.root)
    if root is not None:
        if accepted is not None and "root" not in accepted:
            raise ConfigError(
                f"data set {info.name!r} is built in and takes no data folder; drop --data / "
                "data.root."
            )
        options["root"] = root
    return load_dataset(info.name, split, **options)


def build_splits(
    cfg: Config, device: torch.device, spec: InputSpec, *, train: bool = True
) -> Splits:
    """Load the train (unless ``train=False``), test and gallery splits of ``cfg.data``."""

    def source(split: str, augment: bool) -> Source:
        return Source(_load(cfg, split), cfg, device, spec, train=augment)

    gallery = cfg.data.gallery_split
    return Splits(
        train=source(cfg.data.train_split, True) if train else None,
        test=source(cfg.data.test_split, False),
        gallery=None if gallery is None else source(gallery, False),
    )

"""Data sets and batch sampling.

``load_dataset(name, split, **options)`` loads a registered data set. Built in, and needing no
download (they return an :class:`EmbeddedDataset`, inputs and labels as tensors):

``digits``
    scikit-learn's 8x8 handwritten digits; train = digits 0-4, test = digits 5-9.
``synthetic``
    procedurally generated fine-grained 32x32 RGB images; classes are combinations of shape,
    palette, pattern and marker; 100 train and 100 unseen test classes by default.

The four benchmarks of deep metric learning, read from their official on-disk layouts with the
standard zero-shot splits (they return an :class:`ImageListDataset`: image paths and labels, not
decoded images):

``cub``
    CUB-200-2011, train = classes 1-100 (5,864 images), test = classes 101-200 (5,924).
``cars``
    Cars-196, train = classes 1-98 (8,054), test = classes 99-196 (8,131); the
    ``cars_annos.mat`` layout or the class-folder layout (``layout=`` option).
``sop``
    Stanford Online Products, ``Ebay_train.txt`` (59,551) / ``Ebay_test.txt`` (60,502).
``inshop``
    DeepFashion In-Shop, splits ``train`` (25,882), ``query`` (14,218), ``gallery`` (12,612).

Each takes ``root=`` (default ``$DMLBOOK_DATA/<folder>``; the copy may also sit one folder down)
and ``allow_partial=False``: image counts are checked against the official numbers, and a missing
file or a partial copy raises an error that names the missing files or classes, unless
``allow_partial=True`` (the ``dmlbook`` command: ``--allow-partial``; a config:
``data.options.allow_partial``). :func:`dmlbook.data.fetch.download.prepare` downloads, verifies (md5)
and extracts the archives, and leaves a copy that is already extracted alone. The skeleton the
loaders share is :mod:`dmlbook.data.benchmarks.benchmark`.

The input pipeline for training at benchmark scale (what an engine calls)::

    from dmlbook.data import EvalTransform, PKSampler, TrainTransform, load_dataset

    train = load_dataset("cub", "train").cached(256)    # decode once -> memmap (N, 256, 256, 3)
    test = load_dataset("cub", "test").cached(256)
    aug = TrainTransform(227, scale=(0.16, 1.0), normalization="bn_inception")
    center = EvalTransform(227, normalization="bn_inception")
    g = torch.Generator().manual_seed(0)                 # CPU generator, also for GPU batches
    sampler = PKSampler(train.labels, batch_size=80, k=5, seed=0)
    sampler.set_epoch(epoch)
    for batch in train.batches(sampler, device="cuda"):  # Batch(images, labels, regions, indices)
        x = aug(batch.images, g, regions=batch.regions)  # float (80, 3, 227, 227) on the GPU
        ...
    for batch in test.batches(256, device="cuda"):       # in order, for evaluation
        x = center(batch.images, regions=batch.regions)

``batch.images`` is ``uint8`` ``(B, 3, 256, 256)`` (channels-last memory) and ``batch.labels``
are on the device; ``regions`` and ``indices`` stay on the CPU. The cache is built on first use
(progress bar; interrupt-safe and resumable) under ``$DMLBOOK_CACHE/images`` and reused while
the file list and options are unchanged.

:meth:`ImageListDataset.cached` returns a :class:`CachedImageDataset` (same ``labels`` /
``len`` / ``describe()`` conventions); :class:`TrainTransform` and :class:`EvalTransform` run on
the device of the batch (:mod:`dmlbook.data.batches.augment`, :mod:`dmlbook.data.cache.image_cache`).

:class:`PKSampler` draws the P-classes-by-K-images batches that pair-based losses need;
:class:`RandomBatchSampler` draws batches without regard to class (Liu et al.'s "random
sampler", Table II). :class:`RandomAffine` distorts small images (Omniglot) for training, as
Koch et al. (2015) did.
Further data sets are added with :func:`register_dataset`.

The registry is imported at once; every other name (and torch with it) loads its module on first
use (PEP 562), so the ``dmlbook`` command can list the data sets without importing torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from .registry import (
    DatasetInfo,
    available_datasets,
    dataset_info,
    load_dataset,
    register_dataset,
)

if TYPE_CHECKING:  # pragma: no cover
    from .base.dataset import EmbeddedDataset
    from .batches.affine import RandomAffine
    from .batches.augment import (
        BN_INCEPTION,
        IMAGENET,
        EvalTransform,
        Normalization,
        TrainTransform,
    )
    from .batches.random_sampler import RandomBatchSampler
    from .batches.sampler import PKSampler
    from .benchmarks.image_folder import ImageListDataset, IncompleteDatasetError
    from .cache.image_cache import Batch, CachedImageDataset, build_image_cache

__all__ = [
    "EmbeddedDataset",
    "DatasetInfo",
    "PKSampler",
    "RandomAffine",
    "RandomBatchSampler",
    "available_datasets",
    "dataset_info",
    "load_dataset",
    "register_dataset",
    "Batch",
    "BN_INCEPTION",
    "CachedImageDataset",
    "EvalTransform",
    "IMAGENET",
    "ImageListDataset",
    "IncompleteDatasetError",
    "Normalization",
    "TrainTransform",
    "build_image_cache",
]

#: Where each lazily loaded name lives.
_LAZY = {
    "BN_INCEPTION": ".batches.augment",
    "IMAGENET": ".batches.augment",
    "EvalTransform": ".batches.augment",
    "Normalization": ".batches.augment",
    "TrainTransform": ".batches.augment",
    "EmbeddedDataset": ".base.dataset",
    "Batch": ".cache.image_cache",
    "CachedImageDataset": ".cache.image_cache",
    "build_image_cache": ".cache.image_cache",
    "ImageListDataset": ".benchmarks.image_folder",
    "IncompleteDatasetError": ".benchmarks.image_folder",
    "PKSampler": ".batches.sampler",
    "RandomAffine": ".batches.affine",
    "RandomBatchSampler": ".batches.random_sampler",
}
_SUBMODULES = frozenset(m.name for m in pkgutil.iter_modules(__path__))


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'dmlbook.data' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

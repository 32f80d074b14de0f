"""Data sets and batch sampling.

``load_dataset(name, split, **options)`` returns an :class:`EmbeddedDataset` (inputs and labels
as tensors). Built in, and needing no download:

``digits``
    scikit-learn's 8x8 handwritten digits; train = digits 0-4, test = digits 5-9.
``synthetic``
    procedurally generated fine-grained 32x32 RGB images; classes are combinations of shape,
    palette, pattern and marker; 100 train and 100 unseen test classes by default.

:class:`PKSampler` draws the P-classes-by-K-images batches that pair-based losses need.
Further data sets are added with :func:`register_dataset`.
"""

from .dataset import EmbeddedDataset
from .registry import (
    DatasetInfo,
    available_datasets,
    dataset_info,
    load_dataset,
    register_dataset,
)
from .sampler import PKSampler

__all__ = [
    "EmbeddedDataset",
    "DatasetInfo",
    "PKSampler",
    "available_datasets",
    "dataset_info",
    "load_dataset",
    "register_dataset",
]

"""``EmbeddedDataset``: a labelled data set held in memory as two tensors.

Every loader in :mod:`dmlbook.data` returns one. It is a plain ``torch.utils.data.Dataset``
(``ds[i] -> (input, label)``), so it works with a ``DataLoader`` and with
:class:`dmlbook.data.PKSampler` as ``batch_sampler``. Labels are the *global* class ids of the
data set: the test split of a zero-shot protocol keeps its own ids (e.g. 5-9 for ``digits``),
and ``class_names[label]`` names a class in either split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from ...core.validation import as_labels

__all__ = ["ClassStats", "EmbeddedDataset"]


class ClassStats:
    """Class statistics shared by every data set that has a 1-D ``labels`` tensor."""

    labels: torch.Tensor

    @property
    def classes(self) -> torch.Tensor:
        """Sorted unique class ids present in this split (int64)."""
        return torch.unique(self.labels, sorted=True)

    @property
    def num_classes(self) -> int:
        """Number of distinct classes in this split."""
        return int(self.classes.numel())

    def class_counts(self) -> torch.Tensor:
        """Number of samples of each class in :attr:`classes`, in the same order."""
        return torch.unique(self.labels, sorted=True, return_counts=True)[1]

    def _subset_index(self, indices: torch.Tensor | Sequence[int] | np.ndarray) -> torch.Tensor:
        """``indices`` (LongTensor, index list, array or bool mask) as a flat int64 index."""
        idx = torch.as_tensor(
            np.asarray(indices) if not isinstance(indices, torch.Tensor) else indices
        )
        if idx.dtype == torch.bool:
            if idx.numel() != len(self.labels):
                raise ValueError(
                    f"a boolean mask needs {len(self.labels)} entries, got {idx.numel()}."
                )
            idx = idx.nonzero().flatten()
        return idx.long().flatten()


@dataclass(eq=False, repr=False)
class EmbeddedDataset(ClassStats, Dataset):
    """A data split held in memory: ``inputs[i]`` is a sample, ``labels[i]`` its class id.

    Parameters
    ----------
    inputs : Tensor of shape (N, ...), float32
        One sample per row: feature vectors ``(N, d)`` or images ``(N, C, H, W)``.
    labels : Tensor of shape (N,), int64
        Class id of each sample.
    name : str
        Name of the data set (``"digits"``, ``"synthetic"`` ...).
    split : str
        ``"train"`` or ``"test"``.
    class_names : list of str, optional
        Human-readable class names indexed by class id, covering *all* classes of the data set
        (both splits), so that ``class_names[int(labels[i])]`` names sample ``i``.

    Raises
    ------
    TypeError
        If ``inputs`` is not a floating-point tensor.
    ValueError
        If ``labels`` is not 1-D, or its length differs from the number of rows of ``inputs``.
    """

    inputs: torch.Tensor
    labels: torch.Tensor
    name: str
    split: str
    class_names: list[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.inputs, torch.Tensor):
            raise TypeError(
                f"inputs must be a torch.Tensor, got {type(self.inputs).__name__}; "
                "wrap a numpy array with torch.from_numpy(x).float()."
            )
        if not torch.is_floating_point(self.inputs):
            raise TypeError(
                f"inputs must be floating point (float32), got {self.inputs.dtype}; "
                "convert images with x.float() / 255."
            )
        if self.inputs.ndim < 2:
            raise ValueError(
                f"inputs must have one sample per row, shape (N, ...) with at least 2 dimensions, "
                f"got shape {tuple(self.inputs.shape)}."
            )
        if self.inputs.dtype != torch.float32:
            self.inputs = self.inputs.float()
        labels = as_labels(self.labels)
        if self.inputs.shape[0] != labels.shape[0]:
            raise ValueError(
                f"inputs has {self.inputs.shape[0]} rows but labels has {labels.shape[0]} entries; "
                "pass exactly one label per sample, in the same order."
            )
        self.labels = labels
        if self.class_names is not None:
            self.class_names = [str(c) for c in self.class_names]

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, index: int | torch.Tensor | slice) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(inputs[index], labels[index])``; ``index`` may be an int, slice or LongTensor."""
        return self.inputs[index], self.labels[index]

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. ``(64,)`` or ``(3, 32, 32)``."""
        return tuple(self.inputs.shape[1:])

    def subset(self, indices: torch.Tensor | list[int]) -> EmbeddedDataset:
        """A new data set with the samples at ``indices`` (a LongTensor, index list or bool mask)."""
        idx = torch.as_tensor(indices)
        if idx.dtype != torch.bool:
            idx = idx.long()
        return EmbeddedDataset(
            inputs=self.inputs[idx],
            labels=self.labels[idx],
            name=self.name,
            split=self.split,
            class_names=self.class_names,
        )

    def describe(self) -> str:
        """One-line summary: name, split, size, classes, input shape and images per class.

        Examples
        --------
        ``digits/train: 901 samples, 5 classes, input shape (64,), 176-187 per class``
        """
        n = len(self)
        if n == 0:
            return f"{self.name}/{self.split}: 0 samples"
        counts = self.class_counts()
        shape = self.input_shape
        return (
            f"{self.name}/{self.split}: {n:,} samples, {self.num_classes} classes, "
            f"input shape {shape}, {int(counts.min())}-{int(counts.max())} per class"
        )

    def __repr__(self) -> str:
        return f"EmbeddedDataset({self.describe()})"

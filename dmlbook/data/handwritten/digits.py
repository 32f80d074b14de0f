"""scikit-learn's handwritten digits as a zero-shot retrieval data set.

The 1,797 8x8 grey-level images of ``sklearn.datasets.load_digits`` ship inside scikit-learn,
so nothing is downloaded. Following the zero-shot protocol of deep metric learning benchmarks
(train and test classes are disjoint), the ``train`` split holds the digits 0-4 and the ``test``
split the digits 5-9. Labels keep their digit value, so ``class_names[label] == str(label)``.
"""

from __future__ import annotations

import numpy as np
import torch

from ..base.dataset import EmbeddedDataset

__all__ = ["load", "TRAIN_CLASSES", "TEST_CLASSES", "CLASS_NAMES"]

TRAIN_CLASSES: tuple[int, ...] = (0, 1, 2, 3, 4)
TEST_CLASSES: tuple[int, ...] = (5, 6, 7, 8, 9)
CLASS_NAMES: list[str] = [str(d) for d in range(10)]
_MAX_PIXEL = 16.0  # load_digits stores pixel intensities as integers 0..16


def load(split: str = "train", *, as_images: bool = False) -> EmbeddedDataset:
    """Load the train (digits 0-4) or test (digits 5-9) split.

    Parameters
    ----------
    split : {"train", "test"}
    as_images : bool
        Return inputs of shape ``(N, 1, 8, 8)`` (for a CNN) instead of ``(N, 64)``.

    Returns
    -------
    EmbeddedDataset
        ``inputs`` float32 scaled to ``[0, 1]``, ``labels`` the digit (int64).

    Raises
    ------
    ValueError
        For a split other than ``"train"`` or ``"test"``.
    TypeError
        If ``as_images`` is not a bool.
    """
    if split not in ("train", "test"):
        raise ValueError(
            f"Unknown split {split!r} for data set 'digits'. Valid splits: 'train', 'test'."
        )
    if not isinstance(as_images, bool | np.bool_):
        raise TypeError(f"as_images must be True or False, got {as_images!r}.")
    from sklearn.datasets import load_digits

    bunch = load_digits()
    data = np.asarray(bunch.data, dtype=np.float32) / _MAX_PIXEL
    target = np.asarray(bunch.target, dtype=np.int64)
    keep = np.isin(target, TRAIN_CLASSES if split == "train" else TEST_CLASSES)
    x = torch.from_numpy(np.ascontiguousarray(data[keep]))
    if as_images:
        x = x.reshape(-1, 1, 8, 8)
    y = torch.from_numpy(target[keep])
    return EmbeddedDataset(inputs=x, labels=y, name="digits", split=split, class_names=CLASS_NAMES)

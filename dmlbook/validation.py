"""Input checks shared by every public function.

Each check raises ``ValueError`` (or ``TypeError``) whose message says what was wrong and what to do,
so that a bad call fails at the boundary instead of deep inside torch.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["as_embeddings", "as_labels", "check_same_length"]


def as_embeddings(x: torch.Tensor | np.ndarray, name: str = "embeddings") -> torch.Tensor:
    """Return ``x`` as a 2-D floating-point tensor of finite values.

    Parameters
    ----------
    x : Tensor or ndarray of shape (N, d)
        Embedding vectors, one per row.
    name : str
        Name used in error messages.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, is empty, or holds NaN or infinite values.
    """
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(x).__name__}.")
    if x.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (N, d), got shape {tuple(x.shape)}. "
            "Flatten each sample's embedding into one row."
        )
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(x.shape)}); pass at least one row and column."
        )
    if not torch.is_floating_point(x):
        x = x.float()
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        bad_rows = (~finite).any(dim=1).nonzero().flatten()
        shown = ", ".join(str(i) for i in bad_rows[:5].tolist())
        more = "" if bad_rows.numel() <= 5 else f" (and {bad_rows.numel() - 5} more)"
        raise ValueError(
            f"{name} contain NaN or infinite values in rows {shown}{more}. "
            "Check the model for a diverged loss (lower the learning rate) or the input data."
        )
    return x


def as_labels(labels: torch.Tensor | np.ndarray | list, name: str = "labels") -> torch.Tensor:
    """Return ``labels`` as a 1-D int64 tensor.

    Raises
    ------
    ValueError
        If ``labels`` is not 1-D or holds non-integer values.
    """
    if isinstance(labels, list | tuple):
        labels = torch.as_tensor(labels)
    if isinstance(labels, np.ndarray):
        labels = torch.from_numpy(labels)
    if not isinstance(labels, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, numpy array or list, got {type(labels).__name__}."
        )
    if labels.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one class id per sample), got shape {tuple(labels.shape)}."
        )
    if torch.is_floating_point(labels):
        if not bool((labels == labels.round()).all()):
            raise ValueError(f"{name} must be integer class ids, got non-integer values.")
    return labels.long()


def check_same_length(
    x: torch.Tensor, labels: torch.Tensor, x_name: str = "embeddings", labels_name: str = "labels"
) -> None:
    """Raise ``ValueError`` unless ``x`` has one row per label."""
    if x.shape[0] != labels.shape[0]:
        raise ValueError(
            f"{x_name} has {x.shape[0]} rows but {labels_name} has {labels.shape[0]} entries; "
            "pass exactly one label per embedding, in the same order."
        )

"""What every embedding model shares: an L2-normalised output and a batched :func:`embed`.

Most pair-based losses compare embeddings through the cosine similarity ``S_ij = <f_i, f_j>`` of
unit vectors (Wang et al. 2019, Sec. 3), so the models of this book end in :class:`L2Normalize`.
On the unit sphere ``D^2 = 2 - 2 S``, which makes Euclidean and cosine retrieval agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ..core.similarity import l2_normalize

__all__ = ["L2Normalize", "embed", "check_positive_int"]


def check_positive_int(value: object, name: str) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise ``ValueError``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (``bool`` is refused too).
    ValueError
        If ``value < 1``.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be a positive int (at least 1), got {value}.")
    return int(value)


class L2Normalize(nn.Module):
    """Scale every row to unit Euclidean norm: ``f / max(|f|, eps)``.

    Parameters
    ----------
    eps : float
        Lower bound on the norm, so that a zero row maps to a zero row instead of NaN.
    """

    def __init__(self, eps: float = 1e-12) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2_normalize(x, eps=self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps:g}"


def _model_device(model: nn.Module) -> torch.device:
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


def _as_inputs(data: object) -> torch.Tensor | Sequence:
    """Return a tensor of inputs, or an indexable dataset whose items are ``(x, label)`` or ``x``."""
    inputs = getattr(data, "inputs", None)
    if isinstance(inputs, torch.Tensor):
        return inputs
    if isinstance(data, np.ndarray):
        return torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        return data
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        return data  # a generic map-style dataset
    raise TypeError(
        "embed expects a tensor or array of inputs, or a dataset (an object with .inputs, or one "
        f"that supports len() and ds[i]), got {type(data).__name__}."
    )


def _batch_from_dataset(dataset: Sequence, start: int, stop: int) -> torch.Tensor:
    items = []
    for i in range(start, stop):
        item = dataset[i]
        items.append(item[0] if isinstance(item, tuple | list) else item)
    return torch.stack([torch.as_tensor(x) for x in items])


def embed(
    model: nn.Module,
    inputs: torch.Tensor | np.ndarray | object,
    *,
    batch_size: int = 512,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """Embed ``inputs`` with ``model`` in evaluation mode, batch by batch, without gradients.

    Parameters
    ----------
    model : nn.Module
        Maps a batch of inputs to a batch of embeddings of shape (B, d).
    inputs : Tensor, ndarray or dataset
        A tensor of inputs (first dimension = samples), an object with an ``.inputs`` tensor
        (such as :func:`dmlbook.data.load_dataset`'s result), or any map-style dataset whose
        items are ``(x, label)`` pairs or bare ``x``.
    batch_size : int
        Samples per forward pass; bounds memory, not the result.
    device : str or torch.device, optional
        Where to run the model. Defaults to the device of the model's parameters. The model must
        already live there.

    Returns
    -------
    Tensor of shape (N, d)
        Float32 embeddings on the CPU, in input order.

    Notes
    -----
    BatchNorm and Dropout behave differently in training mode, so the model is switched to
    ``eval()`` and then put back into whatever mode it was in before the call.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")
    batch_size = check_positive_int(batch_size, "batch_size")
    data = _as_inputs(inputs)
    n = len(data)
    if n == 0:
        raise ValueError("embed got no inputs (length 0); pass at least one sample.")
    device = _model_device(model) if device is None else torch.device(device)
    was_training = model.training
    model.eval()
    chunks = []
    try:
        with torch.no_grad():
            for start in range(0, n, batch_size):
                stop = min(start + batch_size, n)
                if isinstance(data, torch.Tensor):
                    x = data[start:stop]
                else:
                    x = _batch_from_dataset(data, start, stop)
                if torch.is_floating_point(x) and x.dtype != torch.float32:
                    x = x.float()
                out = model(x.to(device))
                if not isinstance(out, torch.Tensor) or out.ndim != 2:
                    shape = (
                        tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                    )
                    raise ValueError(
                        f"model must return embeddings of shape (B, d), got {shape}; "
                        "flatten the output or add a Linear head."
                    )
                chunks.append(out.detach().float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(chunks)

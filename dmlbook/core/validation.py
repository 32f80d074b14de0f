"""Input checks shared by every public function.

Each check raises ``ValueError`` (or ``TypeError``) whose message says what was wrong and what to do,
so that a bad call fails at the boundary instead of deep inside torch.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
import torch

__all__ = [
    "Count",
    "NonNegative",
    "NothingToLearnWarning",
    "Number",
    "Real",
    "Reduction",
    "Scale",
    "as_embeddings",
    "as_labels",
    "check_loss_batch",
    "check_same_length",
    "is_integer",
    "is_number",
    "Mask",
]


class NothingToLearnWarning(UserWarning):
    """A batch in which a pair loss has nothing to learn: no positive pair, or no negative pair."""


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
    if x.is_complex():
        raise TypeError(
            f"{name} are complex ({x.dtype}); a cosine or a distance of complex vectors is not "
            "what the losses compute, and casting would drop the imaginary parts. Pass real "
            "embeddings, e.g. torch.view_as_real(x).flatten(1) to keep both parts."
        )
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
    if labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must be integer class ids, got dtype {labels.dtype}.")
    if torch.is_floating_point(labels):
        if not bool(torch.isfinite(labels).all()):
            raise ValueError(
                f"{name} hold NaN or infinite values; pass integer class ids (one per sample)."
            )
        if not bool((labels == labels.round()).all()):
            raise ValueError(f"{name} must be integer class ids, got non-integer values.")
        exact = 2.0 / torch.finfo(labels.dtype).eps  # 2**24 in float32, 2**53 in float64
        if labels.numel() and float(labels.abs().max()) >= min(exact, 2.0**63):
            raise ValueError(
                f"{name} hold values as large as {float(labels.abs().max()):.3g}: beyond "
                f"{exact:.0f} a {labels.dtype} cannot tell neighbouring ids apart (and beyond "
                "2**63 no int64 holds them), so different classes would merge. Pass integer "
                "class ids, e.g. numpy.unique(labels, return_inverse=True)[1]."
            )
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


def check_loss_batch(x: torch.Tensor, labels: torch.Tensor, name: str = "embeddings") -> None:
    """The checks a loss makes on a batch whose entries are floating-point and finite-looking.

    One synchronisation (a handful of numbers read back): the row norms and the number of
    positive and negative pairs. Raises when the cosine similarity would be silently wrong, and
    warns (:class:`NothingToLearnWarning`, once per process under Python's default filters)
    when the batch gives a pair loss nothing to learn.

    Raises
    ------
    ValueError
        For NaN or infinite entries (:func:`as_embeddings`'s message); for rows whose norm
        overflows ``x``'s dtype (about 1.8e19 in float32: the cosine would be 0); for zero rows
        in float16, where the lower bound on the norm underflows and the cosine is 0 / 0.
    """
    with torch.no_grad():
        norms = x.detach().norm(dim=1)
        same = labels[:, None] == labels[None, :]
        pos = same.sum() - labels.shape[0]
        stats = torch.stack([norms.amax().double(), norms.amin().double(), pos.double(),
                             (~same).sum().double()]).tolist()  # fmt: skip
    top, low, n_pos, n_neg = stats
    if not math.isfinite(top):
        as_embeddings(x, name)  # NaN or inf entries: its message, with the rows
        rows = (~torch.isfinite(norms)).nonzero().flatten()[:5].tolist()
        limit = torch.finfo(x.dtype).max  # float16 norms accumulate in float32
        limit = limit if x.dtype == torch.float16 else math.sqrt(limit)  # else |x|^2 overflows
        raise ValueError(
            f"{name} rows {', '.join(map(str, rows))} have norms beyond the range of {x.dtype} "
            f"(above {limit:.3g}): "
            "their cosine similarities would all be 0. The model diverged or the inputs are not "
            "scaled: lower the learning rate, or divide the embeddings by a constant (the cosine "
            "does not change)."
        )
    if low == 0 and x.dtype == torch.float16:
        rows = (norms == 0).nonzero().flatten()[:5].tolist()
        raise ValueError(
            f"{name} rows {', '.join(map(str, rows))} have norm 0 in float16: their direction, "
            "and so their cosine similarity, is undefined (float16 cannot hold the small bound that "
            "keeps a zero row finite in float32). Check the model for dead outputs, or compute "
            "the loss in float32 (embeddings.float())."
        )
    if n_pos == 0 or n_neg == 0:
        what = "positive pair (no two samples share a label)" if n_pos == 0 else (
            "negative pair (all samples share one label)"
        )  # fmt: skip
        warnings.warn(
            f"the batch has no {what}: a pair loss has nothing to learn from it (most return 0 "
            "with a zero gradient). Check the sampler: P classes x k >= 2 images per class "
            "(e.g. dmlbook.data.PKSampler).",
            NothingToLearnWarning,
            stacklevel=3,
        )


# ----------------------------------------------------------------------------- hyper-parameters


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer as a caller may pass one: a Python ``int`` or a numpy
    integer (``numpy.int64(101)``, what indexing an array gives); ``bool`` (and ``numpy.bool_``)
    is not, nor is a float, even an integral one."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def is_number(value: object) -> bool:
    """Whether ``value`` is a real number as a caller may pass one: :func:`is_integer`, or a
    Python or numpy float (finite or not: check the range separately); never ``bool``."""
    return is_integer(value) or isinstance(value, float | np.floating)


@dataclass(frozen=True)
class Number:
    """The range of a numeric hyper-parameter, written in its annotation (bounds included):
    ``alpha: Annotated[float, Number(1e-6, 1e6, "a scale")]``. Python and numpy numbers (and
    one-element real tensors) are accepted, ``bool`` is refused; an ``integer`` one must be an
    integer. The bounds keep every product of the losses finite in float32."""

    low: float
    high: float
    meaning: str = ""
    integer: bool = False
    open: bool = False  # bounds excluded

    def __repr__(self) -> str:
        ends = "()" if self.open else "[]"
        kind = "integer" if self.integer else "number"
        return f"{kind} in {ends[0]}{self.low:g}, {self.high:g}{ends[1]}"

    def check(self, value: Any, name: str) -> float | int:
        kind = "an integer" if self.integer else "a number"
        if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
            value = value.item()
        if (
            isinstance(value, bool | np.bool_)
            or not isinstance(value, int | float | np.integer | np.floating)
            or (self.integer and not isinstance(value, int | np.integer))
        ):
            raise TypeError(f"{name} must be {kind}, got {value!r} ({type(value).__name__}).")
        v = int(value) if self.integer else float(value)
        inside = self.low < v < self.high if self.open else self.low <= v <= self.high
        if not inside:  # NaN fails too
            what = f" ({self.meaning})" if self.meaning else ""
            brackets = "()" if self.open else "[]"
            raise ValueError(
                f"{name} must be {'a finite number' if not self.integer else kind} in "
                f"{brackets[0]}{self.low:g}, {self.high:g}{brackets[1]}{what}, got {value!r}."
            )
        return v


#: A scale or temperature (``alpha``, ``beta``, ``gamma``, ``tau``): beyond 1e6 (or below
#: 1e-6) a product with a similarity or its reciprocal leaves float32.
Scale = Annotated[float, Number(1e-6, 1e6, "a scale or temperature")]
#: A margin or threshold on similarities or distances, of either sign.
Real = Annotated[float, Number(-1e6, 1e6, "a margin or threshold")]
#: A margin, mining margin or exponent that must not be negative.
NonNegative = Annotated[float, Number(0.0, 1e6, "a margin or exponent >= 0")]
#: A number of pairs or draws.
Count = Annotated[int, Number(1, 2**31 - 1, "a count", integer=True)]
#: The reductions of a pure loss function (a module: ``"mean"`` and ``"sum"``).
Reduction = Literal["mean", "sum", "none"]
#: An optional bool mask of pairs (B, B) or triplets (B, B, B) from a miner; ``None``: all.
Mask = torch.Tensor | None

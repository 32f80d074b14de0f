"""What every loss module shares: check the batch, normalise the embeddings, build S and masks.

Besides :class:`PairLoss`, :func:`prepare_batch` and :func:`resolve_masks`, this module holds the
small numerical building blocks that the pair-based losses are written with:

* :func:`check_similarity` validates ``(S, labels)`` at the boundary of every pure loss function;
* :func:`dissimilarity` turns ``S`` into the quantity a loss is written on (``-S``, the Euclidean
  distance ``D = sqrt(2 - 2 S)`` of unit vectors, or ``D^2 = 2 - 2 S``), with a square root
  whose gradient stays finite at ``S = 1``;
* :func:`masked_logsumexp` is a log-sum-exp over the entries a mask keeps, finite in value and
  gradient even when the mask keeps nothing;
* :func:`masked_mean` averages per-anchor (or per-pair) terms over the entries that exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import torch
from torch import nn

from ..similarity import cosine_similarity, pair_masks
from ..validation import as_embeddings, as_labels, check_same_length

__all__ = [
    "FORMS",
    "Form",
    "PairLoss",
    "check_choice",
    "check_positive",
    "check_similarity",
    "dissimilarity",
    "masked_logsumexp",
    "masked_mean",
    "prepare_batch",
    "resolve_masks",
    "safe_distance",
]

Form = Literal["similarity", "distance", "squared_distance"]
#: The three ways a pair-based loss can read a pair: cosine similarity ``S`` (Wang et al. 2019),
#: Euclidean distance ``D`` and squared distance ``D^2`` of unit vectors (Liu et al., Sec. III).
FORMS: tuple[str, ...] = ("similarity", "distance", "squared_distance")


def prepare_batch(
    embeddings: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a batch and return its cosine similarity matrix ``S`` and its labels.

    Raises
    ------
    ValueError
        For non-2-D or non-finite embeddings, or a label count that does not match.
    """
    x = as_embeddings(embeddings)
    y = as_labels(labels).to(x.device)
    check_same_length(x, y)
    return cosine_similarity(x), y


def resolve_masks(
    labels: torch.Tensor,
    pos_mask: torch.Tensor | None,
    neg_mask: torch.Tensor | None,
    shape: tuple[int, int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the (positive, negative) masks to use: the label masks, narrowed by any given mask.

    A mask passed in (from a miner) can only *remove* pairs: it is combined with the label masks
    by logical and, so a miner can never turn a negative pair into a positive one.
    """
    pos, neg = pair_masks(labels)
    for name, given in (("pos_mask", pos_mask), ("neg_mask", neg_mask)):
        if given is None:
            continue
        if given.shape != shape or given.dtype != torch.bool:
            raise ValueError(
                f"{name} must be a bool tensor of shape {tuple(shape)} (one entry per pair), "
                f"got dtype {given.dtype} and shape {tuple(given.shape)}."
            )
    if pos_mask is not None:
        pos = pos & pos_mask.to(pos.device)
    if neg_mask is not None:
        neg = neg & neg_mask.to(neg.device)
    return pos, neg


def check_similarity(S: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Check the inputs of a loss written on ``S`` and return the labels on ``S``'s device.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        A floating-point similarity matrix with finite entries.
    labels : Tensor of shape (B,)
        One integer class id per row of ``S``.

    Raises
    ------
    TypeError
        If ``S`` is not a floating-point tensor.
    ValueError
        If ``S`` is not square, holds NaN/inf, or the labels do not match its size.
    """
    if not isinstance(S, torch.Tensor) or not torch.is_floating_point(S):
        raise TypeError(
            "S must be a floating-point torch.Tensor (the cosine similarity matrix of the batch), "
            f"got {type(S).__name__}{'' if not isinstance(S, torch.Tensor) else ' of dtype ' + str(S.dtype)}."
        )
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(
            f"S must be a square (B, B) matrix of the batch against itself, got shape {tuple(S.shape)}."
        )
    y = as_labels(labels)
    if y.shape[0] != S.shape[0]:
        raise ValueError(
            f"S is {S.shape[0]} x {S.shape[0]} but labels has {y.shape[0]} entries; "
            "pass one label per row of S, in the same order."
        )
    if not bool(torch.isfinite(S).all()):
        raise ValueError(
            "S holds NaN or infinite values; check the embeddings (a diverged model) before the loss."
        )
    return y.to(S.device)


def check_choice(value: str, allowed: tuple[str, ...], name: str) -> str:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``; return it."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}.")
    return value


def check_positive(value: float, name: str) -> float:
    """Raise ``ValueError`` unless ``value`` is a finite number > 0; return it as a float."""
    v = float(value)
    if not (v > 0.0 and v < float("inf")):
        raise ValueError(f"{name} must be a finite number > 0, got {value}.")
    return v


def safe_distance(squared: torch.Tensor) -> torch.Tensor:
    """``sqrt`` of squared distances with a finite gradient everywhere.

    Entries at or below the dtype's machine epsilon (coincident points, ``S = 1`` up to rounding)
    are returned as exactly 0 with gradient 0; every other entry is the exact square root.
    Both branches of the ``where`` are finite, so no NaN reaches the backward pass.
    """
    sq = squared.clamp_min(0.0)
    tiny = torch.finfo(sq.dtype).eps
    keep = sq > tiny
    return torch.where(
        keep, torch.where(keep, sq, torch.ones_like(sq)).sqrt(), torch.zeros_like(sq)
    )


def dissimilarity(S: torch.Tensor, form: str) -> torch.Tensor:
    """The quantity a loss in the given form is written on, as a function of ``S``.

    Parameters
    ----------
    S : Tensor of shape (B, B)
        Cosine similarities of unit vectors.
    form : {"similarity", "distance", "squared_distance"}
        ``"similarity"`` returns ``-S`` (so that a smaller value means a closer pair in every
        form), ``"distance"`` the Euclidean distance ``D = sqrt(2 - 2 S)`` of unit vectors (Liu et
        al., Eq. 1), ``"squared_distance"`` ``D^2 = 2 - 2 S``.

    Notes
    -----
    Writing every loss on a dissimilarity ``d`` makes one formula serve all forms: the triplet
    hinge ``[d_ap - d_an + m]_+`` is Wang et al.'s Eq. 5 for ``d = -S``, Liu et al.'s Eq. 12 for
    ``d = D`` and their Eq. 37 for ``d = D^2``.
    """
    check_choice(form, FORMS, "form")
    if form == "similarity":
        return -S
    sq = 2.0 - 2.0 * S
    if form == "squared_distance":
        return sq
    return safe_distance(sq)


def masked_logsumexp(
    x: torch.Tensor, mask: torch.Tensor, dim: int = -1, *, add_one: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``log sum_{k: mask} exp(x_k)`` along ``dim``, stable and finite for empty masks.

    Parameters
    ----------
    x : Tensor
    mask : bool Tensor, broadcastable to ``x``
        Entries that take part in the sum.
    dim : int
    add_one : bool
        Compute ``log(1 + sum exp(x_k))`` instead (a softplus of the log-sum-exp), as in the
        N-pair (Liu et al., Eq. 13) and multi-similarity losses.

    Returns
    -------
    value : Tensor
        The log-sum-exp, reduced along ``dim``. Where the mask keeps nothing it is ``0`` (with
        ``add_one``: ``log 1 = 0`` exactly; without: the empty sum's ``-inf`` replaced by 0).
    nonempty : bool Tensor
        Where the mask keeps at least one entry. Use it to drop the empty sums.

    Notes
    -----
    The maximum is subtracted before exponentiating, so no ``exp`` argument exceeds 0 (``1`` with
    ``add_one``, where the max also includes the implicit 0). Masked-out entries are replaced by
    the max before ``exp`` and multiplied by 0 after it, so their values (however large) never
    reach the result or its gradient; every branch is finite, so the gradient is never NaN.
    """
    mask = mask.expand_as(x)
    nonempty = mask.any(dim=dim)
    neg_inf = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    m = torch.where(mask, x, neg_inf).amax(dim=dim, keepdim=True)
    if add_one:
        m = m.clamp_min(0.0)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    shifted = torch.where(mask, x - m, torch.zeros_like(x))
    total = (shifted.exp() * mask.to(x.dtype)).sum(dim=dim, keepdim=True)
    if add_one:
        total = total + torch.exp(-m)
    else:
        total = torch.where(mask.any(dim=dim, keepdim=True), total, torch.ones_like(total))
    value = (m + total.log()).squeeze(dim)
    if not add_one:
        value = torch.where(nonempty, value, torch.zeros_like(value))
    return value, nonempty


def masked_mean(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the entries where ``valid`` holds; ``0`` (zero gradient) if none.

    Entries outside ``valid`` are zeroed with ``where`` rather than multiplied, so a non-finite
    value there cannot poison the result.
    """
    kept = torch.where(valid, values, torch.zeros_like(values))
    return kept.sum() / valid.sum().clamp_min(1).to(values.dtype)


class PairLoss(nn.Module):
    """Base class of the thin loss modules: ``loss(embeddings, labels)`` like pytorch-metric-learning.

    A subclass names the pure function of ``S`` it wraps in :attr:`loss_function` and the
    hyper-parameters it stores in :attr:`hyper_parameters`; its ``__init__`` checks them and stores
    each under the name of the function's keyword. :meth:`loss_on_similarity` then calls
    ``loss_function(S, labels, **hyper_parameters, pos_mask=..., neg_mask=...)`` and ``repr``
    lists them. A subclass with more to do (a built-in miner) overrides :meth:`loss_on_similarity`.

    Masks from a miner can be passed as ``loss(embeddings, labels, pos_mask=..., neg_mask=...)``;
    they are forwarded only when given, so a subclass whose :meth:`loss_on_similarity` takes no
    masks keeps working for the plain call.
    """

    #: The pure function of ``S`` the module calls (set with ``staticmethod`` in a subclass).
    loss_function: ClassVar[Callable[..., torch.Tensor] | None] = None
    #: Attribute names passed to :attr:`loss_function` by keyword and shown by ``repr``.
    hyper_parameters: ClassVar[tuple[str, ...]] = ()

    def forward(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        S, y = prepare_batch(embeddings, labels)
        masks = {}
        if pos_mask is not None:
            masks["pos_mask"] = pos_mask
        if neg_mask is not None:
            masks["neg_mask"] = neg_mask
        return self.loss_on_similarity(S, y, **masks)

    def loss_on_similarity(
        self,
        S: torch.Tensor,
        labels: torch.Tensor,
        *,
        pos_mask: torch.Tensor | None = None,
        neg_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The loss of a similarity matrix: :attr:`loss_function` with this module's settings."""
        if self.loss_function is None:
            raise NotImplementedError(
                f"{type(self).__name__} must set loss_function or override loss_on_similarity."
            )
        settings = {name: getattr(self, name) for name in self.hyper_parameters}
        return self.loss_function(S, labels, **settings, pos_mask=pos_mask, neg_mask=neg_mask)

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)!r}" for name in self.hyper_parameters)

"""Pair algebra: the bottom layer that the miners (:mod:`dmlbook.mining`) and the losses
(:mod:`dmlbook.losses`) are both written with. It imports nothing of dmlbook but
:mod:`dmlbook.core.similarity` (forms and pair masks) and :mod:`dmlbook.core.validation` (input checks).

* **Inputs.** :func:`prepare_batch` turns ``(embeddings, labels)`` into ``(S, labels)``
  (:func:`check_batch` validates them without forming ``S``);
  :func:`check_similarity` is the prologue of every pure function of ``S``;
  :func:`resolve_masks` combines the label masks with a miner's masks (which only narrow them);
  :func:`pair_sets` is both at once, with ``S`` in the dtype the loss computes in;
  :func:`check_choice` and :func:`check_positive` check hyper-parameters.
* **Forms.** :func:`dissimilarity` reads ``S`` as ``-S``, ``D = sqrt(2 - 2 S)`` or ``D^2``
  (:data:`FORMS`), with :func:`safe_distance`'s finite gradient at ``S = 1``.
* **Numerics.** :func:`masked_logsumexp` (finite for empty masks) and its weights
  :func:`masked_softmax`, :func:`masked_mean`,
  :func:`softplus` (exact in float64), :func:`compute_dtype` (half precision -> float32).
* **Reductions.** :func:`reduce` is the one ``"mean"``/``"sum"``/``"none"`` of every loss.

Tests: ``tests/core/test_pairs.py``.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from .similarity import cosine_similarity, pair_masks
from .validation import Mask, as_embeddings, as_labels, check_loss_batch, check_same_length

__all__ = [
    "FORMS",
    "check_batch",
    "REDUCTIONS",
    "Form",
    "Mask",
    "check_choice",
    "check_positive",
    "check_similarity",
    "check_triplet_mask",
    "compute_dtype",
    "dissimilarity",
    "masked_logsumexp",
    "masked_mean",
    "masked_softmax",
    "pair_masks",
    "pair_sets",
    "prepare_batch",
    "reduce",
    "resolve_masks",
    "safe_distance",
    "softplus",
]

Form = Literal["similarity", "distance", "squared_distance"]
#: The three ways a pair-based loss can read a pair: cosine similarity ``S`` (Wang et al. 2019),
#: Euclidean distance ``D`` and squared distance ``D^2`` of unit vectors (Liu et al., Sec. III).
FORMS: tuple[str, ...] = ("similarity", "distance", "squared_distance")
#: What a pure loss function accepts as ``reduction`` (a loss module: ``"mean"`` and ``"sum"``).
REDUCTIONS: tuple[str, ...] = ("mean", "sum", "none")

_HALF = (torch.float16, torch.bfloat16)


# ----------------------------------------------------------------------------- input checks


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


def _fast_ok(x: torch.Tensor, labels: torch.Tensor, square: bool, finite: bool = True) -> bool:
    """True when a cheap test already proves ``(x, labels)`` valid.

    ``torch.isfinite`` over a ``B x B`` matrix costs as much as a whole loss on some CPUs; the sum
    of a matrix is finite whenever every entry is (it overflows only for entries near the float
    limit), so a finite sum accepts at the cost of one reduction. Anything else goes through the
    full check, which raises with its message or accepts. ``finite=False`` checks types and
    shapes only (:func:`check_batch` reads finiteness from the row norms it needs anyway).
    """
    return (
        isinstance(x, torch.Tensor)
        and torch.is_floating_point(x)
        and x.ndim == 2
        and x.numel() > 0
        and (not square or x.shape[0] == x.shape[1])
        and isinstance(labels, torch.Tensor)
        and labels.ndim == 1
        and labels.shape[0] == x.shape[0]
        and not torch.is_floating_point(labels)
        and labels.dtype != torch.bool  # bool labels: as_labels refuses them
        and (not finite or math.isfinite(float(x.detach().sum())))  # a Python float: half the calls
    )


def check_batch(
    embeddings: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a batch and return its embeddings and its labels (long, on the same device).

    Raises
    ------
    ValueError
        For non-2-D or non-finite embeddings, or a label count that does not match, and as
        :func:`~dmlbook.core.validation.check_loss_batch` (norms beyond the dtype, float16 zero rows;
        a warning for a batch without positive or negative pairs).
    TypeError
        For complex embeddings.
    """
    if _fast_ok(embeddings, labels, square=False, finite=False):  # finiteness: check_loss_batch
        x, y = embeddings, labels.to(device=embeddings.device, dtype=torch.long)
    else:
        x = as_embeddings(embeddings)
        y = as_labels(labels).to(x.device)
        check_same_length(x, y)
    check_loss_batch(x, y)  # norms that overflow, float16 zero rows; warns on no pair to learn
    return x, y


def prepare_batch(
    embeddings: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a batch and return its cosine similarity matrix ``S`` and its labels.

    Raises
    ------
    ValueError
        For non-2-D or non-finite embeddings, or a label count that does not match.
    """
    x, y = check_batch(embeddings, labels)
    return cosine_similarity(x), y


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
    if _fast_ok(S, labels, square=True):
        return labels.to(device=S.device, dtype=torch.long)
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
    pos, neg = _label_masks(labels)
    for name, given in (("pos_mask", pos_mask), ("neg_mask", neg_mask)):
        if given is None:
            continue
        if given.shape != shape or given.dtype != torch.bool:
            raise ValueError(
                f"{name} must be a bool tensor of shape {tuple(shape)} (one entry per pair), "
                f"got dtype {given.dtype} and shape {tuple(given.shape)}."
            )
    if pos_mask is not None:
        pos.logical_and_(pos_mask.to(pos.device))
    if neg_mask is not None:
        neg.logical_and_(neg_mask.to(neg.device))
    return pos, neg


def pair_sets(
    S: torch.Tensor,
    labels: torch.Tensor,
    pos_mask: torch.Tensor | None = None,
    neg_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The prologue of every loss on ``S``: ``(S, pos, neg)``, the similarities in the dtype the
    loss computes in (:func:`compute_dtype`: float32 for half precision, else ``S`` itself) and
    the positive and negative pair masks (:func:`check_similarity`, then :func:`resolve_masks`)."""
    y = check_similarity(S, labels)
    pos, neg = resolve_masks(y, pos_mask, neg_mask, tuple(S.shape))
    return S.to(compute_dtype(S)), pos, neg


def check_triplet_mask(triplet_mask: torch.Tensor | None, B: int) -> None:
    """Raise ``ValueError`` unless ``triplet_mask`` is ``None`` or a (B, B, B) bool tensor."""
    if triplet_mask is not None and (
        triplet_mask.shape != (B, B, B) or triplet_mask.dtype != torch.bool
    ):
        raise ValueError(
            f"triplet_mask must be a bool tensor of shape {(B, B, B)} (T[a, p, n]), "
            f"got dtype {triplet_mask.dtype} and shape {tuple(triplet_mask.shape)}."
        )


def _label_masks(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~dmlbook.core.similarity.pair_masks` of one batch in two ``B x B`` kernels (fresh tensors).

    The diagonal is cleared in place instead of and-ing with a ``~eye`` mask (two more kernels and
    two more ``B x B`` temporaries): the per-call overhead that dominates small batches.
    """
    same = labels[:, None] == labels[None, :]
    neg = labels[:, None] != labels[None, :]
    return same.fill_diagonal_(False), neg


# ----------------------------------------------------------------------------- forms


def safe_distance(squared: torch.Tensor) -> torch.Tensor:
    """``sqrt`` of squared distances with a finite gradient everywhere.

    Entries at or below the dtype's machine epsilon (coincident points, ``S = 1`` up to rounding)
    are returned as exactly 0 with gradient 0; every other entry is the exact square root.
    The root is taken of ``max(squared, eps)`` (finite, with a finite derivative) and the small
    entries are then set to 0, which also zeroes their gradient: no NaN reaches the backward pass.
    """
    tiny = torch.finfo(squared.dtype).eps
    keep = squared > tiny
    return squared.clamp_min(tiny).sqrt().masked_fill(keep.logical_not_(), 0.0)


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


# ----------------------------------------------------------------------------- numerics


def compute_dtype(S: torch.Tensor) -> torch.dtype:
    """The dtype a loss computes in: float32 for half precision (``bfloat16``, ``float16``)."""
    return torch.float32 if S.dtype in _HALF else S.dtype


#: Above ``x = threshold`` :func:`softplus` returns ``x``: there ``log(1 + e^x) - x = log(1 +
#: e^-x) < e^-x`` is below half an ulp of ``x`` (and ``sigmoid(x)`` rounds to 1) in the dtype.
_SOFTPLUS_THRESHOLD = {torch.float64: 40.0}


def softplus(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + e^x)``, exact to rounding in every floating dtype, value and gradient.

    ``torch.nn.functional.softplus`` returns ``x`` itself above ``threshold = 20``: exact in
    float32 (``e^-20 ~ 2e-9`` is below its rounding) but off by up to ``2e-9`` in float64, and
    its gradient by as much. Float64 inputs therefore switch to ``x`` only above 40
    (``e^-40 ~ 4e-18``); every other dtype keeps torch's threshold, so the float32 path is the same
    kernel, bit for bit. Below the threshold torch computes ``log1p(exp(x))``, which does not
    overflow in float64 for ``x <= 40``.
    """
    return F.softplus(x, threshold=_SOFTPLUS_THRESHOLD.get(x.dtype, 20.0))


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
    ``-inf`` before ``exp`` (``e^{-inf} = 0``) and their gradient is zeroed by the fill, so their
    values (however large) never reach the result or its gradient, which is never NaN.
    """
    mask = mask.expand_as(x)
    outside = mask.logical_not()
    nonempty = mask.any(dim=dim, keepdim=True)
    # the shift: the row's largest kept exponent (0 for an empty row; with the "1 +", at least 0)
    m = x.detach().masked_fill(outside, float("-inf")).amax(dim=dim, keepdim=True)
    m = m.clamp_min(0.0) if add_one else torch.where(nonempty, m, 0.0)
    # exp(-inf) = 0 outside the mask, and masked_fill's backward zeroes the gradient there
    total = (x - m).masked_fill_(outside, float("-inf")).exp().sum(dim=dim, keepdim=True)
    if add_one:
        value = m + (total + torch.exp(-m)).log()
    else:  # an empty row: log 1 = 0 in place of log 0
        value = m + torch.where(nonempty, total, 1.0).log()
    return value.squeeze(dim), nonempty.squeeze(dim)


def masked_softmax(
    x: torch.Tensor, mask: torch.Tensor, dim: int = -1, *, add_one: bool = False
) -> torch.Tensor:
    """``e^{x_k} / sum_{j: mask} e^{x_j}`` on ``mask`` along ``dim``, 0 elsewhere.

    With ``add_one`` the denominator is ``1 + sum`` (the MS weights, Wang et al. 2019, Eq. 13-14).
    These are the weights whose log-sum-exp is :func:`masked_logsumexp` (its gradient), computed
    from it: max-shifted, finite for any finite ``x``, 0 on an empty row.
    """
    lse, _ = masked_logsumexp(x, mask, dim, add_one=add_one)
    return (x - lse.unsqueeze(dim)).masked_fill(mask.logical_not(), float("-inf")).exp()


def masked_mean(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the entries where ``valid`` holds; ``0`` (zero gradient) if none.

    Entries outside ``valid`` are zeroed with ``where`` rather than multiplied, so a non-finite
    value there cannot poison the result.
    """
    kept = torch.where(valid, values, torch.zeros_like(values))
    return kept.sum() / valid.sum().clamp_min(1).to(values.dtype)


# ----------------------------------------------------------------------------- reductions


def reduce(terms: torch.Tensor, reduction: str, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Reduce per-anchor (or per-pair, per-triplet) loss terms: the one reduction of every loss.

    Parameters
    ----------
    terms : Tensor
        The loss terms.
    reduction : {"mean", "sum", "none", "mean_nonzero"}
        ``"none"``: ``terms`` (zeroed outside ``valid``); ``"sum"``: their sum; ``"mean"``: the
        mean over the ``valid`` entries (over all entries when ``valid`` is None, e.g. the MS
        loss's ``1/m`` over all anchors); ``"mean_nonzero"``: the mean over the valid entries
        that are > 0 (the count is not differentiated).
    valid : bool Tensor like ``terms``, optional
        The entries that exist (an anchor with a pair, a selected triplet). Entries outside it
        are zeroed with ``where``, so a non-finite placeholder there never reaches the result.

    Returns
    -------
    Tensor
        A scalar, or ``terms`` for ``"none"``. A mean over nothing is 0 with gradient 0.
    """
    if valid is None:
        if reduction == "none":
            return terms
        if reduction == "sum":
            return terms.sum()
        return terms.sum() / max(terms.numel(), 1)
    terms = torch.where(valid, terms, torch.zeros_like(terms))
    if reduction == "none":
        return terms
    if reduction == "sum":
        return terms.sum()
    if reduction == "mean_nonzero":
        return masked_mean(terms, valid & (terms > 0))
    return masked_mean(terms, valid)

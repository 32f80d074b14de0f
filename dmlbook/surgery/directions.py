"""The unit gradient directions of Xuan & Pless, Eq. 5-7, on L2-normalised embeddings.

For a triplet ``(f_a, f_p, f_n)`` a direction is four vectors: the direction given to the
positive (``e_p``), to the negative (``e_n``), and the anchor's two parts (``e_ap`` from the
positive pair, ``e_an`` from the negative pair). They are gradient (ascent) directions, as in
Eq. 5-6: training moves each feature along ``-weight * e``.

* ``"euc"`` (Eq. 5): ``e_p = (f_p - f_a) / |f_p - f_a|``, ``e_n = (f_a - f_n) / |f_a - f_n|``,
  ``e_ap = -e_p``, ``e_an = -e_n``.
* ``"cos"`` (Eq. 6): ``e_p = -f_a``, ``e_n = f_a``, ``e_ap = -f_p``, ``e_an = f_n`` (unit because
  the features are).
* ``"euc_orth"``, ``"cos_orth"`` (Eq. 7): the negative pair's two vectors with their component
  along ``f_a - f_p`` removed, then rescaled to unit length, so that ``e_n . (f_a - f_p) = 0``
  (and the same for ``e_an``); the positive pair's vectors are unchanged.

A zero-length difference (a duplicate feature) gives a zero direction, never NaN.

Chapter: ``book/13_gradient_surgery.ipynb`` (13.1-13.2).
Tests: ``tests/surgery/test_directions.py``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["DIRECTIONS", "Directions", "unit_directions"]

#: The directions of Sec. 3.2, by the names the loss module and configs use.
DIRECTIONS: tuple[str, ...] = ("euc", "cos", "euc_orth", "cos_orth")


class Directions(NamedTuple):
    """Four (T, d) tensors: ``e_p``, ``e_n``, ``e_ap``, ``e_an`` (see the module docstring)."""

    e_p: torch.Tensor
    e_n: torch.Tensor
    e_ap: torch.Tensor
    e_an: torch.Tensor


def _unit(v: torch.Tensor) -> torch.Tensor:
    norm = v.norm(dim=1, keepdim=True)
    tiny = torch.finfo(v.dtype).eps
    return torch.where(norm > tiny, v / norm.clamp_min(tiny), torch.zeros_like(v))


def _orthogonal_to(v: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``v`` without its component along the unit rows of ``u``, rescaled to unit length."""
    return _unit(v - (v * u).sum(dim=1, keepdim=True) * u)


def unit_directions(
    f_a: torch.Tensor, f_p: torch.Tensor, f_n: torch.Tensor, kind: str
) -> Directions:
    """The unit directions of one kind for each triplet (Xuan & Pless, Eq. 5-7).

    Parameters
    ----------
    f_a, f_p, f_n : Tensor of shape (T, d)
        Unit-norm anchor, positive and negative features, one row per triplet.
    kind : {"euc", "cos", "euc_orth", "cos_orth"}

    Returns
    -------
    Directions
    """
    if kind not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}; got {kind!r}.")
    if kind.startswith("euc"):
        e_p, e_n = _unit(f_p - f_a), _unit(f_a - f_n)
        e_ap, e_an = -e_p, -e_n
    else:
        e_p, e_n, e_ap, e_an = -f_a, f_a, -f_p, f_n
    if kind.endswith("orth"):
        u = _unit(f_a - f_p)
        e_n, e_an = _orthogonal_to(e_n, u), _orthogonal_to(e_an, u)
    return Directions(e_p, e_n, e_ap, e_an)

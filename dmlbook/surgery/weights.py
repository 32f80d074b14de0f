"""Pair weights (Xuan & Pless, Eq. 8-14), triplet weights (Eq. 15-17) and the selections
(Eq. 18-19) of a designed gradient, as functions of a triplet's similarities.

Pair weights return ``(P_plus, P_minus)``, one value per triplet:

* ``"con"`` (Eq. 8): 1 and 1;
* ``"euc"`` (Eq. 9): ``|f_a - f_p| = sqrt(2 - 2 S_ap)`` and ``sqrt(2 - 2 S_an)`` (unit features);
* ``"lin"`` (Eq. 10): ``1 - S_ap`` and ``S_an``;
* ``"sig"`` (Eq. 11): ``1 / (1 + exp(alpha (S_ap - lam)))`` and ``1 / (1 + exp(-beta (S_an - lam)))``;
* ``"sig_ms"`` (Eq. 13): Eq. 11 with ``m_+^sig`` and ``m_-^sig`` in place of the 1, the *means*
  over the relative sets of Eq. 12 as printed (1 when a set is empty, so that it falls back to
  Eq. 11 as the paper says). The MS loss itself has ``1 + sum``, not the mean: the erratum is
  proved in :mod:`dmlbook.symbolic.gradient_surgery`;
* ``"lin_ms"`` (Eq. 14): ``(1 - m_+^lin)(1 - S_ap)`` and ``(1 + m_-^lin) S_an`` with the means
  ``m^lin`` over the same sets (0 when empty). As printed, ``P_plus`` turns negative when
  ``m_+^lin > 1``; it is kept as printed.

Triplet weights: ``"con"`` (Eq. 15, 0.5), ``"cos"`` (Eq. 16, ``sigmoid(tau (S_an - S_ap))``) and
``"cir"`` (Eq. 17). ``"cir"`` takes Circle loss's margin ``m``:
``1 / (1 + exp(tau (S_ap (2 - S_ap) - S_an^2 - 1 + 2 m^2)))``; the default ``m = 1/sqrt(2)`` is
Eq. 17 exactly as printed (the paper drops the constant ``-1 + 2 m^2``).

Selections act on ``P_plus``: ``"sc1"`` (Eq. 18) zeroes it when ``S_an > S_ap``; ``"sc2"``
(Eq. 19, corrected) zeroes it outside the circle ``(1 - S_ap)^2 + S_an^2 < 1/2``, i.e. when
``S_ap (2 - S_ap) - S_an^2 < 1/2``. The paper prints ``> 0.5``, which would keep ``P_plus`` on
every hard triplet and drop it on the easiest ones, against Eq. 18, the text and Fig. 3 (the
circle touches the line of Eq. 18 at (0.5, 0.5) and lies on its kept side); erratum in the chapter.

Chapter: ``book/13_gradient_surgery.ipynb`` (13.3-13.4). Tests: ``tests/surgery/test_weights.py``.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "PAIR_WEIGHTS",
    "PRINTED_CIRCLE_MARGIN",
    "SELECTIONS",
    "TRIPLET_WEIGHTS",
    "pair_weights",
    "relative_means",
    "select",
    "sig_ms_weights",
    "triplet_weight",
]

PAIR_WEIGHTS: tuple[str, ...] = ("con", "euc", "lin", "sig", "sig_ms", "lin_ms")
TRIPLET_WEIGHTS: tuple[str, ...] = ("con", "cos", "cir")
SELECTIONS: tuple[str, ...] = ("none", "sc1", "sc2")
#: Circle loss's margin that makes Eq. 17 hold as printed.
PRINTED_CIRCLE_MARGIN = 1.0 / math.sqrt(2.0)


def _mean_over(values: torch.Tensor, mask: torch.Tensor, empty: float) -> torch.Tensor:
    count = mask.sum(dim=1)
    total = torch.where(mask, values, torch.zeros_like(values)).sum(dim=1)
    return torch.where(count > 0, total / count.clamp_min(1), torch.full_like(total, empty))


def relative_means(
    rows: torch.Tensor,
    s_ap: torch.Tensor,
    s_an: torch.Tensor,
    in_P: torch.Tensor,
    in_N: torch.Tensor,
    kind: str,
    alpha: float,
    beta: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(m_plus, m_minus)`` of Eq. 13 (``kind="sig"``) or Eq. 14 (``kind="lin"``).

    ``rows`` is ``S[a]`` for each triplet (T, B); ``in_P``/``in_N`` the masks of
    :func:`dmlbook.surgery.triplets.relative_sets`.
    """
    gap_p, gap_n = s_ap[:, None] - rows, s_an[:, None] - rows
    if kind == "sig":
        return (
            _mean_over(torch.exp(alpha * gap_p), in_P, 1.0),
            _mean_over(torch.exp(-beta * gap_n), in_N, 1.0),
        )
    return _mean_over(gap_p, in_P, 0.0), _mean_over(gap_n, in_N, 0.0)


def sig_ms_weights(
    rows: torch.Tensor,
    s_ap: torch.Tensor,
    s_an: torch.Tensor,
    in_P: torch.Tensor,
    in_N: torch.Tensor,
    *,
    alpha: float,
    beta: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P_plus, P_minus)`` of ``"sig_ms"`` (Eq. 13): ``pair_weights("sig_ms", ...)`` with the
    means of :func:`relative_means`.

    A weight ``1 / (m + exp(x))`` is infinite only where its denominator is below the dtype's
    smallest positive number, that is where the true weight is beyond the dtype's largest
    (float32: ``1 / 1.4e-45 > 3.4e38``); no other form of the same dtype can hold it, and
    the caller reports it (:func:`dmlbook.surgery.gradient.designed_gradient`).
    """
    m_plus, m_minus = relative_means(rows, s_ap, s_an, in_P, in_N, "sig", alpha, beta)
    return pair_weights(
        "sig_ms", s_ap, s_an, alpha=alpha, beta=beta, lam=lam, m_plus=m_plus, m_minus=m_minus
    )


def pair_weights(
    kind: str,
    s_ap: torch.Tensor,
    s_an: torch.Tensor,
    *,
    alpha: float,
    beta: float,
    lam: float,
    m_plus: torch.Tensor | None = None,
    m_minus: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P_plus, P_minus)`` of one pair weight (Xuan & Pless, Eq. 8-14); see the module docstring.

    ``m_plus``/``m_minus`` (from :func:`relative_means`) are needed by ``"sig_ms"`` and
    ``"lin_ms"`` only. The hyper-parameters' defaults are declared once, in
    :class:`dmlbook.surgery.gradient.SurgerySpec`.
    """
    if kind not in PAIR_WEIGHTS:
        raise ValueError(f"pair_weight must be one of {', '.join(PAIR_WEIGHTS)}; got {kind!r}.")
    if kind == "con":
        return torch.ones_like(s_ap), torch.ones_like(s_an)
    if kind == "euc":
        return (2 - 2 * s_ap).clamp_min(0).sqrt(), (2 - 2 * s_an).clamp_min(0).sqrt()
    if kind == "lin":
        return 1 - s_ap, s_an.clone()
    if kind in ("sig_ms", "lin_ms") and (m_plus is None or m_minus is None):
        raise ValueError(f"pair weight {kind!r} needs m_plus and m_minus (relative_means).")
    if kind == "lin_ms":
        return (1 - m_plus) * (1 - s_ap), (1 + m_minus) * s_an
    one_p = torch.ones_like(s_ap) if kind == "sig" else m_plus
    one_n = torch.ones_like(s_an) if kind == "sig" else m_minus
    return (
        1 / (one_p + torch.exp(alpha * (s_ap - lam))),
        1 / (one_n + torch.exp(-beta * (s_an - lam))),
    )


def triplet_weight(
    kind: str,
    s_ap: torch.Tensor,
    s_an: torch.Tensor,
    *,
    tau: float,
    circle_margin: float = PRINTED_CIRCLE_MARGIN,
) -> torch.Tensor:
    """The triplet weight ``T`` (Xuan & Pless, Eq. 15-17); see the module docstring."""
    if kind not in TRIPLET_WEIGHTS:
        raise ValueError(
            f"triplet_weight must be one of {', '.join(TRIPLET_WEIGHTS)}; got {kind!r}."
        )
    if kind == "con":
        return torch.full_like(s_ap, 0.5)
    if kind == "cos":
        return torch.sigmoid(tau * (s_an - s_ap))
    shift = 1.0 - 2.0 * circle_margin**2
    return torch.sigmoid(-tau * (s_ap * (2 - s_ap) - s_an**2 - shift))


def select(kind: str, p_plus: torch.Tensor, s_ap: torch.Tensor, s_an: torch.Tensor) -> torch.Tensor:
    """``P_plus`` after a selection operator (Eq. 18, corrected Eq. 19)."""
    if kind not in SELECTIONS:
        raise ValueError(f"selection must be one of {', '.join(SELECTIONS)}; got {kind!r}.")
    if kind == "none":
        return p_plus
    if kind == "sc1":
        drop = s_an > s_ap
    else:
        drop = s_ap * (2 - s_ap) - s_an**2 < 0.5
    return torch.where(drop, torch.zeros_like(p_plus), p_plus)

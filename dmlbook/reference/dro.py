"""Paper-literal loops of the DRO paper's losses, in plain Python floats.

**Reference semantics, not a training path.** Each function enumerates the pairs one at a time,
writes the paper's equation as printed (Eq. 1 with the sets of Sec. 3.1-3.2, Eq. 7, supplement
Eq. 23 and 30-32) and solves each inner maximisation by a different route from the vectorised
code of :mod:`dmlbook.losses.dro` and :mod:`dmlbook.losses.dro_grouped`: sorting a Python list
for top-K, a log-sum-exp loop for KL, and *bisection* on the KKT multiplier for the chi-square
ball. ``S`` is a list of lists, ``y`` a list of ints. Tests: ``tests/reference/test_dro.py`` (the
loops on hand-computed batches); the losses against them: ``tests/losses/test_dro.py``,
``tests/losses/test_dro_grouped.py``.
"""

from __future__ import annotations

import math

from .classic import lse, sets

__all__ = [
    "chi2_value_reference",
    "dro_grouped_loss_reference",
    "dro_loss_reference",
    "hap2s_e_loss_reference",
    "pair_loss_reference",
]


def pair_loss_reference(s: float, positive: bool, base: str, m: float, lam: float, a: float,
                        b: float) -> float:  # fmt: skip
    """``l_ij``: ``[m + y (lambda - S)]_+`` with ``y = +-1``, or the binomial softplus."""
    if base == "margin":
        y = 1.0 if positive else -1.0
        return max(0.0, m + y * (lam - s))
    x = a * (lam - s) if positive else b * (s - lam)
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def _pairs(S, y, base, m, lam, a, b, drop_zero):
    """``[(loss, positive)]`` over ordered pairs i != j (negatives: different labels)."""
    out = []
    for i in range(len(y)):
        P, N = sets(y, i)
        for j in P + N:
            loss = pair_loss_reference(S[i][j], j in P, base, m, lam, a, b)
            if loss > 0 or not drop_zero:
                out.append((loss, j in P))
    return out


def chi2_value_reference(losses: list[float], rho: float) -> float:
    """``max p.l`` over the simplex and ``(1/n) sum (n p_i - 1)^2 / 2 <= rho / n``, by bisection.

    ``p_i(nu) = [l_i - nu]_+ / sum [l_k - nu]_+`` concentrates as ``nu`` grows; the largest ``nu``
    (below ``max l``) whose ``p`` stays in the ball is found by 200 halvings.
    """
    n = len(losses)
    c = 1 + 2 * rho / n
    top = max(losses)

    def chi(nu: float) -> float:
        w = [max(0.0, v - nu) for v in losses]
        tot = sum(w)
        return n * sum((v / tot) ** 2 for v in w)

    ties = sum(1 for v in losses if v == top)
    if c * ties >= n or ties == n:
        return top
    lo, hi = min(losses) - 1e6 * (top - min(losses) + 1), top
    for _ in range(200):
        mid = (lo + hi) / 2
        if chi(mid) <= c:
            lo = mid
        else:
            hi = mid
    w = [max(0.0, v - lo) for v in losses]
    return sum(wi * v for wi, v in zip(w, losses, strict=True)) / sum(w)


def dro_loss_reference(S, y, uncertainty, base="margin", K=160, gamma=0.1, rho=1.0, m=0.2,
                       lam=0.5, a=2.0, b=50.0, drop_zero=True) -> float:  # fmt: skip
    """Eq. 1 for one uncertainty set: mean, max, top-K mean, TopK-PN mean, KL closed form, chi-square."""
    pairs = _pairs(S, y, base, m, lam, a, b, drop_zero)
    if not pairs:
        return 0.0
    losses = [v for v, _ in pairs]
    if uncertainty == "uniform":
        return sum(losses) / len(losses)
    if uncertainty == "simplex":
        return max(losses)
    if uncertainty == "topk":
        return sum(sorted(losses, reverse=True)[:K]) / K
    if uncertainty == "topk_pn":
        pos = sorted((v for v, p in pairs if p), reverse=True)[: K // 2]
        neg = sorted((v for v, p in pairs if not p), reverse=True)[: K // 2]
        return (sum(pos) + sum(neg)) / K
    if uncertainty == "kl":
        return gamma * (lse([v / gamma for v in losses]) - math.log(len(losses)))
    return chi2_value_reference(losses, rho)


def dro_grouped_loss_reference(S, y, gp, gn, base="margin", m=0.2, lam=0.5, a=2.0, b=50.0,
                               pseudo=False, l0=0.0, drop_zero=True, reduction="mean") -> float:  # fmt: skip
    """Eq. 7 (Eq. 23 with ``pseudo``) per anchor through its closed form (supplement Eq. 18)."""
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        total, real = 0.0, False
        for group, positive, g in ((P, True, gp), (N, False, gn)):
            ls = [pair_loss_reference(S[i][j], positive, base, m, lam, a, b) for j in group]
            ls = [v for v in ls if v > 0 or not drop_zero]
            real = real or bool(ls)
            if pseudo:
                ls.append(l0)
            if ls:
                total += g * (lse([v / g for v in ls]) - math.log(len(ls)))
        if real:
            terms.append(total)
    if not terms:
        return 0.0
    return sum(terms) / (len(terms) if reduction == "mean" else 1)


def hap2s_e_loss_reference(S, y, m=0.2, gamma=0.1) -> float:
    """Supplement Eq. 30-32: hinge of exponentially weighted positive and negative similarities."""
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not P or not N:
            continue
        qp = [math.exp(-S[i][j] / gamma) for j in P]
        qn = [math.exp(S[i][j] / gamma) for j in N]
        sp = sum(q * S[i][j] for q, j in zip(qp, P, strict=True)) / sum(qp)
        sn = sum(q * S[i][j] for q, j in zip(qn, N, strict=True)) / sum(qn)
        terms.append(max(0.0, sn - sp + m))
    return sum(terms) / len(terms) if terms else 0.0

"""Paper-literal loops of the classic pair-based losses, in plain Python floats.

**Reference semantics, not a training path.** Each function walks over anchors, pairs or triplets
one at a time and writes the paper's equation as printed (Wang et al. 2019, Eq. 5, 6, 9, 16 and
supplement Eq. 3-5 and 10; Liu et al. Eq. 11-14, 35-37), with the conventions of :mod:`dmlbook.losses`
for what the papers leave open (means over the terms that exist; empty sets contribute nothing).
``S`` is a list of lists, ``y`` a list of ints; every function returns a float. They are slow on
purpose: the vectorised losses are tested against them (``tests/losses/``); the loops themselves
on hand-computed batches in ``tests/reference/test_classic.py``.
"""

from __future__ import annotations

import math

__all__ = [
    "binlifted_loss_reference",
    "binomial_deviance_loss_reference",
    "contrastive_distance_loss_reference",
    "dist",
    "histogram_loss_reference",
    "histogram_reference",
    "histogram_nodes",
    "lifted_loss_reference",
    "lifted_star_loss_reference",
    "lifted_structure_loss_reference",
    "lse",
    "npair_loss_reference",
    "npair_pairs_reference",
    "sets",
    "softplus",
    "triplet_loss_reference",
]


def dist(s: float, form: str) -> float:
    """The dissimilarity of a pair: ``-S``, ``D = sqrt(2 - 2 S)`` (Liu et al., Eq. 1) or ``D^2``."""
    if form == "similarity":
        return -s
    if form == "squared_distance":
        return 2 - 2 * s
    return math.sqrt(max(2 - 2 * s, 0.0))


def lse(xs: list[float]) -> float:
    """``log sum exp`` of a non-empty list, max-shifted."""
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def sets(labels: list[int], i: int) -> tuple[list[int], list[int]]:
    """Anchor ``i``'s positives ``P_i`` (other samples of its class) and negatives ``N_i``."""
    P = [k for k in range(len(labels)) if k != i and labels[k] == labels[i]]
    N = [k for k in range(len(labels)) if labels[k] != labels[i]]
    return P, N


def triplet_loss_reference(S, y, margin, form, reduction):
    """Wang et al. Eq. 5 / Liu et al. Eq. 12, 37: ``[d_ap - d_an + m]_+`` over every triplet."""
    terms = []
    for a in range(len(y)):
        P, N = sets(y, a)
        for p in P:
            for n in N:
                terms.append(max(dist(S[a][p], form) - dist(S[a][n], form) + margin, 0.0))
    if reduction == "sum":
        return sum(terms)
    if reduction == "mean_nonzero":
        terms = [t for t in terms if t > 0]
    return sum(terms) / len(terms) if terms else 0.0


def lifted_loss_reference(S, y, margin, form):
    """Wang et al. Eq. 6 per anchor: ``[log sum_P e^{d} + log sum_N e^{-d} + lambda]_+``, mean."""
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if P and N:
            a = lse([dist(S[i][k], form) for k in P]) + lse([-dist(S[i][k], form) for k in N])
            terms.append(max(a + margin, 0.0))
    return sum(terms) / len(terms) if terms else 0.0


def lifted_structure_loss_reference(S, y, margin, form, squared, joint):
    """Song et al.; Liu et al. Eq. 14: one term ``J_ij`` per ordered positive pair."""
    terms = []
    for i in range(len(y)):
        P, Ni = sets(y, i)
        for j in P:
            Nj = sets(y, j)[1]
            ti = [margin - dist(S[i][k], form) for k in Ni]
            tj = [margin - dist(S[j][k], form) for k in Nj]
            if joint:
                if not (ti or tj):
                    continue
                J = dist(S[i][j], form) + lse(ti + tj)
            else:
                if not (ti and tj):
                    continue
                J = dist(S[i][j], form) + lse(ti) + lse(tj)
            h = max(J, 0.0)
            terms.append(h * h / 2 if squared else h)
    return sum(terms) / len(terms) if terms else 0.0


def softplus(x: float) -> float:
    """``log(1 + e^x)`` in Python floats."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def binomial_deviance_loss_reference(S, y, alpha, beta, lam):
    """Wang et al. Eq. 9: per-anchor averages of the two softplus halves, mean over anchors."""
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not (P or N):
            continue
        t = 0.0
        if P:
            t += sum(softplus(alpha * (lam - S[i][k])) for k in P) / len(P)
        if N:
            t += sum(softplus(beta * (S[i][k] - lam)) for k in N) / len(N)
        terms.append(t)
    return sum(terms) / len(terms) if terms else 0.0


def lifted_star_loss_reference(S, y, alpha, beta):
    """Wang et al. Eq. 16 (LiftedStruct*): two tempered log-sum-exps per anchor."""
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not (P or N):
            continue
        t = 0.0
        if P:
            t += lse([-alpha * S[i][k] for k in P]) / alpha
        if N:
            t += lse([beta * S[i][k] for k in N]) / beta
        terms.append(t)
    return sum(terms) / len(terms) if terms else 0.0


def binlifted_loss_reference(S, y, alpha, beta, lam):
    """BinLifted, the loss whose weight is Wang et al. supplement Eq. 10 (see dmlbook.losses)."""
    terms = []
    for i in range(len(y)):
        P, N = sets(y, i)
        if not (P or N):
            continue
        t = 0.0
        if N:
            t += sum(softplus(beta * (S[i][k] - lam)) for k in N) / (2 * beta)
            t += lse([beta * S[i][k] for k in N]) / (2 * beta)
        if P:
            t += sum(softplus(alpha * (lam - S[i][k])) for k in P) / (2 * alpha)
            t += lse([-alpha * S[i][k] for k in P]) / (2 * alpha)
        terms.append(t)
    return sum(terms) / len(terms) if terms else 0.0


def npair_pairs_reference(y):
    """Sohn's construction by a loop: first two samples of each class."""
    members: dict[int, list[int]] = {}
    for idx, c in enumerate(y):
        members.setdefault(c, []).append(idx)
    return [(m[0], m[1]) for m in members.values() if len(m) >= 2]


def npair_loss_reference(S, y, form, sampling):
    """Liu et al. Eq. 13 (Sohn): ``log(1 + sum_k e^{d_ij - d_ik})`` per selected positive pair."""
    terms = []
    if sampling == "npair":
        pairs = npair_pairs_reference(y)
        for a, p in pairs:
            negs = [q for (b, q) in pairs if y[b] != y[a]]
            x = [dist(S[a][p], form) - dist(S[a][q], form) for q in negs]
            terms.append(softplus(lse(x)) if x else 0.0)
    else:
        for i in range(len(y)):
            P, N = sets(y, i)
            for j in P:
                x = [dist(S[i][j], form) - dist(S[i][k], form) for k in N]
                terms.append(softplus(lse(x)) if x else 0.0)
    return sum(terms) / len(terms) if terms else 0.0


def contrastive_distance_loss_reference(S, y, m1, m2, variant):
    """Liu et al. Eq. 11, 35, 36 over the ordered pairs ``i != j``, mean."""
    terms = []
    for i in range(len(y)):
        for j in range(len(y)):
            if i == j:
                continue
            d = dist(S[i][j], "squared_distance" if variant == "squared_distance" else "distance")
            t = max(d - m1, 0.0) if y[i] == y[j] else max(m2 - d, 0.0)
            terms.append(t * t if variant == "squared_hinge" else t)
    return sum(terms) / len(terms) if terms else 0.0


def histogram_nodes(R: int, printed: bool = False) -> list[float]:
    """The nodes ``t_1 .. t_R`` of the histogram loss, ``Delta = 2 / (R - 1)``.

    ``t_r = (r - 1) Delta - 1``, from -1 to 1 (Ustinova & Lempitsky); ``printed=True`` gives the
    supplement's ``t_r = r Delta - 1`` (Wang et al. 2019, supplement, after Eq. 5).
    """
    delta = 2 / (R - 1)
    return [(r if printed else r - 1) * delta - 1 for r in range(1, R + 1)]


def _kernel(s: float, r: int, t: list[float]) -> float:
    """``delta_ijr`` of supplement Eq. 5, branch by branch (``t_0``, ``t_{R+1}`` one step out)."""
    delta = t[1] - t[0]
    lower = t[r - 2] if r > 1 else t[0] - delta
    upper = t[r] if r < len(t) else t[-1] + delta
    if lower <= s <= t[r - 1]:
        return (s - lower) / delta
    if t[r - 1] <= s <= upper:
        return (upper - s) / delta
    return 0.0


def histogram_reference(values: list[float], R: int, printed: bool = False) -> list[float]:
    """Supplement Eq. 4: ``h_r = (1/|S|) sum_{pairs} delta_ijr`` for ``r = 1..R``."""
    t = histogram_nodes(R, printed)
    return [sum(_kernel(s, r, t) for s in values) / len(values) for r in range(1, R + 1)]


def histogram_loss_reference(S, y, R):
    """Supplement Eq. 3, first line, ``sum_r h^-_r sum_{q <= r} h^+_q``, over the ordered pairs
    ``i != j``; 0 without a positive or a negative pair."""
    B = len(y)
    pos = [S[i][j] for i in range(B) for j in range(B) if i != j and y[i] == y[j]]
    neg = [S[i][j] for i in range(B) for j in range(B) if y[i] != y[j]]
    if not pos or not neg:
        return 0.0
    h_pos, h_neg = histogram_reference(pos, R), histogram_reference(neg, R)
    return sum(h_neg[r] * sum(h_pos[: r + 1]) for r in range(R))

"""Paper-literal loops for Xuan & Pless: the designed gradient one triplet at a time, Circle loss
and the cosine triplet loss (Eq. 4) one anchor at a time, in Python floats.

:func:`designed_gradient_reference` follows Sec. 3 line by line: for each anchor its easy positive
and hard negative (Sec. 4), the relative sets of Eq. 12 written as the paper's set-builder rules,
the pair weight (Eq. 8-14), the selection (Eq. 18, Eq. 19 corrected), the triplet weight
(Eq. 15-17), the unit directions (Eq. 5-7). The vectorised :func:`dmlbook.surgery.designed_gradient`
is tested against it for every combination (``tests/surgery/test_gradient.py``); the losses of
:mod:`dmlbook.losses.circle` and :mod:`dmlbook.losses.triplet` (the cosine triplet) are tested against the
other two loops. The loops themselves are tested on a hand-worked batch in
``tests/reference/test_gradient_surgery.py``. Chapter: ``book/13_gradient_surgery.ipynb``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..surgery.gradient import SurgerySpec

__all__ = ["circle_loss_reference", "cosine_triplet_loss_reference", "designed_gradient_reference"]


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > np.finfo(float).eps else np.zeros_like(v)


def _pair_weight(spec: SurgerySpec, sp: float, sn: float, rp: list, rn: list) -> tuple:
    al, be, lam = spec.alpha, spec.beta, spec.lam
    if spec.pair_weight == "con":
        return 1.0, 1.0
    if spec.pair_weight == "euc":
        return math.sqrt(max(2 - 2 * sp, 0.0)), math.sqrt(max(2 - 2 * sn, 0.0))
    if spec.pair_weight == "lin":
        return 1 - sp, sn
    if spec.pair_weight == "sig":
        return 1 / (1 + math.exp(al * (sp - lam))), 1 / (1 + math.exp(-be * (sn - lam)))
    if spec.pair_weight == "sig_ms":
        mp = sum(math.exp(al * (sp - r)) for r in rp) / len(rp) if rp else 1.0
        mn = sum(math.exp(-be * (sn - r)) for r in rn) / len(rn) if rn else 1.0
        return 1 / (mp + math.exp(al * (sp - lam))), 1 / (mn + math.exp(-be * (sn - lam)))
    mp = sum(sp - r for r in rp) / len(rp) if rp else 0.0
    mn = sum(sn - r for r in rn) / len(rn) if rn else 0.0
    return (1 - mp) * (1 - sp), (1 + mn) * sn


def _triplet_weight(spec: SurgerySpec, sp: float, sn: float) -> float:
    if spec.triplet_weight == "con":
        return 0.5
    if spec.triplet_weight == "cos":
        return 1 / (1 + math.exp(spec.tau * (sp - sn)))
    shift = 1 - 2 * spec.circle_margin**2
    return 1 / (1 + math.exp(spec.tau * (sp * (2 - sp) - sn**2 - shift)))


def _directions(spec: SurgerySpec, fa: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple:
    if spec.direction.startswith("euc"):
        e_p, e_n = _unit(fp - fa), _unit(fa - fn)
        e_ap, e_an = -e_p, -e_n
    else:
        e_p, e_n, e_ap, e_an = -fa, fa, -fp, fn
    if spec.direction.endswith("orth"):
        u = _unit(fa - fp)
        e_n, e_an = _unit(e_n - (e_n @ u) * u), _unit(e_an - (e_an @ u) * u)
    return e_p, e_n, e_ap, e_an


def designed_gradient_reference(
    f: torch.Tensor, labels: torch.Tensor, spec: SurgerySpec
) -> torch.Tensor:
    """The designed gradient of a batch of unit features, one triplet at a time (float64)."""
    F = f.detach().double().numpy()
    y = labels.tolist()
    S = F @ F.T
    grad = np.zeros_like(F)
    triplets = []
    for a in range(len(y)):
        pos = [j for j in range(len(y)) if j != a and y[j] == y[a]]
        neg = [j for j in range(len(y)) if y[j] != y[a]]
        if pos and neg:
            p = max(pos, key=lambda j: (S[a, j], -j))
            n = max(neg, key=lambda j: (S[a, j], -j))
            triplets.append((a, p, n, pos, neg))
    for a, p, n, pos, neg in triplets:
        sp, sn = S[a, p], S[a, n]
        max_neg = max(S[a, j] for j in neg)
        min_pos = min(S[a, j] for j in pos)
        rp = [S[a, i] for i in pos if i != p and S[a, i] < max_neg + spec.epsilon]
        rn = [S[a, j] for j in neg if j != n and S[a, j] > min_pos - spec.epsilon]
        w_p, w_n = _pair_weight(spec, sp, sn, rp, rn)
        if spec.selection == "sc1" and sn > sp:
            w_p = 0.0
        if spec.selection == "sc2" and sp * (2 - sp) - sn**2 < 0.5:
            w_p = 0.0
        c = spec.scale * _triplet_weight(spec, sp, sn) / len(triplets)
        e_p, e_n, e_ap, e_an = _directions(spec, F[a], F[p], F[n])
        grad[p] += c * w_p * e_p
        grad[n] += c * w_n * e_n
        grad[a] += c * (w_p * e_ap + w_n * e_an)
    return torch.from_numpy(grad)


def circle_loss_reference(
    S: torch.Tensor, labels: torch.Tensor, gamma: float, margin: float
) -> float:
    """Circle loss (Sun et al. 2020), mean over anchors with a positive and a negative."""
    s, y = S.tolist(), labels.tolist()
    terms = []
    for a in range(len(y)):
        ps = [j for j in range(len(y)) if j != a and y[j] == y[a]]
        ns = [j for j in range(len(y)) if y[j] != y[a]]
        if ps and ns:
            total = 0.0
            for p in ps:
                for n in ns:
                    ap, an = max(1 + margin - s[a][p], 0.0), max(s[a][n] + margin, 0.0)
                    total += math.exp(
                        gamma * (an * (s[a][n] - margin) - ap * (s[a][p] - 1 + margin))
                    )
            terms.append(math.log1p(total))
    return sum(terms) / len(terms) if terms else 0.0


def cosine_triplet_loss_reference(S: torch.Tensor, labels: torch.Tensor, tau: float) -> float:
    """Eq. 4 averaged over every valid triplet ``(a, p, n)``."""
    s, y = S.tolist(), labels.tolist()
    terms = [
        -math.log(math.exp(tau * s[a][p]) / (math.exp(tau * s[a][p]) + math.exp(tau * s[a][n])))
        for a in range(len(y))
        for p in range(len(y))
        for n in range(len(y))
        if p != a and y[p] == y[a] and y[n] != y[a]
    ]
    return sum(terms) / len(terms) if terms else 0.0

"""Self-checks of the exercises of Chapters 1-9 (see :mod:`dmlbook.exercises.registry`).

Chapters: ``book/01_what_is_dml.ipynb`` to ``book/09_classic_comparison.ipynb``, their last
section. Tests: ``tests/exercises/test_basics.py``. Each test recomputes what it needs from the
exercise's statement (its batch, its formula) and the package, then compares.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import sympy as sp
import torch

from ..evaluate import recall_at_k
from ..losses import contrastive_loss
from ..symbolic import derived
from .registry import (
    WrongForm,
    call,
    close,
    exercise,
    expression,
    matrix,
    numbers,
    proved,
    triples,
)

#: The batch of Exercise 2.3 (used again by 3.2, 3.3 and 4.2), as its statement prints it.
S_23 = (
    (1.0, 0.7, 0.2, 0.6),
    (0.7, 1.0, 0.3, 0.1),
    (0.2, 0.3, 1.0, 0.4),
    (0.6, 0.1, 0.4, 1.0),
)
LABELS_23 = (0, 0, 1, 1)


def _contrastive_weights() -> torch.Tensor:
    S = torch.tensor(S_23, dtype=torch.float64, requires_grad=True)
    contrastive_loss(S, torch.tensor(LABELS_23), 0.5).backward()
    return S.grad


@exercise("1.2", "Recall@1, @2 and @3 as three numbers", "Section 1.4 (Recall@K by hand)")
def _recall(answer: object) -> bool:
    if isinstance(answer, dict):
        answer = [answer.get(k, math.nan) for k in (1, 2, 3)]
    x = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.8, 0.6], [0.0, 1.0]])
    want = recall_at_k(x, torch.tensor([0, 0, 1, 1]), (1, 2, 3))
    return close(numbers(answer, 3), [want[k] for k in (1, 2, 3)], 1e-6)


@exercise("1.3", "(positive pairs, negative pairs) for B = 60, K = 5", "Section 1.2 (pairs)")
def _pair_counts(answer: object) -> bool:
    y = torch.arange(12).repeat_interleave(5)
    same = y[:, None] == y[None, :]
    want = [int(same.sum()) - len(y), int((~same).sum())]
    return close(numbers(answer, 2), want, 0.0)


@exercise(
    "2.2", "the weight, a number or an expression in S", "Section 2.5 (the change of variable)"
)
def _distance_weight(answer: object) -> bool:
    S = sp.Symbol("S", real=True)
    # the derivative of D^2 = 2 - 2S, D^2 on the unit sphere (Section 1.1)
    return proved(expression(answer, {"S": S}), derived(sp.diff, lambda: 2 - 2 * S, S))


@exercise("2.3", "the 4 x 4 weights dL/dS", "Section 2.3 (the sign convention) and Eq. 4")
def _contrastive_grid(answer: object) -> bool:
    got = matrix(answer, (4, 4))
    return bool(torch.allclose(got, _contrastive_weights(), atol=1e-4))


@exercise(
    "3.1",
    "(derivative of the positive term, derivative of the negative term) in D and m",
    "Section 3.2 (the distance forms)",
)
def _contrastive_distance(answer: object) -> bool:
    D, m, t = sp.symbols("D m t", positive=True)
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise WrongForm("not a pair of expressions")
    inside = {m: D + t}  # a negative inside the margin: m - D = t > 0
    pos, neg = (expression(a, {"D": D, "m": m}).subs(inside) for a in answer)
    return proved(pos, lambda: 2 * D) and proved(neg, lambda: -2 * t)


@exercise("3.2", "the loss value, a number", "Section 3.1 (Eq. 4 and its mean over pairs)")
def _contrastive_value(answer: object) -> bool:
    S = torch.tensor(S_23, dtype=torch.float64)
    want = float(contrastive_loss(S, torch.tensor(LABELS_23), 0.5))
    return close(numbers(answer, 1), [want], 5e-4)


@exercise(
    "3.3",
    "a function contrastive_sum(S, labels, margin) returning the summed loss",
    "Section 3.4 (the implementations)",
)
def _contrastive_sum(fn: object) -> bool:
    g = torch.Generator().manual_seed(3)
    for B, margin in ((4, 0.5), (9, 0.2), (16, 0.0)):
        x = torch.nn.functional.normalize(torch.randn(B, 5, generator=g, dtype=torch.float64))
        S, y = x @ x.T, torch.randint(0, 3, (B,), generator=g)
        want = float(contrastive_loss(S, y, margin)) * B * (B - 1)
        got = numbers(call(fn, S, y, margin), 1)
        if not close(got, [want], 1e-6):
            return False
    return True


@exercise(
    "4.1",
    "a function triplet_weights(S, labels, margin) returning the B x B weights dL/dS",
    "Section 4.1 (Eq. 5)",
)
def _triplet_weights(fn: object) -> bool:
    g = torch.Generator().manual_seed(4)
    for B, margin in ((6, 0.25), (10, 0.5)):
        x = torch.nn.functional.normalize(torch.randn(B, 4, generator=g, dtype=torch.float64))
        S, y = (x @ x.T).requires_grad_(True), torch.arange(B) % 3
        same, other = y[:, None] == y[None, :], y[:, None] != y[None, :]
        same = same & ~torch.eye(B, dtype=torch.bool)
        # sum over (a, p, n) of [S_an - S_ap + m]_+ by broadcasting: [a, p, n]
        hinge = torch.relu(S[:, None, :] - S[:, :, None] + margin)
        (hinge * (same[:, :, None] & other[:, None, :])).sum().backward()
        got = matrix(call(fn, S.detach(), y, margin), (B, B))
        if not torch.allclose(got, S.grad, atol=1e-9):
            return False
    return True


@exercise("4.2", "the active (anchor, positive, negative) triples", "Section 4.1 (Eq. 5)")
def _active_triplets(answer: object) -> bool:
    S, y, m = S_23, LABELS_23, 0.25
    want = {
        (a, p, n)
        for a in range(4)
        for p in range(4)
        for n in range(4)
        if p != a and y[p] == y[a] and y[n] != y[a] and S[a][n] - S[a][p] + m > 0
    }
    return triples(answer) == want


@exercise("4.3", "(triplets summed, triplets batch-hard keeps)", "Section 4.3 (mining)")
def _triplet_counts(answer: object) -> bool:
    B, K = 60, 5
    return close(numbers(answer, 2), [B * (K - 1) * (B - K), B], 0.0)


@exercise("5.2", "a 3 x 3 array: one row of weights per beta = 1, 10, 100", "Section 5.8")
def _temperatures(answer: object) -> bool:
    s = torch.tensor([0.2, 0.5, 0.4], dtype=torch.float64)
    want = torch.stack([torch.softmax(b * s, 0) for b in (1.0, 10.0, 100.0)])
    return bool(torch.allclose(matrix(answer, (3, 3)), want, atol=2e-3))


@exercise(
    "5.3",
    "a function tempered_lse(s, beta), or the beta at which exp(beta) overflows float32",
    "Section 5.5 (the implementations) and the float32 range, torch.finfo(torch.float32).max",
)
def _tempered_lse(answer: object) -> bool:
    if not callable(answer):
        overflow = math.log(torch.finfo(torch.float32).max)
        return close(numbers(answer, 1), [overflow], 2e-4)
    g = torch.Generator().manual_seed(5)
    for beta in (1.0, 50.0, 100.0, 1000.0):
        s = torch.rand(7, generator=g) * 2 - 1
        s[0] = 1.0  # the case the naive formula fails on
        want = torch.logsumexp(beta * s.double(), 0) / beta
        got = numbers(call(answer, s, beta), 1)
        if not close(got, [float(want)], 1e-5):
            return False
    return True


@exercise("6.1", "the similarity, an expression in S, lambda and beta", "Section 6.1 (Eq. 10)")
def _half_maximum(answer: object) -> bool:
    S, lam = sp.Symbol("S", real=True), sp.Symbol("lambda", real=True)
    beta = sp.Symbol("beta", positive=True)
    return proved(expression(answer, {"S": S, "lambda": lam, "beta": beta}), lambda: lam)


@exercise("6.2", "(the naive value, softplus's value), two numbers", "Section 6.3 (softplus)")
def _softplus(answer: object) -> bool:
    x = torch.tensor(100.0)
    want = [float(torch.log(1 + torch.exp(x))), float(torch.nn.functional.softplus(x))]
    return close(numbers(answer, 2), want, 1e-6)


@exercise(
    "7.1",
    "a function npair_weights(s_ap, s_neg) returning (w_positive, w_negatives)",
    "Section 7.2 (a soft-max over the positive and the negatives)",
)
def _npair_derivation(fn: object) -> bool:
    g = torch.Generator().manual_seed(7)
    for n in (1, 3, 8):
        s = (torch.rand(n + 1, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_(True)
        torch.log(1 + torch.exp(s[1:] - s[0]).sum()).backward()
        out = call(fn, s[0].detach(), s[1:].detach())
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise WrongForm("not a pair (w_positive, w_negatives)")
        got = numbers(out[0], 1) + numbers(out[1], n)
        if not close(got, s.grad.tolist(), 1e-9):
            return False
    return True


@exercise(
    "7.2",
    "(w_positive, w_negative at 0.5, w_negative at 0.1)",
    "Section 7.2 (a soft-max over the positive and the negatives)",
)
def _npair_weights(answer: object) -> bool:
    s = torch.tensor([0.8, 0.5, 0.1], dtype=torch.float64, requires_grad=True)
    torch.log(1 + torch.exp(s[1:] - s[0]).sum()).backward()
    return close(numbers(answer, 3), s.grad.tolist(), 2e-3)


@exercise(
    "7.3",
    "(positive pairs, negative pairs, negatives per anchor), expressions in N",
    "Section 7.4 (the N-pair batch)",
)
def _npair_counts(answer: object) -> bool:
    N = sp.Symbol("N", integer=True, positive=True)
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise WrongForm("not three expressions")
    got = [expression(a, {"N": N}) for a in answer]
    # B = 2N labels, two per class: count the pairs of a labelling with N as a symbol
    want = [lambda: 2 * N * 1, lambda: 2 * N * (2 * N - 2), lambda: 2 * N - 2]  # B = 2N
    return all(proved(g, w) for g, w in zip(got, want, strict=True))


@exercise(
    "8.2",
    "(soft-max before, soft-max after, MS before, MS after), four rows of three weights",
    "Section 8.3 (shift the row)",
)
def _shift(answer: object) -> bool:
    neg, lam, beta = torch.tensor([0.4, 0.55, 0.3], dtype=torch.float64), 0.5, 10.0

    def ms(s: torch.Tensor) -> torch.Tensor:  # Eq. 13, one anchor, these negatives
        e = torch.exp(beta * (s - lam))
        return e / (1 + e.sum())

    rows = [torch.softmax(beta * neg, 0), torch.softmax(beta * (neg + 0.1), 0)]
    want = torch.stack(rows + [ms(neg), ms(neg + 0.1)])
    return bool(torch.allclose(matrix(answer, (4, 3)), want, atol=2e-3))


@exercise(
    "9.2",
    "a function paired(a, b) returning (mean difference, standard error)",
    "Section 9.3 (reading the results)",
)
def _paired(fn: object) -> bool:
    rng = np.random.default_rng(9)
    for n in (3, 5, 12):
        a, b = pd.Series(rng.normal(0.6, 0.02, n)), pd.Series(rng.normal(0.59, 0.02, n))
        d = (a - b).to_numpy()
        want = [d.mean(), np.sqrt(((d - d.mean()) ** 2).sum() / (n - 1) / n)]
        if not close(numbers(call(fn, a, b), 2), want, 1e-6):
            return False
    return True


@exercise(
    "9.3",
    "(standard error with three seeds, seeds for a standard error of 0.25)",
    "Section 9.3 (reading the results)",
)
def _seeds(answer: object) -> bool:
    se, n = numbers(answer, 2)
    sd = 1.0
    return close([se], [sd / math.sqrt(3)], 5e-3) and n == math.ceil((sd / 0.25) ** 2)

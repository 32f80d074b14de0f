"""Self-checks of Chapters 1-9 (:mod:`dmlbook.exercises.basics`): a right and a wrong answer each.

The right answers are worked by hand from the statements (the book's instructor answers give the
same), not taken from the checks: e.g. 2.3's weights are -1/12 on positive pairs and +1/12 on
the one negative pair above the margin, 3.2's value is (-2.2 + 0.2)/12.
"""

from __future__ import annotations

import math

import pytest
import torch
from exercise_cases import right_then_wrong

from dmlbook.exercises import basics
from dmlbook.exercises.registry import EXERCISES, check

W23 = torch.tensor([[0, -1, 0, 1], [-1, 0, 0, 0], [0, 0, 0, -1], [1, 0, -1, 0]]) / 12


def contrastive_sum(S, labels, margin):
    pos = (labels[:, None] == labels[None, :]) & ~torch.eye(len(labels), dtype=torch.bool)
    neg = labels[:, None] != labels[None, :]
    return -S[pos].sum() + torch.relu(S[neg] - margin).sum()


def stable_lse(s, beta):
    m = s.max()
    return m + torch.log(torch.exp(beta * (s - m)).sum()) / beta


def triplet_weights(S, labels, margin):  # Answer 4.1's rule, loop by loop
    B = len(labels)
    W = torch.zeros(B, B, dtype=S.dtype)
    for a in range(B):
        for p in range(B):
            for n in range(B):
                positive, negative = labels[p] == labels[a], labels[n] != labels[a]
                if p != a and positive and negative and S[a, n] - S[a, p] + margin > 0:
                    W[a, p] -= 1
                    W[a, n] += 1
    return W


def npair_weights(s_ap, s_neg):  # Answer 7.1: p_k for negatives, p_p - 1 for the positive
    z = torch.exp(s_ap) + torch.exp(s_neg).sum()
    return torch.exp(s_ap) / z - 1, torch.exp(s_neg) / z


def paired(a, b):
    d = a - b
    return d.mean(), d.std(ddof=1) / len(d) ** 0.5


SOFTMAX_52 = [[0.280, 0.378, 0.342], [0.035, 0.705, 0.260], [0.0, 1.0, 0.0]]  # Answer 5.2
SHIFT_82 = [  # Answer 8.2's printed values
    [0.171, 0.766, 0.063],
    [0.171, 0.766, 0.063],
    [0.117, 0.523, 0.043],
    [0.146, 0.654, 0.054],
]

RIGHT = {
    "1.2": {1: 0.0, 2: 0.5, 3: 1.0},
    "1.3": (240, 3300),
    "2.2": "-2",
    "2.3": W23,
    "3.1": ("2*D", "-2*(m - D)"),
    "3.2": -0.1667,
    "3.3": contrastive_sum,
    "4.1": triplet_weights,
    "4.2": [(0, 1, 3), (2, 3, 0), (2, 3, 1), (3, 2, 0)],
    "4.3": (13200, 60),
    "5.2": SOFTMAX_52,
    "5.3": stable_lse,
    "6.1": "lambda",
    "6.2": (math.inf, 100.0),
    "7.1": npair_weights,
    "7.2": (-0.553, 0.331, 0.222),
    "7.3": ("2*N", "2*N*(2*N - 2)", "2*N - 2"),
    "8.2": SHIFT_82,
    "9.2": paired,
    "9.3": (0.577, 16),
}
WRONG = {
    "1.2": (0.0, 0.5, 0.5),
    "1.3": (300, 3300),  # counted i = j as a positive pair
    "2.2": "-1",
    "2.3": W23 * 12,  # the sum, not the mean of Eq. 4
    "3.1": ("2*D", "2*(m - D)"),  # the sign of the push
    "3.2": -0.1833,  # forgot the negative pair above the margin
    "3.3": lambda S, labels, margin: contrastive_sum(S, labels, margin) / 2,
    "4.1": lambda S, labels, margin: triplet_weights(S, labels, margin).clamp(max=0),  # no push
    "4.2": [(0, 1, 3), (2, 3, 0), (2, 3, 1)],
    "4.3": (13200, 120),
    "5.2": [[1 / 3] * 3, [1 / 3] * 3, [1 / 3] * 3],
    "5.3": lambda s, beta: torch.log(torch.exp(beta * s).sum()) / beta,  # overflows at 100
    "6.1": "lambda + 1/beta",
    "6.2": (100.0, 100.0),
    "7.1": lambda s_ap, s_neg: (npair_weights(s_ap, s_neg)[0] + 1, npair_weights(s_ap, s_neg)[1]),
    "7.2": (-0.447, 0.331, 0.222),  # p_p, not p_p - 1
    "7.3": ("N", "2*N*(2*N - 2)", "2*N - 2"),
    "8.2": SHIFT_82[:2] + SHIFT_82[2:3] * 2,  # MS weights unchanged by the shift
    "9.2": lambda a, b: ((a - b).mean(), (a - b).std(ddof=1)),  # no 1/sqrt(n)
    "9.3": (0.577, 4),
}


def test_every_entry_of_the_module_is_tested():
    mine = {n for n, e in EXERCISES.items() if e.test.__module__ == basics.__name__}
    assert mine == set(RIGHT) == set(WRONG)


@pytest.mark.parametrize("number", sorted(RIGHT))
def test_right_and_wrong(number, capsys):
    out = right_then_wrong(number, RIGHT[number], WRONG[number], capsys)
    assert out.startswith(f"Exercise {number}: not yet. Re-read ")
    assert EXERCISES[number].reread in out


def test_the_5_3_threshold_is_the_float32_overflow():
    assert check("5.3", 88.72, quiet=True) and not check("5.3", 50.0, quiet=True)
    assert torch.isinf(torch.exp(torch.tensor(88.73))) and torch.isfinite(
        torch.exp(torch.tensor(88.72))
    )


def test_symbolic_answers_accept_sympy_and_equivalent_forms():
    import sympy as sp

    D, m = sp.symbols("D m")
    assert check("3.1", (2 * D, -2 * sp.Max(m - D, 0)), quiet=True)
    assert check("2.2", -2.0, quiet=True)
    assert check("7.3", ("2*N", "4*N**2 - 4*N", "2*(N - 1)"), quiet=True)

"""Tests of dmlbook.reference.gradient_surgery, the loops for Xuan & Pless: the designed gradient
one triplet at a time on a hand-worked batch, Circle loss (Sun et al. 2020) and the cosine triplet
loss (Eq. 4), each written out here for that batch.

The batch: ``f_0 = (1, 0)``, ``f_1 = (0.6, 0.8)``, ``f_2 = (0.8, -0.6)``, ``y = (0, 0, 1)``, so
``S_01 = 0.6``, ``S_02 = 0.8``, ``S_12 = 0``. Anchors 0 and 1 form the easy-positive /
hard-negative triplets (0, 1, 2) and (1, 0, 2); anchor 2 has no positive: T = 2.
"""

from __future__ import annotations

import math

import pytest
import torch

from dmlbook.reference.gradient_surgery import (
    circle_loss_reference,
    cosine_triplet_loss_reference,
    designed_gradient_reference,
)
from dmlbook.surgery import SurgerySpec

F = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.8, -0.6]], dtype=torch.float64)
Y = torch.tensor([0, 0, 1])
f0, f1, f2 = F


def test_cosine_directions_constant_weights():
    # Eq. 6 with P^con, T^con = 1/2, over T = 2 triplets: c = 1/4 per triplet.
    # (0, 1, 2): f_1 gets -f_0, f_2 gets f_0, f_0 gets -f_1 + f_2; (1, 0, 2) likewise.
    c = 0.25
    want = torch.stack([c * (-2 * f1 + f2), c * (-2 * f0 + f2), c * (f0 + f1)])
    got = designed_gradient_reference(F, Y, SurgerySpec())
    assert torch.allclose(got, want, atol=1e-15, rtol=0)
    # the gradient of 1/2 mean(S_an - S_ap) over the two triplets, by autograd
    x = F.clone().requires_grad_(True)
    gap = (x[0] @ x[2] - x[0] @ x[1] + x[1] @ x[2] - x[1] @ x[0]) / 2
    (g,) = torch.autograd.grad(gap / 2, x)
    assert torch.allclose(got, g, atol=1e-15, rtol=0)


def test_linear_pair_weights_and_the_sc1_selection():
    # P^lin (Eq. 10): w_p = 1 - S_ap, w_n = S_an: (0, 1, 2): 0.4, 0.8; (1, 0, 2): 0.4, 0
    c = 0.25
    want = torch.stack(
        [c * (0.4 * -f1 + 0.8 * f2 + 0.4 * -f1), c * (0.4 * -f0 + 0.4 * -f0), c * 0.8 * f0]
    )
    got = designed_gradient_reference(F, Y, SurgerySpec(pair_weight="lin"))
    assert torch.allclose(got, want, atol=1e-15, rtol=0)
    # sc1 (Eq. 18): triplet (0, 1, 2) is hard (S_an = 0.8 > S_ap = 0.6), its positive pull is 0
    want = torch.stack([c * (0.8 * f2 + 0.4 * -f1), c * (0.4 * -f0), c * 0.8 * f0])
    got = designed_gradient_reference(F, Y, SurgerySpec(pair_weight="lin", selection="sc1"))
    assert torch.allclose(got, want, atol=1e-15, rtol=0)


def test_euclidean_directions_and_the_cosine_triplet_weight():
    tau = 2.0
    unit = lambda v: v / v.norm()
    t1 = 1 / (1 + math.exp(tau * (0.6 - 0.8)))  # T^cos (Eq. 16) of (0, 1, 2)
    t2 = 1 / (1 + math.exp(tau * (0.6 - 0.0)))  # of (1, 0, 2)
    # Eq. 5: e_p = (f_p - f_a)/|.|, e_n = (f_a - f_n)/|.|, the anchor gets -e_p - e_n
    g = torch.zeros_like(F)
    for w, (a, p, n) in ((t1, (0, 1, 2)), (t2, (1, 0, 2))):
        e_p, e_n = unit(F[p] - F[a]), unit(F[a] - F[n])
        g[p] += w / 2 * e_p
        g[n] += w / 2 * e_n
        g[a] -= w / 2 * (e_p + e_n)
    spec = SurgerySpec(direction="euc", triplet_weight="cos", tau=tau)
    assert torch.allclose(designed_gradient_reference(F, Y, spec), g, atol=1e-15, rtol=0)


def test_circle_loss_as_sun_et_al_write_it():
    S = F @ F.T
    gamma, m = 2.0, 0.25
    # alpha_p = [1 + m - s_p]_+, alpha_n = [s_n + m]_+, Delta_p = 1 - m, Delta_n = m
    term = lambda sp, sn: math.log1p(
        math.exp(gamma * ((sn + m) * (sn - m) - (1 + m - sp) * (sp - 1 + m)))
    )
    want = (term(0.6, 0.8) + term(0.6, 0.0)) / 2  # anchor 2 has no positive
    assert circle_loss_reference(S, Y, gamma, m) == pytest.approx(want, rel=1e-12)
    # two negatives of one anchor share its logarithm; alpha_n of S_an = -0.3 is [-0.05]_+ = 0
    y = torch.tensor([0, 0, 1, 2])
    S4 = torch.tensor(
        [[1.0, 0.7, 0.2, 0.4], [0.7, 1.0, 0.1, -0.3], [0.2, 0.1, 1.0, 0.5], [0.4, -0.3, 0.5, 1.0]],
        dtype=torch.float64,
    )
    inner = lambda sp, sn: math.exp(
        gamma * (max(sn + m, 0.0) * (sn - m) - max(1 + m - sp, 0.0) * (sp - 1 + m))
    )
    want = (
        math.log1p(inner(0.7, 0.2) + inner(0.7, 0.4))
        + math.log1p(inner(0.7, 0.1) + math.exp(-gamma * (1.25 - 0.7) * (0.7 - 0.75)))
    ) / 2
    assert circle_loss_reference(S4, y, gamma, m) == pytest.approx(want, rel=1e-12)


def test_cosine_triplet_is_eq4_over_every_triplet():
    S = F @ F.T
    tau = 3.0
    softplus = lambda x: math.log1p(math.exp(x))
    want = (softplus(tau * (0.8 - 0.6)) + softplus(tau * (0.0 - 0.6))) / 2
    assert cosine_triplet_loss_reference(S, Y, tau) == pytest.approx(want, rel=1e-12)
    assert cosine_triplet_loss_reference(S, torch.tensor([0, 1, 2]), tau) == 0.0  # no triplet

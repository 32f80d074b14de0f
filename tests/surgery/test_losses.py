"""Circle loss and the cosine (NCA) triplet loss: values against the loops of
dmlbook.reference.gradient_surgery and Eq. 4 written out,
finite differences, and their registration. Chapter: ``book/13_gradient_surgery.ipynb``."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings

from dmlbook.losses import circle_loss, cosine_triplet_loss, describe_loss, get_loss
from dmlbook.reference.gradient_surgery import circle_loss_reference, cosine_triplet_loss_reference

from .strategies import ephn_loop, unit_batches


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_circle_value_matches_the_double_sum(batch):
    f, y = batch
    S = f @ f.T
    got = float(circle_loss(S, y, gamma=4.0, margin=0.25))
    assert abs(got - circle_loss_reference(S, y, 4.0, 0.25)) < 1e-12


@settings(max_examples=30, deadline=None)
@given(unit_batches())
def test_cosine_triplet_value_matches_eq4(batch):
    f, y = batch
    tau = 5.0
    S = (f @ f.T).tolist()
    want_ephn = [
        -math.log(math.exp(tau * S[a][p]) / (math.exp(tau * S[a][p]) + math.exp(tau * S[a][n])))
        for a, p, n in ephn_loop(f, y)
    ]
    got = float(cosine_triplet_loss(f @ f.T, y, tau))
    assert abs(got - sum(want_ephn) / len(want_ephn)) < 1e-12
    got_all = float(cosine_triplet_loss(f @ f.T, y, tau, mining="all"))
    assert abs(got_all - cosine_triplet_loss_reference(f @ f.T, y, tau)) < 1e-12


def test_finite_differences():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    for module in (
        get_loss("circle", gamma=4.0, margin=0.25, detach_weights=False),
        get_loss("cosine_triplet", tau=5.0, mining="all"),
    ):
        assert torch.autograd.gradcheck(lambda v, m=module: m(v, y), (x,))


def test_registered_and_described():
    name, params = describe_loss(get_loss("nca_triplet", tau=8.0))
    assert name == "cosine_triplet" and params["tau"] == 8.0
    assert describe_loss(get_loss("circle"))[0] == "circle"
    assert describe_loss(get_loss("surgery", selection="sc1"))[1]["selection"] == "sc1"

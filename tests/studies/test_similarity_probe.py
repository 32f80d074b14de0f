"""Tests of :mod:`dmlbook.studies.similarity_probe`: one negative pair's GPW weight by autograd
(against Wang et al. 2019, Eq. 10, by hand), the probe's argument checks and ``ProbeSpec``'s loss
from the registry. Table 1 built from these pieces: ``tests/studies/test_three_similarities.py``.
"""

from __future__ import annotations

import pytest
import torch

from dmlbook.losses import binomial_deviance_loss, get_loss
from dmlbook.studies.similarity_probe import (
    PROBE_LAYOUT,
    ProbeSpec,
    negative_pair_weight,
    probe_loss,
)


def test_weight_is_autograd_of_the_loss_and_equals_eq10():
    g = torch.Generator().manual_seed(0)
    A = torch.rand(7, 7, generator=g, dtype=torch.float64) * 1.6 - 0.8
    S = A.triu(1) + A.triu(1).T + torch.eye(7, dtype=torch.float64)
    y = torch.tensor(PROBE_LAYOUT["labels"])
    w = negative_pair_weight(
        lambda s, lab: binomial_deviance_loss(s, lab, 2.0, 50.0, 0.5, reduction="sum"), S, y, 0, 4
    )
    n_neg = 4  # anchor 0 has negatives 3, 4, 5, 6
    assert w == pytest.approx(
        50.0 / n_neg * float(torch.sigmoid(50.0 * (S[0, 4] - 0.5))), rel=1e-12
    )


def test_probe_arguments_are_checked():
    fn = get_loss("binomial").loss_on_similarity
    with pytest.raises(ValueError, match="mode"):
        probe_loss(fn, mode="absolute")
    with pytest.raises(ValueError, match="n_steps"):
        probe_loss(fn, n_steps=1)


def test_probe_spec_builds_from_the_registry():
    spec = ProbeSpec("x", "triplet", {"margin": 0.3, "reduction": "sum"})
    fn = spec.build()
    S = torch.eye(3, dtype=torch.float64)
    assert float(fn(S, torch.tensor([0, 0, 1]))) == pytest.approx(2 * 0.3)


def _quadratic(c_p: float, c_n: float):
    """L = S_04^2 / 8 + S_04 (c_p S_01 + c_n S_06) / 4, so the probed weight is, by hand,
    w_04 = dL/dS_04 = (S_04 + c_p S_01 + c_n S_06) / 4."""
    i, j, p, k = (PROBE_LAYOUT[key] for key in ("anchor", "negative", "positive", "other_negative"))

    def loss(S, labels):
        s = S[i, j]
        return s**2 / 8 + s * (c_p * S[i, p] + c_n * S[i, k]) / 4

    return loss


def test_probe_moves_exactly_the_similarity_a_hand_written_weight_uses():
    """Each sweep moves one entry from -1 to 1 (entries mode); with |w| <= 1 the reported change
    is the weight's range along it: 2 / 4 for S, 2 c_p / 4 for P, 2 c_n / 4 for N, and exactly 0
    for a similarity the weight does not contain."""
    got = probe_loss(_quadratic(0.0, 0.0), mode="entries", n_configs=2, n_steps=5)
    assert got == {"S": pytest.approx(0.5, abs=1e-12), "P": 0.0, "N": 0.0}
    got = probe_loss(_quadratic(1.0, 0.5), mode="entries", n_configs=2, n_steps=5)
    assert got == pytest.approx({"S": 0.5, "P": 0.5, "N": 0.25}, abs=1e-12)
    # the relative S-probe shifts the anchor's whole row: a weight on S_04 - S_01 does not move
    # with it, and its P-sweep moves w by the full range of S_01 (-1 to 1) over 4
    got = probe_loss(_quadratic(-1.0, 0.0), n_configs=2, n_steps=5)
    assert got == pytest.approx({"S": 0.0, "P": 0.5, "N": 0.0}, abs=1e-12)

"""The proofs of :mod:`dmlbook.symbolic.dro_printed`: the DRO paper's misprinted forms as they
should read. Chapter: ``book/12_dro.ipynb`` (12.8)."""

from __future__ import annotations

import pytest

from dmlbook.symbolic import dro_printed


@pytest.mark.parametrize("proof", [dro_printed.eq3_lambda, dro_printed.supplement_scales])
def test_every_step_is_proved(proof):
    results = proof()
    assert results and all(v is True for v in results.values()), results


def test_the_erratum_proofs_print_what_each_step_computed(proof_rows):
    """Eq. 3's lambda and the supplement's two factors print their results (issue 39)."""
    assert all(dro_printed.eq3_lambda(P=1, N=2, verbose=True).values())
    title, rows = proof_rows()
    assert "1 positives, 2 negatives" in title and "one instance" in title
    assert rows["d/dlambda log sum_P e^{lambda - s}"] == "1"
    assert rows["d/dlambda log sum_N e^{s - lambda}"] == "-1"
    assert rows["d Eq. 3 / d lambda = 0"] == "proved      0"
    assert "lambda" not in rows["Eq. 3 = Wang Eq. 6 at lambda = 0"].split("bracket =")[1]

    assert all(dro_printed.supplement_scales(P=2, N=1, verbose=True).values())
    _, rows = proof_rows()
    assert rows["Eq. 14: dKL/dp = log(|P_i| p) + 1"] == "proved      dKL/dp_1 = log(2*p_1) + 1"
    assert rows["d Eq. 9 / ds^+_1"].startswith("-exp(alpha*(lambda - s^+_1))/(n*(")

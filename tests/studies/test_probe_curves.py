"""Tests of :mod:`dmlbook.studies.probe_curves`: the chapter figure's probe base, the weight
curves along the S-, P- and N-sweeps, and their plot.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from dmlbook.studies.probe_curves import example_similarities, plot_weight_curves, weight_curves
from dmlbook.studies.similarity_probe import DEFAULT_PROBES, PROBE_LAYOUT

#: What the probe finds (S, P, N) for the rows whose curves are checked; the regenerated Table 1
#: finds the same (``tests/studies/test_three_similarities.py``, ``EXPECTED``).
DEPENDS = {
    "Binomial (Wang Eq. 9)": (True, False, False),
    "N-pair (Liu Eq. 13)": (False, True, True),
    "LiftedStruct* (Wang Eq. 16)": (False, False, True),
}


def test_example_similarities_is_a_valid_probe_base():
    S = example_similarities()
    assert torch.equal(S, S.T) and torch.equal(S.diagonal(), torch.ones(7, dtype=S.dtype))
    assert S.abs().max() <= 1
    row = S[0]
    negatives = [3, 4, 5, 6]
    assert int(row[negatives].argmax()) == negatives.index(PROBE_LAYOUT["negative"])
    assert row[PROBE_LAYOUT["positive"]] < row[2]  # the moved positive is the hardest one


def test_weight_curves_are_flat_where_the_probe_says_so():
    """Flat up to float64 round-off (a shifted soft-max is exact only in exact arithmetic)."""
    specs = [s for s in DEFAULT_PROBES if s.loss in ("binomial", "lifted_star", "npair")]
    assert sorted(spec.label for spec in specs) == sorted(DEPENDS)
    curves = weight_curves(specs, n_steps=21)
    assert set(curves["probe"]) == {"S", "P", "N"}
    assert len(curves) == 3 * 3 * 21
    for spec in specs:
        for s in "SPN":
            part = curves[(curves["label"] == spec.label) & (curves["probe"] == s)]["w"]
            flat = float(part.max() - part.min()) <= 1e-9 * max(1.0, float(part.abs().max()))
            assert flat == (not DEPENDS[spec.label]["SPN".index(s)]), (spec.label, s)
        rel = curves[curves["label"] == spec.label]["w_rel"]
        assert rel.abs().max() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_steps"):
        weight_curves(specs, n_steps=1)
    with pytest.raises(ValueError, match="7 x 7"):
        weight_curves(specs, base=torch.eye(3))


def test_plot_weight_curves_draws_one_panel_per_loss_and_probe():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = DEFAULT_PROBES[:2]
    fig = plot_weight_curves(weight_curves(specs, n_steps=5))
    assert len(fig.axes) == 6
    assert fig.axes[0].get_ylabel() == specs[0].label
    plt.close(fig)
    with pytest.raises(ValueError, match="weight_curves"):
        plot_weight_curves(pd.DataFrame({"x": [1]}))

"""Wang et al. 2019, Table 1, regenerated from dmlbook's autograd weights."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from dmlbook.losses import PairLoss, binomial_deviance_loss, get_loss
from dmlbook.losses import registry as loss_registry
from dmlbook.studies.three_similarities import (
    DEFAULT_PROBES,
    PAPER_TABLE_1,
    PROBE_LAYOUT,
    ProbeSpec,
    compare_with_paper,
    default_probes,
    negative_pair_weight,
    paper_table_1,
    probe_loss,
    three_similarities_table,
)

#: What the probe finds (S, P, N) for every default row; see the notes in DEFAULT_PROBES for the
#: rows that differ from the paper's column.
EXPECTED = {
    "Contrastive (Wang Eq. 4)": (True, False, False),
    "Contrastive, distance (Liu Eq. 11)": (True, False, False),
    "Binomial (Wang Eq. 9)": (True, False, False),
    "Triplet (Wang Eq. 5)": (False, True, False),
    "Triplet, distance (Liu Eq. 12)": (True, True, False),
    "Triplet, squared distance (Liu Eq. 37)": (False, True, False),
    "Triplet, batch-hard (Eq. 5)": (False, True, True),
    "Triplet, semi-hard (Eq. 5)": (False, True, False),
    "N-pair (Liu Eq. 13)": (False, True, True),
    "Lifted (Wang Eq. 6)": (False, False, True),
    "Lifted, pairwise (Liu Eq. 14, Song et al.)": (True, True, True),
    "LiftedStruct* (Wang Eq. 16)": (False, False, True),
    "BinLifted (Wang suppl. Eq. 10)": (True, False, True),
    "Histogram (Wang suppl. Eq. 3)": (True, True, False),
}


@pytest.fixture(scope="module")
def table():
    return three_similarities_table(DEFAULT_PROBES)


def test_paper_table_is_table_1():
    t = paper_table_1()
    assert t.shape == (3, 9)
    assert list(t.index) == ["Similarity-S", "Similarity-P", "Similarity-N"]
    assert t["MS"].all() and t["Contrastive"].tolist() == [True, False, False]
    assert t["BinLifted"].tolist() == [True, False, True]
    assert t["NCA"].tolist() == [False, True, True]
    # every method but MS misses at least one similarity (the paper's point)
    assert all(not all(v) for k, v in PAPER_TABLE_1.items() if k != "MS")


def test_regenerated_table(table):
    got = {label: tuple(bool(row[s]) for s in "SPN") for label, row in table.iterrows()}
    assert got == EXPECTED
    # a similarity that is not used leaves the weight exactly unchanged
    for s in "SPN":
        assert bool((table.loc[~table[s], f"d{s}"] == 0).all())


def test_rows_agree_with_the_paper_unless_a_note_explains_why(table):
    cmp = compare_with_paper(table, DEFAULT_PROBES)
    for spec in DEFAULT_PROBES:
        assert cmp.loc[spec.label, "agrees"] == (spec.note == ""), spec.label
    # the rows that implement the paper's own equations agree with its columns
    for label in (
        "Contrastive (Wang Eq. 4)",
        "Binomial (Wang Eq. 9)",
        "Triplet (Wang Eq. 5)",
        "Lifted (Wang Eq. 6)",
        "LiftedStruct* (Wang Eq. 16)",
        "BinLifted (Wang suppl. Eq. 10)",
    ):
        assert cmp.loc[label, "agrees"], label
    # N-pair is the one paper column that no dmlbook form reproduces: P is in its denominator
    assert not cmp.loc["N-pair (Liu Eq. 13)", "agrees"]
    missing = [label for label in cmp.index if "not probed" in label]
    assert missing == ["NCA (not probed)", "MS (not probed)"]
    # the histogram loss has no Similarity-N at all (Table 1's column): its N-sweep is exact 0
    assert cmp.loc["Histogram (Wang suppl. Eq. 3)", "N (dmlbook)"] is False


def test_marks_for_display(table):
    cmp = compare_with_paper(table, DEFAULT_PROBES, marks=True)
    assert cmp.loc["Triplet (Wang Eq. 5)", "P (dmlbook)"] == "✓"
    assert cmp.loc["Triplet (Wang Eq. 5)", "S (paper)"] == "✗"
    assert cmp.loc["MS (not probed)", "S (dmlbook)"] == "-"


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


def test_entries_mode_counts_every_soft_max_as_similarity_s():
    """Moving S_ij alone changes its relative similarities too: the reason for the relative mode."""
    wanted = ("LiftedStruct* (Wang Eq. 16)", "Triplet (Wang Eq. 5)", "Binomial (Wang Eq. 9)")
    spec = [s for s in DEFAULT_PROBES if s.label in wanted]
    rel = three_similarities_table(spec, n_configs=2)
    ent = three_similarities_table(spec, mode="entries", n_configs=2)
    assert ent["S"].all()
    assert not rel.loc["LiftedStruct* (Wang Eq. 16)", "S"]
    assert not rel.loc["Triplet (Wang Eq. 5)", "S"]
    assert rel.loc["Binomial (Wang Eq. 9)", "S"]


def test_probe_arguments_are_checked():
    fn = get_loss("binomial").loss_on_similarity
    with pytest.raises(ValueError, match="mode"):
        probe_loss(fn, mode="absolute")
    with pytest.raises(ValueError, match="n_steps"):
        probe_loss(fn, n_steps=1)


def test_a_later_loss_joins_the_table_by_registering(monkeypatch):
    """A later loss (MS) gets a row and a column once registered as 'multi_similarity'."""
    later = {"multi_similarity", "nca", "histogram"}
    without = {k: v for k, v in loss_registry._REGISTRY.items() if k not in later}
    monkeypatch.setattr(loss_registry, "_REGISTRY", without)
    monkeypatch.setattr(loss_registry, "_ALIASES", dict(loss_registry._ALIASES))

    class ToyMS(PairLoss):
        """Not the MS loss: a soft-max over negatives with a '1 +' (S and N, no mining)."""

        def loss_on_similarity(self, S, labels):
            neg = labels[:, None] != labels[None, :]
            x = torch.where(neg, 10 * (S - 0.5), torch.full_like(S, -torch.inf))
            zeros = torch.zeros(len(labels), 1, dtype=S.dtype)
            return torch.logsumexp(torch.cat([x, zeros], 1), 1).mean()

    assert default_probes() == DEFAULT_PROBES
    loss_registry.register_loss("multi_similarity", ToyMS, overwrite=True)
    probes = default_probes()
    assert probes[-1].loss == "multi_similarity" and probes[-1].paper_column == "MS"
    table = three_similarities_table([probes[-1]], n_configs=2)
    cmp = compare_with_paper(table, [probes[-1]])
    row = cmp.loc["MS (Wang Eq. 15)"]
    assert row["S (dmlbook)"] and row["N (dmlbook)"] and not row["P (dmlbook)"]
    assert "MS (not probed)" not in cmp.index


def test_probe_spec_builds_from_the_registry():
    spec = ProbeSpec("x", "triplet", {"margin": 0.3, "reduction": "sum"})
    fn = spec.build()
    S = torch.eye(3, dtype=torch.float64)
    assert float(fn(S, torch.tensor([0, 0, 1]))) == pytest.approx(2 * 0.3)


# --------------------------------------------------------------------------------------------
# symbolic_dependence, weight_curves, plot_weight_curves


def _symbolic_anchor(P: int = 2, N: int = 3):
    import dmlbook.symbolic as sy

    return sy.anchor_similarities(P, N), sy.hyperparameters("lambda alpha beta m")


def test_symbolic_dependence_reproduces_the_paper_columns_it_can():
    import sympy as sp

    import dmlbook.symbolic as sy
    from dmlbook.studies.three_similarities import symbolic_dependence

    a, (lam, alpha, beta, _) = _symbolic_anchor()
    j = a.neg[0]
    cases = {
        "Contrastive": sum(sy.hinge(s - lam) for s in a.neg) - sum(a.pos),
        "Binomial": sum(sp.log(1 + sp.exp(beta * (s - lam))) for s in a.neg) / a.N
        + sum(sp.log(1 + sp.exp(alpha * (lam - s))) for s in a.pos) / a.P,
        "Triplet": sum(sy.hinge(n - p + lam) for p in a.pos for n in a.neg),
        "NCA": sy.log_sum_exp(list(a.all)) - sy.log_sum_exp(list(a.pos)),
    }
    for column, loss in cases.items():
        dep = symbolic_dependence(sy.pair_weights(loss, a)[j], a, j)
        assert tuple(bool(dep[s]) for s in "SPN") == PAPER_TABLE_1[column], column
    contrastive = symbolic_dependence(sy.pair_weights(cases["Contrastive"], a)[j], a, j)
    assert contrastive == {"S": "gate", "P": "", "N": ""}
    binomial = symbolic_dependence(sy.pair_weights(cases["Binomial"], a)[j], a, j)
    assert binomial == {"S": "weight", "P": "", "N": ""}


def test_symbolic_dependence_of_softmax_weights():
    import dmlbook.symbolic as sy
    from dmlbook.studies.three_similarities import symbolic_dependence

    a, (_, alpha, beta, _) = _symbolic_anchor()
    j = a.neg[0]
    star = (
        sy.log_sum_exp([-alpha * s for s in a.pos]) / alpha
        + sy.log_sum_exp([beta * s for s in a.neg]) / beta
    )
    assert symbolic_dependence(sy.pair_weights(star, a)[j], a, j) == {
        "S": "",
        "P": "",
        "N": "weight",
    }
    a1 = sy.anchor_similarities(1, 3)
    npair = sy.log1p_sum_exp([n - a1.pos[0] for n in a1.neg])
    got = symbolic_dependence(sy.pair_weights(npair, a1)[a1.neg[0]], a1, a1.neg[0])
    assert got == {"S": "", "P": "weight", "N": "weight"}  # the positive is in the soft-max


def test_symbolic_dependence_distance_triplet_and_errors():
    import dmlbook.symbolic as sy
    from dmlbook.studies.three_similarities import symbolic_dependence

    a, (_, _, _, m) = _symbolic_anchor()
    D = sy.unit_sphere_distance
    j = a.neg[0]
    trip = sum(sy.hinge(D(p) - D(n) + m) for p in a.pos for n in a.neg)
    got = symbolic_dependence(sy.pair_weights(trip, a)[j], a, j)
    assert got == {"S": "weight, gate", "P": "gate", "N": ""}
    with pytest.raises(ValueError, match="negative"):
        symbolic_dependence(a.pos[0], a, a.pos[0])


def test_example_similarities_is_a_valid_probe_base():
    from dmlbook.studies.three_similarities import example_similarities

    S = example_similarities()
    assert torch.equal(S, S.T) and torch.equal(S.diagonal(), torch.ones(7, dtype=S.dtype))
    assert S.abs().max() <= 1
    row = S[0]
    negatives = [3, 4, 5, 6]
    assert int(row[negatives].argmax()) == negatives.index(PROBE_LAYOUT["negative"])
    assert row[PROBE_LAYOUT["positive"]] < row[2]  # the moved positive is the hardest one


def test_weight_curves_are_flat_where_the_probe_says_so(table):
    """Flat up to float64 round-off (a shifted soft-max is exact only in exact arithmetic)."""
    from dmlbook.studies.three_similarities import weight_curves

    specs = [s for s in DEFAULT_PROBES if s.loss in ("binomial", "lifted_star", "npair")]
    curves = weight_curves(specs, n_steps=21)
    assert set(curves["probe"]) == {"S", "P", "N"}
    assert len(curves) == 3 * 3 * 21
    for spec in specs:
        for s in "SPN":
            part = curves[(curves["label"] == spec.label) & (curves["probe"] == s)]["w"]
            flat = float(part.max() - part.min()) <= 1e-9 * max(1.0, float(part.abs().max()))
            assert flat == (not table.loc[spec.label, s]), (spec.label, s)
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

    from dmlbook.studies.three_similarities import plot_weight_curves, weight_curves

    specs = DEFAULT_PROBES[:2]
    fig = plot_weight_curves(weight_curves(specs, n_steps=5))
    assert len(fig.axes) == 6
    assert fig.axes[0].get_ylabel() == specs[0].label
    plt.close(fig)
    with pytest.raises(ValueError, match="weight_curves"):
        plot_weight_curves(pd.DataFrame({"x": [1]}))

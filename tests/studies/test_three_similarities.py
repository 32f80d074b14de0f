"""Wang et al. 2019, Table 1, regenerated from dmlbook's autograd weights.

The parts have their own tests: the probe in ``test_similarity_probe.py``, the symbolic reading
in ``test_similarity_symbolic.py``, the weight curves in ``test_probe_curves.py``.
"""

from __future__ import annotations

import pytest
import torch

from dmlbook.losses import PairLoss
from dmlbook.losses import registry as loss_registry
from dmlbook.studies.three_similarities import (
    DEFAULT_PROBES,
    PAPER_TABLE_1,
    compare_with_paper,
    default_probes,
    paper_table_1,
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

"""The old import paths of the layering of issue 11 warn (DeprecationWarning) and forward to the
very objects of the new homes: dmlbook.pairs, dmlbook.mining, dmlbook.reference, dmlbook.studies."""

from __future__ import annotations

import importlib
import sys

import pytest

import dmlbook.losses
import dmlbook.mining
import dmlbook.reference
import dmlbook.studies.ms_ablation
import dmlbook.studies.three_similarities


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("ms_mining_masks", dmlbook.mining),
        ("multi_similarity_loss_reference", dmlbook.reference),
        ("PAPER_TABLE_2", dmlbook.studies.ms_ablation),
        ("paper_table_2", dmlbook.studies.ms_ablation),
        ("read_ablation_csv", dmlbook.studies.ms_ablation),
        ("summarize_ablation", dmlbook.studies.ms_ablation),
    ],
)
def test_moved_names_of_dmlbook_losses_warn_and_forward(name, home):
    assert name not in dmlbook.losses.__all__  # studies, references and miners are no losses
    with pytest.warns(DeprecationWarning, match=home.__name__):
        got = getattr(dmlbook.losses, name)
    assert got is getattr(home, name)
    with pytest.raises(AttributeError, match="no_such_name"):
        dmlbook.losses.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("dmlbook.three_similarities", "dmlbook.studies.three_similarities"),
        ("dmlbook.losses.ms_reference", "dmlbook.reference.multi_similarity"),
    ],
)
def test_moved_modules_warn_and_are_the_new_module(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_split_ms_ablation_module_forwards_both_halves(monkeypatch):
    monkeypatch.delitem(sys.modules, "dmlbook.losses.ms_ablation", raising=False)
    with pytest.warns(DeprecationWarning, match="dmlbook.studies.ms_ablation"):
        old = importlib.import_module("dmlbook.losses.ms_ablation")
    assert old.ablation_loss is dmlbook.losses.ablation_loss
    assert old.summarize_ablation is dmlbook.studies.ms_ablation.summarize_ablation
    assert set(old.__all__) >= {"TABLE_2", "MinedPairLoss", "PAPER_TABLE_2", "read_ablation_csv"}

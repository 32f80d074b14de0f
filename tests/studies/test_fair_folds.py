"""Tests of dmlbook.studies.fair_folds: the class-disjoint validation folds of the fair comparison.

The expected alphabets and character counts are read from the shipped Omniglot copy's class
names (``split/alphabet/character``), not from the module's own helpers.
"""

from __future__ import annotations

import pytest

from dmlbook.data import load_dataset
from dmlbook.studies import fair_comparison as fc
from dmlbook.studies import fair_folds as ff


@pytest.fixture(scope="module")
def train():
    return load_dataset("omniglot", "train")


def alphabets(ds) -> set[str]:
    return {ds.class_names[int(c)].split("/")[1] for c in ds.classes}


def test_the_folds_are_disjoint_and_hold_no_test_alphabet(train):
    folds = [set(f) for f in ff.VALIDATION_FOLDS]
    assert len(folds) >= 2 and all(len(f) == 2 for f in folds)  # K folds of two alphabets
    assert all(not a & b for i, a in enumerate(folds) for b in folds[i + 1 :])  # disjoint
    assert set().union(*folds) <= alphabets(train)  # training alphabets only
    assert not set().union(*folds) & alphabets(load_dataset("omniglot", "test"))
    assert ff.VALIDATION_ALPHABETS == ff.VALIDATION_FOLDS[0] == ("Balinese", "Early_Aramaic")
    assert fc.VALIDATION_FOLDS is ff.VALIDATION_FOLDS and fc.validation_split is ff.validation_split


def test_each_split_is_class_disjoint_and_holds_out_its_folds_alphabets(train):
    test = alphabets(load_dataset("omniglot", "test"))
    # characters per alphabet in the shipped copy: Korean 40, Latin 26, Balinese 24, Greek 24,
    # Early_Aramaic 22 (20 drawings each)
    expected = {
        0: ({"Greek", "Korean", "Latin"}, 90, 46),
        1: ({"Balinese", "Early_Aramaic", "Korean"}, 86, 50),
    }
    held_out = set()
    for k, (fit_alphabets, n_fit, n_val) in expected.items():
        fit_part, val = ff.validation_split(train, k)
        assert alphabets(val) == set(ff.VALIDATION_FOLDS[k])
        assert alphabets(fit_part) == fit_alphabets
        assert (fit_part.num_classes, val.num_classes) == (n_fit, n_val)
        assert len(fit_part) + len(val) == len(train) == 2720
        assert not set(fit_part.classes.tolist()) & set(val.classes.tolist())
        assert not test & (alphabets(fit_part) | alphabets(val))  # the test never touched
        held_out |= set(val.classes.tolist())
    assert len(held_out) == 96  # no character validates in two folds


def test_a_bad_fold_or_data_set_is_refused(train):
    _, val = ff.validation_split(train, 0)
    with pytest.raises(ValueError, match="validation alphabets"):
        ff.validation_split(val, 0)  # only the fold's alphabets
    with pytest.raises(ValueError, match="fold must be an integer from 0 to"):
        ff.validation_split(train, len(ff.VALIDATION_FOLDS))
    with pytest.raises(ValueError, match="fold must be"):
        ff.validation_split(train, "1")

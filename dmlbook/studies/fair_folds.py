"""The class-disjoint validation folds of the fair Omniglot comparison.

Musgrave, Belongie and Lim (2020) choose every hyper-parameter on classes disjoint from the test
classes, and average the validation score over several such folds so that one lucky split
cannot decide. The shipped Omniglot ``train`` split holds five alphabets (Korean 40 characters,
Latin 26, Balinese 24, Greek 24, Early_Aramaic 22); :data:`VALIDATION_FOLDS` declares the folds
once: two alphabets held out per fold, no alphabet in two folds, Korean (the largest) always
training. :func:`validation_split` gives a fold's ``(fit part, validation part)``; the ``test``
alphabets and Lake et al.'s one-shot runs are in no fold. Tests: ``tests/studies/test_fair_folds.py``.
"""

from __future__ import annotations

import torch

from ..data.base.dataset import EmbeddedDataset

__all__ = ["VALIDATION_ALPHABETS", "VALIDATION_FOLDS", "alphabet_of", "validation_split"]

#: The validation folds: the training alphabets each fold holds out (the other three train).
#: Two folds of two alphabets is what the five shipped training alphabets allow with two each;
#: every choice reads the mean of a validation metric over them
#: (:func:`dmlbook.studies.fair_selection.fold_means`).
VALIDATION_FOLDS: tuple[tuple[str, ...], ...] = (
    ("Balinese", "Early_Aramaic"),
    ("Greek", "Latin"),
)
#: The first fold's alphabets (the one fold of the earlier protocol).
VALIDATION_ALPHABETS = VALIDATION_FOLDS[0]


def alphabet_of(data: EmbeddedDataset) -> list[str]:
    """Each example's alphabet (Omniglot class names read ``split/alphabet/character``)."""
    return [data.class_names[int(c)].split("/")[1] for c in data.labels]


def validation_split(
    train: EmbeddedDataset, fold: int = 0
) -> tuple[EmbeddedDataset, EmbeddedDataset]:
    """``(fit_part, validation_part)`` of Omniglot's ``train`` split for one fold.

    Parameters
    ----------
    train : EmbeddedDataset
        Omniglot's ``train`` split (the five training alphabets).
    fold : int
        Index into :data:`VALIDATION_FOLDS`: the validation part holds every drawing of that
        fold's alphabets, the fit part every other drawing; the two share no character.

    Raises
    ------
    ValueError
        For a fold outside ``0 .. len(VALIDATION_FOLDS) - 1``, or data holding none or only
        the fold's alphabets (not the ``train`` split).
    """
    if not isinstance(fold, int) or not 0 <= fold < len(VALIDATION_FOLDS):
        raise ValueError(
            f"fold must be an integer from 0 to {len(VALIDATION_FOLDS) - 1} "
            f"(VALIDATION_FOLDS has {len(VALIDATION_FOLDS)}), got {fold!r}."
        )
    alphabets = VALIDATION_FOLDS[fold]
    held = torch.tensor([a in alphabets for a in alphabet_of(train)])
    if not held.any() or held.all():
        raise ValueError(
            f"the data set holds {'none' if not held.any() else 'only'} of the validation "
            f"alphabets {alphabets} (fold {fold}); pass Omniglot's train split."
        )
    index = torch.arange(len(train))
    return train.subset(index[~held]), train.subset(index[held])

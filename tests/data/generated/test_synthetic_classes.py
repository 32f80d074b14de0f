"""Tests of dmlbook.data.generated.synthetic_classes: the attribute values, the fixed class list, names.

Expected sizes come from the attribute table in :mod:`dmlbook.data.generated.synthetic`'s docstring
(8 shapes, 8 palettes, 6 patterns, 4 markers).
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlbook.data.generated import synthetic_classes


def test_attributes_of():
    a = synthetic_classes.attributes_of(0)
    assert set(a) == {"shape", "palette", "pattern", "marker", "split", "name"}
    assert a["name"] == f"{a['shape']}/{a['palette']}/{a['pattern']}/{a['marker']}"
    assert a["shape"] in synthetic_classes.SHAPES and a["palette"] in synthetic_classes.PALETTES
    assert a["pattern"] in synthetic_classes.PATTERNS and a["marker"] in synthetic_classes.MARKERS
    assert a["split"] == "train" and synthetic_classes.attributes_of(150)["split"] == "test"
    names = synthetic_classes.class_names(200)
    assert all(synthetic_classes.attributes_of(c)["name"] == names[c] for c in (0, 99, 100, 199))
    with pytest.raises(ValueError, match="out of range"):
        synthetic_classes.attributes_of(200)
    with pytest.raises(TypeError, match="class_id must be an int"):
        synthetic_classes.attributes_of(1.5)


def test_class_table_is_fine_grained_and_zero_shot():
    table = synthetic_classes.class_attribute_table(200)
    assert table.shape == (200, 4)
    assert len({tuple(r) for r in table}) == 200  # test combinations are unseen in training
    sizes = [
        len(synthetic_classes.SHAPES),
        len(synthetic_classes.PALETTES),
        len(synthetic_classes.PATTERNS),
        len(synthetic_classes.MARKERS),
    ]
    for part in (table[:100], table[100:]):
        for a, n in enumerate(sizes):  # every attribute value occurs in both splits
            assert set(part[:, a].tolist()) == set(range(n))
        differ = (part[:, None, :] != part[None, :, :]).sum(-1)
        # fine-grained: most classes have a same-split neighbour that differs in one attribute
        assert ((differ == 1).sum(1) > 0).mean() > 0.5
    # the class list is fixed: independent of the instance seed and of earlier calls
    assert np.array_equal(table, synthetic_classes.class_attribute_table(200))
    for c in (4, 6, synthetic_classes.MAX_CLASSES):
        t = synthetic_classes.class_attribute_table(c)
        assert len({tuple(r) for r in t}) == c


def test_every_combination_is_a_class_once_and_bad_counts_are_refused():
    assert synthetic_classes.MAX_CLASSES == 8 * 8 * 6 * 4 == 1536
    table = synthetic_classes.class_attribute_table(synthetic_classes.MAX_CLASSES)
    combinations = {
        (s, p, t, m) for s in range(8) for p in range(8) for t in range(6) for m in range(4)
    }
    assert {tuple(row) for row in table.tolist()} == combinations
    table[0, 0] = 99  # a copy: the cached table is not changed through it
    assert synthetic_classes.class_attribute_table(1536)[0, 0] != 99
    for bad, error in ((5, ValueError), (2, ValueError), (1538, ValueError), (20.0, TypeError)):
        with pytest.raises(error, match="num_classes"):
            synthetic_classes.class_names(bad)


def test_a_numpy_integer_difficulty_is_a_number():
    """Issue 38: difficulty=numpy.int64(1) is the difficulty 1.0; True is refused."""
    import numpy as np

    from dmlbook.data.generated.synthetic_classes import _check_options

    assert _check_options(4, 2, 16, np.int64(1), 0) == 1.0
    with pytest.raises(TypeError, match="difficulty must be a number"):
        _check_options(4, 2, 16, True, 0)

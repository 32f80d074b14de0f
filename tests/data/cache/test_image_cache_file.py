"""Tests of dmlbook.data.cache.image_cache_file: opening a built cache and checking its manifest.

A cache here is written by hand (``numpy.save`` and a JSON manifest), so what
:func:`open_image_cache` returns is checked against values the test chose, not against the
builder; the last test opens what :func:`~dmlbook.data.cache.image_cache.build_image_cache` wrote.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dmlbook.data.cache.image_cache_file import CACHE_VERSION, open_image_cache

from ..image_files import SIZE


def hand_made_cache(folder, **manifest):
    """A 2-image cache of 4 x 4 cells: ``(path, array)``; ``manifest`` overrides entries."""
    cells = np.random.default_rng(0).integers(0, 256, (2, 4, 4, 3), dtype=np.uint8)
    path = folder / "cache.npy"
    np.save(path, cells)
    entries = {"version": CACHE_VERSION, "size": 4, "count": 2, "fit": "crop"}
    entries |= {"image_sizes": [[2, 4], [4, 2]], **manifest}
    path.with_suffix(".json").write_text(json.dumps(entries))
    return path, cells


def test_open_reads_the_array_read_only_with_its_manifest(tmp_path):
    path, cells = hand_made_cache(tmp_path, bad=[[1, "b/x.jpg", "broken data"]])
    cache = open_image_cache(str(path))
    assert cache.path == path and len(cache) == 2 and cache.size == 4 and cache.fit == "crop"
    np.testing.assert_array_equal(cache.images, cells)
    assert isinstance(cache.images, np.memmap) and not cache.images.flags.writeable
    assert cache.image_sizes.tolist() == [[2, 4], [4, 2]]  # (height, width)
    assert cache.regions.tolist() == [[0, 0, 4, 4]] * 2  # a cropped image fills its cell
    assert cache.bad == [(1, "b/x.jpg", "broken data")]


def test_padded_regions_are_where_the_whole_image_lands(tmp_path):
    path, _ = hand_made_cache(tmp_path, fit="pad")
    # 2 x 4 (height x width): long side 4, height 2, centred -> rows 1-2; 4 x 2: columns 1-2
    assert open_image_cache(path).regions.tolist() == [[1, 0, 2, 4], [0, 1, 4, 2]]


def test_a_manifest_that_does_not_describe_the_array_is_refused(tmp_path):
    path, _ = hand_made_cache(tmp_path, version=CACHE_VERSION + 1)
    with pytest.raises(ValueError, match=rf"format version {CACHE_VERSION + 1}.*delete it"):
        open_image_cache(path)
    path, _ = hand_made_cache(tmp_path, count=3, image_sizes=[[4, 4]] * 3)
    with pytest.raises(ValueError, match=r"shape \(2, 4, 4, 3\).*describes \(3, 4, 4, 3\) uint8"):
        open_image_cache(path)


def test_array_without_manifest_is_not_used(images, tmp_path):
    cache = images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False).cache
    manifest = cache.path.with_suffix(".json")
    manifest.unlink()
    with pytest.raises(FileNotFoundError, match="No complete image cache"):
        open_image_cache(cache.path)
    rebuilt = images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False).cache
    assert manifest.is_file() and rebuilt.path == cache.path

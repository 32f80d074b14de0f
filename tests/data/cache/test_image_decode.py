"""Tests of dmlbook.data.cache.image_decode: where an image lands in a cache cell, and decoding it.

The reference is torchvision's ``Resize(size)`` -> ``CenterCrop(size)`` written out with PIL
(``image_files.reference_cell``), on the eight images of every kind in ``image_files.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from dmlbook.data.cache.image_decode import decode_resized, resized_geometry

from ..image_files import SIZE, reference_cell


def test_geometry_matches_torchvision_resize():
    assert resized_geometry(500, 375, 256, "crop") == ((341, 256), (0, -42), (0, 0, 256, 256))
    assert resized_geometry(375, 500, 256, "crop") == ((256, 341), (-42, 0), (0, 0, 256, 256))
    assert resized_geometry(500, 375, 256, "pad") == ((256, 192), (32, 0), (32, 0, 192, 256))
    with pytest.raises(ValueError, match="fit"):
        resized_geometry(10, 10, 8, "stretch")


def test_decode_matches_reference(images):
    for f in images.files:
        cell, (h, w) = decode_resized(f, SIZE, "crop", draft=False)
        assert cell.shape == (SIZE, SIZE, 3) and cell.dtype == np.uint8
        assert (h, w) == Image.open(f).size[::-1]
        np.testing.assert_array_equal(cell, reference_cell(f, SIZE))


def test_decode_pad_keeps_whole_image(images):
    f = images.files[5]  # 70 x 35
    cell, _ = decode_resized(f, SIZE, "pad", draft=False)
    _, _, (top, left, h, w) = resized_geometry(70, 35, SIZE, "pad")
    assert (top, left, h, w) == (8, 0, 16, 32)
    assert cell[:top].max() == 0 and cell[top + h :].max() == 0
    ref = np.asarray(Image.open(f).convert("RGB").resize((32, 16), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(cell[top : top + h], ref)


@pytest.mark.parametrize("mode", ["RGB", "L", "CMYK"])
def test_draft_decoding_is_close(tmp_path, mode):
    """Reduced-scale JPEG decoding (8x smaller photo than the file) changes pixels only slightly."""
    rng = np.random.default_rng(0)
    smooth = Image.fromarray(rng.integers(0, 256, (20, 26, 3), dtype=np.uint8)).resize(
        (520, 400), Image.Resampling.BICUBIC
    )
    path = tmp_path / "photo.jpg"
    smooth.convert(mode).save(path, quality=92)
    fast, size = decode_resized(path, 48, draft=True)
    exact, _ = decode_resized(path, 48, draft=False)
    assert size == (400, 520) and fast.shape == exact.shape == (48, 48, 3)
    diff = np.abs(fast.astype(int) - exact.astype(int))
    assert diff.mean() < 3.0 and diff.max() < 32  # of 255

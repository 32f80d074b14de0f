"""Decoding one image into a square ``uint8`` cell: resize, then center-crop or pad.

The geometry (:func:`resized_geometry`) follows ``transforms.Resize(size)`` and ``CenterCrop``
(``fit="crop"``) or resizes the long side and pads (``fit="pad"``), as described in
:mod:`dmlbook.data.cache.image_cache`, which decodes every image of a split once with
:func:`decode_resized`. Tested in ``tests/data/cache/test_image_decode.py`` against a PIL reference.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["FITS", "decode_resized", "resized_geometry"]

#: How an image becomes a square: ``"crop"`` (short side = size, center crop) or ``"pad"``.
FITS = ("crop", "pad")


def resized_geometry(
    width: int, height: int, size: int, fit: str = "crop"
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """Where an image of ``width x height`` lands in a ``size x size`` cache cell.

    Returns
    -------
    resized : (int, int)
        ``(width, height)`` after the resize. ``fit="crop"``: short side ``size``, long side
        ``int(size * long / short)`` (torchvision's ``Resize(size)``). ``fit="pad"``: long side
        ``size``, short side ``max(1, int(size * short / long))``.
    offset : (int, int)
        ``(top, left)`` of the resized image in the cell; negative for ``"crop"`` (the part cut
        off; torchvision's ``CenterCrop`` rounding ``int(round((h - size) / 2))``).
    region : (int, int, int, int)
        ``(top, left, height, width)`` of the cell that holds image pixels: the whole cell for
        ``"crop"``, the unpadded rectangle for ``"pad"``.
    """
    if fit not in FITS:
        raise ValueError(f"fit must be one of {', '.join(FITS)}, got {fit!r}.")
    short, long = min(width, height), max(width, height)
    if fit == "crop":
        new_short, new_long = size, int(size * long / short)
    else:
        new_short, new_long = max(1, int(size * short / long)), size
    new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
    if fit == "crop":
        top, left = -int(round((new_h - size) / 2.0)), -int(round((new_w - size) / 2.0))
        return (new_w, new_h), (top, left), (0, 0, size, size)
    top, left = (size - new_h) // 2, (size - new_w) // 2
    return (new_w, new_h), (top, left), (top, left, new_h, new_w)


def decode_resized(
    path: str | os.PathLike[str], size: int, fit: str = "crop", draft: bool = True
) -> tuple[np.ndarray, tuple[int, int]]:
    """Decode one image into a ``size x size x 3`` ``uint8`` RGB cell (see the module notes).

    Parameters
    ----------
    path : path
        Image file (any format PIL reads; grey, CMYK, palette images are converted to RGB).
    size : int
        Cell side.
    fit : {"crop", "pad"}
    draft : bool
        Let PIL decode a JPEG at a reduced scale (at least the target size) first.

    Returns
    -------
    cell : ndarray of shape (size, size, 3), uint8
    original_size : (int, int)
        ``(height, width)`` of the file.

    Raises
    ------
    OSError, ValueError, PIL.UnidentifiedImageError
        Whatever PIL raises for an unreadable, truncated or corrupt file.
    """
    from PIL import Image

    with Image.open(path) as img:
        width, height = img.size
        (new_w, new_h), (top, left), _ = resized_geometry(width, height, size, fit)
        if draft and img.format == "JPEG":
            img.draft("RGB", (new_w, new_h))
        rgb = img.convert("RGB")
    if rgb.size != (new_w, new_h):
        rgb = rgb.resize((new_w, new_h), Image.Resampling.BILINEAR)
    arr = np.asarray(rgb)
    cell = np.zeros((size, size, 3), dtype=np.uint8)
    if fit == "crop":
        cell[:] = arr[-top : -top + size, -left : -left + size]
    else:
        cell[top : top + new_h, left : left + new_w] = arr
    return cell, (height, width)

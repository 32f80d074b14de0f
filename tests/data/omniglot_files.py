"""Omniglot's official layout written small, and an independent reference of its preprocessing.

Zip files and folders in the release's layout (``<set>/<Alphabet>/characterNN/<id>_<drawer>.png``
and ``runNN/...``), with random one-bit 105 x 105 drawings. Expected images come from an
independent area-average reference (:func:`box_reference`), not from
:mod:`dmlbook.data.handwritten.omniglot_layout`. Shared by ``test_omniglot.py`` and
``test_omniglot_layout.py``; the ``small_layout`` fixture is in ``tests/data/conftest.py``.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image


def box_reference(bits: np.ndarray, size: int) -> np.ndarray:
    """Box filter of ``1 - bits`` (ink = 1) onto a ``size x size`` grid, scaled to 0..255.

    Output pixel ``i`` covers input coordinates ``(i s, (i + 1) s]`` with ``s = n / size``; it is
    the mean of the input pixels whose centres ``j + 0.5`` fall in that interval.
    """
    n = bits.shape[0]
    scale = n / size
    centres = np.arange(n) + 0.5
    weights = np.stack(
        [(centres > i * scale) & (centres <= (i + 1) * scale) for i in range(size)]
    ).astype(np.float64)
    weights /= weights.sum(axis=1, keepdims=True)
    ink = 1.0 - bits.astype(np.float64)
    return 255.0 * weights @ ink @ weights.T


def drawing(rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """A random one-bit 105 x 105 PNG (mostly white, like Omniglot) and its pixels."""
    bits = rng.random((105, 105)) > 0.1
    buffer = io.BytesIO()
    Image.fromarray(bits).convert("1").save(buffer, format="PNG")
    return buffer.getvalue(), bits


def character_set(
    seed: int, alphabets: dict[str, int], drawers: int = 3
) -> dict[str, tuple[bytes, np.ndarray]]:
    """``{"<Alphabet>/characterNN/<id>_<drawer>.png": (png, bits)}``."""
    rng = np.random.default_rng(seed)
    files = {}
    for a, (alphabet, count) in enumerate(sorted(alphabets.items())):
        for c in range(1, count + 1):
            for d in range(1, drawers + 1):
                files[f"{alphabet}/character{c:02d}/{a:02d}{c:02d}_{d:02d}.png"] = drawing(rng)
    return files


def write_zip(
    path: Path, top: str, files: dict[str, bytes], order: list[str] | None = None
) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{top}/", b"")
        for name in order or list(files):
            zf.writestr(f"{top}/{name}", files[name])
    return path


def runs_files(seed: int, runs: int = 2, ways: int = 3) -> tuple[dict[str, bytes], np.ndarray]:
    rng = np.random.default_rng(seed)
    files, answers = {}, np.zeros((runs, ways), dtype=np.int64)
    for r in range(1, runs + 1):
        perm = rng.permutation(ways)
        lines = []
        for i in range(1, ways + 1):
            files[f"run{r:02d}/training/class{i:02d}.png"] = drawing(rng)[0]
            files[f"run{r:02d}/test/item{i:02d}.png"] = drawing(rng)[0]
            lines.append(
                f"run{r:02d}/test/item{i:02d}.png run{r:02d}/training/class{perm[i - 1] + 1:02d}.png"
            )
            answers[r - 1, i - 1] = perm[i - 1]
        files[f"run{r:02d}/class_labels.txt"] = ("\n".join(lines) + "\n").encode()
    return files, answers


def small_sets(root: Path) -> dict:
    """Two small sets (sharing the alphabet 'Latin') and two 3-way runs, as zip files."""
    one = character_set(0, {"Alpha": 2, "Latin": 1})
    two = character_set(1, {"Beta": 2, "Latin": 1})
    runs, answers = runs_files(2)
    with zipfile.ZipFile(root / "all_runs.zip", "w") as zf:
        for name, data in runs.items():
            zf.writestr(name, data)
    return {
        "root": root,
        "one": one,
        "two": two,
        "answers": answers,
        "small1": write_zip(
            root / "images_background_small1.zip",
            "images_background_small1",
            {k: v[0] for k, v in one.items()},
        ),
        "small2": write_zip(
            root / "images_background_small2.zip",
            "images_background_small2",
            {k: v[0] for k, v in two.items()},
        ),
        "runs": root / "all_runs.zip",
    }

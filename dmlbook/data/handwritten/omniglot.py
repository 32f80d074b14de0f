"""Omniglot: real handwritten characters, shipped with ``dmlbook`` and read from the full release.

Omniglot (Lake, Salakhutdinov and Tenenbaum 2015, "Human-level concept learning through
probabilistic program induction", Science 350(6266); MIT licence, see ``OMNIGLOT_LICENSE`` beside
this file) holds 1,623 characters of 50 alphabets, each drawn once by 20 people. Two loaders:

``load_dataset("omniglot", split)`` (:func:`load`)
    The compact copy inside the package (``omniglot28.npz``, 0.5 MB; nothing is downloaded):
    the two "small background" sets of the release, 28 x 28. Zero-shot split: ``train`` is
    ``images_background_small1`` (5 alphabets, 136 characters, 2,720 drawings), ``test`` is
    ``images_background_small2`` less the two alphabets it shares with small set 1 (Greek and
    Latin, the same drawings in both): 3 alphabets, 106 characters, 2,120 drawings. The file
    also holds the 20 official runs of the 20-way one-shot task (:func:`one_shot_runs`, scored by
    :func:`dmlbook.evaluate.oneshot.one_shot_error`). ``tools/build_omniglot.py`` rebuilds it byte for
    byte from the three zip files; :data:`SHA256` is its checksum.
``load_dataset("omniglot_full", split)`` (:func:`load_full`)
    The full release: ``train`` = ``images_background`` (30 alphabets, 964 characters, 19,280
    drawings), ``test`` = ``images_evaluation`` (20 alphabets, 659 characters, 13,180), read
    from ``<root>/images_background.zip`` (or the extracted ``<root>/images_background/``) and
    downloaded there with ``download=True``.

Both return an :class:`~dmlbook.data.EmbeddedDataset` of ``(N, 1, size, size)`` float images in
``[0, 1]`` with ink = 1 and background = 0 (:func:`dmlbook.data.handwritten.omniglot_layout.preprocess`);
``class_names[label]`` is ``"<set>/<Alphabet>/characterNN"``. Chapters 1 and 9 train on it;
tests in ``tests/data/handwritten/test_omniglot.py``.
"""

from __future__ import annotations

import hashlib
import io
import os
import urllib.error
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ...core.validation import is_integer
from ..base.dataset import EmbeddedDataset
from ..base.errors import DownloadError
from ..benchmarks.benchmark import data_root
from ..fetch.transfer import ChecksumError
from ..fetch.transfer import download as fetch
from .omniglot_layout import (
    COMPACT_SIZE,
    DamagedSetError,
    alphabets,
    drop_alphabets,
    list_characters,
    read_characters,
)

__all__ = [
    "FULL_SETS",
    "FULL_URLS",
    "FULL_MD5",
    "FULL_CLASSES",
    "SHA256",
    "OneShotRuns",
    "verify_compact",
    "load",
    "load_full",
    "one_shot_runs",
]

#: Folder of the full release under ``$DMLBOOK_DATA`` (also what ``dmlbook --data`` looks for).
FOLDER = "omniglot"
#: File name of the compact copy inside ``dmlbook/data``.
DATA_FILE = "omniglot28.npz"
#: sha256 of the shipped ``omniglot28.npz`` (printed by ``tools/build_omniglot.py``).
SHA256 = "ef9d719d781ec4acf8deaa832b0a224987cfd655d648fb6d27e2c62b9da5c500"
#: The two sets of the full release, by split.
FULL_SETS = {"train": "images_background", "test": "images_evaluation"}
#: Where the full release is published (the ``python/`` folder of ``brendenlake/omniglot``).
FULL_URLS = {
    name: f"https://raw.githubusercontent.com/brendenlake/omniglot/master/python/{name}.zip"
    for name in FULL_SETS.values()
}
#: md5 of the two zip files as published with ``torchvision.datasets.Omniglot`` (its
#: ``zips_md5``). They could not be recomputed where this package was written (no internet);
#: :func:`load_full` checks every download against them, so a mismatch is reported, not used.
FULL_MD5 = {
    "images_background": "68d2efa1b9178cc56df9314c21c6e718",
    "images_evaluation": "6b91aef0f799c5bb55b94e3f2daec811",
}
#: Characters per set of the full release.
FULL_CLASSES = {"images_background": 964, "images_evaluation": 659}
_SPLITS = ("train", "test")
_LARGER = "for larger images load the full release: load_dataset('omniglot_full', ...)."


@dataclass(frozen=True)
class OneShotRuns:
    """The runs of Lake et al.'s 20-way one-shot task.

    Attributes
    ----------
    train : Tensor of shape (R, C, 1, size, size)
        ``train[r, c]``: the one training drawing of class ``c`` in run ``r``.
    test : Tensor of shape (R, Q, 1, size, size)
        ``test[r, q]``: test drawing ``q`` of run ``r`` (by another drawer).
    answers : Tensor of shape (R, Q), int64
        ``answers[r, q]``: the index ``c`` of the training drawing of the same character.
    """

    train: torch.Tensor
    test: torch.Tensor
    answers: torch.Tensor

    @property
    def num_runs(self) -> int:
        """``R``, 20 for the official runs."""
        return int(self.answers.shape[0])


def _check_split(split: str, name: str) -> None:
    if split not in _SPLITS:
        raise ValueError(
            f"Unknown split {split!r} for data set {name!r}. Valid splits: 'train', 'test'."
        )


def _check_size(image_size: int, largest: int, hint: str) -> None:
    if not is_integer(image_size) or image_size < 1:
        raise ValueError(f"image_size must be a positive int (e.g. 28 or 14), got {image_size!r}.")
    if image_size > largest:
        raise ValueError(f"image_size={image_size} is larger than the {largest} px stored; {hint}")


def _as_float(images: np.ndarray, image_size: int) -> torch.Tensor:
    """uint8 ``(..., s, s)`` -> float32 ``(..., 1, image_size, image_size)`` in ``[0, 1]``."""
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    lead = x.shape[:-2]
    x = x.reshape(-1, 1, *x.shape[-2:])
    if x.shape[-1] != image_size:
        x = F.interpolate(x, size=(image_size, image_size), mode="area")
    return x.reshape(*lead, 1, image_size, image_size).contiguous()


def _compact_file() -> Any:
    """The shipped file, as :mod:`importlib.resources` finds it in the installed package."""
    return resources.files("dmlbook.data").joinpath(DATA_FILE)


def _restore(path: object) -> str:
    return (
        f"Restore {path}: reinstall dmlbook (pip install --force-reinstall dmlbook), or rebuild "
        "it with `python tools/build_omniglot.py DIR` from the Omniglot zip files."
    )


def _compact_bytes() -> tuple[bytes, str]:
    """The shipped file's bytes, checked against :data:`SHA256`, and its path (for messages).

    Hashing the 0.5 MB takes 1.4 ms (measured on a busy 2-core machine, where reading the arrays
    takes 55 ms); a file truncated, emptied or changed by a single bit is refused in one line
    here instead of failing inside :mod:`numpy`'s reader.
    """
    with resources.as_file(_compact_file()) as path:
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} is missing from the installed package. {_restore(path)}"
            )
        data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        what = "empty" if not data else f"{len(data):,} bytes, sha256 {digest[:16]}..."
        raise ChecksumError(
            f"{path} is damaged ({what}; the shipped copy has sha256 {SHA256[:16]}...: "
            f"truncated, emptied or modified). {_restore(path)}"
        )
    return data, str(path)


def _compact() -> dict[str, np.ndarray]:
    """The arrays of the shipped file (read from the installed package, digest checked)."""
    data, _ = _compact_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        return {key: arrays[key] for key in arrays.files}


def verify_compact() -> str:
    """sha256 of the shipped file; ``ChecksumError`` if it differs from :data:`SHA256`.

    Every load checks it too (:func:`load`, :func:`one_shot_runs`).
    """
    return hashlib.sha256(_compact_bytes()[0]).hexdigest()


def load(split: str = "train", *, image_size: int = COMPACT_SIZE) -> EmbeddedDataset:
    """The shipped Omniglot copy: ``train`` = small set 1, ``test`` = small set 2 (zero-shot).

    Parameters
    ----------
    split : {"train", "test"}
        ``train``: 136 characters of 5 alphabets (Balinese, Early Aramaic, Greek, Korean,
        Latin), 20 drawings each; ``test``: 106 characters of 3 other alphabets (Japanese
        (katakana), Sanskrit, Tagalog).
    image_size : int
        Side of the returned images, at most 28 (the stored size); a smaller one is an area
        average (e.g. 14 for a quicker CNN).

    Returns
    -------
    EmbeddedDataset
        ``inputs`` float32 ``(N, 1, image_size, image_size)``, ink = 1; ``labels`` 0-135
        (train) and 136-241 (test); ``class_names`` for all 242 characters.
    """
    _check_split(split, "omniglot")
    _check_size(image_size, COMPACT_SIZE, _LARGER)
    data = _compact()
    return EmbeddedDataset(
        inputs=_as_float(data[f"{split}_images"], image_size),
        labels=torch.from_numpy(data[f"{split}_labels"]),
        name="omniglot",
        split=split,
        class_names=[str(n) for n in data["class_names"]],
    )


def one_shot_runs(*, image_size: int = COMPACT_SIZE) -> OneShotRuns:
    """The 20 official runs of the 20-way one-shot task (evaluation alphabets), from the copy.

    Lake et al. (2015, the one-shot classification task): in each run, 20 characters of one evaluation
    alphabet have one training drawing each, and 20 drawings of the same characters by other
    people are to be classified. Their characters appear in neither split of :func:`load`.
    """
    _check_size(image_size, COMPACT_SIZE, "the runs ship at 28 x 28 only.")
    data = _compact()
    return OneShotRuns(
        train=_as_float(data["runs_train"], image_size),
        test=_as_float(data["runs_test"], image_size),
        answers=torch.from_numpy(data["runs_answers"]),
    )


def load_full(
    split: str = "train",
    *,
    root: str | os.PathLike[str] | None = None,
    image_size: int = COMPACT_SIZE,
    download: bool = False,
    sets: tuple[str, str] = ("images_background", "images_evaluation"),
) -> EmbeddedDataset:
    """The full Omniglot release: ``train`` = background (964 characters), ``test`` = evaluation.

    Parameters
    ----------
    split : {"train", "test"}
    root : path, optional
        Folder holding ``images_background.zip`` / ``images_evaluation.zip`` or the extracted
        folders of the same names (an extracted folder is preferred). Default
        ``$DMLBOOK_DATA/omniglot``.
    image_size : int
        Side of the images, at most 105 (the 105 x 105 drawings are box-filtered to it).
    download : bool
        Download the missing zip file from :data:`FULL_URLS` into ``root`` and check its md5
        (:data:`FULL_MD5`) first.
    sets : (str, str)
        Names of the train and test sets; ``("images_background_small1",
        "images_background_small2")`` reads the small sets, which share the layout.

    Returns
    -------
    EmbeddedDataset
        As :func:`load`: labels of the test set continue after the train classes (964 for the
        full release), and ``class_names`` lists the train classes first. Alphabets of the test
        set that are also in the train set are left out of it (none in the full release; Greek
        and Latin for the two small sets), so the splits never share a class.

    Raises
    ------
    FileNotFoundError
        If neither the folder nor the zip file is there (the message says how to get it).
    ValueError
        If an official set (``images_background``, ``images_evaluation``) does not hold its 964
        or 659 characters.
    ChecksumError
        If a downloaded zip file does not have the published md5.
    DamagedSetError
        (a ``ValueError``) If the zip file is damaged (a member fails its CRC-32) or a drawing
        does not decode: one line naming the file and how to fetch the set again.
    """
    _check_split(split, "omniglot_full")
    _check_size(image_size, 105, "the drawings are 105 x 105.")
    if not (
        isinstance(download, bool) and len(sets) == 2 and all(isinstance(s, str) for s in sets)
    ):
        raise TypeError(
            f"download must be True or False and sets two set names, got {download!r}, {sets!r}."
        )
    folder = data_root(FOLDER, root, dataset="omniglot_full")
    name = sets[_SPLITS.index(split)]
    source = _locate(folder, name, split, download)
    chars = _read(read_characters, source, name, split, image_size)
    expected = FULL_CLASSES.get(name)
    if expected is not None and len(chars.class_names) != expected:
        raise ValueError(
            f"{source} holds {len(chars.class_names)} characters, the release's {name} has "
            f"{expected}: the copy is partial or not the official one. Delete it and load with "
            "download=True, or pass sets=(...) with other set names to read it as it is."
        )
    offset, train_names = 0, []
    if split == "test":
        train_source = _locate(folder, sets[0], "train", download)
        train_classes = _read(list_characters, train_source, sets[0], "train")
        chars = drop_alphabets(chars, alphabets(train_classes))
        train_names = [f"{sets[0]}/{n}" for n in train_classes]
        offset = len(train_names)
    names = train_names + [f"{name}/{n}" for n in chars.class_names]
    return EmbeddedDataset(
        inputs=_as_float(chars.images, image_size),
        labels=torch.from_numpy(chars.labels + offset),
        name="omniglot_full",
        split=split,
        class_names=names,
    )


def _read(reader: Any, source: Path, name: str, split: str, *args: Any) -> Any:
    """``reader(source, *args)``; a damaged copy's one line says how to get the set again."""
    try:
        return reader(source, *args)
    except DamagedSetError as err:
        how = (
            f"load_dataset('omniglot_full', {split!r}, download=True) downloads it (md5 "
            f"{FULL_MD5[name]}), or get it from "
            if name in FULL_URLS
            else "get it from "
        )
        raise DamagedSetError(
            f"{err} Delete {source} and fetch {name}.zip again: {how}"
            "https://github.com/brendenlake/omniglot (python/ folder)."
        ) from None


def _locate(folder: Path, name: str, split: str, download: bool) -> Path:
    """The extracted folder ``<folder>/<name>/`` or else the zip file, downloaded if allowed."""
    if (folder / name).is_dir():
        return folder / name
    source = folder / f"{name}.zip"
    if source.is_file():
        return source
    if not download or name not in FULL_URLS:
        how = (
            f"load_dataset('omniglot_full', {split!r}, download=True)"
            if name in FULL_URLS
            else "copying it there"
        )
        raise FileNotFoundError(
            f"Omniglot set {name!r} not found: neither {folder / name}/ nor {source}. Get it "
            f"with {how}, or from https://github.com/brendenlake/omniglot (python/ folder)."
        )
    try:
        return fetch(FULL_URLS[name], source, md5=FULL_MD5[name])
    except (OSError, urllib.error.URLError) as err:
        if isinstance(err, ChecksumError):
            raise
        reason = " ".join(str(getattr(err, "reason", err)).split())
        raise DownloadError(
            f"Could not download {FULL_URLS[name]} ({reason}). Offline? Download {name}.zip by "
            f"hand (md5 {FULL_MD5[name]}) into {folder}, or extract it there as {folder / name}/."
        ) from err

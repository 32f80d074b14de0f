"""Read Omniglot's official file layout and write the compact copy that ships with ``dmlbook``.

The public Omniglot release (Lake, Salakhutdinov and Tenenbaum 2015, Science 350(6266);
repository ``brendenlake/omniglot``, MIT licence) stores every character as 20 PNG drawings of
105 x 105 one-bit pixels (white background, black strokes)::

    images_background/<Alphabet>/characterNN/<id>_<drawer>.png      (964 characters)
    images_evaluation/<Alphabet>/characterNN/<id>_<drawer>.png       (659 characters)
    images_background_small1/...  images_background_small2/...      (136 and 156 characters)

and the 20 runs of the 20-way one-shot task as ``runNN/training/classMM.png`` (one drawing of
each of 20 characters), ``runNN/test/itemMM.png`` (20 other drawings) and
``runNN/class_labels.txt``, one line ``runNN/test/itemMM.png runNN/training/classKK.png`` per
test item. Each set can be read from its zip file or from the extracted folder.

:func:`preprocess` turns one drawing into the array every loader uses: strokes are made bright
(ink = 255, background = 0) and the image is reduced to ``size x size`` with Pillow's box filter
(each output pixel is the mean of the input pixels whose centres fall inside it), so a 28 x 28
image keeps the stroke coverage as grey levels. :func:`write_npz` writes arrays into an ``.npz`` file that is the same,
byte for byte, whenever the arrays are: members in a fixed order, a fixed zip date, fixed
attributes and compression level. :func:`build_compact` uses both to build the copy shipped as
``dmlbook/data/omniglot28.npz`` (``tools/build_omniglot.py`` is its command line). Tests:
``tests/data/handwritten/test_omniglot_layout.py``.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ...core.validation import is_integer

__all__ = [
    "CharacterSet",
    "DamagedSetError",
    "RawRuns",
    "alphabets",
    "build_compact",
    "drop_alphabets",
    "list_characters",
    "preprocess",
    "read_characters",
    "read_runs",
    "write_npz",
]

#: Side of the images in the compact copy (as in Koch et al. 2015 and Vinyals et al. 2016).
COMPACT_SIZE = 28
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip file can hold
_PNG = re.compile(r"^(?P<alphabet>[^/]+)/(?P<character>character\d+)/(?P<file>[^/]+\.png)$")
_LABEL_LINE = re.compile(r"^(\S+/test/(item\d+)\.png)\s+(\S+/training/(class\d+)\.png)$")


class DamagedSetError(ValueError):
    """A file of an Omniglot set (its zip file, a member, an extracted drawing) cannot be read: a
    broken download or copy. The message names the file; :func:`dmlbook.data.handwritten.omniglot.load_full`
    adds how to fetch the set again."""


@dataclass(frozen=True)
class CharacterSet:
    """The drawings of one Omniglot set, preprocessed.

    Attributes
    ----------
    images : ndarray of uint8, shape (N, size, size)
        Ink = 255, background = 0; characters in the order of ``class_names``, drawings of one
        character in file-name order.
    labels : ndarray of int64, shape (N,)
        Index into ``class_names`` (0 .. C-1).
    class_names : list of str
        ``"<Alphabet>/characterNN"``, sorted.
    """

    images: np.ndarray
    labels: np.ndarray
    class_names: list[str]


@dataclass(frozen=True)
class RawRuns:
    """The official one-shot runs, preprocessed.

    Attributes
    ----------
    train, test : ndarray of uint8, shape (R, 20, size, size)
        ``train[r, c]`` is ``runRR/training/class{c+1:02d}.png``; ``test[r, q]`` is
        ``runRR/test/item{q+1:02d}.png``.
    answers : ndarray of int64, shape (R, 20)
        ``answers[r, q]``: index into ``train[r]`` of the class of test item ``q``
        (from ``class_labels.txt``).
    """

    train: np.ndarray
    test: np.ndarray
    answers: np.ndarray


def preprocess(png: bytes, size: int = COMPACT_SIZE) -> np.ndarray:
    """One Omniglot drawing as a ``(size, size)`` uint8 array, ink = 255.

    Parameters
    ----------
    png : bytes
        The PNG file's content (any mode Pillow reads; Omniglot's are one-bit).
    size : int
        Output side; the 105 x 105 drawing is reduced with ``Image.Resampling.BOX``.
    """
    if not is_integer(size) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}.")
    with Image.open(io.BytesIO(png)) as im:
        grey = np.asarray(im.convert("L"), dtype=np.uint8)
    ink = Image.fromarray(255 - grey)
    if ink.size != (size, size):
        ink = ink.resize((size, size), Image.Resampling.BOX)
    return np.asarray(ink, dtype=np.uint8)


def _open_zip(source: Path) -> zipfile.ZipFile:
    """``source`` opened as a zip file; :class:`DamagedSetError` if it is not one (any more)."""
    if not zipfile.is_zipfile(source):
        raise DamagedSetError(
            f"{source} is neither a folder nor a readable zip file (empty, truncated or "
            "damaged: a broken download or copy)."
        )
    return zipfile.ZipFile(source)


def _read_member(zf: zipfile.ZipFile, source: Path, name: str) -> bytes:
    """The bytes of member ``name``, checked against its CRC-32 by :mod:`zipfile`."""
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, zlib.error, EOFError) as err:
        raise DamagedSetError(
            f"{source} is damaged: its member {name} does not read back ({err}), a broken "
            "download or copy."
        ) from None


def _decoded(png: bytes, size: int, where: str) -> np.ndarray:
    """:func:`preprocess` of one file, whose name ``where`` any decoding error names."""
    try:
        return preprocess(png, size)
    except Exception as err:  # Pillow raises OSError, SyntaxError, ValueError ... for bad data
        raise DamagedSetError(
            f"{where} is not a readable PNG drawing ({type(err).__name__}: {err}), a broken "
            "download or copy."
        ) from None


def _members(source: Path) -> Iterator[tuple[str, bytes]]:
    """``(path relative to the set's top folder, bytes)`` for every file of a zip or folder."""
    if source.is_dir():
        for path in sorted(source.rglob("*")):
            if path.is_file():
                yield path.relative_to(source).as_posix(), path.read_bytes()
        return
    with _open_zip(source) as zf:
        names = sorted(n for n in zf.namelist() if not n.endswith("/"))
        tops = {n.split("/", 1)[0] for n in names if "/" in n}
        if len(tops) != 1:
            raise ValueError(
                f"{source} should hold one top folder (e.g. 'images_background/'), found "
                f"{sorted(tops)[:5] or 'none'}."
            )
        for name in names:
            if name.startswith("__MACOSX/") or name.rsplit("/", 1)[-1].startswith("."):
                continue
            yield name.split("/", 1)[1], _read_member(zf, source, name)


def list_characters(source: str | os.PathLike[str]) -> list[str]:
    """Sorted ``"<Alphabet>/characterNN"`` names of a set, without decoding any image.

    ``source`` as for :func:`read_characters`; ``FileNotFoundError`` if it does not exist.
    """
    source = Path(source).expanduser()
    if not source.exists():
        raise FileNotFoundError(f"Omniglot set {source} does not exist.")
    if source.is_dir():
        rels = [p.relative_to(source).as_posix() for p in source.glob("*/character*/*.png")]
    else:
        with _open_zip(source) as zf:
            rels = [n.split("/", 1)[1] for n in zf.namelist() if n.count("/") == 3]
    return sorted({m["alphabet"] + "/" + m["character"] for r in rels if (m := _PNG.match(r))})


def read_characters(source: str | os.PathLike[str], size: int = COMPACT_SIZE) -> CharacterSet:
    """Read one set (``images_background``, ``images_evaluation``, a small set) of the layout.

    Parameters
    ----------
    source : path
        The set's zip file (one top folder holding the alphabets) or its extracted folder (the
        one whose sub-folders are the alphabets).
    size : int
        Side of the preprocessed images (see :func:`preprocess`).

    Raises
    ------
    FileNotFoundError
        If ``source`` does not exist.
    ValueError
        If it holds no ``<Alphabet>/characterNN/*.png`` drawing, or a file elsewhere.
    DamagedSetError
        (a ``ValueError``) If the zip file or a drawing cannot be read (a member fails its
        CRC-32, a PNG does not decode); the message names the file.
    """
    source = Path(source).expanduser()
    if not source.exists():
        raise FileNotFoundError(f"Omniglot set {source} does not exist.")
    drawings: dict[str, list[tuple[str, bytes]]] = {}
    for rel, data in _members(source):
        match = _PNG.match(rel)
        if match is None:
            if rel.rsplit("/", 1)[-1].startswith(".") or "__MACOSX" in rel:
                continue
            raise ValueError(
                f"{source}: {rel!r} is not '<Alphabet>/characterNN/<id>_<drawer>.png'; pass the "
                "folder whose sub-folders are the alphabets (or the official zip file)."
            )
        name = f"{match['alphabet']}/{match['character']}"
        drawings.setdefault(name, []).append((match["file"], data))
    if not drawings:
        raise ValueError(f"{source} holds no Omniglot drawing ('<Alphabet>/characterNN/*.png').")
    class_names = sorted(drawings)
    images, labels = [], []
    for label, name in enumerate(class_names):
        for file, data in sorted(drawings[name]):
            images.append(_decoded(data, size, f"{source}: {name}/{file}"))
            labels.append(label)
    return CharacterSet(
        images=np.stack(images), labels=np.asarray(labels, dtype=np.int64), class_names=class_names
    )


def read_runs(source: str | os.PathLike[str], size: int = COMPACT_SIZE) -> RawRuns:
    """Read the one-shot runs (``all_runs.zip`` or its extracted folder of ``runNN/``).

    Raises
    ------
    ValueError
        If a run lacks ``class_labels.txt``, a listed image, or does not have as many training
        as test images; a :class:`DamagedSetError` if a file cannot be read.
    """
    source = Path(source).expanduser()
    if not source.exists():
        raise FileNotFoundError(f"Omniglot runs {source} do not exist.")
    files: dict[str, bytes] = {}
    if source.is_dir():
        for path in sorted(source.rglob("*")):
            if path.is_file():
                files[path.relative_to(source).as_posix()] = path.read_bytes()
    else:
        with _open_zip(source) as zf:
            names = sorted(n for n in zf.namelist() if not n.endswith("/"))
            files = {n: _read_member(zf, source, n) for n in names}
    runs = sorted({n.split("/", 1)[0] for n in files if re.match(r"^run\d+/", n)})
    if not runs:
        raise ValueError(f"{source} holds no 'runNN/' folder of the one-shot task.")
    train, test, answers = [], [], []
    for run in runs:
        labels_file = f"{run}/class_labels.txt"
        if labels_file not in files:
            raise ValueError(f"{source}: {labels_file} is missing.")
        classes = sorted(n for n in files if re.match(rf"^{run}/training/class\d+\.png$", n))
        items = sorted(n for n in files if re.match(rf"^{run}/test/item\d+\.png$", n))
        if not classes or len(classes) != len(items):
            raise ValueError(
                f"{source}: {run} has {len(classes)} training and {len(items)} test images; "
                "the task needs one test image per training image."
            )
        answer = {}
        for line in files[labels_file].decode("utf-8").splitlines():
            match = _LABEL_LINE.match(line.strip())
            if match is None:
                if line.strip():
                    raise ValueError(f"{source}: unreadable line {line!r} in {labels_file}.")
                continue
            answer[match[1]] = match[3]
        missing = [n for n in items if n not in answer]
        unknown = sorted(set(answer.values()) - set(classes))
        if missing or unknown:
            raise ValueError(
                f"{source}: {labels_file} does not list {missing[:3]} or names missing training "
                f"images {unknown[:3]}."
            )
        train.append(np.stack([_decoded(files[n], size, f"{source}: {n}") for n in classes]))
        test.append(np.stack([_decoded(files[n], size, f"{source}: {n}") for n in items]))
        answers.append([classes.index(answer[n]) for n in items])
    return RawRuns(
        train=np.stack(train), test=np.stack(test), answers=np.asarray(answers, dtype=np.int64)
    )


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``arrays`` to an ``.npz`` that depends on nothing but their content.

    ``numpy.savez_compressed`` stamps every member with the current time; here members are
    written in the given order, dated 1980-01-01, with fixed attributes and deflate level 9, so
    equal arrays give equal bytes (``numpy.load`` reads the file as usual). Object arrays are
    refused (they would need pickle to load).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for key, value in arrays.items():
            array = np.ascontiguousarray(value)
            if array.dtype.hasobject:
                raise TypeError(f"array {key!r} has dtype object; store strings as dtype 'U'.")
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # Unix, whatever system writes it
            zf.writestr(info, buffer.getvalue(), compresslevel=9)
    os.replace(tmp, path)
    return path


def build_compact(
    train_set: str | os.PathLike[str],
    test_set: str | os.PathLike[str],
    runs: str | os.PathLike[str],
    out: str | os.PathLike[str],
    size: int = COMPACT_SIZE,
) -> Path:
    """Build the compact copy: two character sets (train, test classes) and the one-shot runs.

    The two small sets of the release share two alphabets (Greek and Latin: the same 50
    characters, the same 1,000 drawings), so the test set keeps only the alphabets that are not
    in the train set (:func:`drop_alphabets`): the splits share no alphabet, let alone a class.

    The file holds ``train_images``/``test_images`` (uint8, ``(N, size, size)``),
    ``train_labels``/``test_labels`` (int64; test labels continue after the train classes),
    ``class_names`` (``"<set>/<Alphabet>/characterNN"``, indexed by label),
    ``runs_train``/``runs_test`` (uint8, ``(20, 20, size, size)``) and ``runs_answers``.

    Parameters
    ----------
    train_set, test_set : path
        ``images_background_small1.zip`` and ``images_background_small2.zip`` (or folders).
    runs : path
        ``all_runs.zip`` (or its folder).
    out : path
        The ``.npz`` to write (see :func:`write_npz`).
    size : int
        Image side.
    """
    train = read_characters(train_set, size)
    test = drop_alphabets(read_characters(test_set, size), alphabets(train.class_names))
    one_shot = read_runs(runs, size)
    names = [f"{_set_name(train_set)}/{n}" for n in train.class_names]
    names += [f"{_set_name(test_set)}/{n}" for n in test.class_names]
    return write_npz(
        out,
        {
            "train_images": train.images,
            "train_labels": train.labels,
            "test_images": test.images,
            "test_labels": test.labels + len(train.class_names),
            "class_names": np.asarray(names, dtype=np.str_),
            "runs_train": one_shot.train,
            "runs_test": one_shot.test,
            "runs_answers": one_shot.answers,
        },
    )


def alphabets(class_names: list[str]) -> set[str]:
    """The alphabets of ``"<Alphabet>/characterNN"`` class names."""
    return {name.split("/", 1)[0] for name in class_names}


def drop_alphabets(chars: CharacterSet, drop: set[str]) -> CharacterSet:
    """``chars`` without the characters of the alphabets in ``drop``, relabelled 0 .. C'-1."""
    keep = [i for i, name in enumerate(chars.class_names) if name.split("/", 1)[0] not in drop]
    if len(keep) == len(chars.class_names):
        return chars
    if not keep:
        raise ValueError(
            f"every alphabet of the test set is also in the train set ({sorted(drop)}); pick "
            "sets with different alphabets."
        )
    new_label = np.full(len(chars.class_names), -1, dtype=np.int64)
    new_label[keep] = np.arange(len(keep))
    rows = new_label[chars.labels] >= 0
    return CharacterSet(
        images=chars.images[rows],
        labels=new_label[chars.labels[rows]],
        class_names=[chars.class_names[i] for i in keep],
    )


def _set_name(source: str | os.PathLike[str]) -> str:
    """``images_background_small1`` for ``.../images_background_small1.zip`` or its folder."""
    name = Path(source).name
    return name[: -len(".zip")] if name.endswith(".zip") else name

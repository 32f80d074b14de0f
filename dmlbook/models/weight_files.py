"""Pretrained weight files: a manifest of full SHA-256 digests, checked downloads and cached copies.

The ImageNet weights the book's backbones start from are files of 45-100 MB fetched once and
cached under ``$TORCH_HOME/hub/checkpoints``. :data:`MANIFEST` records, for each file the package
knows by name, its full SHA-256 digest, its size and where it can be downloaded. Every file of
such a name is verified before it is loaded: a fresh download (a mismatch is deleted, and the next
source is tried), a copy already in the cache, and a local file given by path. A file under an
official name with other content (a partial download, weights saved there by hand) is refused
with the name of the file and what to do; to load other weights on purpose, give them another name.

Sources: the torchvision files' digests start with the 8 hex digits torchvision publishes in their
names, and were recorded, with their sizes, in several independent projects that verify these
files. The BN-Inception port (Cadene's ``pretrainedmodels``) has one public host, a university
server with long outages; its digest starts with the 9 hex digits published in its name and was
recorded by a third-party project that checks the file with ``sha256sum``; this package could not
download it here to check it a second time. No second public source with a checksum was found; set
``DMLBOOK_WEIGHTS_MIRROR`` to a folder or URL prefix holding the files under their names (a course
server, a cluster's shared folder) and it is tried first. Whatever the source, the digest decides.

Used by :func:`dmlbook.models.pretrained.fetch_state_dict`; tested in ``tests/models/test_weight_files.py``.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import urllib.parse
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "MANIFEST",
    "WeightFile",
    "cached_weights",
    "file_sha256",
    "read_torch_file",
    "verify_weights",
    "weights_problem",
]


@dataclass(frozen=True)
class WeightFile:
    """One known weight file.

    Attributes
    ----------
    name : str
        Its file name (as in the cache and in its URLs).
    sha256 : str
        Full SHA-256 digest, 64 lower-case hex digits.
    size : int or None
        Size in bytes, where recorded.
    sources : tuple of str
        URLs it can be downloaded from, tried in order.
    """

    name: str
    sha256: str
    size: int | None
    sources: tuple[str, ...]


MANIFEST: dict[str, WeightFile] = {
    w.name: w
    for w in (
        WeightFile(
            "resnet18-f37072fd.pth",
            "f37072fd47e89c5e827621c5baffa7500819f7896bbacec160b1a16c560e07ec",
            46_830_571,
            ("https://download.pytorch.org/models/resnet18-f37072fd.pth",),
        ),
        WeightFile(
            "resnet50-0676ba61.pth",
            "0676ba61b6795bbe1773cffd859882e5e297624d384b6993f7c9e683e722fb8a",
            102_530_333,
            ("https://download.pytorch.org/models/resnet50-0676ba61.pth",),
        ),
        WeightFile(
            "bn_inception-52deb4733.pth",
            "52deb473314542a5c2f87e9e6f26f4ca42fe863d15f986414dbae8c2dfdd2353",
            None,
            ("http://data.lip6.fr/cadene/pretrainedmodels/bn_inception-52deb4733.pth",),
        ),
    )
}

_HASH_PREFIX = re.compile(r"-([a-f0-9]{6,})\.")


def file_sha256(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in ``chunk_size`` pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            h.update(chunk)
    return h.hexdigest()


def weights_problem(path: str | os.PathLike[str], *, check_prefix: bool = False) -> str | None:
    """What is wrong with the file ``path`` given its name, or None.

    A name in :data:`MANIFEST` must have that entry's size and full SHA-256; with
    ``check_prefix``, another name carrying a hex digest (``name-0123abcd.pth``, torchvision's
    convention) must have a SHA-256 starting with it. Other names are not checked.
    """
    path = Path(path)
    known = MANIFEST.get(path.name)
    if known is not None:
        size = path.stat().st_size
        if known.size is not None and size != known.size:
            return f"is not the official {known.name} ({size:,} bytes, not {known.size:,})"
        digest = file_sha256(path)
        if digest != known.sha256:
            return f"is not the official {known.name} (sha256 {digest}, not {known.sha256})"
        return None
    match = _HASH_PREFIX.search(path.name)
    if check_prefix and match and not file_sha256(path).startswith(match[1]):
        return f"has a SHA-256 that does not start with {match[1]}, the digest its name carries"
    return None


def verify_weights(path: str | os.PathLike[str], *, check_prefix: bool = False) -> None:
    """Raise one ``ValueError`` naming ``path`` and the fix if :func:`weights_problem` finds one."""
    problem = weights_problem(path, check_prefix=check_prefix)
    if problem is not None:
        raise ValueError(
            f"{path} {problem}: a partial or damaged download, or other weights saved under its "
            "name. Delete it and run again to download it afresh; to load other weights on "
            "purpose, give the file another name."
        )


def _sources(url: str, name: str) -> list[str]:
    """The URLs to try for ``url``: the mirror first, then ``url``, then the manifest's others."""
    out = []
    mirror = os.environ.get("DMLBOOK_WEIGHTS_MIRROR", "").strip()
    if mirror:
        base = mirror if "://" in mirror else Path(mirror).expanduser().resolve().as_uri()
        out.append(f"{base.rstrip('/')}/{name}")
    known = MANIFEST.get(name)
    for source in (url, *(known.sources if known else ())):
        if source not in out:
            out.append(source)
    return out


def _one_line(err: BaseException) -> str:
    reason = getattr(err, "reason", None) or err
    return f"{type(err).__name__}: " + " ".join(str(reason).split())


def cached_weights(
    url: str,
    *,
    model_dir: str | os.PathLike[str] | None = None,
    check_hash: bool = False,
    progress: bool = True,
) -> Path:
    """The verified local copy of the weight file at ``url``, downloaded once into ``model_dir``.

    A copy already in ``model_dir`` is verified (:func:`verify_weights`) before it is returned.
    Otherwise each source (:envvar:`DMLBOOK_WEIGHTS_MIRROR`, ``url``, the manifest's other
    sources) is tried until one gives a file that verifies; a download that does not is deleted.

    Raises
    ------
    ValueError
        If the cached copy does not verify (the message says to delete it), or no source gives a
        verified file (each source's failure is listed, with what to do offline).
    """
    name = Path(urllib.parse.urlparse(url).path).name
    folder = Path(model_dir or Path(torch.hub.get_dir()) / "checkpoints").expanduser()
    path = folder / name
    if path.is_file():
        verify_weights(path, check_prefix=check_hash)
        return path
    folder.mkdir(parents=True, exist_ok=True)
    failures = []
    for source in _sources(url, name):
        try:
            torch.hub.download_url_to_file(source, str(path), hash_prefix=None, progress=progress)
        except (OSError, ValueError) as err:
            failures.append(f"{source}: {_one_line(err)}")
            continue
        problem = weights_problem(path, check_prefix=check_hash)
        if problem is None:
            return path
        path.unlink()
        failures.append(f"{source}: the file it gave {problem}, deleted")
    raise ValueError(
        f"could not download {name} ({'; '.join(failures)}). Without internet access, fetch the "
        f"file elsewhere and put it at {path} (its SHA-256 is checked), or pass its local path "
        "(config: model.pretrained=/path/to/file.pth)."
    )


def read_torch_file(path: str | os.PathLike[str], fix: str) -> object:
    """``torch.load(path, weights_only=True)`` on the CPU; every failure one ``ValueError``.

    The message names ``path``, says what is wrong in a few words (torch's own messages run to
    several lines and advise ``weights_only=False``, which would run code from the file) and ends
    with ``fix``. Shared by the weight files and the engine's checkpoints.

    ``torch.load`` checks a file's structure, not its numbers: a flipped bit inside a weight loads
    as a wrong weight. The file's own CRC-32 of each record (``torch.save`` writes a zip) is
    checked first, so such a file is refused as damaged.
    """
    try:
        _check_records(path)
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        if "Unsupported global" in text:
            raise ValueError(
                f"{path} holds more than tensors (code objects or custom classes); refusing to "
                "unpickle it (weights_only=True). Re-save it as a plain dict of tensors."
            ) from err
        why, cause = text.partition("WeightsUnpickler error:")[2] or text, err
    except Exception as err:  # truncated zip, a text file (KeyError), an empty file (EOFError)
        why, cause = str(err) or "the file ends early", err
    why = " ".join(why.split()).split(" Check the documentation")[0].split(". ")[0][:120]
    raise ValueError(
        f"{path} cannot be read ({type(cause).__name__}: {why}): it is truncated, damaged or not "
        f"a file written by torch.save. {fix}"
    ) from cause


def _check_records(path: str | os.PathLike[str]) -> None:
    """Raise ``zipfile.BadZipFile`` when a record of the zip at ``path`` fails its CRC-32; a file
    that is not a whole zip is left to ``torch.load`` (which names what is wrong with it)."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError):
        return
    if bad is not None:
        raise zipfile.BadZipFile(f"Bad CRC-32 for record {bad!r}")

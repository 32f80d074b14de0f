"""Download, verify and extract the benchmark archives.

``prepare("cub", data_dir)`` fetches the archives of a data set into ``<data_dir>/downloads/``,
checks their md5, and extracts them where the loaders look (``<data_dir>/CUB_200_2011`` ...).
The pieces are usable alone:

:func:`download`
    One URL to one file, resumable: bytes arrive in ``<file>.part``; a later call continues from
    its size with an HTTP ``Range`` request (``file://`` URLs seek). A server that ignores
    ``Range`` (status 200) restarts the download from zero. An interrupted or failed transfer
    keeps the ``.part`` file, so calling again resumes. When the transfer is complete the md5 is
    checked: a match renames ``.part`` to the file name; a mismatch **deletes** the ``.part``
    file (resuming a corrupt file can never fix it) and raises :class:`ChecksumError`; pass
    ``keep_bad=True`` to keep it as ``<file>.bad`` for inspection instead. A file already at the
    destination is verified and returned without downloading; if its md5 is wrong it is left
    alone (it was not written by this function) and :class:`ChecksumError` says to delete it.
:func:`extract`
    Safe, all-or-nothing extraction of tar and zip archives (:mod:`dmlbook.data.archive`).
:func:`file_md5`
    The md5 of a file, read in chunks.

Only CUB-200-2011 has a stable direct URL today. The original Cars-196 URLs at
``ai.stanford.edu/~jkrause`` are offline, SOP is served from Google Drive, and DeepFashion
In-Shop requires a manual download from its Google Drive folder. A file placed by hand in
``<data_dir>/downloads/`` under the expected name is verified and used by :func:`prepare`
without downloading, and a copy already extracted under ``data_dir`` (by hand, by a course, on a
cluster without internet) is left as it is (:func:`find_copy`). Offline, a failed download raises
:class:`~dmlbook.data.errors.DownloadError` with one line saying where to put the file instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from ..progress import progress_disabled
from . import cars, cub, inshop, sop
from .archive import extract
from .benchmark import Layout
from .errors import DownloadError, prepare_call
from .locations import datasets_folder

__all__ = [
    "ChecksumError",
    "DownloadError",
    "RESOURCES",
    "Resource",
    "download",
    "extract",
    "file_md5",
    "find_copy",
    "prepare",
]


class ChecksumError(ValueError):
    """A downloaded or existing file does not have the expected md5."""


@dataclass(frozen=True)
class Resource:
    """One file of a data set release.

    Attributes
    ----------
    url : str
        Where to fetch it.
    md5 : str or None
        Expected md5 (hex); ``None`` skips the check.
    filename : str
        Name under ``<data_dir>/downloads/``.
    subdir : str
        Folder under ``data_dir`` to extract (or copy) it into; ``""`` for ``data_dir`` itself.
    extract : bool
        Extract it (an archive) or copy it as is (e.g. ``cars_annos.mat``).
    """

    url: str
    md5: str | None
    filename: str
    subdir: str = ""
    extract: bool = True


#: Release files per data set (see the module notes for their availability).
RESOURCES: dict[str, tuple[Resource, ...]] = {
    "cub": (
        Resource(
            "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz",
            "97eceeb196236b17998738112f37df78",
            "CUB_200_2011.tgz",
        ),
    ),
    "cars": (
        Resource(
            "http://ai.stanford.edu/~jkrause/car196/car_ims.tgz",
            "d5c8f0aa497503f355e17dc7886c3f14",
            "car_ims.tgz",
            subdir="cars196",
        ),
        Resource(
            "http://ai.stanford.edu/~jkrause/car196/cars_annos.mat",
            "b407c6086d669747186bd1d764ff9dbc",
            "cars_annos.mat",
            subdir="cars196",
            extract=False,
        ),
    ),
    "sop": (
        Resource(
            "https://drive.usercontent.google.com/download?id=1TclrpQOF_ullUP99wk_gjGN8pKvtErG8"
            "&export=download&confirm=t",
            "7f73d41a2f44250d4779881525aea32e",
            "Stanford_Online_Products.zip",
        ),
    ),
    "inshop": (),
}

_MANUAL = {
    "inshop": (
        "DeepFashion In-Shop has no direct download: request it from "
        "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html (Google Drive), "
        "then put 'Eval/list_eval_partition.txt' and the extracted 'Img/img/...' under "
        "<data_dir>/InShop/."
    ),
}


#: How each benchmark's extracted copy is recognised (its loader's layout).
LAYOUTS: dict[str, Layout] = {m.LAYOUT.dataset: m.LAYOUT for m in (cub, cars, sop, inshop)}


def find_copy(name: str, data_dir: str | os.PathLike[str]) -> Path | None:
    """The folder of an extracted copy of benchmark ``name`` under ``data_dir``, or None.

    A copy is a folder (``data_dir`` itself, or ``data_dir/<folder>`` or an alias, e.g.
    ``CUB_200_2011``) holding the layout's list file (e.g. ``images.txt``): one extracted by hand,
    by a course or on a cluster counts as much as one :func:`prepare` extracted. Whether it is
    complete is for the loader to check.
    """
    key = str(name).strip().lower()
    if key not in LAYOUTS:
        raise ValueError(f"Unknown data set {name!r}; known: {', '.join(sorted(LAYOUTS))}.")
    return LAYOUTS[key].find(Path(data_dir).expanduser())


def _one_line(err: BaseException) -> str:
    """The cause of a failed transfer on one line (``HTTP error 404: Not Found``)."""
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP error {err.code}: {err.reason}"
    reason = getattr(err, "reason", None) or err
    return " ".join(str(reason).split())


def file_md5(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    """Hex md5 of a file, read in ``chunk_size`` pieces."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            h.update(chunk)
    return h.hexdigest()


def _open(url: str, offset: int, timeout: float) -> tuple[BinaryIO | None, int | None, int]:
    """``(stream, total size, start offset)``; ``stream`` is None when nothing is left to read."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = urllib.request.url2pathname(parsed.path)
        if parsed.netloc and parsed.netloc != "localhost":
            path = f"//{parsed.netloc}{path}"
        try:
            f = open(path, "rb")  # noqa: SIM115 - returned to the caller, closed there
        except OSError as err:
            raise FileNotFoundError(f"Cannot open {url} ({err}).") from err
        total = os.fstat(f.fileno()).st_size
        if offset > total:
            offset = 0
        if offset == total:
            f.close()
            return None, total, offset
        f.seek(offset)
        return f, total, offset
    headers = {"User-Agent": "dmlbook"}
    if offset and parsed.scheme in ("http", "https"):
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # range not satisfiable: the .part file is complete
            content_range = err.headers.get("Content-Range", "")
            total = content_range.rpartition("/")[2]
            err.close()
            if total.isdigit() and int(total) == offset:
                return None, offset, offset
            return _open(url, 0, timeout)  # the .part file is longer than the file: restart
        raise
    status = getattr(response, "status", 200)
    if offset and status == 206:
        content_range = response.headers.get("Content-Range", "")
        start = content_range.split(" ")[-1].split("-")[0]
        total = content_range.rpartition("/")[2]
        if start != str(offset):
            response.close()
            raise OSError(
                f"{url} answered a request for bytes {offset}- with range {content_range!r}."
            )
        return response, (int(total) if total.isdigit() else None), offset
    length = response.headers.get("Content-Length")
    return response, (int(length) if length and length.isdigit() else None), 0


def _checked_md5(md5: str | None) -> str | None:
    """``md5`` normalised to 32 lower-case hex digits (``None`` stays ``None``)."""
    if md5 is not None:
        md5 = md5.strip().lower()
        if len(md5) != 32 or any(c not in "0123456789abcdef" for c in md5):
            raise ValueError(f"md5 must be 32 hex digits, got {md5!r}.")
    return md5


def _already_there(dest: Path, md5: str | None) -> bool:
    """Whether ``dest`` exists with the expected content; a file with another md5 is an error."""
    if not dest.is_file():
        return False
    if md5 is None:
        return True
    got = file_md5(dest)
    if got == md5:
        return True
    raise ChecksumError(
        f"{dest} already exists with md5 {got}, expected {md5}; it was not written by this "
        "download, so it is left as is. Delete it to download it again."
    )


def _receive(
    stream: BinaryIO, part: Path, url: str, offset: int, chunk_size: int, bar: tqdm
) -> int:
    """Append ``stream`` to ``part`` (from ``offset``); the byte count of ``part`` at the end."""
    received = offset
    with stream, open(part, "ab" if offset else "wb") as f:
        while True:
            try:
                chunk = stream.read(chunk_size)
            except (OSError, ValueError) as err:  # incl. http.client.IncompleteRead
                raise OSError(
                    f"Download of {url} stopped after {received:,} bytes ({err}); "
                    f"{part} is kept: call again to resume."
                ) from err
            if not chunk:
                break
            f.write(chunk)
            received += len(chunk)
            bar.update(len(chunk))
    return received


def _refuse_if_corrupt(part: Path, dest: Path, url: str, md5: str, keep_bad: bool) -> None:
    """Raise :class:`ChecksumError` if ``part``'s md5 is not ``md5`` (keeping it as ``.bad``)."""
    got = file_md5(part)
    if got != md5:
        if keep_bad:
            bad = dest.with_name(dest.name + ".bad")
            os.replace(part, bad)
            kept = f"kept as {bad}"
        else:
            part.unlink()
            kept = "deleted"
        raise ChecksumError(
            f"{url} downloaded with md5 {got}, expected {md5}: the file is corrupt or not the "
            f"expected release, so it was refused ({kept}). Download again, or check the URL."
        )


def download(
    url: str,
    dest: str | os.PathLike[str],
    *,
    md5: str | None = None,
    resume: bool = True,
    keep_bad: bool = False,
    progress: bool | None = None,
    timeout: float = 60.0,
    chunk_size: int = 1 << 20,
) -> Path:
    """Download ``url`` to ``dest``, resumably, and check its md5.

    Parameters
    ----------
    url : str
        ``http``, ``https``, ``ftp`` or ``file`` URL (``Range`` resume for ``http(s)``; ``file``
        resumes by seeking; ``ftp`` restarts).
    dest : path
        Destination file; its folder is created. Bytes go to ``<dest>.part`` until verified.
    md5 : str, optional
        Expected hex md5; ``None`` accepts any content.
    resume : bool
        Continue an existing ``<dest>.part`` (default) instead of starting over.
    keep_bad : bool
        On a checksum mismatch keep the download as ``<dest>.bad`` instead of deleting it.
    progress : bool, optional
        Progress bar (bytes); default on unless ``TQDM_DISABLE`` is set.
    timeout : float
        Socket timeout in seconds.
    chunk_size : int
        Bytes per read.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ChecksumError
        If the downloaded (or already present) file's md5 differs from ``md5``.
    OSError
        If the transfer fails or ends early; ``<dest>.part`` is kept and a new call resumes.
    """
    dest = Path(dest).expanduser()
    md5 = _checked_md5(md5)
    if _already_there(dest, md5):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    if part.exists() and not resume:
        part.unlink()
    offset = part.stat().st_size if part.exists() else 0
    stream, total, offset = _open(url, offset, timeout)
    received = offset
    if stream is not None:
        bar = tqdm(
            total=total,
            initial=offset,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=dest.name,
            disable=progress_disabled(progress),
        )
        try:
            received = _receive(stream, part, url, offset, chunk_size, bar)
        finally:
            bar.close()
    if total is not None and received != total:
        raise OSError(
            f"Download of {url} ended after {received:,} of {total:,} bytes; {part} is kept: "
            "call again to resume."
        )
    if md5 is not None:
        _refuse_if_corrupt(part, dest, url, md5, keep_bad)
    os.replace(part, dest)
    return dest


def prepare(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    keep_archives: bool = True,
    progress: bool | None = None,
) -> Path:
    """Download (or find in ``<data_dir>/downloads/``), verify and extract a benchmark.

    Each archive is extracted once: a marker file ``downloads/<archive>.extracted`` records it.

    Parameters
    ----------
    name : {"cub", "cars", "sop", "inshop"}
    data_dir : path, optional
        Folder of all data sets; default ``$DMLBOOK_DATA``.
    keep_archives : bool
        Keep the verified archives after extraction (default) or delete them.
    progress : bool, optional
        Progress bars; default on unless ``TQDM_DISABLE`` is set.

    Nothing is downloaded for a data set already extracted under ``data_dir`` (by hand, by a
    course, on a cluster without internet: see :func:`find_copy`); the loaders check it.

    Returns
    -------
    Path
        ``data_dir``.

    Raises
    ------
    ValueError
        For an unknown name, a data set without a direct download and no copy (In-Shop: the
        message says what to do), or no ``data_dir``.
    FileNotFoundError
        If ``data_dir`` is not an existing folder (a typo must not start a download).
    DownloadError
        If a file cannot be fetched (offline, a moved URL): one line saying where to put the
        file or the extracted copy instead.
    """
    key = str(name).strip().lower()
    if key not in RESOURCES:
        raise ValueError(
            f"Unknown data set {name!r}; prepare() knows {', '.join(sorted(RESOURCES))}."
        )
    if data_dir is None:
        data_dir = datasets_folder()
        if data_dir is None:
            raise ValueError("Pass data_dir or set DMLBOOK_DATA to the folder for the data sets.")
    root = Path(data_dir).expanduser()
    if not root.is_dir():  # a typo must not start a download of gigabytes into a new folder
        raise FileNotFoundError(
            f"data_dir {str(data_dir)!r} is not a folder. Check the spelling; to download "
            f"{key} into a new folder, create it first (os.makedirs)."
        )
    if find_copy(key, root) is not None:
        return root  # already extracted: never download what is there
    if not RESOURCES[key]:
        raise ValueError(_MANUAL[key])
    downloads = root / "downloads"
    for res in RESOURCES[key]:
        archive = downloads / res.filename
        marker = downloads / f"{res.filename}.extracted"
        target = root / res.subdir if res.subdir else root
        if marker.is_file():
            continue
        try:
            download(res.url, archive, md5=res.md5, progress=progress)
        except (OSError, urllib.error.URLError) as err:
            raise DownloadError(
                f"Could not download {res.url} ({_one_line(err)}). Offline? Download "
                f"{res.filename} by hand (md5 {res.md5}) into {downloads}, or extract the data set "
                f"into {root / LAYOUTS[key].folder}, then call {prepare_call(key)} again."
            ) from err
        if res.extract:
            extract(archive, target, progress=progress)
        else:
            target.mkdir(parents=True, exist_ok=True)
            if not (target / res.filename).exists():
                shutil.copy2(archive, target / res.filename)
        marker.write_text(f"{res.md5}\n", encoding="utf-8")
        if not keep_archives:
            with contextlib.suppress(OSError):
                archive.unlink()
    return root

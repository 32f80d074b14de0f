"""One URL to one file, resumably, with its md5 checked.

:func:`download` writes the bytes to ``<file>.part``; a later call continues from
its size with an HTTP ``Range`` request (``file://`` URLs seek). A server that ignores
``Range`` (status 200) restarts the download from zero. An interrupted or failed transfer
keeps the ``.part`` file, so calling again resumes. When the transfer is complete the md5 is
checked: a match renames ``.part`` to the file name; a mismatch **deletes** the ``.part``
file (resuming a corrupt file can never fix it) and raises :class:`ChecksumError`; pass
``keep_bad=True`` to keep it as ``<file>.bad`` for inspection instead. A file already at the
destination is verified and returned without downloading; if its md5 is wrong it is left
alone (it was not written by this function) and :class:`ChecksumError` says to delete it.

:func:`file_md5` is the md5 of a file, read in chunks. The benchmarks' archives
(:func:`dmlbook.data.fetch.download.prepare`) and Omniglot's (:mod:`dmlbook.data.handwritten.omniglot`) are fetched
with :func:`download`. Tests: ``tests/data/fetch/test_transfer.py`` (``file://`` URLs and a loopback
HTTP server that can ignore ``Range`` or drop the connection).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from ...core.progress import progress_disabled

__all__ = ["ChecksumError", "download", "file_md5"]


class ChecksumError(ValueError):
    """A downloaded or existing file does not have the expected md5."""


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

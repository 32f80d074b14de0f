"""Extracting a release archive safely: all or nothing, nothing outside the destination, bounded.

:func:`extract` handles ``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz`` and ``.zip``.
Members are extracted into a temporary folder inside the destination and moved into place only
when all of them were extracted, so an interrupted extraction leaves nothing half-written.

Every member is resolved against the destination by this module itself, not by the file system
and not by :mod:`tarfile`'s extraction filters (whose checks depend on the Python version and,
before 3.11.13/3.12.11, could be passed by a symbolic-link chain longer than ``PATH_MAX``,
CVE-2025-4517):

* a name that is absolute or has a ``..`` component is refused (path traversal, CVE-2007-4559);
* symbolic links are followed *in the archive's own table* (a link's target, then the links
  that target passes through, at most :data:`MAX_LINK_HOPS` of them) and refused if the
  resolution leaves the destination, is absolute, or does not end; links are created last, after
  every file, and no member may lie under a link, so nothing is ever written through one;
* a hard link must name a regular file extracted before it;
* device files and FIFOs are refused; files are opened with ``O_NOFOLLOW``.

The bytes written are bounded (``max_bytes``, default :func:`default_limit`: 100 times the
archive's size, at least 100 MiB; each member counts at least 512 bytes, so an archive of millions
of empty files is refused too): a decompression bomb stops at the limit, with nothing extracted.
A truncated or corrupt archive raises :class:`ArchiveError` saying to download it again.
macOS junk (``._*``, ``__MACOSX/``, ``.DS_Store``) is skipped. Used by
:func:`dmlbook.data.fetch.download.prepare`; tested in ``tests/data/fetch/test_archive.py`` (crafted archives
and a hypothesis fuzz) and ``tests/data/fetch/test_download.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from ...core.progress import progress_disabled
from ..base.files import is_junk

__all__ = ["ArchiveError", "MAX_LINK_HOPS", "default_limit", "extract"]

#: Links followed while resolving one member (Linux's own limit is 40).
MAX_LINK_HOPS = 40
_MEMBER_COST = 512  # bytes each member counts towards the limit (a tar header)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class ArchiveError(ValueError):
    """An archive that is unsafe, too large once extracted, truncated or corrupt."""


def default_limit(archive: str | os.PathLike[str]) -> int:
    """The default ``max_bytes`` of :func:`extract`: 100 x the archive's size, >= 100 MiB.

    The benchmark archives hold JPEG images, which do not compress: they expand by a few per cent.
    """
    return max(100 << 20, 100 * os.path.getsize(archive))


def _archive_kind(path: Path) -> str:
    with _reading(path):  # is_tarfile reads the first block: a cut gzip header raises EOFError
        if zipfile.is_zipfile(path):
            return "zip"
        if tarfile.is_tarfile(path):
            return "tar"
    raise ArchiveError(f"{path} is neither a tar (.tar, .tgz, .tar.gz/.bz2/.xz) nor a zip archive.")


def _parts(text: str) -> list[str]:
    return [p for p in text.replace("\\", "/").split("/") if p not in ("", ".")]


def _safe_name(name: str, archive: Path) -> str:
    """Normalised member path; :class:`ArchiveError` for absolute paths and ``..`` components."""
    clean = name.replace("\\", "/")
    parts = _parts(clean)
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":") or ".." in parts:
        raise ArchiveError(
            f"{archive} holds the unsafe member {name!r} (an absolute path or a '..' component "
            "would write outside the destination); refusing to extract it."
        )
    return "/".join(parts)


class _Tree:
    """What an extraction has created so far, by normalised name: the archive's own file table.

    Resolution of links happens here, never through the file system, so that it cannot depend on
    the Python version or on ``PATH_MAX``.
    """

    def __init__(self, archive: Path, tmp: Path, limit: int) -> None:
        self.archive, self.tmp, self.limit = archive, tmp, limit
        self.kinds: dict[str, str] = {}  # name -> "dir", "file" or "link"
        self.links: dict[str, str] = {}  # symbolic link name -> target as written
        self.written = 0

    def refuse(self, member: str, why: str) -> ArchiveError:
        return ArchiveError(
            f"{self.archive} holds the unsafe member {member!r} ({why}); refusing it."
        )

    def resolve(self, start: list[str], target: str, member: str) -> list[str]:
        """``target`` followed from the folder ``start`` through the archive's links."""
        if target.replace("\\", "/").startswith("/"):
            raise self.refuse(member, f"a link to the absolute path {target!r}")
        todo, done, hops = list(reversed(_parts(target))), list(start), 0
        while todo:
            part = todo.pop()
            if part == "..":
                if not done:
                    raise self.refuse(member, "a link that points outside the destination")
                done.pop()
                continue
            name = "/".join([*done, part])
            if name in self.links:
                hops += 1
                if hops > MAX_LINK_HOPS:
                    raise self.refuse(member, f"a chain of more than {MAX_LINK_HOPS} links")
                link = self.links[name]
                if link.replace("\\", "/").startswith("/"):
                    raise self.refuse(member, f"a link to the absolute path {link!r}")
                todo.extend(reversed(_parts(link)))
                continue
            done.append(part)
        return done

    def claim(self, name: str, kind: str) -> Path:
        """Record ``name`` as ``kind``; refuse one under a link or one that changes kind."""
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if self.kinds.get(parent, "dir") != "dir":
                raise self.refuse(name, f"it lies under {parent!r}, which is not a folder")
        old = self.kinds.get(name)
        if old is not None and (old != kind or kind == "link"):
            raise self.refuse(name, f"it appears twice, as a {old} and as a {kind}")
        for i in range(1, len(parts)):
            self.kinds.setdefault("/".join(parts[:i]), "dir")
        self.kinds[name] = kind
        return self.tmp / name

    def count(self, n: int) -> None:
        self.written += n
        if self.written > self.limit:
            raise ArchiveError(
                f"{self.archive} expands to more than {self.limit:,} bytes (max_bytes), "
                f"{self.written / max(os.path.getsize(self.archive), 1):,.0f} times its size: a "
                "corrupt or malicious archive (a decompression bomb)? Nothing was extracted. If "
                "it is genuine, pass a larger max_bytes."
            )

    def write(self, name: str, chunks: Iterator[bytes]) -> None:
        """Write a regular file from ``chunks`` without following any link."""
        path = self.claim(name, "file")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.count(_MEMBER_COST)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                self.count(len(chunk))
                out.write(chunk)

    def mkdir(self, name: str) -> None:
        self.claim(name, "dir").mkdir(parents=True, exist_ok=True)
        self.count(_MEMBER_COST)

    def hardlink(self, name: str, target: str) -> None:
        source = self.resolve([], target, name)
        if self.kinds.get("/".join(source)) != "file":
            raise self.refuse(
                name, f"a hard link to {target!r}, which is not a file extracted before it"
            )
        path = self.claim(name, "file")
        self.count(_MEMBER_COST + os.path.getsize(self.tmp.joinpath(*source)))
        if "/".join(source) == name:  # a link to itself: the file is there already
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        shutil.copyfile(self.tmp.joinpath(*source), path, follow_symlinks=False)

    def symlink(self, name: str, target: str) -> None:
        if not target:
            raise self.refuse(name, "a link with an empty target")
        parts = name.split("/")
        self.resolve(parts[:-1], target, name)  # refuse early; checked again at the end
        self.claim(name, "link")
        self.count(_MEMBER_COST)
        self.links[name] = target.replace("\\", "/")

    def make_links(self) -> None:
        """Check every link against the final table, then create them (after every file)."""
        for name, target in self.links.items():
            self.resolve(name.split("/")[:-1], target, name)
        for name, target in self.links.items():
            path = self.tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path)


@contextlib.contextmanager
def _reading(archive: Path) -> Iterator[None]:
    """Turn the errors of reading a truncated or corrupt archive into :class:`ArchiveError`.

    Only reads happen in this block, so whatever fails in it is the archive's fault: a cut gzip
    stream (``EOFError``), a bad header (``tarfile.ReadError``), a damaged zip (``BadZipFile``,
    or ``NotImplementedError`` and "encrypted" once a flag byte is hit), ``zlib.error`` ...
    """
    try:
        yield
    except (ArchiveError, PermissionError, FileNotFoundError, IsADirectoryError):
        raise
    except Exception as err:  # EOFError, TarError, BadZipFile, zlib/lzma errors, "encrypted" ...
        raise ArchiveError(
            f"{archive} is truncated or corrupt ({type(err).__name__}: {err}); nothing was "
            "extracted. Delete it and download it again."
        ) from err


def _chunks(src: BinaryIO, archive: Path) -> Iterator[bytes]:
    while True:
        with _reading(archive):
            chunk = src.read(1 << 20)
        if not chunk:
            return
        yield chunk


def _unzip(archive: Path, tree: _Tree, disable: bool) -> None:
    """Extract the zip ``archive`` into the tree's folder, member by member."""
    with _reading(archive):
        zf = zipfile.ZipFile(archive)
    with zf:
        infos = zf.infolist()
        for info in tqdm(infos, desc=f"extracting {archive.name}", unit="file", disable=disable):
            if is_junk(info.filename):
                continue
            name = _safe_name(info.filename, archive)
            if not name:
                continue
            if (info.external_attr >> 16) & 0o170000 == 0o120000:  # S_IFLNK
                raise tree.refuse(
                    info.filename, "a symbolic link, which zip archives of data sets never need"
                )
            if info.is_dir():
                tree.mkdir(name)
                continue
            with _reading(archive):
                src = zf.open(info)
            with src:
                tree.write(name, _chunks(src, archive))


def _members(tar: tarfile.TarFile, archive: Path) -> Iterator[tarfile.TarInfo]:
    it = iter(tar)
    while True:
        with _reading(archive):
            member = next(it, None)
        if member is None:
            return
        yield member


def _untar(archive: Path, tree: _Tree, disable: bool) -> None:
    """Extract the tar ``archive`` into the tree's folder, member by member."""
    with _reading(archive):
        tar = tarfile.open(archive, "r:*")
    with tar:
        bar = tqdm(desc=f"extracting {archive.name}", unit="file", disable=disable)
        for member in _members(tar, archive):
            if is_junk(member.name):
                continue
            name = _safe_name(member.name, archive)
            if not name:
                continue
            if member.isdir():
                tree.mkdir(name)
            elif member.isreg():
                with _reading(archive):
                    src = tar.extractfile(member)
                tree.write(name, _chunks(src, archive))
            elif member.issym():
                tree.symlink(name, member.linkname)
            elif member.islnk():
                tree.hardlink(name, _safe_name(member.linkname, archive))
            else:
                raise tree.refuse(member.name, "a device file, FIFO or other special file")
            bar.update(1)
        bar.close()
    tree.make_links()


def _move_entries(tmp: Path, dest: Path, archive: Path) -> list[Path]:
    """Move the top-level entries of ``tmp`` into ``dest``; none if any of them exists there."""
    entries = sorted(tmp.iterdir())
    clashes = [e.name for e in entries if os.path.lexists(dest / e.name)]
    if clashes:
        raise FileExistsError(
            f"{', '.join(clashes)} already exist(s) in {dest}; {archive.name} seems to be "
            "extracted already. Delete it to extract again."
        )
    out = []
    for e in entries:
        os.replace(e, dest / e.name)
        out.append(dest / e.name)
    return out


def extract(
    archive: str | os.PathLike[str],
    dest_dir: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    max_bytes: int | None = None,
) -> list[Path]:
    """Extract a tar or zip archive into ``dest_dir``, safely (see the module notes).

    Parameters
    ----------
    archive : path
        ``.tar``, ``.tgz``/``.tar.gz``, ``.tar.bz2``, ``.tar.xz`` or ``.zip``.
    dest_dir : path
        Destination folder (created).
    progress : bool, optional
        Progress bar over members; default on unless ``TQDM_DISABLE`` is set.
    max_bytes : int, optional
        Most bytes the extraction may write (each member counts at least 512); default
        :func:`default_limit` (100 x the archive's size, at least 100 MiB).

    Returns
    -------
    list of Path
        The top-level files and folders extracted into ``dest_dir``.

    Raises
    ------
    ArchiveError
        (a ``ValueError``) For an unsafe member, an archive that expands past ``max_bytes``, a
        truncated or corrupt archive, or a file that is not an archive; nothing is extracted.
    FileExistsError
        If a top-level entry of the archive already exists in ``dest_dir`` (nothing is moved).
    """
    archive = Path(archive)
    dest = Path(dest_dir).expanduser()
    if not archive.is_file():
        raise FileNotFoundError(f"Archive {archive} does not exist.")
    limit = default_limit(archive) if max_bytes is None else int(max_bytes)
    kind = _archive_kind(archive)
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".extract-{archive.name}-", dir=dest))
    disable = progress_disabled(progress)
    try:
        tree = _Tree(archive, tmp, limit)
        (_unzip if kind == "zip" else _untar)(archive, tree, disable)
        return _move_entries(tmp, dest, archive)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

"""Extracting a release archive safely: all or nothing, nothing outside the destination.

:func:`extract` handles ``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz`` and ``.zip``.
Members are extracted into a temporary folder inside the destination and moved into place only
when all of them were extracted, so an interrupted extraction leaves nothing half-written. A
member with an absolute path, a ``..`` component, a link pointing outside the destination, or a
device file aborts the extraction with ``ValueError`` (path traversal, CVE-2007-4559). macOS junk
(``._*``, ``__MACOSX/``, ``.DS_Store``) is skipped. Used by :func:`dmlbook.data.download.prepare`;
tested in ``tests/data/test_download.py``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path

from tqdm import tqdm

from ..progress import progress_disabled
from .files import is_junk

__all__ = ["extract"]

#: ``tarfile.FilterError`` where the extraction filters exist (Python >= 3.11.4), else nothing.
_FILTER_ERROR: type[Exception] | tuple[()] = getattr(tarfile, "FilterError", ())


def _archive_kind(path: Path) -> str:
    if zipfile.is_zipfile(path):
        return "zip"
    if tarfile.is_tarfile(path):
        return "tar"
    raise ValueError(f"{path} is neither a tar (.tar, .tgz, .tar.gz/.bz2/.xz) nor a zip archive.")


def _safe_name(name: str, archive: Path) -> str:
    """Normalised member path; ``ValueError`` for absolute paths and ``..`` components."""
    clean = name.replace("\\", "/")
    parts = [p for p in clean.split("/") if p not in ("", ".")]
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":") or ".." in parts:
        raise ValueError(
            f"{archive} holds the unsafe member {name!r} (an absolute path or a '..' component "
            "would write outside the destination); refusing to extract it."
        )
    return "/".join(parts)


def _check_tar_member(member: tarfile.TarInfo, name: str, archive: Path) -> None:
    if member.isdev() or member.isfifo():
        raise ValueError(f"{archive} holds the device or FIFO member {member.name!r}; refusing it.")
    if member.issym() or member.islnk():
        link = member.linkname.replace("\\", "/")
        base = os.path.dirname(name) if member.issym() else ""
        target = os.path.normpath(os.path.join(base, link))
        if link.startswith("/") or target == ".." or target.startswith("../"):
            raise ValueError(
                f"{archive} holds the link {member.name!r} -> {member.linkname!r}, which points "
                "outside the destination; refusing to extract it."
            )


def _unzip(archive: Path, tmp: Path, disable: bool) -> None:
    """Extract the zip ``archive`` into ``tmp``, member by member, refusing unsafe members."""
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        for info in tqdm(infos, desc=f"extracting {archive.name}", unit="file", disable=disable):
            if is_junk(info.filename):
                continue
            name = _safe_name(info.filename, archive)
            if not name:
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise ValueError(
                    f"{archive} holds the symbolic link {info.filename!r}; refusing it."
                )
            target = tmp / name
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)


def _untar(archive: Path, tmp: Path, disable: bool) -> None:
    """Extract the tar ``archive`` into ``tmp``, member by member, refusing unsafe members."""
    with tarfile.open(archive, "r:*") as tar:
        bar = tqdm(desc=f"extracting {archive.name}", unit="file", disable=disable)
        for member in tar:
            if is_junk(member.name):
                continue
            name = _safe_name(member.name, archive)
            if not name:
                continue
            _check_tar_member(member, name, archive)
            member.name = name
            try:
                if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 / 3.12
                    tar.extract(member, tmp, filter="data")
                else:  # pragma: no cover - older Pythons; checked above
                    tar.extract(member, tmp)
            except _FILTER_ERROR as err:  # pragma: no cover - caught above first
                raise ValueError(f"{archive}: unsafe member {member.name!r} ({err}).") from err
            bar.update(1)
        bar.close()


def _move_entries(tmp: Path, dest: Path, archive: Path) -> list[Path]:
    """Move the top-level entries of ``tmp`` into ``dest``; none if any of them exists there."""
    entries = sorted(tmp.iterdir())
    clashes = [e.name for e in entries if (dest / e.name).exists()]
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

    Returns
    -------
    list of Path
        The top-level files and folders extracted into ``dest_dir``.

    Raises
    ------
    ValueError
        For an unsafe member (nothing is extracted) or a file that is not an archive.
    FileExistsError
        If a top-level entry of the archive already exists in ``dest_dir`` (nothing is moved).
    """
    archive = Path(archive)
    dest = Path(dest_dir).expanduser()
    if not archive.is_file():
        raise FileNotFoundError(f"Archive {archive} does not exist.")
    kind = _archive_kind(archive)
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".extract-{archive.name}-", dir=dest))
    disable = progress_disabled(progress)
    try:
        if kind == "zip":
            _unzip(archive, tmp, disable)
        else:
            _untar(archive, tmp, disable)
        return _move_entries(tmp, dest, archive)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

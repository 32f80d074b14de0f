"""Tests of dmlbook.data.fetch.archive under hostile and damaged archives.

Crafted cases (the symbolic-link chain past ``PATH_MAX`` of CVE-2025-4517, a link to ``.`` that
makes a lexical check pass, members under links, hard links, decompression bombs, truncated files)
and a hypothesis fuzz of random tar layouts and of damaged bytes. Each fuzz property: extraction
either refuses with :class:`ArchiveError` / ``FileExistsError`` or succeeds, and in both cases
nothing outside the destination exists or changed, and every link inside resolves inside it.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmlbook.data.fetch.archive import MAX_LINK_HOPS, ArchiveError, default_limit, extract


def add(tar: tarfile.TarFile, name: str, kind: str = "file", data: bytes = b"x", link: str = ""):
    info = tarfile.TarInfo(name)
    if kind == "file":
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        return
    info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[kind]
    info.linkname = link
    tar.addfile(info)


def snapshot(folder: Path, skip: Path) -> dict[str, bytes | str]:
    """Every path under ``folder`` except ``skip``'s subtree, with its bytes or link target."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            key = str(p.relative_to(folder))
            out[key] = (
                os.readlink(p) if p.is_symlink() else (p.read_bytes() if p.is_file() else "d")
            )
    return out


def empty(folder: Path) -> bool:
    """``folder`` is missing or empty (an archive refused before it was created, or after)."""
    return not folder.exists() or not any(folder.iterdir())


def assert_inside(dest: Path) -> None:
    """Every entry under ``dest`` resolves inside it (links included)."""
    real = os.path.realpath(dest)
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames + filenames:
            resolved = os.path.realpath(os.path.join(dirpath, name))
            assert resolved == real or resolved.startswith(real + os.sep), (name, resolved)


def test_symlink_chain_past_path_max_cve_2025_4517(tmp_path):
    """Sixteen links to 247-character folders make a path longer than PATH_MAX; realpath stops
    resolving there, and a filter relying on it lets ``escape/flag`` be written two levels up."""
    comp, steps, path = "d" * 247, "abcdefghijklmnop", ""
    archive = tmp_path / "poc.tar"
    with tarfile.open(archive, "w") as tar:
        for step in steps:
            add(tar, os.path.join(path, comp), "dir")
            add(tar, os.path.join(path, step), "sym", link=comp)
            path = os.path.join(path, comp)
        deep = os.path.join(*steps, "l" * 254)
        add(tar, deep, "sym", link="../" * len(steps))
        add(tar, "escape", "sym", link=deep + "/../..")
        add(tar, "escape/flag", data=b"pwned")
    dest = tmp_path / "a" / "b" / "dest"
    with pytest.raises(ArchiveError, match="unsafe member"):
        extract(archive, dest, progress=False)
    assert not list(tmp_path.rglob("flag")) and list(dest.iterdir()) == []


@pytest.mark.parametrize(
    ("members", "why"),
    [
        # s -> "." passes a lexical check; s/s/s/../../../z is then the destination's parent
        ([("s", "sym", "."), ("l", "sym", "s/s/s/../../../z")], "outside"),
        ([("pkg/up", "sym", ".."), ("pkg/up/evil", "file", "")], "lies under"),
        ([("a", "sym", "b"), ("b", "sym", "a"), ("c", "sym", "a/x")], "chain of more than"),
        ([("l", "sym", "/etc")], "absolute"),
        ([("h", "hard", "../outside")], "unsafe member"),
        ([("h", "hard", "missing")], "not a file extracted before"),
        ([("x", "file", ""), ("x", "sym", "y")], "appears twice"),
    ],
)
def test_crafted_links_are_refused(tmp_path, members, why):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        for name, kind, link in members:
            add(tar, name, kind, link=link)
    before = snapshot(tmp_path, tmp_path / "dest")
    with pytest.raises(ArchiveError, match=why):
        extract(archive, tmp_path / "dest", progress=False)
    assert snapshot(tmp_path, tmp_path / "dest") == before
    assert list((tmp_path / "dest").iterdir()) == []


def test_links_inside_and_hard_links_are_extracted(tmp_path):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        add(tar, "pkg/data/a.txt", data=b"alpha")
        add(tar, "pkg/latest", "sym", link="data")
        add(tar, "pkg/copy.txt", "hard", link="pkg/data/a.txt")
        add(tar, "pkg/deep/up", "sym", link="../data/a.txt")
    extract(archive, tmp_path / "dest", progress=False)
    pkg = tmp_path / "dest" / "pkg"
    assert (pkg / "latest" / "a.txt").read_bytes() == b"alpha"
    assert (pkg / "copy.txt").read_bytes() == b"alpha"
    assert (pkg / "deep" / "up").read_bytes() == b"alpha"
    assert_inside(tmp_path / "dest")
    assert MAX_LINK_HOPS == 40


def test_size_limit_stops_bombs_and_inode_bombs(tmp_path):
    bomb = tmp_path / "bomb.tgz"
    with tarfile.open(bomb, "w:gz") as tar:
        add(tar, "zeros.bin", data=bytes(3 << 20))
    assert bomb.stat().st_size < 10_000
    with pytest.raises(ArchiveError, match="decompression bomb"):
        extract(bomb, tmp_path / "dest", progress=False, max_bytes=1 << 20)
    assert list((tmp_path / "dest").iterdir()) == []
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(300):
            zf.writestr(f"e/{i}", b"")
    with pytest.raises(ArchiveError, match="max_bytes"):
        extract(many, tmp_path / "dest", progress=False, max_bytes=100 * 512)
    assert default_limit(bomb) == 100 << 20  # small archives: 100 MiB
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(3 << 20)  # sparse: the size counts, not the blocks
    assert default_limit(big) == 300 << 20
    assert extract(bomb, tmp_path / "dest", progress=False)  # 3 MiB is under the default


@pytest.mark.parametrize(
    ("suffix", "mode"), [(".tgz", "w:gz"), (".tar.bz2", "w:bz2"), (".tar.xz", "w:xz"), (".zip", "")]
)
def test_truncated_archives_raise_the_modules_error(tmp_path, suffix, mode):
    archive = tmp_path / f"a{suffix}"
    payload = os.urandom(200_000)  # incompressible: the cut lands inside the member's data
    if suffix == ".zip":
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("pkg/a.bin", payload)
        cut = archive.read_bytes()[: archive.stat().st_size - 40]  # end record lost
        flipped = bytearray(archive.read_bytes())
        flipped[1000] ^= 0xFF  # the CRC no longer matches
        damaged = [cut, bytes(flipped)]
    else:
        with tarfile.open(archive, mode) as tar:
            add(tar, "pkg/a.bin", data=payload)
        damaged = [archive.read_bytes()[: archive.stat().st_size // 2]]
    for data in damaged:
        archive.write_bytes(data)
        with pytest.raises(ArchiveError, match="truncated or corrupt|neither a tar"):
            extract(archive, tmp_path / "dest", progress=False)
        assert empty(tmp_path / "dest")


# ------------------------------------------------------------------------------------------
# fuzz
# ------------------------------------------------------------------------------------------

NAMES = st.lists(st.sampled_from(["a", "b", "..", ".", "c", ""]), min_size=1, max_size=4).map(
    "/".join
)
MEMBER = st.tuples(
    st.sampled_from(["file", "dir", "sym", "hard"]),
    NAMES,
    st.one_of(NAMES, NAMES.map(lambda n: "/" + n)),
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fuzz_once(build) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "outside").mkdir()
        (root / "outside" / "keep.txt").write_bytes(b"keep")
        archive = root / "x.tar"
        build(archive)
        dest = root / "dest"
        before = snapshot(root, dest)
        try:
            extract(archive, dest, progress=False, max_bytes=1 << 20)
        except (ArchiveError, FileExistsError):
            assert empty(dest)
        assert snapshot(root, dest) == before
        assert_inside(dest)


@FUZZ
@given(st.lists(MEMBER, min_size=1, max_size=8))
def test_fuzz_random_tar_layouts_never_escape(members):
    def build(archive: Path) -> None:
        with tarfile.open(archive, "w") as tar:
            for kind, name, link in members:
                add(tar, name or ".", kind, link=link)

    _fuzz_once(build)


@FUZZ
@given(st.sampled_from([".tgz", ".zip"]), st.integers(0, 10**6), st.integers(0, 255))
def test_fuzz_damaged_bytes_give_the_modules_error(suffix, where, value):
    def build(archive: Path) -> None:
        good = io.BytesIO()
        if suffix == ".zip":
            with zipfile.ZipFile(good, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr("pkg/a.txt", b"alpha" * 50)
                zf.writestr("pkg/b.txt", b"beta" * 50)
        else:
            with tarfile.open(fileobj=good, mode="w:gz") as tar:
                add(tar, "pkg/a.txt", data=b"alpha" * 50)
                add(tar, "pkg/l", "sym", link="a.txt")
        data = bytearray(good.getvalue())
        i = where % len(data)
        data = data[:i] if value == 0 else data[:i] + bytes([value ^ data[i]]) + data[i + 1 :]
        archive.write_bytes(bytes(data))

    _fuzz_once(build)

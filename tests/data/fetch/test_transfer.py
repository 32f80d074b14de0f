"""Tests of :mod:`dmlbook.data.fetch.transfer`: ``download`` from ``file://`` URLs and from a loopback
HTTP server (``http_files.py``) that honours ``Range``, ignores it, or drops the connection, so
that resumed downloads are checked by what was actually requested; ``file_md5``.
"""

from __future__ import annotations

import urllib.error

import pytest

from dmlbook.data.fetch.transfer import ChecksumError, download, file_md5

from ..http_files import MD5, PAYLOAD

# ------------------------------------------------------------------------------------------
# download from file:// URLs
# ------------------------------------------------------------------------------------------


def test_file_md5(source):
    assert file_md5(source) == MD5
    assert file_md5(source, chunk_size=7) == MD5


def test_file_url(source, tmp_path):
    dest = tmp_path / "out" / "data.bin"
    assert download(source.as_uri(), dest, md5=MD5, progress=False) == dest
    assert dest.read_bytes() == PAYLOAD
    assert not dest.with_name("data.bin.part").exists()


def test_file_url_resumes_by_seeking(source, tmp_path):
    dest = tmp_path / "data.bin"
    part = tmp_path / "data.bin.part"
    part.write_bytes(b"X" * 1000)  # not the real prefix: proves that bytes 0-999 were not re-read
    download(source.as_uri(), dest, progress=False)
    assert dest.read_bytes() == b"X" * 1000 + PAYLOAD[1000:]
    part.write_bytes(b"X" * 1000)
    dest.unlink()
    download(source.as_uri(), dest, resume=False, progress=False)  # start over
    assert dest.read_bytes() == PAYLOAD


def test_bad_checksum_deletes_the_download(source, tmp_path):
    dest = tmp_path / "data.bin"
    with pytest.raises(ChecksumError, match=rf"md5 {MD5}, expected 0{{32}}.*deleted"):
        download(source.as_uri(), dest, md5="0" * 32, progress=False)
    assert not dest.exists() and not (tmp_path / "data.bin.part").exists()
    with pytest.raises(ChecksumError, match="kept as"):
        download(source.as_uri(), dest, md5="0" * 32, keep_bad=True, progress=False)
    assert (tmp_path / "data.bin.bad").read_bytes() == PAYLOAD and not dest.exists()


def test_existing_destination(source, tmp_path, server):
    dest = tmp_path / "data.bin"
    dest.write_bytes(PAYLOAD)
    assert download(f"{server.url}/data.bin", dest, md5=MD5, progress=False) == dest
    assert server.requests == []  # verified, not downloaded
    dest.write_bytes(b"something else")
    with pytest.raises(ChecksumError, match="Delete it to download it again"):
        download(f"{server.url}/data.bin", dest, md5=MD5, progress=False)
    assert dest.read_bytes() == b"something else"  # not ours: left alone


def test_argument_checks(source, tmp_path):
    with pytest.raises(ValueError, match="32 hex digits"):
        download(source.as_uri(), tmp_path / "x", md5="abc")
    with pytest.raises(FileNotFoundError, match="Cannot open"):
        download((tmp_path / "missing.bin").as_uri(), tmp_path / "x", progress=False)


def test_progress_bar(source, tmp_path, capsys):
    download(source.as_uri(), tmp_path / "data.bin", progress=True)
    assert "data.bin" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# download over HTTP (loopback server)
# ------------------------------------------------------------------------------------------


def test_http_download(server, tmp_path):
    dest = download(f"{server.url}/data.bin", tmp_path / "data.bin", md5=MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", None)]


def test_http_resume_with_range(server, tmp_path):
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:123_456])
    dest = download(f"{server.url}/data.bin", tmp_path / "data.bin", md5=MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", "bytes=123456-")]


def test_http_interrupted_then_resumed(server, tmp_path):
    server.mode = "drop"
    dest = tmp_path / "data.bin"
    with pytest.raises(OSError, match="call again to resume"):
        download(f"{server.url}/data.bin", dest, md5=MD5, progress=False, chunk_size=4096)
    part = tmp_path / "data.bin.part"
    kept = part.stat().st_size
    assert 0 < kept < len(PAYLOAD) and part.read_bytes() == PAYLOAD[:kept]
    assert not dest.exists()
    server.mode = "range"
    download(f"{server.url}/data.bin", dest, md5=MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.requests[-1] == ("/data.bin", f"bytes={kept}-")


def test_http_server_ignoring_range_restarts(server, tmp_path):
    server.mode = "ignore_range"
    (tmp_path / "data.bin.part").write_bytes(b"stale prefix")
    dest = download(f"{server.url}/data.bin", tmp_path / "data.bin", md5=MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_http_complete_part_is_verified(server, tmp_path):
    """A ``.part`` as long as the file: the server answers 416 and the file is only verified."""
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD)
    dest = download(f"{server.url}/data.bin", tmp_path / "data.bin", md5=MD5, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert server.requests == [("/data.bin", f"bytes={len(PAYLOAD)}-")]


def test_http_bad_checksum(server, tmp_path):
    server.files["/data.bin"] = PAYLOAD[:-1] + b"!"
    with pytest.raises(ChecksumError, match="refused"):
        download(f"{server.url}/data.bin", tmp_path / "data.bin", md5=MD5, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_http_not_found(server, tmp_path):
    with pytest.raises(urllib.error.HTTPError, match="404"):
        download(f"{server.url}/nothing.bin", tmp_path / "x.bin", progress=False)

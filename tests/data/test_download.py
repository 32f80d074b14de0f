"""Tests of dmlbook.data.download against local archives: file:// URLs and a loopback HTTP server.

The server (``http.server`` on 127.0.0.1 in a thread) answers ``Range`` requests with 206, can
ignore them (200), drop the connection halfway through a body, and logs every request, so that
resumed downloads are checked by what was actually requested.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import threading
import urllib.error
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from dmlbook.data import cub
from dmlbook.data import download as download_module
from dmlbook.data.download import (
    ChecksumError,
    Resource,
    download,
    extract,
    file_md5,
    prepare,
)

PAYLOAD = np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
MD5 = hashlib.md5(PAYLOAD).hexdigest()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        server = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        data = server.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        header = self.headers.get("Range")
        if header and server.mode != "ignore_range":
            start = int(re.fullmatch(r"bytes=(\d+)-", header).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if server.mode == "drop":  # promise the whole body, send half, hang up
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.files = {"/data.bin": PAYLOAD}
    httpd.requests = []
    httpd.mode = "range"
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "source" / "data.bin"
    path.parent.mkdir()
    path.write_bytes(PAYLOAD)
    return path


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


# ------------------------------------------------------------------------------------------
# extraction
# ------------------------------------------------------------------------------------------


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def make_tar(path, members: dict[str, bytes], mode: str = "w:gz") -> None:
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            add_bytes(tar, name, data)


MEMBERS = {
    "pkg/a.txt": b"alpha",
    "pkg/sub/b.txt": b"beta",
    "pkg/._a.txt": b"apple double",
    "__MACOSX/pkg/._b.txt": b"junk",
}


@pytest.mark.parametrize(
    ("suffix", "mode"),
    [(".tgz", "w:gz"), (".tar", "w"), (".tar.bz2", "w:bz2"), (".tar.xz", "w:xz")],
)
def test_extract_tar(tmp_path, suffix, mode):
    archive = tmp_path / f"a{suffix}"
    make_tar(archive, MEMBERS, mode)
    out = extract(archive, tmp_path / "dest", progress=False)
    assert out == [tmp_path / "dest" / "pkg"]
    assert (tmp_path / "dest" / "pkg" / "sub" / "b.txt").read_bytes() == b"beta"
    assert sorted(p.name for p in (tmp_path / "dest").rglob("*")) == [
        "a.txt",
        "b.txt",
        "pkg",
        "sub",
    ]


def test_extract_zip(tmp_path):
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in MEMBERS.items():
            zf.writestr(name, data)
        zf.writestr("pkg/empty/", b"")
    extract(archive, tmp_path / "dest", progress=False)
    assert (tmp_path / "dest" / "pkg" / "a.txt").read_bytes() == b"alpha"
    assert (tmp_path / "dest" / "pkg" / "empty").is_dir()
    assert (
        not list((tmp_path / "dest").rglob("._*")) and not (tmp_path / "dest" / "__MACOSX").exists()
    )


@pytest.mark.parametrize("evil", ["../evil.txt", "pkg/../../evil.txt", "/tmp/dmlbook-evil.txt"])
def test_extract_refuses_traversal(tmp_path, evil):
    archive = tmp_path / "a.tgz"
    make_tar(archive, {"pkg/a.txt": b"ok", evil: b"evil"})
    dest = tmp_path / "dest"
    with pytest.raises(ValueError, match="unsafe member"):
        extract(archive, dest, progress=False)
    assert list(dest.iterdir()) == []  # nothing moved in, temporary folder removed
    assert not (tmp_path / "evil.txt").exists()
    zarchive = tmp_path / "a.zip"
    with zipfile.ZipFile(zarchive, "w") as zf:
        zf.writestr("pkg/a.txt", b"ok")
        zf.writestr(zipfile.ZipInfo(evil), b"evil")
    with pytest.raises(ValueError, match="unsafe member"):
        extract(zarchive, dest, progress=False)
    assert list(dest.iterdir()) == []


def test_extract_refuses_links_outside(tmp_path):
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        add_bytes(tar, "pkg/a.txt")
        link = tarfile.TarInfo("pkg/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "../../outside"
        tar.addfile(link)
    with pytest.raises(ValueError, match="points outside"):
        extract(archive, tmp_path / "dest", progress=False)
    ok = tmp_path / "ok.tar"
    with tarfile.open(ok, "w") as tar:
        add_bytes(tar, "pkg/a.txt", b"target")
        link = tarfile.TarInfo("pkg/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "a.txt"
        tar.addfile(link)
    extract(ok, tmp_path / "dest2", progress=False)
    assert (tmp_path / "dest2" / "pkg" / "link").read_bytes() == b"target"


def test_extract_clash_and_non_archive(tmp_path):
    archive = tmp_path / "a.tgz"
    make_tar(archive, {"pkg/a.txt": b"new"})
    (tmp_path / "dest" / "pkg").mkdir(parents=True)
    (tmp_path / "dest" / "pkg" / "a.txt").write_bytes(b"old")
    with pytest.raises(FileExistsError, match="already"):
        extract(archive, tmp_path / "dest", progress=False)
    assert (tmp_path / "dest" / "pkg" / "a.txt").read_bytes() == b"old"
    assert [p.name for p in (tmp_path / "dest").iterdir()] == ["pkg"]
    (tmp_path / "plain.txt").write_text("hello")
    with pytest.raises(ValueError, match="neither a tar"):
        extract(tmp_path / "plain.txt", tmp_path / "dest", progress=False)


# ------------------------------------------------------------------------------------------
# prepare: download + verify + extract into the loaders' layout
# ------------------------------------------------------------------------------------------


def tiny_cub_archive(path) -> None:
    """``CUB_200_2011.tgz`` with 2 classes of 2 images (plus a macOS junk member)."""
    with tarfile.open(path, "w:gz") as tar:
        images, labels = [], []
        for k, c in enumerate([1, 1, 101, 101], start=1):
            rel = f"{c:03d}.Bird/img_{k}.jpg"
            buf = io.BytesIO()
            Image.new("RGB", (20, 16), (k * 40, 0, 0)).save(buf, format="JPEG")
            add_bytes(tar, f"CUB_200_2011/images/{rel}", buf.getvalue())
            images.append(f"{k} {rel}")
            labels.append(f"{k} {c}")
        add_bytes(tar, "CUB_200_2011/images.txt", ("\n".join(images) + "\n").encode())
        add_bytes(tar, "CUB_200_2011/image_class_labels.txt", ("\n".join(labels) + "\n").encode())
        add_bytes(tar, "CUB_200_2011/._images.txt", b"junk")
        add_bytes(tar, "attributes.txt", b"1 has_bill_shape::curved\n")


def test_prepare(tmp_path, monkeypatch, server):
    archive = tmp_path / "CUB_200_2011.tgz"
    tiny_cub_archive(archive)
    server.files["/CUB_200_2011.tgz"] = archive.read_bytes()
    md5 = file_md5(archive)
    monkeypatch.setitem(
        download_module.RESOURCES,
        "cub",
        (Resource(f"{server.url}/CUB_200_2011.tgz", md5, "CUB_200_2011.tgz"),),
    )
    data = tmp_path / "data"
    monkeypatch.setenv("DMLBOOK_DATA", str(data))
    with pytest.raises(FileNotFoundError, match="not a folder. Check the spelling"):
        prepare("cub", progress=False)  # a typo must not start a download
    assert not data.exists() and not server.requests
    data.mkdir()
    assert prepare("cub", progress=False) == data
    assert (data / "downloads" / "CUB_200_2011.tgz.extracted").is_file()
    ds = cub.load("test", allow_partial=True)  # from $DMLBOOK_DATA/CUB_200_2011
    assert len(ds) == 2 and ds.labels.tolist() == [100, 100]
    assert prepare("cub", data, progress=False, keep_archives=False) == data  # done: no request
    assert len(server.requests) == 1


def test_prepare_copies_plain_files(tmp_path, monkeypatch, source):
    monkeypatch.setitem(
        download_module.RESOURCES,
        "cars",
        (Resource(source.as_uri(), MD5, "cars_annos.mat", subdir="cars196", extract=False),),
    )
    prepare("cars", tmp_path, progress=False, keep_archives=False)
    assert (tmp_path / "cars196" / "cars_annos.mat").read_bytes() == PAYLOAD
    assert not (tmp_path / "downloads" / "cars_annos.mat").exists()


def test_prepare_errors(tmp_path, monkeypatch, server):
    with pytest.raises(ValueError, match="no direct download"):
        prepare("inshop", tmp_path)
    with pytest.raises(ValueError, match="Unknown data set"):
        prepare("mnist", tmp_path)
    monkeypatch.delenv("DMLBOOK_DATA", raising=False)
    with pytest.raises(ValueError, match="DMLBOOK_DATA"):
        prepare("cub")
    monkeypatch.setitem(
        download_module.RESOURCES, "sop", (Resource(f"{server.url}/gone.zip", "0" * 32, "SOP.zip"),)
    )
    with pytest.raises(OSError, match=r"by hand .*into .*downloads"):
        prepare("sop", tmp_path, progress=False)


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("cub", ["CUB_200_2011/images.txt"]),
        ("cars", ["cars196/cars_annos.mat"]),
        ("cars", ["stanford_cars/car_data/car_data/train/x.jpg"]),
        ("sop", ["Stanford_Online_Products/Ebay_test.txt"]),
        ("inshop", ["In-shop Clothes Retrieval Benchmark/Eval/list_eval_partition.txt"]),
    ],
)
def test_prepare_leaves_an_extracted_copy_alone(tmp_path, monkeypatch, name, files):
    gone = (tmp_path / "nowhere.tgz").as_uri()  # any download attempt would fail
    monkeypatch.setitem(download_module.RESOURCES, name, (Resource(gone, MD5, "x.tgz"),))
    assert download_module.find_copy(name, tmp_path) is None
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    assert prepare(name, tmp_path, progress=False) == tmp_path  # In-Shop too: nothing to fetch
    assert download_module.find_copy(name, tmp_path) == tmp_path / files[0].split("/")[0]
    assert not (tmp_path / "downloads").exists()
    with pytest.raises(ValueError, match="Unknown data set 'mnist'"):
        download_module.find_copy("mnist", tmp_path)


def test_failed_download_is_one_line_with_what_to_do(tmp_path, monkeypatch, server):
    monkeypatch.setitem(
        download_module.RESOURCES, "cub", (Resource(f"{server.url}/gone.tgz", MD5, "C.tgz"),)
    )
    with pytest.raises(download_module.DownloadError) as err:
        prepare("cub", tmp_path, progress=False)
    message = str(err.value)
    assert "\n" not in message and "(HTTP error 404: Not Found)" in message
    assert f"C.tgz by hand (md5 {MD5}) into {tmp_path / 'downloads'}" in message
    assert f"or extract the data set into {tmp_path / 'CUB_200_2011'}" in message
    assert isinstance(err.value, OSError)

"""Tests of dmlbook.data.fetch.download: ``prepare`` fetches, verifies and extracts a benchmark from
local archives (``file://`` URLs and the loopback HTTP server of ``http_files.py``), and the
archives' extraction. The transfer itself is tested in ``test_transfer.py``.
"""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest
from PIL import Image

from dmlbook.data.benchmarks import cub
from dmlbook.data.fetch import download as download_module
from dmlbook.data.fetch.download import (
    Resource,
    extract,
    file_md5,
    prepare,
)

from ..http_files import MD5, PAYLOAD

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

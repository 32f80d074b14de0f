"""Tests of dmlbook.data.handwritten.omniglot: the shipped compact copy, its one-shot runs, and the loader
of the full release.

Fixtures are small zip files and folders in the official layout
(``<set>/<Alphabet>/characterNN/<id>_<drawer>.png`` and ``runNN/...``), with random one-bit
105 x 105 drawings (``omniglot_files.py``). Expected images come from an independent
area-average reference (``omniglot_files.box_reference``), not from
:mod:`dmlbook.data.handwritten.omniglot_layout` (tested in ``test_omniglot_layout.py``). Nothing here reads
the original zip files: the shipped copy is checked through its recorded sha256 and its content.
"""

from __future__ import annotations

import hashlib
import zipfile
from importlib import resources

import numpy as np
import pytest
import torch

from dmlbook.data import load_dataset
from dmlbook.data.fetch.download import ChecksumError
from dmlbook.data.handwritten import omniglot as omniglot_module
from dmlbook.data.handwritten.omniglot import load, load_full, one_shot_runs, verify_compact
from dmlbook.data.handwritten.omniglot_layout import build_compact

from ..omniglot_files import box_reference, character_set, write_zip

#: sha256 of dmlbook/data/omniglot28.npz as built by tools/build_omniglot.py from the three
#: zip files of brendenlake/omniglot (commit 057f034); recorded when the copy was built.
SHIPPED_SHA256 = "ef9d719d781ec4acf8deaa832b0a224987cfd655d648fb6d27e2c62b9da5c500"


def test_shipped_copy_has_its_recorded_checksum():
    data = resources.files("dmlbook.data").joinpath("omniglot28.npz").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHIPPED_SHA256 == omniglot_module.SHA256
    assert verify_compact() == SHIPPED_SHA256
    assert len(data) < 1_000_000
    assert (
        resources.files("dmlbook.data")
        .joinpath("OMNIGLOT_LICENSE")
        .read_text()
        .startswith("The MIT License")
    )


def test_shipped_splits():
    train, test = load_dataset("omniglot", "train"), load_dataset("omniglot", "test")
    assert (len(train), train.num_classes, len(test), test.num_classes) == (2720, 136, 2120, 106)
    assert set(train.class_counts().tolist()) == set(test.class_counts().tolist()) == {20}
    assert train.input_shape == test.input_shape == (1, 28, 28)
    assert 0.0 <= float(train.inputs.min()) and float(train.inputs.max()) <= 1.0
    alphabets = lambda ds: {ds.class_names[int(c)].split("/")[1] for c in ds.classes}
    assert alphabets(train) == {"Balinese", "Early_Aramaic", "Greek", "Korean", "Latin"}
    assert alphabets(test) == {"Japanese_(katakana)", "Sanskrit", "Tagalog"}
    # ink is sparse: the mean image is mostly background
    assert 0.02 < float(train.inputs.mean()) < 0.2


def test_smaller_images_are_2x2_means():
    full, half = load("test"), load("test", image_size=14)
    expected = full.inputs.reshape(-1, 1, 14, 2, 14, 2).mean(dim=(3, 5))
    assert torch.allclose(half.inputs, expected, atol=1e-6)


def test_shipped_runs():
    runs = one_shot_runs()
    assert runs.num_runs == 20
    assert runs.train.shape == runs.test.shape == (20, 20, 1, 28, 28)
    # every run asks for each of its 20 classes once
    assert all(sorted(row) == list(range(20)) for row in runs.answers.tolist())
    # run 1, item 1 is class 8 (first line of the official run01/class_labels.txt)
    assert int(runs.answers[0, 0]) == 7


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"image_size": 0}, ValueError, "image_size must be a positive int"),
        ({"image_size": True}, ValueError, "image_size must be a positive int"),
        ({"size": 28}, TypeError, "Unknown option 'size'"),
        ({"image_size": 32}, ValueError, "larger than the 28 px stored.*omniglot_full"),
    ],
)
def test_bad_options(options, error, match):
    with pytest.raises(error, match=match):
        load_dataset("omniglot", "train", **options)


def test_bad_split():
    with pytest.raises(ValueError, match="Valid splits"):
        load("val")
    with pytest.raises(ValueError, match="Valid splits"):
        load_full("val", root=".")
    with pytest.raises(ValueError, match="105 x 105"):
        load_full("train", root=".", image_size=106)
    with pytest.raises(ValueError, match="28 x 28"):
        one_shot_runs(image_size=29)


@pytest.fixture(scope="module")
def full_layout(tmp_path_factory):
    """The full release's layout: 964 background characters (a zip) and 659 evaluation ones
    (an extracted folder), one drawing each."""
    root = tmp_path_factory.mktemp("omniglot_full")
    background = character_set(3, {f"Bg{i:02d}": 32 for i in range(30)} | {"Bg30": 4}, drawers=1)
    evaluation = character_set(4, {f"Ev{i:02d}": 33 for i in range(19)} | {"Ev19": 32}, drawers=1)
    assert (len(background), len(evaluation)) == (964, 659)
    write_zip(
        root / "images_background.zip",
        "images_background",
        {k: v[0] for k, v in background.items()},
    )
    for name, (png, _) in evaluation.items():
        path = root / "images_evaluation" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png)
    return root, background, evaluation


def test_full_layout(full_layout):
    root, background, evaluation = full_layout
    train = load_dataset("omniglot_full", "train", root=root)
    test = load_dataset("omniglot_full", "test", root=root)
    assert (len(train), train.num_classes, len(test), test.num_classes) == (964, 964, 659, 659)
    assert test.labels.min().item() == 964 and len(test.class_names) == 1623
    assert test.class_names[964] == "images_evaluation/Ev00/character01"
    assert train.class_names[5] == "images_background/Bg00/character06"
    bits = evaluation["Ev00/character01/0001_01.png"][1]
    expected = box_reference(bits, 28) / 255.0
    assert np.abs(test.inputs[0, 0].numpy() - expected).max() <= 1.0 / 255 + 1e-6


def test_full_layout_partial_copy(tmp_path, full_layout):
    root, background, _ = full_layout
    names = list(background)[:-1]
    write_zip(
        tmp_path / "images_background.zip",
        "images_background",
        {k: background[k][0] for k in names},
    )
    with pytest.raises(ValueError, match="holds 963 characters.*has 964"):
        load_full("train", root=tmp_path)


def test_full_layout_download(tmp_path, full_layout, monkeypatch):
    root, _, _ = full_layout
    source = root / "images_background.zip"
    md5 = hashlib.md5(source.read_bytes()).hexdigest()
    monkeypatch.setitem(omniglot_module.FULL_URLS, "images_background", source.as_uri())
    monkeypatch.setitem(omniglot_module.FULL_MD5, "images_background", md5)
    target = tmp_path / "data"
    with pytest.raises(FileNotFoundError, match="download=True"):
        load_full("train", root=target)
    train = load_full("train", root=target, download=True)
    assert (target / "images_background.zip").read_bytes() == source.read_bytes()
    assert train.num_classes == 964
    monkeypatch.setitem(omniglot_module.FULL_MD5, "images_background", "0" * 32)
    with pytest.raises(ChecksumError):
        load_full("train", root=tmp_path / "other", download=True)


def test_full_loader_reads_the_small_sets_like_the_compact_copy(small_layout, tmp_path):
    s = small_layout
    out = build_compact(s["small1"], s["small2"], s["runs"], tmp_path / "d.npz")
    sets = ("images_background_small1", "images_background_small2")
    test = load_full("test", root=s["root"], sets=sets)
    with np.load(out) as data:
        assert test.labels.tolist() == data["test_labels"].tolist()
        assert test.class_names == [str(n) for n in data["class_names"]]
        assert torch.equal(test.inputs[:, 0], torch.from_numpy(data["test_images"]).float() / 255)


def test_full_root_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("DMLBOOK_DATA", raising=False)
    with pytest.raises(ValueError, match="DMLBOOK_DATA"):
        load_full("train")
    monkeypatch.setenv("DMLBOOK_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "omniglot")):
        load_full("train")


# ------------------------------------------------------------------------------------------
# A damaged file is one line naming it and how to restore it (issue 45)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "empty", "one-bit"])
def test_a_damaged_compact_copy_is_refused_by_its_digest(tmp_path, monkeypatch, damage):
    good = resources.files("dmlbook.data").joinpath("omniglot28.npz").read_bytes()
    bad = {
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "one-bit": good[:1000] + bytes([good[1000] ^ 1]) + good[1001:],
    }[damage]
    path = tmp_path / "omniglot28.npz"
    path.write_bytes(bad)
    monkeypatch.setattr(omniglot_module, "_compact_file", lambda: path)
    what = (
        "empty"
        if not bad
        else f"{len(bad):,} bytes, sha256 {hashlib.sha256(bad).hexdigest()[:16]}..."
    )
    expected = (
        f"{path} is damaged ({what}; the shipped copy has sha256 {SHIPPED_SHA256[:16]}...: "
        f"truncated, emptied or modified). Restore {path}: reinstall dmlbook (pip install "
        "--force-reinstall dmlbook), or rebuild it with `python tools/build_omniglot.py DIR` "
        "from the Omniglot zip files."
    )
    for read in (lambda: load("train"), lambda: one_shot_runs(), verify_compact):
        with pytest.raises(ChecksumError) as caught:
            read()
        assert str(caught.value) == expected


def _damage_a_member(path, member: str) -> None:
    """Flip one byte in the middle of ``member``'s data inside the zip file ``path``."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_release_zip_with_a_flipped_byte_says_how_to_fetch_it_again(tmp_path):
    """A zip named like the release's: its message gives the download call (and the md5)."""
    files = character_set(3, {"Alpha": 1, "Beta": 1}, drawers=2)
    path = write_zip(tmp_path / "images_background.zip", "images_background",
                     {k: v[0] for k, v in files.items()})  # fmt: skip
    member = "images_background/Beta/character01/0101_02.png"
    _damage_a_member(path, member)
    with pytest.raises(ValueError) as caught:
        load_full("train", root=tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path} is damaged: its member {member} does not read back (")
    assert "Bad CRC-32" in message and "\n" not in message
    assert message.endswith(
        f"Delete {path} and fetch images_background.zip again: load_dataset('omniglot_full', "
        f"'train', download=True) downloads it (md5 {omniglot_module.FULL_MD5['images_background']}),"
        " or get it from https://github.com/brendenlake/omniglot (python/ folder)."
    )


def test_a_numpy_integer_image_size_is_checked_like_an_int():
    """Issue 38: image_size=numpy.int64(14) passes the size check; True and 14.0 do not."""
    from dmlbook.data.handwritten.omniglot import _check_size

    _check_size(np.int64(14), 28, "")
    for bad in (True, 14.0):
        with pytest.raises(ValueError, match="image_size must be a positive int"):
            _check_size(bad, 28, "")

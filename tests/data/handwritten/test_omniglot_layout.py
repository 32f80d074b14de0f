"""Tests of dmlbook.data.handwritten.omniglot_layout: reading Omniglot's official layout, preprocessing a
drawing, and building the shipped compact copy byte for byte.

Fixtures are small zip files in the official layout with random one-bit 105 x 105 drawings
(``omniglot_files.py``, fixture ``small_layout``); expected images come from the independent
area-average reference ``omniglot_files.box_reference``.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from dmlbook.data.handwritten.omniglot_layout import (
    DamagedSetError,
    build_compact,
    list_characters,
    preprocess,
    read_characters,
    read_runs,
    write_npz,
)

from ..omniglot_files import box_reference, drawing, write_zip


def test_preprocess_is_an_area_average_of_the_ink():
    png, bits = drawing(np.random.default_rng(5))
    got = preprocess(png, 28).astype(np.float64)
    assert got.shape == (28, 28)
    assert np.abs(got - box_reference(bits, 28)).max() <= 1.0  # uint8 rounding


def test_build_is_byte_for_byte_reproducible(small_layout, tmp_path):
    s = small_layout
    a = build_compact(s["small1"], s["small2"], s["runs"], tmp_path / "a.npz")
    # the same content, with the members of the source zip in another order
    names = list(s["one"])
    shuffled = write_zip(
        tmp_path / "images_background_small1.zip",
        "images_background_small1",
        {k: v[0] for k, v in s["one"].items()},
        order=names[::-1],
    )
    b = build_compact(shuffled, s["small2"], s["runs"], tmp_path / "b.npz")
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        assert {info.date_time for info in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_build_content_matches_the_reference(small_layout, tmp_path):
    s = small_layout
    out = build_compact(s["small1"], s["small2"], s["runs"], tmp_path / "c.npz")
    with np.load(out, allow_pickle=False) as data:
        names = [str(n) for n in data["class_names"]]
        # 3 train characters; the test set keeps Beta only (Latin is in the train set)
        assert names == [
            "images_background_small1/Alpha/character01",
            "images_background_small1/Alpha/character02",
            "images_background_small1/Latin/character01",
            "images_background_small2/Beta/character01",
            "images_background_small2/Beta/character02",
        ]
        assert data["train_labels"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
        assert data["test_labels"].tolist() == [3, 3, 3, 4, 4, 4]
        first_beta = s["two"]["Beta/character01/0001_01.png"][1]
        assert np.abs(data["test_images"][0] - box_reference(first_beta, 28)).max() <= 1.0
        assert data["runs_answers"].tolist() == s["answers"].tolist()
        assert data["runs_train"].shape == (2, 3, 28, 28)


def test_write_npz_refuses_object_arrays(tmp_path):
    with pytest.raises(TypeError, match="dtype object"):
        write_npz(tmp_path / "x.npz", {"a": np.array([{"x": 1}], dtype=object)})


def test_a_set_reads_the_same_from_its_zip_and_its_folder_and_refuses_stray_files(
    small_layout, tmp_path
):
    folder = tmp_path / "images_background_small1"
    for name, (png, _) in small_layout["one"].items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(png)
    from_zip, from_folder = read_characters(small_layout["small1"]), read_characters(folder)
    names = ["Alpha/character01", "Alpha/character02", "Latin/character01"]
    assert from_zip.class_names == from_folder.class_names == names
    assert list_characters(small_layout["small1"]) == list_characters(folder) == names
    assert from_folder.labels.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    np.testing.assert_array_equal(from_folder.images, from_zip.images)
    bits = small_layout["one"]["Alpha/character01/0001_01.png"][1]
    assert np.abs(from_folder.images[0] - box_reference(bits, 28)).max() <= 1.0
    (folder / "Alpha" / "notes.txt").write_text("not a drawing")
    with pytest.raises(ValueError, match=r"'Alpha/notes.txt' is not '<Alphabet>/characterNN"):
        read_characters(folder)


def test_runs_read_from_their_folder_and_an_unreadable_label_line_is_named(small_layout, tmp_path):
    with zipfile.ZipFile(small_layout["runs"]) as zf:
        zf.extractall(tmp_path / "runs")
    runs = read_runs(tmp_path / "runs")
    assert runs.answers.tolist() == small_layout["answers"].tolist()
    assert runs.train.shape == runs.test.shape == (2, 3, 28, 28)
    with open(tmp_path / "runs" / "run02" / "class_labels.txt", "a") as f:
        f.write("run02/test/item01.png class01\n")
    with pytest.raises(ValueError, match=r"unreadable line .* in run02/class_labels.txt"):
        read_runs(tmp_path / "runs")


# ------------------------------------------------------------------------------------------
# A damaged file of a set is named (issue 45)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["folder", "zip"])
def test_a_corrupt_png_is_named(small_layout, tmp_path, where):
    files = {name: png for name, (png, _) in small_layout["one"].items()}
    files["Latin/character01/0101_02.png"] = files["Latin/character01/0101_02.png"][:40]  # cut
    if where == "zip":
        source = write_zip(tmp_path / "set.zip", "set", files)
    else:
        source = tmp_path / "set"
        for name, data in files.items():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes(data)
    with pytest.raises(DamagedSetError) as caught:
        read_characters(source)
    assert str(caught.value).startswith(
        f"{source}: Latin/character01/0101_02.png is not a readable PNG drawing ("
    )
    with zipfile.ZipFile(small_layout["runs"]) as zf:  # a one-shot run's image, likewise
        runs = {n: zf.read(n) for n in zf.namelist()}
    runs["run01/test/item02.png"] = b"\x89PNG\r\n\x1a\n" + b"\x00" * 30
    with zipfile.ZipFile(tmp_path / "runs.zip", "w") as zf:
        for name, data in runs.items():
            zf.writestr(name, data)
    with pytest.raises(DamagedSetError, match=r"runs.zip: run01/test/item02.png is not a readable"):
        read_runs(tmp_path / "runs.zip")


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_flipped_byte_in_a_zip_member_is_named(small_layout, tmp_path, compression):
    """Stored: zipfile's CRC-32 check fails; deflated: usually the decompressor first."""
    path = tmp_path / "set.zip"
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, (png, _) in small_layout["one"].items():
            zf.writestr(f"set/{name}", png)
        info = zf.getinfo("set/Latin/character01/0101_02.png")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedSetError) as caught:
        read_characters(path)
    assert str(caught.value).startswith(
        f"{path} is damaged: its member set/Latin/character01/0101_02.png does not read back ("
    )


@pytest.mark.parametrize("content", [b"", "half"])
def test_an_empty_or_truncated_zip_is_named(small_layout, tmp_path, content):
    good = small_layout["small1"].read_bytes()
    path = tmp_path / "images_background_small1.zip"
    path.write_bytes(good[: len(good) // 2] if content == "half" else content)
    for read in (read_characters, list_characters, read_runs):
        with pytest.raises(DamagedSetError, match=rf"^{path} is neither a folder nor a readable "
                           r"zip file \(empty, truncated or damaged"):  # fmt: skip
            read(path)


def test_a_numpy_integer_size_is_accepted():
    """Issue 38: preprocess(png, numpy.int64(14)) is preprocess(png, 14)."""
    import io

    import numpy as np
    from PIL import Image

    from dmlbook.data.handwritten.omniglot_layout import preprocess

    buf = io.BytesIO()
    Image.fromarray(np.full((105, 105), 255, np.uint8)).save(buf, format="PNG")
    png = buf.getvalue()
    np.testing.assert_array_equal(preprocess(png, np.int64(14)), preprocess(png, 14))
    with pytest.raises(ValueError, match="size must be a positive int"):
        preprocess(png, 14.0)

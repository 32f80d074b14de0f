"""Tests of dmlbook.data.omniglot_layout: reading Omniglot's official layout, preprocessing a
drawing, and building the shipped compact copy byte for byte.

Fixtures are small zip files in the official layout with random one-bit 105 x 105 drawings
(``omniglot_files.py``, fixture ``small_layout``); expected images come from the independent
area-average reference ``omniglot_files.box_reference``.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from dmlbook.data.omniglot_layout import (
    build_compact,
    list_characters,
    preprocess,
    read_characters,
    read_runs,
    write_npz,
)

from .omniglot_files import box_reference, drawing, write_zip


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

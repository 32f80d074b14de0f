"""Omniglot: the shipped copy, its byte-for-byte build, and the loader of the full layout.

Fixtures are small zip files and folders written here in the official layout
(``<set>/<Alphabet>/characterNN/<id>_<drawer>.png`` and ``runNN/...``), with random one-bit
105 x 105 drawings. Expected images come from an independent area-average reference
(:func:`box_reference`), not from :mod:`dmlbook.data.omniglot_layout`. Nothing here reads the
original zip files: the shipped copy is checked through its recorded sha256 and its content.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from dmlbook.data import load_dataset
from dmlbook.data import omniglot as omniglot_module
from dmlbook.data.download import ChecksumError
from dmlbook.data.omniglot import load, load_full, one_shot_runs, verify_compact
from dmlbook.data.omniglot_layout import build_compact, preprocess, write_npz

#: sha256 of dmlbook/data/omniglot28.npz as built by tools/build_omniglot.py from the three
#: zip files of brendenlake/omniglot (commit 057f034); recorded when the copy was built.
SHIPPED_SHA256 = "ef9d719d781ec4acf8deaa832b0a224987cfd655d648fb6d27e2c62b9da5c500"


def box_reference(bits: np.ndarray, size: int) -> np.ndarray:
    """Box filter of ``1 - bits`` (ink = 1) onto a ``size x size`` grid, scaled to 0..255.

    Output pixel ``i`` covers input coordinates ``(i s, (i + 1) s]`` with ``s = n / size``; it is
    the mean of the input pixels whose centres ``j + 0.5`` fall in that interval.
    """
    n = bits.shape[0]
    scale = n / size
    centres = np.arange(n) + 0.5
    weights = np.stack(
        [(centres > i * scale) & (centres <= (i + 1) * scale) for i in range(size)]
    ).astype(np.float64)
    weights /= weights.sum(axis=1, keepdims=True)
    ink = 1.0 - bits.astype(np.float64)
    return 255.0 * weights @ ink @ weights.T


def drawing(rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """A random one-bit 105 x 105 PNG (mostly white, like Omniglot) and its pixels."""
    bits = rng.random((105, 105)) > 0.1
    buffer = io.BytesIO()
    Image.fromarray(bits).convert("1").save(buffer, format="PNG")
    return buffer.getvalue(), bits


def character_set(
    seed: int, alphabets: dict[str, int], drawers: int = 3
) -> dict[str, tuple[bytes, np.ndarray]]:
    """``{"<Alphabet>/characterNN/<id>_<drawer>.png": (png, bits)}``."""
    rng = np.random.default_rng(seed)
    files = {}
    for a, (alphabet, count) in enumerate(sorted(alphabets.items())):
        for c in range(1, count + 1):
            for d in range(1, drawers + 1):
                files[f"{alphabet}/character{c:02d}/{a:02d}{c:02d}_{d:02d}.png"] = drawing(rng)
    return files


def write_zip(
    path: Path, top: str, files: dict[str, bytes], order: list[str] | None = None
) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{top}/", b"")
        for name in order or list(files):
            zf.writestr(f"{top}/{name}", files[name])
    return path


def runs_files(seed: int, runs: int = 2, ways: int = 3) -> tuple[dict[str, bytes], np.ndarray]:
    rng = np.random.default_rng(seed)
    files, answers = {}, np.zeros((runs, ways), dtype=np.int64)
    for r in range(1, runs + 1):
        perm = rng.permutation(ways)
        lines = []
        for i in range(1, ways + 1):
            files[f"run{r:02d}/training/class{i:02d}.png"] = drawing(rng)[0]
            files[f"run{r:02d}/test/item{i:02d}.png"] = drawing(rng)[0]
            lines.append(
                f"run{r:02d}/test/item{i:02d}.png run{r:02d}/training/class{perm[i - 1] + 1:02d}.png"
            )
            answers[r - 1, i - 1] = perm[i - 1]
        files[f"run{r:02d}/class_labels.txt"] = ("\n".join(lines) + "\n").encode()
    return files, answers


@pytest.fixture(scope="module")
def small_layout(tmp_path_factory):
    """Two small sets (sharing the alphabet 'Latin') and two 3-way runs, as zip files."""
    root = tmp_path_factory.mktemp("omniglot_small")
    one = character_set(0, {"Alpha": 2, "Latin": 1})
    two = character_set(1, {"Beta": 2, "Latin": 1})
    runs, answers = runs_files(2)
    with zipfile.ZipFile(root / "all_runs.zip", "w") as zf:
        for name, data in runs.items():
            zf.writestr(name, data)
    return {
        "root": root,
        "one": one,
        "two": two,
        "answers": answers,
        "small1": write_zip(
            root / "images_background_small1.zip",
            "images_background_small1",
            {k: v[0] for k, v in one.items()},
        ),
        "small2": write_zip(
            root / "images_background_small2.zip",
            "images_background_small2",
            {k: v[0] for k, v in two.items()},
        ),
        "runs": root / "all_runs.zip",
    }


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

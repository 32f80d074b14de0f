"""Tests of dmlbook.data.cache.image_cache: decode once into a memory-mapped uint8 cache, build it
safely (interrupts, shared folders, full disks, bad images) and find it again.

The eight images of every kind and the PIL reference of a cell are in ``image_files.py``
(fixture ``images``). Decoding one image is tested in ``test_image_decode.py``, opening a built
cache in ``test_image_cache_file.py``, reading batches in ``test_cached_dataset.py``.
"""

from __future__ import annotations

import json
import os
import stat
import types

import numpy as np
import pytest

from dmlbook.data import CachedImageDataset, ImageListDataset, build_image_cache
from dmlbook.data.cache import image_cache as ic
from dmlbook.data.cache.image_cache import decode_resized

from ..image_files import SIZE, reference_cell, write_image

# ------------------------------------------------------------------------------------------
# building, reuse and rebuild
# ------------------------------------------------------------------------------------------


def test_build_and_reuse(images, tmp_path, monkeypatch):
    cached = images.cached(
        SIZE, cache_dir=tmp_path / "cache", workers=2, draft=False, progress=False
    )
    assert isinstance(cached, CachedImageDataset)
    cache = cached.cache
    assert cache.images.shape == (8, SIZE, SIZE, 3) and cache.images.dtype == np.uint8
    assert isinstance(cache.images, np.memmap) and not cache.images.flags.writeable
    for i, f in enumerate(images.files):
        np.testing.assert_array_equal(cache.images[i], reference_cell(f, SIZE))
    manifest = json.loads(cache.path.with_suffix(".json").read_text())
    assert manifest["version"] == ic.CACHE_VERSION and manifest["count"] == 8
    assert manifest["paths"] == images.paths
    assert manifest["file_sizes"] == [f.stat().st_size for f in images.files]
    assert manifest["image_sizes"][0] == [30, 40]
    # the array and its manifest, and no stray lock file (issue 19)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [cache.path.name, cache.path.with_suffix(".json").name]
    )

    def fail(*args):
        raise AssertionError("a valid cache must not be rebuilt")

    monkeypatch.setattr(ic, "_decode_or_error", fail)
    again = images.cached(SIZE, cache_dir=tmp_path / "cache", draft=False, progress=False)
    assert again.cache.path == cache.path


def test_changed_file_list_rebuilds(images, tmp_path):
    kw = {"cache_dir": tmp_path / "cache", "progress": False}
    first = images.cached(SIZE, **kw).cache.path
    assert images.subset([0, 1, 2]).cached(SIZE, **kw).cache.path != first
    write_image(images.files[2], 99, (80, 80))  # same path, other content and byte size
    rebuilt = images.cached(SIZE, **kw).cache
    assert rebuilt.path != first
    np.testing.assert_array_equal(rebuilt.images[2], decode_resized(images.files[2], SIZE)[0])
    assert images.cached(SIZE, fit="pad", **kw).cache.path != rebuilt.path
    assert images.cached(SIZE + 8, **kw).cache.path != rebuilt.path


def test_cache_survives_a_moved_root(images, tmp_path):
    path = images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False).cache.path
    moved = tmp_path / "moved"
    images.root.rename(moved)
    copy = ImageListDataset(moved, images.paths, images.labels, "toy", "train")
    assert copy.cached(SIZE, cache_dir=tmp_path / "cache", progress=False).cache.path == path


def test_corrupt_image_reported_by_path(images, tmp_path):
    images.files[3].write_bytes(b"\xff\xd8\xff\xe0 truncated")
    images.files[5].write_bytes(b"plain text, not an image")
    with pytest.raises(ValueError, match=r"Cannot decode 2 of 8 images") as err:
        images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False)
    assert str(images.files[3]) in str(err.value) and str(images.files[5]) in str(err.value)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.suffix in (".npy", ".json")]


def test_corrupt_images_skipped_and_listed_on_request(images, tmp_path):
    images.files[3].write_bytes(b"\xff\xd8\xff\xe0 truncated")
    images.files[5].write_bytes(b"plain text, not an image")
    with pytest.warns(UserWarning, match=r"leaving out 2 of 8 images that cannot be decoded") as w:
        cached = images.cached(
            SIZE, cache_dir=tmp_path / "cache", progress=False, draft=False, skip_bad=True
        )
    message = str(w[0].message)
    assert str(images.files[3]) in message and str(images.files[5]) in message
    assert len(cached) == 6 and cached.labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert [i for i, _, _ in cached.cache.bad] == [3, 5]
    for row, i in enumerate([0, 1, 2, 4, 6, 7]):  # the kept images, in order
        image, label = cached[row]
        assert int(label) == int(images.labels[i])
        np.testing.assert_array_equal(
            image.permute(1, 2, 0).numpy(), reference_cell(images.files[i], SIZE)
        )
    assert cached[5][0].shape == (3, SIZE, SIZE)
    # the same cache, asked for strictly, refuses rather than serving black cells
    with pytest.raises(
        ValueError, match=r"Cannot decode 2 of 8 images, the cache was built with blank cells"
    ):
        images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False, draft=False)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.suffix == ".lock"]


def test_missing_image(images, tmp_path):
    images.files[1].unlink()
    with pytest.raises(FileNotFoundError, match=r"1 images to cache do not exist: .*1.jpg"):
        images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False)


def test_interrupted_build_resumes(images, tmp_path, monkeypatch):
    calls = []
    real = ic._decode_or_error

    def flaky(args):
        calls.append(args[0])
        if len(calls) == 70:  # in the second chunk of 64
            raise KeyboardInterrupt
        return real(args)

    monkeypatch.setattr(ic, "_decode_or_error", flaky)
    kw = {"cache_dir": tmp_path / "cache", "workers": 1, "progress": False}
    with pytest.raises(KeyboardInterrupt):
        build_image_cache(images.files[:4] * 40, size=SIZE, **kw)  # 160 images, chunks of 64
    cache_files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert any(n.endswith(".partial.npy") for n in cache_files)
    assert not any(n.endswith(".json") and ".partial" not in n for n in cache_files)

    resumed: list[str] = []

    def counting(args):
        resumed.append(args[0])
        return real(args)

    monkeypatch.setattr(ic, "_decode_or_error", counting)
    cache = build_image_cache(images.files[:4] * 40, size=SIZE, **kw)
    assert len(resumed) == 160 - 64  # the first chunk was kept
    for i in (0, 63, 64, 159):
        np.testing.assert_array_equal(cache.images[i], decode_resized(images.files[i % 4], SIZE)[0])
    assert not [p for p in (tmp_path / "cache").iterdir() if ".partial" in p.name]


def test_links_planted_under_the_cache_names_are_never_followed(images, tmp_path):
    """In a shared cache folder, links under the predictable names of a build's files must not
    make the build overwrite (or create) their targets (issue 29)."""
    probe = build_image_cache(images.files, size=SIZE, cache_dir=tmp_path / "probe", progress=False)
    stem, shared = probe.path.stem, tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for suffix in (".partial.npy", ".sizes.npy", ".partial.json"):
        (shared / f"{stem}{suffix}").symlink_to(victim)
    cache = build_image_cache(images.files, size=SIZE, cache_dir=shared, progress=False)
    assert victim.read_text() == "precious"
    np.testing.assert_array_equal(cache.images, probe.images)
    other = tmp_path / "other"
    other.mkdir()
    (other / f"{stem}.lock").symlink_to(tmp_path / "made-by-the-lock")
    with pytest.raises(OSError, match="symbolic link, not a lock file"):
        build_image_cache(images.files, size=SIZE, cache_dir=other, progress=False)
    assert not (tmp_path / "made-by-the-lock").exists()


def test_a_disk_too_small_for_the_cache_is_one_error_before_decoding(images, tmp_path, monkeypatch):
    """A memory map that meets a full disk dies of SIGBUS with no message; check the space first."""
    from dmlbook.data.base import atomic

    monkeypatch.setattr(atomic.shutil, "disk_usage", lambda p: types.SimpleNamespace(free=1000))
    with pytest.raises(OSError, match=r"not enough space in .* GiB free\): free some space"):
        build_image_cache(images.files, size=SIZE, cache_dir=tmp_path / "cache", progress=False)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.suffix != ".lock"]


def test_progress_file_of_an_older_format_restarts_the_build(images, tmp_path, monkeypatch):
    real = ic._decode_or_error
    calls: list[str] = []

    def interrupted(args):
        calls.append(args[0])
        if len(calls) == 70:
            raise KeyboardInterrupt
        return real(args)

    monkeypatch.setattr(ic, "_decode_or_error", interrupted)
    kw = {"cache_dir": tmp_path / "cache", "workers": 1, "progress": False}
    with pytest.raises(KeyboardInterrupt):
        build_image_cache(images.files[:4] * 40, size=SIZE, **kw)
    (state,) = (tmp_path / "cache").glob("*.partial.json")
    old = json.loads(state.read_text())
    state.write_text(json.dumps({**old, "errors": [["some/file.jpg", "an error"]]}))  # v1 rows
    calls.clear()
    monkeypatch.setattr(ic, "_decode_or_error", lambda args: calls.append(args[0]) or real(args))
    cache = build_image_cache(images.files[:4] * 40, size=SIZE, **kw)
    assert len(calls) == 160 and cache.bad == []  # started over instead of misreading it


def test_cache_files_follow_the_umask_for_a_shared_folder(images, tmp_path):
    saved = os.umask(0o002)  # a group-shared cache folder
    try:
        cached = images.cached(SIZE, cache_dir=tmp_path / "cache", progress=False)
    finally:
        os.umask(saved)
    for path in (cached.cache.path, cached.cache.path.with_suffix(".json")):
        assert stat.S_IMODE(path.stat().st_mode) == 0o664, path
    assert stat.S_IMODE((tmp_path / "cache").stat().st_mode) == 0o775


def test_bad_options(images, tmp_path):
    with pytest.raises(ValueError, match="size"):
        build_image_cache(images.files, size=4, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="fit"):
        build_image_cache(images.files, size=SIZE, fit="stretch", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="empty"):
        build_image_cache([], size=SIZE, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="workers"):
        build_image_cache(images.files, size=SIZE, workers=0, cache_dir=tmp_path)


def test_numpy_integer_worker_counts_are_accepted(tmp_path):
    """Issue 38: workers=numpy.int64(1) is one worker; True is refused."""
    import numpy as np

    from dmlbook.data.cache.image_cache import _checked_options

    size, _ = _checked_options([tmp_path / "a.png"], np.int64(16), "pad", np.int64(1), "x")
    assert size == 16
    with pytest.raises(ValueError, match="workers must be a positive int"):
        _checked_options([tmp_path / "a.png"], 16, "pad", True, "x")

"""Tests of :mod:`dmlbook.data.base.atomic`: atomic replacement, permissions from the umask, locks."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest

from dmlbook.data.base.atomic import atomic_write, exclusive_lock, file_mode


@pytest.fixture
def umask():
    """Set a umask for the test, then restore the previous one."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(saved)


@pytest.mark.parametrize(("mask", "mode"), [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_written_file_has_the_umask_mode(tmp_path, umask, mask, mode):
    umask(mask)
    assert file_mode() == mode
    path = atomic_write(tmp_path / "a.bin", lambda f: f.write(b"abc"))
    assert path.read_bytes() == b"abc"
    assert stat.S_IMODE(path.stat().st_mode) == mode  # a plain open() would give the same
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert stat.S_IMODE(plain.stat().st_mode) == mode


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write(path, lambda f: f.write("old"), text=True)

    def fail(f):
        f.write("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, fail, text=True)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]


def test_lock_excludes_and_leaves_no_file(tmp_path):
    lock = tmp_path / "x.lock"
    inside, order = threading.Event(), []

    def holder():
        with exclusive_lock(lock):
            inside.set()
            time.sleep(0.2)
            order.append("first done")

    t = threading.Thread(target=holder)
    t.start()
    inside.wait()  # no deadline: a busy machine may start the thread late
    with exclusive_lock(lock):  # waits for the holder, then takes a fresh lock file
        order.append("second in")
        assert lock.exists()
    t.join()
    assert order == ["first done", "second in"]
    assert not lock.exists()

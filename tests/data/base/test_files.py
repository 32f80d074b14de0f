"""Tests of dmlbook.data.base.files: image names in a folder, macOS junk, whitespace list files.

Expected values are written out by hand from the folder each test builds.
"""

from __future__ import annotations

import pytest

from dmlbook.data.base.files import is_junk, read_table, scan_images

from ..official_layouts import write_jpeg, write_junk


def test_is_junk_and_scan(tmp_path):
    assert is_junk("a/._x.jpg") and is_junk("__MACOSX/a/x.jpg") and is_junk(".DS_Store")
    assert not is_junk("a/x.jpg") and not is_junk("a._b.jpg")
    write_jpeg(tmp_path / "a" / "x.jpg", 0)
    write_junk(tmp_path / "a" / "._x.jpg")
    write_jpeg(tmp_path / "__MACOSX" / "a" / "x.jpg", 1)
    (tmp_path / "a" / "notes.txt").write_text("-")
    assert scan_images(tmp_path) == ["a/x.jpg"]


def test_scan_matches_extensions_in_any_case_and_skips_hidden_files(tmp_path):
    # scanning goes by name only: empty files are enough
    for rel in ("b/y.JPG", "b/z.PnG", "a/x.webp", "top.jpeg", ".hidden.jpg", ".git/w.jpg", "c.tif"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    assert scan_images(tmp_path) == ["a/x.webp", "b/y.JPG", "b/z.PnG", "top.jpeg"]
    assert scan_images(tmp_path, recursive=False) == ["top.jpeg"]
    assert scan_images(tmp_path / "b") == ["y.JPG", "z.PnG"]


def test_read_table_skips_header_and_blank_lines_and_names_a_short_line(tmp_path):
    path = tmp_path / "list.txt"
    path.write_text("image_id path\n1 a/x.jpg\n\n  \n2 b/y.jpg extra\n")
    rows = list(read_table(path, columns=2, what="'<id> <path>'", skip=1))
    assert rows == [["1", "a/x.jpg"], ["2", "b/y.jpg", "extra"]]
    path.write_text("1 a/x.jpg\n2\n")
    reader = read_table(path, columns=2, what="'<id> <path>'")
    assert next(reader) == ["1", "a/x.jpg"]  # lines are read one at a time
    with pytest.raises(ValueError, match=r"list\.txt, line 2: expected '<id> <path>', got '2'"):
        next(reader)

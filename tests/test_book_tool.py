"""The chapter executor behind `make refresh` and `make book`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("book_tool", ROOT / "tools" / "book.py")
book = importlib.util.module_from_spec(spec)
sys.modules["book_tool"] = book
spec.loader.exec_module(book)


def notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["widgets"] = {"state": "volatile"}
    return nb


def test_execute_stores_counts_outputs_and_strips_metadata(tmp_path):
    src = tmp_path / "01_demo.ipynb"
    nbformat.write(notebook("import os\nprint(os.environ['TQDM_DISABLE'])", "1 + 1"), src)
    seconds = book.execute(src, src, cell_timeout=60)
    nb = nbformat.read(src, as_version=4)
    assert seconds > 0
    assert [c.execution_count for c in nb.cells] == [1, 2]
    assert nb.cells[0].outputs[0].text == "1\n"
    assert nb.cells[1].outputs[0].data["text/plain"] == "2"
    assert set(nb.metadata) == {"kernelspec", "language_info"}
    assert "execution" not in nb.cells[0].metadata


def test_stderr_output_is_refused(tmp_path):
    src = tmp_path / "02_noisy.ipynb"
    nbformat.write(notebook("import sys\nprint('oops', file=sys.stderr)"), src)
    with pytest.raises(RuntimeError, match="wrote to stderr"):
        book.execute(src, tmp_path / "out.ipynb", cell_timeout=60)


def test_failing_chapter_counts_as_failure(tmp_path, capsys):
    src = tmp_path / "03_broken.ipynb"
    nbformat.write(notebook("raise ValueError('broken on purpose')"), src)
    failures = book.run_all([src], lambda p: tmp_path / "out.ipynb", 60, 60.0)
    assert failures == 1
    assert "FAILED" in capsys.readouterr().out


def test_chapters_are_in_reading_order_and_toc_lists_them(tmp_path):
    found = book.chapters()
    names = [p.name for p in found]
    assert names == sorted(names)
    assert all(p.name[:2].isdigit() for p in found), "chapters are named NN_short_name.ipynb"
    stems = [p.stem for p in found]
    assert len(stems) == len(set(stems)), "chapter names must be unique across the book"
    for p in [tmp_path / "01_a.ipynb", tmp_path / "02_b.ipynb"]:
        p.touch()
    book.write_toc(sorted(tmp_path.glob("*.ipynb")), tmp_path)
    assert (tmp_path / "_toc.yml").read_text().splitlines()[-2:] == ["- file: 01_a", "- file: 02_b"]


def test_stored_chapters_were_executed_top_to_bottom():
    for path in book.chapters():
        nb = nbformat.read(path, as_version=4)
        counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()]
        assert counts == list(range(1, len(counts) + 1)), f"{path.name}: run `make refresh`"
        assert set(nb.metadata) <= {"kernelspec", "language_info"}, f"{path.name}: unnormalised"

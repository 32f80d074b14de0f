"""The chapter executor behind `make refresh` and `make book`."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.ipkernel import IPythonKernel

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("book_tool", ROOT / "tools" / "book.py")
book = importlib.util.module_from_spec(spec)
sys.modules["book_tool"] = book
spec.loader.exec_module(book)
heartbeat = sys.modules["heartbeat"]  # tools/heartbeat.py, as book.py imported it


def notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["widgets"] = {"state": "volatile"}
    return nb


def test_execute_stores_counts_outputs_and_strips_metadata(tmp_path):
    src = tmp_path / "01_demo.ipynb"
    nbformat.write(notebook("import os\nprint(os.environ['TQDM_DISABLE'])", "1 + 1"), src)
    seconds, cpu = book.execute(src, src, cell_timeout=60)
    nb = nbformat.read(src, as_version=4)
    assert seconds > 0 and cpu > 0
    assert [c.execution_count for c in nb.cells] == [1, 2]
    assert nb.cells[0].outputs[0].text == "1\n"
    assert nb.cells[1].outputs[0].data["text/plain"] == "2"
    assert set(nb.metadata) == {"kernelspec", "language_info"}
    # what the kernel reports, whole: JupyterLab writes it on open and marks any difference
    assert nb.metadata.language_info == IPythonKernel.language_info
    assert "execution" not in nb.cells[0].metadata


def test_consecutive_streams_are_stored_as_one_output(tmp_path):
    src = tmp_path / "01_demo.ipynb"
    code = "import sys, time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')\n2"
    nbformat.write(notebook(code), src)
    book.execute(src, src, cell_timeout=60)
    outputs = nbformat.read(src, as_version=4).cells[0].outputs
    assert [o.output_type for o in outputs] == ["stream", "execute_result"]
    assert outputs[0].text == "a\nb\n"


def test_stderr_output_is_refused(tmp_path):
    src = tmp_path / "02_noisy.ipynb"
    nbformat.write(notebook("import sys\nprint('oops', file=sys.stderr)"), src)
    with pytest.raises(book.ChapterError, match="wrote to stderr"):
        book.execute(src, tmp_path / "out.ipynb", cell_timeout=60)


def test_failing_chapter_counts_as_failure_and_is_not_stored_by_refresh(tmp_path, capsys):
    src = tmp_path / "03_broken.ipynb"
    nbformat.write(notebook("print('before')", "raise ValueError('broken on purpose')"), src)
    failures, slow = book.run_all([src], lambda p: tmp_path / "out.ipynb", 60, 120.0)
    assert (failures, slow) == (1, [])
    captured = capsys.readouterr()
    assert "FAILED" in captured.out and "broken on purpose" in captured.err
    assert not (tmp_path / "out.ipynb").exists()


def test_failing_chapter_is_kept_with_its_error_for_the_readers_build(tmp_path):
    src = tmp_path / "03_broken.ipynb"
    nbformat.write(notebook("print('before')", "raise ValueError('broken on purpose')"), src)
    failures, _ = book.run_all([src], lambda p: tmp_path / "out.ipynb", 60, 120.0, keep_failed=True)
    assert failures == 1
    cells = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert cells[0].outputs[0].text == "before\n"
    assert cells[1].outputs[-1].ename == "ValueError"


BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass"


@pytest.mark.slow
def test_budget_is_kernel_cpu_time_enforced_by_refresh_and_a_warning_otherwise(tmp_path):
    src = tmp_path / "04_slow.ipynb"
    nbformat.write(notebook(BURN), src)
    wall, cpu = book.execute(src, tmp_path / "timed.ipynb", cell_timeout=60)
    assert cpu >= 0.6, "the kernel's CPU time must be counted, not this process's"
    failures, slow = book.run_all([src], lambda p: tmp_path / "a.ipynb", 60, 0.3)
    assert failures == 1 and len(slow) == 1 and "s CPU" in slow[0]
    failures, slow = book.run_all(
        [src], lambda p: tmp_path / "b.ipynb", 60, 0.3, enforce_budget=False
    )
    assert failures == 0 and len(slow) == 1
    assert (tmp_path / "b.ipynb").exists()


@pytest.mark.slow
def test_build_renders_a_book_whose_chapter_is_over_budget(tmp_path, capsys, monkeypatch):
    src_book = tmp_path / "book"
    src_book.mkdir()
    (src_book / "intro.md").write_text("# A tiny book\n")
    shutil.copy2(book.BOOK / "_config.yml", src_book / "_config.yml")
    nb = notebook(BURN, "print('rendered')")
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("# Slow chapter"))
    nbformat.write(nb, src_book / "01_slow.ipynb")
    out = tmp_path / "out"
    monkeypatch.setattr(heartbeat, "EVERY", 0.2)  # the slow cell runs 0.6 s: a progress mark
    assert book.build(60, 0.3, book=src_book, out=out, api=False) == 0
    lines = capsys.readouterr().out.splitlines()
    chapter = next(line for line in lines if line.startswith("[1/1] ") and "01_slow" in line)
    assert "[cell 2/3, " in chapter and chapter.endswith("s CPU (over the 0 s CPU budget)")
    assert any(line.startswith("  read 01_slow") for line in lines), "rendering shows its pages"
    warning = lines.index(next(line for line in lines if line.startswith("warning: over")))
    assert "01_slow.ipynb" in lines[warning + 1]
    assert lines[-1] == f"open {out / '_build' / 'html' / 'index.html'}", (
        "the book is the last line"
    )
    page = (out / "_build" / "html" / "01_slow.html").read_text()
    assert "rendered" in page


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


def test_the_notation_page_is_read_right_after_the_introduction(tmp_path):
    assert "notation" in book.FRONT_PAGES and (book.BOOK / "notation.md").is_file()
    book.write_toc([tmp_path / "01_a.ipynb"], tmp_path, ("errata",), front=book.FRONT_PAGES)
    toc = (tmp_path / "_toc.yml").read_text().splitlines()
    assert toc == [
        "format: jb-book",
        "root: intro",
        "chapters:",
        "- file: notation",
        "- file: 01_a",
        "- file: errata",
    ]


def test_stored_chapters_were_executed_top_to_bottom():
    for path in book.chapters():
        nb = nbformat.read(path, as_version=4)
        counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()]
        assert counts == list(range(1, len(counts) + 1)), f"{path.name}: run `make refresh`"
        assert set(nb.metadata) <= {"kernelspec", "language_info"}, f"{path.name}: unnormalised"
        # The kernel's whole language_info (its version is the Python that executed the chapter)
        assert set(nb.metadata.language_info) == set(IPythonKernel.language_info), path.name


@pytest.mark.slow
@pytest.mark.skipif("avx2" not in Path("/proc/cpuinfo").read_text(), reason="needs an AVX2 CPU")
def test_refresh_runs_chapters_on_avx2_kernels_and_names_the_cpu(tmp_path, capsys, monkeypatch):
    """Issue 46: the budget `make refresh` checks is for an AVX2 CPU; `--kernels native` is not."""
    for key in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA"):
        monkeypatch.delenv(key, raising=False)
    src = tmp_path / "01_kernels.ipynb"
    code = "import os, torch\nprint(torch.backends.cpu.get_cpu_capability(), os.environ.get('ONEDNN_MAX_CPU_ISA'))"
    seen = {}
    for kernels in ("avx2", "native"):
        nbformat.write(notebook(code), src)
        args = ["refresh", str(src)] + ([] if kernels == "avx2" else ["--kernels", kernels])
        assert book.main(args) == 0
        seen[kernels] = nbformat.read(src, as_version=4).cells[0].outputs[0].text.split()
        assert "kernels" in capsys.readouterr().out.splitlines()[0]
    assert seen["avx2"] == ["AVX2", "AVX2"]
    assert seen["native"][1] == "None"  # oneDNN not capped; torch uses the CPU's best
    if "avx512f" in Path("/proc/cpuinfo").read_text():
        assert seen["native"][0] == "AVX512"

"""Student and instructor editions of the rendered book (issue 15).

The small book of ``tests/test_book_render.py`` (built through ``tools/book.py``'s own
``prepare``/``render``), with an exercise and its answer cell added, rendered once per edition:
the student pages and the notebook they offer for download hold no answer text, the instructor
pages hold it (in a dropdown); the exercise itself is in both.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "book_render_helpers", ROOT / "tests" / "test_book_render.py"
)
helpers = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("book_render_helpers", helpers)
_spec.loader.exec_module(helpers)
book_tool = helpers.book_tool

QUESTION = "**Exercise 1.1** (derive). Show that the weight of a positive pair is negative."
ANSWER_TEXT = "The derivative of minus a similarity is minus one, quokka"


def chapter_with_exercise() -> nbformat.NotebookNode:
    nb = helpers.chapter()
    nb.cells += [
        nbformat.v4.new_markdown_cell("## 1.1 Exercises"),
        nbformat.v4.new_markdown_cell(QUESTION),
        nbformat.v4.new_markdown_cell(
            f"````{{admonition}} Answer 1.1\n:class: dropdown\n{ANSWER_TEXT}.\n````",
            metadata={"tags": ["answer"]},
        ),
    ]
    return nb


def build_edition(out: Path, edition: str) -> Path:
    src = out / "src"
    src.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    (src / "_config.yml").write_text(yaml.safe_dump(config))
    (src / "intro.md").write_text(helpers.INTRO)
    if (ROOT / "book" / "_static").is_dir():
        shutil.copytree(ROOT / "book" / "_static", src / "_static")
    site = out / "site"
    site.mkdir()
    nbformat.write(chapter_with_exercise(), site / "01_demo.ipynb")
    book_tool.prepare(src, site, [site / "01_demo.ipynb"], None, edition, api=False)
    assert book_tool.render(site) == 0
    return site / "_build" / "html"


@pytest.fixture(scope="module", params=book_tool.EDITIONS)
def edition(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, build_edition(tmp_path_factory.mktemp(request.param), request.param)


def rendered_text(html: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in html.rglob("*")
        if p.is_file() and p.suffix in (".html", ".ipynb", ".txt", ".md", ".js")
    )


@pytest.mark.slow
def test_answers_only_in_the_instructor_edition(edition):
    name, html = edition
    page = (html / "01_demo.html").read_text()
    assert "Show that the weight of a positive pair is negative" in page
    if name == "student":
        assert "quokka" not in rendered_text(html), "an answer reached the student edition"
        assert "Answer 1.1" not in page
    else:
        assert ANSWER_TEXT in page and "Answer 1.1" in page
        assert "dropdown" in page, "the answer sits behind a toggle"
        assert "instructor edition" in (html / "intro.html").read_text()


@pytest.mark.slow
def test_no_launch_buttons_where_the_build_meant_none(edition):
    """Built without a launch target, no page opens anyone's notebooks (Jupyter Book's default
    repository, its own project, once filled the gap), and the link check agrees."""
    name, html = edition
    page = (html / "01_demo.html").read_text()
    assert "mybinder.org" not in page and "colab.research.google.com" not in page
    assert helpers.book_check.check_book(html, None, report=lambda line: None) == []


def test_student_edition_never_edits_the_sources(tmp_path):
    book = tmp_path / "book"
    book.mkdir()
    (book / "_config.yml").write_text((ROOT / "book" / "_config.yml").read_text())
    nbformat.write(chapter_with_exercise(), book / "01_demo.ipynb")
    site = tmp_path / "site"
    site.mkdir()
    with pytest.raises(ValueError, match="executed copies"):
        book_tool.prepare(book, site, [book / "01_demo.ipynb"], None, "student")
    assert "quokka" in (book / "01_demo.ipynb").read_text()
    with pytest.raises(ValueError, match="edition"):
        book_tool.prepare(book, site, [], None, "teacher")


def test_remove_answers_counts_and_keeps_everything_else(tmp_path):
    nbformat.write(chapter_with_exercise(), tmp_path / "c.ipynb")
    before = nbformat.read(tmp_path / "c.ipynb", as_version=4)
    assert book_tool.remove_answers(tmp_path / "c.ipynb") == 1
    after = nbformat.read(tmp_path / "c.ipynb", as_version=4)
    assert [c.source for c in after.cells] == [c.source for c in before.cells[:-1]]

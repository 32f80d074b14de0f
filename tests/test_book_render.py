"""The rendered book offline: a small book built with the real ``book/_config.yml``, opened in Chromium.

``make test`` must not need ``make book`` first, so this builds a two-page book (an intro and one
executed notebook with the kinds of content the chapters have: inline and display maths, maths in
a heading, SymPy LaTeX output, a long code line, a figure stored as the chapters store theirs) in a
temporary folder through ``tools/book.py``'s own ``prepare``/``render``, then checks it with
``tools/book_check.py`` (the same checks ``python tools/book_check.py build/book/_build/html`` runs
on the real book). A second build with Sphinx's default MathJax (a CDN) shows the checks fail.

The browser tests need Chromium (Debian: ``apt-get install chromium``; ``.ci/run`` installs it).
Without one they are skipped with that reason, unless ``DMLBOOK_REQUIRE_BROWSER=1`` (set by CI),
where a missing browser is a failure.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import re
import sys
from pathlib import Path

import matplotlib
import nbformat
import pytest
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
book_check = importlib.import_module("book_check")
book_links = importlib.import_module("book_links")
spec = importlib.util.spec_from_file_location("book_tool", ROOT / "tools" / "book.py")
book_tool = sys.modules.get("book_tool") or importlib.util.module_from_spec(spec)
if "book_tool" not in sys.modules:
    sys.modules["book_tool"] = book_tool
    spec.loader.exec_module(book_tool)

LAUNCH = book_links.LaunchTarget("dmlbook-readers", "dmlbook", "main", "book")
LONG_LINE = "values = [" + ", ".join(str(i) for i in range(60)) + "]"
INTRO = r"""# A small book

## A loss is a function of $\mathbf{S}$

Inline maths $S_{ij} = \mathbf{x}_i^\top \mathbf{x}_j$ and a display:

$$
\frac{\partial \mathcal{L}}{\partial S_{ij}} = w_{ij}
$$
"""


def figure_png() -> str:
    """A figure stored as the chapters store theirs (80 dpi, the widest chapter figure's size)."""
    fig, ax = plt.subplots(figsize=(855 / 80, 266 / 80), dpi=80)
    ax.plot([0, 1, 2], [0, 1, 4])
    ax.set_title("Recall@1 against epochs")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def chapter() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    sympy_output = nbformat.v4.new_output(
        "execute_result",
        {
            "text/plain": "exp(x)/(exp(x) + 1)",
            "text/latex": r"$\displaystyle \frac{e^{x}}{e^{x} + 1}$",
        },
        execution_count=1,
    )
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "# Pair weights\n\n## Which loss has $|w_{ij}| = 2D_{ij}$?\n\nThe weight $\\alpha + \\beta$."
        ),
        nbformat.v4.new_code_cell("sp.exp(x) / (1 + sp.exp(x))", execution_count=1),
        nbformat.v4.new_code_cell(LONG_LINE + "\nprint(values)", execution_count=2),
        nbformat.v4.new_code_cell("plot()", execution_count=3),
    ]
    nb.cells[1].outputs = [sympy_output]
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text=LONG_LINE + "\n")]
    # stored as the chapters store a figure: numbered within the chapter, captioned, described
    nb.cells[3].metadata["mystnb"] = {
        "figure": {"caption": "Figure 1.1. Recall@1 against epochs.", "name": "fig-01-demo"},
        "image": {"alt": "A line rising from 0 to 4 over three epochs."},
    }
    nb.cells[3].outputs = [
        nbformat.v4.new_output(
            "display_data", {"image/png": figure_png(), "text/plain": "<Figure>"}
        )
    ]
    nb.metadata["kernelspec"] = book_tool.KERNELSPEC
    return nb


def build_small_book(
    out: Path, config_edit=None, offline: bool = True, api: bool = False, intro: str = INTRO
) -> Path:
    """Build the small book in ``out`` through tools/book.py; returns the HTML folder.

    ``render`` returns 0 for a book that reads offline and 1 when a page needs the network.
    """
    src = out / "src"
    src.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    if config_edit:
        config_edit(config)
    (src / "_config.yml").write_text(yaml.safe_dump(config))
    (src / "intro.md").write_text(intro)
    if (ROOT / "book" / "_static").is_dir():
        (src / "_static").symlink_to(ROOT / "book" / "_static")
    site = out / "site"
    site.mkdir()
    nbformat.write(chapter(), site / "01_demo.ipynb")
    book_tool.prepare(src, site, [site / "01_demo.ipynb"], LAUNCH, api=api)
    assert book_tool.render(site) == (0 if offline else 1)
    assert (site / "_build" / "html" / "01_demo.html").is_file(), "Jupyter Book rendered nothing"
    return site / "_build" / "html"


def test_a_sphinx_warning_fails_the_build(tmp_path, capsys):
    """``make book`` renders with ``-W --keep-going``: a page that makes Sphinx warn (here a link
    to a document that does not exist) fails the build, and the warning is printed."""
    with pytest.raises(AssertionError, match="assert 1 == 0"):
        build_small_book(tmp_path, intro=INTRO + "\nSee {doc}`no_such_page`.\n")
    assert re.search(r"WARNING: unknown document: .?no_such_page", capsys.readouterr().out)


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> Path:
    return build_small_book(tmp_path_factory.mktemp("offline-book"), api=True)


@pytest.fixture(scope="module")
def cdn_html(tmp_path_factory) -> Path:
    """Today's default: the same book with Sphinx's own MathJax (from a CDN)."""

    def sphinx_default_mathjax(config):
        config["sphinx"].pop("extra_extensions", None)

    return build_small_book(tmp_path_factory.mktemp("cdn-book"), sphinx_default_mathjax, False)


@pytest.fixture(scope="module")
def browser(chromium) -> str:
    return chromium


def test_real_config_bundles_mathjax_from_the_installed_package():
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert "sphinx-mathjax-offline" in config["sphinx"]["extra_extensions"]
    package = importlib.util.find_spec("sphinx-mathjax-offline")
    assert package is not None, "pip install sphinx-mathjax-offline (the book extra)"
    mathjax = Path(package.origin).parent / "static" / "mathjax"
    assert (mathjax / "tex-chtml.js").is_file()
    fonts = list((mathjax / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert len(fonts) > 20, "MathJax's CHTML fonts must ship with it"


def test_rendered_pages_reference_nothing_on_the_network(html):
    assert book_check.network_references(html) == []
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_equations_render_with_the_network_cut_off(html, browser):
    pages = ["intro.html", "01_demo.html"]
    for page in pages:
        result = book_check.open_offline(html / page, browser)
        assert book_check.page_problems(result) == [], page
        assert result.requests == []
    intro = book_check.parse(book_check.open_offline(html / "intro.html", browser).dom)
    assert intro.math >= 4, "heading, contents entry, inline and display maths typeset"


def test_sphinx_default_mathjax_is_caught(cdn_html, browser):
    remote = book_check.network_references(cdn_html)
    assert any("cdn.jsdelivr.net/npm/mathjax" in line for line in remote)
    problems = book_check.page_problems(book_check.open_offline(cdn_html / "01_demo.html", browser))
    assert any(p.startswith("requested the network: https://cdn.jsdelivr.net") for p in problems)
    assert any("no MathJax output" in p for p in problems)
    assert any("raw TeX left in the text" in p and "\\frac" in p for p in problems)


def test_launch_links_are_plain_links_and_each_chapter_downloads_as_ipynb(html):
    page = (html / "01_demo.html").read_text()
    binder = "https://mybinder.org/v2/gh/dmlbook-readers/dmlbook/main?urlpath="
    colab = "https://colab.research.google.com/github/dmlbook-readers/dmlbook/blob/main/book/"
    assert f'href="{binder}' in page and f'href="{colab}01_demo.ipynb"' in page
    assert 'href="_sources/01_demo.ipynb"' in page
    downloaded = nbformat.read(html / "_sources" / "01_demo.ipynb", as_version=4)
    assert downloaded.cells[2].source.startswith(LONG_LINE)


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("https://github.com/owner/dmlbook.git", ("owner", "dmlbook", "main", "book")),
        ("git@github.com:owner/dml.book.git", ("owner", "dml.book", "main", "book")),
        ("https://github.com/owner/dmlbook/", ("owner", "dmlbook", "main", "book")),
        ("https://github.com/c/stu/tree/v2/notebooks/", ("c", "stu", "v2", "notebooks")),
        ("https://github.com/c/stu/tree/student", ("c", "stu", "student", "")),
        ("/work/main", None),
        ("https://gitlab.com/owner/dmlbook.git", None),
        ("", None),
    ],
)
def test_launch_buttons_only_for_a_github_tree(monkeypatch, tmp_path, remote, expected):
    monkeypatch.delenv("DMLBOOK_STUDENT_REPOSITORY", raising=False)
    monkeypatch.setenv("DMLBOOK_REPOSITORY", remote)
    if not remote:
        monkeypatch.delenv("DMLBOOK_REPOSITORY")  # and tmp_path is no git clone: no origin
    target, why = book_links.launch_target("instructor", tmp_path)
    assert target == (book_links.LaunchTarget(*expected) if expected else None), why
    # The student edition never opens the repository's notebooks (they hold the answers) ...
    student, why = book_links.launch_target("student", tmp_path)
    assert student is None and "DMLBOOK_STUDENT_REPOSITORY" in why
    # ... only the student notebooks, where they are published
    monkeypatch.setenv("DMLBOOK_STUDENT_REPOSITORY", remote)
    assert book_links.launch_target("student", tmp_path)[0] == target


def test_link_check_accepts_what_the_build_meant_and_names_the_rest(tmp_path, html):
    assert book_check.check_book(html, None, report=lambda line: None) == []
    binder = "https://mybinder.org/v2/gh/{}/main?urlpath=lab/tree/book/01_demo.ipynb"
    page = tmp_path / "_build" / "html" / "01_demo.html"
    (page.parent / "_sources").mkdir(parents=True)
    (page.parent / "_sources" / "01_demo.ipynb").write_text("see https://example.org/paper")
    page.write_text(
        "".join(
            f'<a href="{url}">x</a>'
            for url in (
                "https://example.org/paper",  # written by the author: fine
                binder.format("dmlbook-readers/dmlbook"),  # the one the build meant
                binder.format("executablebooks/jupyter-book"),  # Jupyter Book's default
                "https://example.org/elsewhere",  # written by no one
            )
        )
    )
    book_links.write_manifest(tmp_path, "instructor", LAUNCH)
    problems = book_links.link_problems(page.parent, page, book_links.read_manifest(page.parent))
    assert len(problems) == 2, problems
    assert "executablebooks/jupyter-book" in problems[0] and "elsewhere" in problems[1]
    book_links.write_manifest(tmp_path, "student", None)
    problems = book_links.link_problems(page.parent, page, book_links.read_manifest(page.parent))
    assert sum("the build did not mean" in p for p in problems) == 2


def test_clipped_code_and_shrunken_figures_are_reported(tmp_path, browser):
    png = figure_png()
    page = tmp_path / "bad.html"
    page.write_text(
        "<html><body><div style='width:300px'>"
        f"<pre style='overflow-x:hidden;white-space:pre'>{LONG_LINE}</pre>"
        f"<img style='width:200px' src='data:image/png;base64,{png}'>"
        "</div></body></html>"
    )
    problems = book_check.page_problems(book_check.open_offline(page, browser), expect_math=False)
    assert any(p.startswith("code line clipped: 'values = [0, 1") for p in problems)
    assert any("shown at 200px of its 855px" in p for p in problems)


def test_figure_shows_the_chapters_number_and_hides_sphinxs(html, browser):
    """The rendered figure carries the cell's caption ("Figure 1.1. ...") and its alternative
    text; Sphinx's own book-wide "Fig. N" is in the page but hidden by book/_static's CSS."""
    result = book_check.open_offline(html / "01_demo.html", browser)
    assert "Figure 1.1. Recall@1 against epochs." in result.dom
    assert 'alt="A line rising from 0 to 4 over three epochs."' in result.dom
    assert re.search(r'class="caption-number"[^>]*>Fig\. 1', result.dom), "Sphinx numbered it"
    assert book_check.page_problems(result) == []


def test_a_visible_book_wide_figure_number_is_reported(tmp_path, browser):
    """Without the book's CSS rule Sphinx's number shows beside the chapter's caption."""
    page = tmp_path / "numbered.html"
    page.write_text(
        "<html><body><figure><img src='data:image/png;base64," + figure_png() + "'>"
        "<figcaption><p><span class='caption-number'>Fig. 17 </span>"
        "<span class='caption-text'>Figure 4.2. A curve.</span></p></figcaption></figure>"
        "</body></html>"
    )
    problems = book_check.page_problems(book_check.open_offline(page, browser), expect_math=False)
    assert problems == [
        "Sphinx's book-wide figure number shown beside the chapter's caption: 'Fig. 17'"
    ]


def test_api_reference_renders_an_entry_for_every_public_name(html):
    """Sphinx's autodoc rendered each name of the public modules' ``__all__`` (an import or
    docstring failure leaves a name out with only a warning)."""
    import re

    api_test = importlib.import_module("test_api_reference")
    page = (html / "api.html").read_text()
    ids = {i.rsplit(".", 1)[1] for i in re.findall(r'<dt class="sig[^"]*" id="([\w.]+)"', page)}
    missing = [f"{m}.{n}" for m, n in api_test.public_names() if n not in ids]
    assert missing == [], "not rendered on the API page"
    # docstrings' formulas are plain text in literal blocks (`::`), never half-rendered TeX
    prose = " ".join(book_check.parse(page).prose)
    assert not book_check.RAW_TEX.findall(prose), "TeX-like text in a docstring"
    assert "API reference" in (html / "intro.html").read_text(), "in the table of contents"


def test_no_chapter_title_carries_maths():
    """The contents panel shows page titles as plain text: ``\\mathbf{S}`` where maths was."""
    titled = []
    for path in book_tool.chapters():
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                titled += [
                    f"{path.name}: {line}"
                    for line in cell.source.splitlines()
                    if line.startswith("# ") and "$" in line
                ]
    intro = (ROOT / "book" / "intro.md").read_text().splitlines()
    titled += [f"intro.md: {line}" for line in intro if line.startswith("# ") and "$" in line]
    assert titled == [], "keep maths out of '# ' titles (section headings are fine)"


def test_no_chapter_cell_holds_a_control_character():
    """A control character in a cell (``"\\beta"`` typed in a Python string becomes a backspace and
    "eta") renders as nothing or as garbage; tab, newline and carriage return are text."""
    control = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
    found = [
        f"{path.name}, cell {i}: {cell.source[max(m.start() - 20, 0) : m.end() + 5]!r}"
        for path in book_tool.chapters()
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells)
        for m in control.finditer(cell.source)
    ]
    assert found == []


def test_internal_links_and_anchors_that_do_not_resolve_are_reported(tmp_path):
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "fig.png").write_bytes(base64.b64decode(figure_png()))
    (tmp_path / "12_dro.html").write_text(
        '<section id="pseudo-pairs-and-ms-hap2s-e"><h2>12.6</h2><a name="old-style"></a></section>'
    )
    page = tmp_path / "errata.html"
    page.write_text(
        "".join(
            f'<a href="{href}">x</a>'
            for href in (
                "12_dro.html#pseudo-pairs-and-ms-hap2s-e",  # resolves
                "12_dro.html#old-style",  # an <a name=...> resolves too
                "#top",  # an anchor of this page that it lacks
                "12_dro.html#126-pseudo-pairs-and-ms-hap2s_e-supplement-612-613",  # the errata's
                "13_gradient_surgery.html",  # no such page
                "_images/fig.png",
                "https://example.org/x#y",  # external: book_links' business
                "mailto:a@b.org",
            )
        )
    )
    problems = book_check.internal_link_problems(tmp_path, page, {})
    assert problems == [
        "link to an anchor that does not exist: #top",
        "link to an anchor that does not exist: "
        "12_dro.html#126-pseudo-pairs-and-ms-hap2s_e-supplement-612-613",
        "link to a file that does not exist: 13_gradient_surgery.html",
    ]


def test_maths_that_mathjax_cannot_typeset_is_reported(html, browser):
    """Chapter 13 once had a literal backspace where ``\\beta`` was meant (``"\\beta"`` in a
    Python string): MathJax shows a red "Math input error"; and a TeX error (a double exponent)."""
    page = (html / "01_demo.html").read_text()
    bad = (
        '<p><span class="math notranslate nohighlight">\\(\\alpha + \x08eta\\)</span> and '
        '<span class="math notranslate nohighlight">\\(x^2^3\\)</span></p>'
    )
    broken = html / "01_bad_maths.html"
    broken.write_text(page.replace("<h1>", bad + "<h1>", 1))
    try:
        problems = book_check.page_problems(book_check.open_offline(broken, browser))
    finally:
        broken.unlink()
    errors = [p for p in problems if p.startswith("maths MathJax could not typeset")]
    assert len(errors) == 2, problems
    assert any("Double exponent" in p for p in errors)
    fine = book_check.page_problems(book_check.open_offline(html / "01_demo.html", browser))
    assert fine == []

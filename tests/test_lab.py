"""The book in a real JupyterLab, driven in headless Chromium (playwright with the system's Chromium).

One JupyterLab server for the whole file, started as ``make lab`` starts it (``tools/jupyter``
first on ``JUPYTER_CONFIG_PATH``) on the reader's working copy that ``tools/lab.py`` makes of the
student edition (here in a temporary folder), with its own settings, workspaces and runtime
folders:

- the file browser lists the chapters and nothing else;
- a chapter opens without an unsaved-changes mark, and saving it untouched leaves the file as it
  was, byte for byte (JupyterLab writes the kernel's ``language_info`` into a notebook it opens;
  ``tools/book.py`` stores exactly that);
- the weight explorer of Chapter 10 runs, and redraws for another loss and another value typed
  into a slider, showing what :mod:`dmlbook.chapters.explorer` computes in this process for the same
  settings;
- a chapter shows its exercises and none of their answers (issue 41), while the same chapter
  with its answers, opened the same way, shows them (the check can fail).

Without a browser: ``tools/lab.py``'s copies (student without answers, instructor with them; a
reader's edited chapter is never overwritten, ``REFRESH=1`` moves the copy aside; the copy lives
where git ignores it) and the ``make lab`` recipe that serves it.

Needs Chromium, as ``tests/test_book_render.py`` (``DMLBOOK_REQUIRE_BROWSER=1``, set by CI, turns
a missing browser into a failure).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from ipykernel.ipkernel import IPythonKernel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import lab as lab_copy  # noqa: E402  (tools/lab.py)

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

CHAPTER = "10_multi_similarity.ipynb"
EXERCISES = "02_general_pair_weighting.ipynb"
WORDS = r"[A-Za-z][A-Za-z ,;]+"
EXPLORER_CALL = 'weight_explorer("multi_similarity")'
TIMEOUT_MS = 180_000  # the first cell run imports torch in a fresh kernel on a busy machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, chromium):
    """(playwright page, base URL with token, the served copy of book/)."""
    browser = chromium
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("lab")
    served, _, _, _ = lab_copy.prepare("student", tmp / "lab-student")
    settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # every cell in the page, not only those scrolled into view, so that its text can be read
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    chapter = served / CHAPTER
    nb = nbformat.read(chapter, as_version=4)
    if nb.metadata.language_info.get("version") != IPythonKernel.language_info["version"]:
        # Executed with another Python: JupyterLab would record this one's version on open.
        nb.metadata.language_info = dict(IPythonKernel.language_info)
        nbformat.write(nb, chapter)
    token, port = secrets.token_hex(16), free_port()
    config_path = os.pathsep.join(
        filter(None, [str(ROOT / "tools" / "jupyter"), os.environ.get("JUPYTER_CONFIG_PATH")])
    )
    env = os.environ | {
        "JUPYTER_CONFIG_PATH": config_path,
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
    }
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("jupyter")),
            "lab",
            str(served),
            "--no-browser",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            "--allow-root",
        ],  # fmt: skip
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                assert server.poll() is None, "JupyterLab exited at start"
                time.sleep(0.2)
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            yield page, f"{base}/lab/tree/{{}}?token={token}", served
            chromium.close()
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def test_the_file_browser_lists_the_chapters_only(lab):
    page, url, served = lab
    page.goto(url.format(""))
    page.wait_for_selector(".jp-DirListing-item")
    page.wait_for_function("document.querySelectorAll('.jp-DirListing-item').length > 10")
    shown = page.eval_on_selector_all(
        ".jp-DirListing-itemText", "els => els.map(e => e.textContent)"
    )
    chapters = sorted(p.name for p in served.glob("[0-9][0-9]_*.ipynb"))
    assert sorted(shown) == chapters, f"not chapters: {sorted(set(shown) - set(chapters))}"
    assert (served / lab_copy.MANIFEST).is_file()  # the copy's manifest, hidden from the browser


def test_a_chapter_opens_unchanged(lab):
    page, url, served = lab
    before = (served / CHAPTER).read_bytes()
    page.goto(url.format(CHAPTER))
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    # the kernel is up and JupyterLab has written its language_info and kernelspec
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    page.wait_for_timeout(3000)
    tab = page.locator(".lm-TabBar-tab.jp-mod-current").first
    assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "unsaved changes on open"
    page.keyboard.press("Control+s")
    page.wait_for_timeout(2000)
    after = (served / CHAPTER).read_bytes()
    assert after == before, "saving an untouched chapter rewrote it"


def test_the_weight_explorer_redraws_in_jupyterlab(lab):
    from dmlbook.chapters.explorer import batch_weights, default_batch, tunable_parameters

    page, url, _ = lab
    if CHAPTER not in page.url:
        page.goto(url.format(CHAPTER))
    cell = page.locator(".jp-CodeCell", has_text=EXPLORER_CALL).first
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    summary = cell.locator(".dmlbook-explorer-summary")
    batch = default_batch()

    def expect(name: str, params: dict) -> None:
        wanted = batch_weights(name, params, *batch).summary()
        page.wait_for_function(
            "([el, text]) => el.textContent === text", arg=[summary.element_handle(), wanted]
        )

    summary.wait_for()
    expect("multi_similarity", tunable_parameters("multi_similarity"))
    first_figure = cell.locator(".dmlbook-explorer-figure").get_attribute("src")
    cell.locator(".widget-dropdown select").select_option("contrastive")
    expect("contrastive", tunable_parameters("contrastive"))
    readout = cell.locator(".widget-slider .widget-readout").first
    readout.click()
    page.keyboard.press("Control+a")
    page.keyboard.type("0.3")
    page.keyboard.press("Enter")
    expect("contrastive", {"margin": 0.3})
    figure = cell.locator(".dmlbook-explorer-figure").element_handle()
    page.wait_for_function("([el, first]) => el.src !== first", arg=[figure, first_figure])
    table = cell.locator(".dmlbook-explorer-similarities").inner_text()
    assert "Wang et al., Table 1 (Contrastive)" in table


def page_text(page, url: str, chapter: str, cells: int) -> str:
    """The text of every cell of ``chapter`` (``cells`` of them) as JupyterLab shows it, markdown
    rendered: read once every cell is on the page and the text has stopped changing (JupyterLab
    renders markdown a cell at a time, so a first read can miss the last cells)."""
    page.goto(url.format(chapter))
    shown = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"  # the tab in front
    page.wait_for_function(f"document.querySelectorAll('{shown} .jp-Cell').length >= {cells}")
    page.wait_for_function(f"document.querySelector('{shown}').innerText.includes('Exercise 2.3')")
    text, deadline = "", time.monotonic() + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        page.wait_for_timeout(1000)
        now = page.inner_text(shown)
        if now == text:
            return text
        text = now
    raise AssertionError(f"the page of {chapter} kept changing for {TIMEOUT_MS / 1000:.0f} s")


def answer_phrases(chapter: Path) -> list[str]:
    """From every answer cell of ``chapter``, its longest run of plain words (no maths)."""
    phrases = []
    for cell in nbformat.read(chapter, as_version=4).cells:
        if "answer" in cell.metadata.get("tags", []):
            body = cell.source.split(":class: dropdown", 1)[1]
            body = re.sub(r"```.*?```", " ", body, flags=re.S)  # prose only, no code
            runs = [r for part in re.split(r"\$[^$]*\$", body) for r in re.findall(WORDS, part)]
            phrases.append(max(runs, key=len).strip())
    assert phrases and all(len(p) > 15 for p in phrases), phrases
    return phrases


def test_a_chapter_shows_its_exercises_and_no_answer(lab):
    page, url, served = lab
    phrases = answer_phrases(ROOT / "book" / EXERCISES)
    text = page_text(page, url, EXERCISES, len(nbformat.read(served / EXERCISES, 4).cells))
    assert "Exercise 2.3" in text and "Self-check" in text, f"no exercises: {text[-500:]!r}"
    shown = [p for p in phrases if p in text]
    assert shown == [] and ":class: dropdown" not in text, f"answers on the page: {shown}"
    # the same chapter with its answers, served the same way, shows them: the check can fail
    shutil.copy(ROOT / "book" / EXERCISES, served / f"control_{EXERCISES}")
    cells = len(nbformat.read(ROOT / "book" / EXERCISES, 4).cells)
    control = page_text(page, url, f"control_{EXERCISES}", cells)
    assert all(p in control for p in phrases), [p for p in phrases if p not in control]


def test_student_copy_has_no_answers_instructor_copy_has_them(tmp_path):
    student, added, _, _ = lab_copy.prepare("student", tmp_path / "s")
    instructor, _, _, _ = lab_copy.prepare("instructor", tmp_path / "i")
    book = sorted(p.name for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(added) == book

    def tagged(folder: Path, name: str) -> int:
        nb = nbformat.read(folder / name, as_version=4)
        return sum("answer" in c.metadata.get("tags", []) for c in nb.cells)

    for name in ("02_general_pair_weighting.ipynb", "12_dro.ipynb"):
        exercises = nbformat.read(student / name, as_version=4).cells
        assert (
            tagged(student, name) == 0
            and tagged(instructor, name) == tagged(ROOT / "book", name) > 0
        )
        assert any(c.source.startswith("**Exercise ") for c in exercises)


def test_a_readers_copy_is_never_overwritten(tmp_path):
    book, dest = tmp_path / "book", tmp_path / "build" / "lab-student"
    book.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")])
        nbformat.write(nb, book / name)
    lab_copy.prepare("student", dest, book=book)
    mine = dest / "01_a.ipynb"
    mine.write_text(mine.read_text().replace("# 01_a", "# 01_a, with my notes"))
    (book / "02_b.ipynb").write_text((book / "02_b.ipynb").read_text().replace("02_b", "02_b v2"))
    nbformat.write(nbformat.v4.new_notebook(), book / "03_c.ipynb")
    _, added, changed, kept = lab_copy.prepare("student", dest, book=book)
    assert "my notes" in mine.read_text(), "the reader's edit was overwritten"
    assert added == ["03_c.ipynb"] and changed == ["02_b.ipynb"] and kept is None
    assert "v2" not in (dest / "02_b.ipynb").read_text()
    message = lab_copy.report("student", dest, added, changed, kept)
    assert "02_b.ipynb" in message and "REFRESH=1" in message and str(dest) in message
    _, added, changed, kept = lab_copy.prepare("student", dest, book=book, refresh=True)
    assert "my notes" in (kept / "01_a.ipynb").read_text(), "refresh lost the old copy"
    assert "v2" in (dest / "02_b.ipynb").read_text() and len(added) == 3 and changed == []
    with pytest.raises(ValueError, match="inside the book"):
        lab_copy.prepare("student", book / "copy", book=book)
    with pytest.raises(ValueError, match="edition"):
        lab_copy.prepare("teacher", dest, book=book)


def test_make_lab_serves_the_working_copy_git_ignores():
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "build/lab-student/01_what_is_dml.ipynb"], cwd=ROOT
    )
    assert ignored.returncode == 0, "the reader's copy would show in git status"
    assert lab_copy.default_copy("student") == ROOT / "build" / "lab-student"

    def recipe(*args: str) -> str:
        out = subprocess.run(
            ["make", "-n", "-o", ".venv/.dmlbook-installed", "lab", *args],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout

    default = recipe()
    assert "tools/lab.py prepare --edition student" in default and "--refresh" not in default
    assert 'jupyter lab "$copy"' in default and "jupyter lab book" not in default
    assert "--edition instructor --refresh" in recipe("EDITION=instructor", "REFRESH=1")

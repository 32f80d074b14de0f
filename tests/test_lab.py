"""The book in a real JupyterLab, driven in headless Chromium (playwright with the system's Chromium).

One JupyterLab server for the whole file, started as ``make lab`` starts it (``tools/jupyter``
first on ``JUPYTER_CONFIG_PATH``) on a copy of ``book/`` (a cell run here must not touch the
chapters), with its own settings, workspaces and runtime folders:

- the file browser lists the chapters and nothing else;
- a chapter opens without an unsaved-changes mark, and saving it untouched leaves the file as it
  was, byte for byte (JupyterLab writes the kernel's ``language_info`` into a notebook it opens;
  ``tools/book.py`` stores exactly that);
- the weight explorer of Chapter 10 runs, and redraws for another loss and another value typed
  into a slider, showing what :mod:`dmlbook.explorer` computes in this process for the same
  settings.

Needs Chromium, as ``tests/test_book_render.py`` (``DMLBOOK_REQUIRE_BROWSER=1``, set by CI, turns
a missing browser into a failure).
"""

from __future__ import annotations

import os
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
from book_check import find_browser  # noqa: E402

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

CHAPTER = "10_multi_similarity.ipynb"
EXPLORER_CALL = 'weight_explorer("multi_similarity")'
TIMEOUT_MS = 180_000  # the first cell run imports torch in a fresh kernel on a busy machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(playwright page, base URL with token, the served copy of book/)."""
    browser = find_browser()
    if browser is None:
        message = "no Chromium on PATH (apt-get install chromium)"
        if os.environ.get("DMLBOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(message + "; DMLBOOK_REQUIRE_BROWSER=1 requires it")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("lab")
    served = tmp / "book"
    shutil.copytree(ROOT / "book", served, ignore=shutil.ignore_patterns("_build", ".ipynb_*"))
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
    assert (served / "_config.yml").is_file()  # hidden from the browser, not moved


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
    from dmlbook.explorer import batch_weights, default_batch, tunable_parameters

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

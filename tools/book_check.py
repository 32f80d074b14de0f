"""Check a rendered HTML book offline: nothing fetched, maths typeset, code readable, links meant.

Usage::

    python tools/book_check.py build/book/_build/html            # after `make book`
    python tools/book_check.py build/book/_build/html --no-browser  # the static scan only

Three checks, usable on any Jupyter Book 1.x output (``tests/test_book_render.py`` runs them on a
small book built with the real ``book/_config.yml``):

- ``network_references``: every ``<script src>``, ``<link href>`` (style sheets, fonts, preloads,
  icons) and ``<img src>`` in the pages, and every ``url(...)``/``@import`` in the book's CSS, that
  points at ``http(s)://``. A page that names one needs the network to look right.
- ``open_offline``: opens a page in headless Chromium with every host name unresolvable, records
  the requests the page made (Chromium's NetLog) and returns the DOM after scripts ran. A small
  probe script added to a copy of the page waits for MathJax and records layout facts: code
  blocks whose lines are clipped, images shown smaller than they were stored, and Sphinx's
  book-wide figure numbers ("Fig. 17") left visible beside the chapters' own captions.
  ``page_problems`` turns both into readable complaints: no MathJax output, raw TeX left in the
  text, network requests, clipped code, a visible book-wide figure number.
- ``book_links.link_problems``: every external link of a page points where the build meant it
  to (the launch buttons to the edition's published notebooks, or none; other links written in
  the page's source). One line per page is printed as it is checked.
- ``internal_link_problems``: every link from a page to the book itself (another page, a figure,
  an anchor ``#...``) resolves: the file exists and, where the link names an anchor, the page it
  points to has an element with that ``id``.
- MathJax's own errors: an equation MathJax could not typeset (a TeX error such as an undefined
  control sequence, or a character TeX does not accept, shown in red as "Math input error") is
  an ``<mjx-merror>`` in the typeset page; ``page_problems`` names each with its message.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

from book_links import link_problems, read_manifest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])(https?:)?//""", re.IGNORECASE)
# TeX that MathJax should have replaced: delimiters, commands (\\frac), sub/superscript groups.
RAW_TEX = re.compile(r"\\[()\[\]]|\$\$|\\[A-Za-z]+|[_^]\{")
# Elements whose text is code, machinery or the browser tab title (never typeset), not prose.
NOT_PROSE = {
    "title",
    "script",
    "style",
    "pre",
    "code",
    "textarea",
    "mjx-container",
    "mjx-assistive-mml",
}
SMALLEST_FIGURE_SCALE = 0.75  # a figure stored at 80 dpi shown below this is hard to read

PROBE = """<script>
(function () {
  function measure() {
    var clipped = [], shrunk = [], numbers = [];
    document.querySelectorAll("pre").forEach(function (pre) {
      var overflow = getComputedStyle(pre).overflowX;
      var wraps = getComputedStyle(pre).whiteSpace.indexOf("wrap") >= 0;
      if (pre.scrollWidth > pre.clientWidth + 1 && !wraps && overflow !== "auto"
          && overflow !== "scroll") {
        clipped.push(pre.textContent.slice(0, 60));
      }
    });
    document.querySelectorAll("img").forEach(function (img) {
      if (img.naturalWidth > 0 && img.width < SCALE * img.naturalWidth) {
        shrunk.push([img.getAttribute("src").slice(0, 60), img.width, img.naturalWidth]);
      }
    });
    // Sphinx's book-wide figure numbers ("Fig. 17" in Chapter 4): the captions carry the
    // chapter's own ("Figure 4.2."), so a visible one contradicts them.
    document.querySelectorAll(".caption-number").forEach(function (span) {
      var style = getComputedStyle(span);
      if (style.display !== "none" && style.visibility !== "hidden" && span.offsetWidth > 0) {
        numbers.push(span.textContent.trim());
      }
    });
    document.body.setAttribute("data-dmlbook-probe", JSON.stringify({
      clipped: clipped, shrunk: shrunk, numbers: numbers,
      mathjax: !!(window.MathJax && window.MathJax.startup)
    }));
  }
  window.addEventListener("load", function () {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(function () { setTimeout(measure, 100); });
    } else {
      setTimeout(measure, 100);
    }
  });
})();
</script>""".replace("SCALE", str(SMALLEST_FIGURE_SCALE))


class _Tags(HTMLParser):
    """Collects remote resource references, links, anchors and the prose text of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.remote: list[str] = []
        self.prose: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.math_errors: list[str] = []
        self.probe: str | None = None
        self.math = 0
        self._skip = 0
        self._merror = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        url = {"script": a.get("src"), "link": a.get("href"), "img": a.get("src")}.get(tag)
        if url and REMOTE.match(url):
            self.remote.append(f"<{tag}> {url}")
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key])
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        if tag == "mjx-merror":
            self.math_errors.append(a.get("data-mjx-error", ""))
            self._merror += 1
        if tag == "mjx-container":
            self.math += 1
        if tag == "body" and "data-dmlbook-probe" in a:
            self.probe = a["data-dmlbook-probe"]
        if tag in NOT_PROSE:
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in NOT_PROSE and self._skip:
            self._skip -= 1
        if tag == "mjx-merror" and self._merror:
            self._merror -= 1

    def handle_data(self, data: str) -> None:
        if self._merror and self.math_errors and not self.math_errors[-1]:
            self.math_errors[-1] = data.strip()  # no message attribute: the red text is it
        if not self._skip:
            self.prose.append(data)


def parse(html: str) -> _Tags:
    tags = _Tags()
    tags.feed(html)
    tags.close()
    return tags


def network_references(html_root: Path) -> list[str]:
    """Every reference to an ``http(s)`` script, style sheet, font or image in a rendered book.

    Links (``<a href>``) are not counted: they are fetched only when a reader follows them.
    Returns lines ``"page: <tag> url"`` (empty when the book is self-contained).
    """
    found = []
    for page in sorted(html_root.rglob("*.html")):
        rel = page.relative_to(html_root).as_posix()
        found += [f"{rel}: {ref}" for ref in parse(page.read_text(errors="replace")).remote]
    for css in sorted(html_root.rglob("*.css")):
        for n, line in enumerate(css.read_text(errors="replace").splitlines(), 1):
            if CSS_URL.search(line):
                found.append(f"{css.relative_to(html_root).as_posix()}:{n}: {line.strip()[:120]}")
    return found


NOT_A_PAGE_LINK = re.compile(r"^([a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)  # http:, mailto:, data:


def internal_link_problems(html_root: Path, page: Path, ids: dict[Path, set[str]]) -> list[str]:
    """Every link of ``page`` to the book itself that does not resolve.

    ``ids`` caches the ``id``s of each page read so far (pass the same dict for a whole book).
    A link resolves when its file exists under ``html_root`` and, when it names an anchor
    (``page.html#anchor`` or ``#anchor``), that page has an element with that ``id``.
    """

    def anchors(target: Path) -> set[str]:
        if target not in ids:
            ids[target] = parse(target.read_text(errors="replace")).ids
        return ids[target]

    problems = []
    root = html_root.resolve()
    for href in dict.fromkeys(parse(page.read_text(errors="replace")).links):
        if not href or NOT_A_PAGE_LINK.match(href):
            continue
        path, _, anchor = unquote(href).partition("#")
        target = (page.parent / path).resolve() if path else page.resolve()
        if target.is_dir():
            target = target / "index.html"
        if root not in target.parents and target != root:
            problems.append(f"link out of the book: {href}")
        elif not target.is_file():
            problems.append(f"link to a file that does not exist: {href}")
        elif anchor and target.suffix == ".html" and anchor not in anchors(target):
            problems.append(f"link to an anchor that does not exist: {href}")
    return problems


def find_browser() -> str | None:
    """Path of a Chromium (or Chrome) executable on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageResult:
    """What headless Chromium saw on one page with the network cut off."""

    dom: str
    requests: list[str] = field(default_factory=list)


def _page_requests(netlog: Path) -> list[str]:
    """``http(s)`` URLs the page itself asked for (not the browser's own update checks)."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params", {})
        if event["type"] != start or not REMOTE.match(params.get("url", "")):
            continue
        if "file://" in params.get("network_isolation_key", ""):
            urls.append(params["url"])
    return sorted(set(urls))


def open_offline(page: Path, browser: str, budget_ms: int = 15000) -> PageResult:
    """Open ``page`` (a file) in headless ``browser`` with no network; return its DOM and requests.

    Every host name is made unresolvable, so a script or font from a CDN cannot load, and NetLog
    records the attempt. A copy of the page with a probe script is what is opened (removed after).
    """
    page = page.resolve()
    probed = page.with_name(f".probe-{page.name}")
    html = page.read_text(errors="replace")
    probed.write_text(html.replace("</body>", PROBE + "</body>", 1))
    try:
        with tempfile.TemporaryDirectory(prefix="dmlbook-browser-") as tmp:
            netlog = Path(tmp) / "netlog.json"
            cmd = [
                browser,
                "--headless",
                "--no-sandbox",  # containers run as root; the pages are our own local files
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--window-size=1280,900",
                f"--user-data-dir={tmp}/profile",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--log-net-log={netlog}",
                f"--virtual-time-budget={budget_ms}",
                "--dump-dom",
                probed.as_uri(),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if proc.returncode or not proc.stdout.strip():
                raise RuntimeError(
                    f"{browser} could not open {page} (exit {proc.returncode}): "
                    f"{proc.stderr.strip()[-800:]}"
                )
            requests = _page_requests(netlog) if netlog.exists() else []
    finally:
        probed.unlink(missing_ok=True)
    return PageResult(dom=proc.stdout, requests=requests)


def page_problems(result: PageResult, expect_math: bool = True) -> list[str]:
    """Readable complaints about one page opened offline (empty when it is fine)."""
    tags = parse(result.dom)
    problems = [f"requested the network: {url}" for url in result.requests]
    if tags.probe is None:
        problems.append("the layout probe did not run (the page's scripts did not finish loading)")
        probe = {}
    else:
        probe = json.loads(tags.probe)
    if expect_math and tags.math == 0:
        problems.append("no MathJax output (<mjx-container>): the equations did not render")
    raw = sorted({m.group(0) for m in RAW_TEX.finditer(" ".join(tags.prose))})
    if raw:
        problems.append(f"raw TeX left in the text: {' '.join(raw)}")
    problems += [
        f"maths MathJax could not typeset: {m or 'Math input error'}" for m in tags.math_errors
    ]
    problems += [f"code line clipped: {text!r}" for text in probe.get("clipped", [])]
    problems += [
        f"figure {src} shown at {shown}px of its {natural}px"
        for src, shown, natural in probe.get("shrunk", [])
    ]
    problems += [
        f"Sphinx's book-wide figure number shown beside the chapter's caption: {text!r}"
        for text in probe.get("numbers", [])
    ]
    return problems


def check_book(html_root: Path, browser: str | None, report=print) -> list[str]:
    """All problems of a rendered book, one ``report`` line per page as it is checked.

    The static scan of the whole book, then for every page its external links (where the build
    meant them to point, ``tools/book_links.py``) and, with a browser, the page opened offline.
    """
    manifest = read_manifest(html_root)
    problems = network_references(html_root)
    pages = [
        p
        for p in sorted(html_root.glob("*.html"))
        if p.name not in ("genindex.html", "search.html")
    ]
    ids: dict[Path, set[str]] = {}
    for n, page in enumerate(pages, 1):
        found = link_problems(html_root, page, manifest) + internal_link_problems(
            html_root, page, ids
        )
        source = page.read_text(errors="replace")
        # a redirect (index.html -> the first page) has nothing to render
        if browser is not None and 'http-equiv="Refresh"' not in source:
            expect_math = 'class="math' in source
            found += page_problems(open_offline(page, browser), expect_math)
        verdict = "ok" if not found else f"{len(found)} problem(s)"
        report(f"[{n}/{len(pages)}] {page.name}: {verdict}" + "".join(f"\n  {p}" for p in found))
        problems += [f"{page.name}: {p}" for p in found]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path, help="the rendered book, e.g. build/book/_build/html")
    parser.add_argument("--no-browser", action="store_true", help="static scan only")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        parser.error(f"{args.html} has no index.html: run `make book` first")
    browser = None if args.no_browser else find_browser()
    if browser is None and not args.no_browser:
        parser.error("no Chromium found: `apt-get install chromium`, or pass --no-browser")
    print(
        f"checking {args.html} "
        + (f"in {browser} with the network cut off" if browser else "(static scan only)"),
        flush=True,
    )
    problems = check_book(args.html, browser, report=lambda line: print(line, flush=True))
    pages = len(list(args.html.glob("*.html")))
    print(f"{pages} pages checked{' in ' + browser if browser else ''}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a rendered book's external links point: the launch buttons the build meant, and the rest.

``make book`` decides the Binder/Colab launch buttons here (:func:`launch_target`) and records its
decision beside the rendered book (:func:`write_manifest`); ``make check-book`` reads it back and
checks every external link on every page against it (:func:`link_problems`):

- a link to a launch service (the hosts in :data:`LAUNCH_HOSTS`) must open this page's notebook in
  the tree the build meant (repository, branch and folder), and there must be none when the build
  meant none;
- any other external link must be written in the page's own source (``_sources/``, and for a
  page generated from docstrings, the API reference, the docstrings the build saved beside it in
  ``_sources_extra/``): a link an author put there, not one a theme or a default added.

Which tree a page launches. The **instructor** edition's chapters hold the answers, as the
repository's ``book/`` does: its buttons open the repository (``$DMLBOOK_REPOSITORY``, or the
``origin`` remote when it is on GitHub), on the branch and folder of ``book/_config.yml``'s
``repository`` section. The **student** edition has buttons only where the student notebooks are
published (answers removed, as the student build writes them): ``$DMLBOOK_STUDENT_REPOSITORY``,
e.g. ``https://github.com/course/dml-student/tree/main/book``. Without it the student edition has
no launch buttons, because the repository's notebooks would show the answers. A URL may name a
tree, ``https://github.com/OWNER/REPO/tree/BRANCH/FOLDER``; the first path part after ``tree/`` is
the branch. Only GitHub is supported (Binder's ``gh`` provider and Colab's ``github`` paths).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

#: Launch services whose links must point where the build meant (``launch_buttons`` in the config).
LAUNCH_HOSTS = ("mybinder.org", "colab.research.google.com")
MANIFEST = "dmlbook-build.json"
EDITION_VARIABLE = {"student": "DMLBOOK_STUDENT_REPOSITORY", "instructor": "DMLBOOK_REPOSITORY"}

GITHUB = re.compile(
    r"^(?:https://github\.com/|git@github\.com:)(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?"
    r"(?:/tree/(?P<branch>[^/]+)(?:/(?P<path>.*?))?)?/?$"
)


@dataclass(frozen=True)
class LaunchTarget:
    """A GitHub tree whose ``path`` folder holds the chapters as ``NN_name.ipynb``."""

    owner: str
    repo: str
    branch: str
    path: str

    @property
    def repository(self) -> str:
        return f"https://github.com/{self.owner}/{self.repo}"

    def notebook(self, page: str) -> str:
        """The notebook of ``page`` (``03_contrastive``) inside the tree."""
        return "/".join(p for p in (self.path, f"{page}.ipynb") if p)


def parse_github(url: str, branch: str = "main", path: str = "book") -> LaunchTarget | None:
    """The tree a GitHub URL names (``branch``/``path`` unless it has ``/tree/...``), or None."""
    match = GITHUB.match(url.strip())
    if not match:
        return None
    return LaunchTarget(
        match["owner"],
        match["repo"],
        match["branch"] or branch,
        ((match["path"] or "") if match["branch"] else path).strip("/"),
    )


def origin_url(root: Path) -> str:
    """The ``origin`` remote of the checkout at ``root`` ("" without git or remote)."""
    try:
        proc = subprocess.run(
            ["git", "remote", "get-url", "origin"], cwd=root, capture_output=True, text=True
        )
    except OSError:  # no git: a book from a tarball
        return ""
    return proc.stdout.strip()


def launch_target(
    edition: str, root: Path, branch: str = "main", path: str = "book"
) -> tuple[LaunchTarget | None, str]:
    """The tree the edition's launch buttons open, or None; and a line saying why.

    ``branch`` and ``path`` are the defaults of the repository section of ``_config.yml``.
    """
    variable = EDITION_VARIABLE[edition]
    url = os.environ.get(variable, "").strip()
    source = f"${variable}"
    if not url and edition == "instructor":
        url, source = origin_url(root), "the origin remote"
    if url:
        target = parse_github(url, branch, path)
        if target is not None:
            where = f"{target.repository}, branch {target.branch}, {target.path or '/'}"
            return target, f"launch buttons open {where} (from {source})"
        return None, f"no launch buttons: {source} ({url}) is not a GitHub repository"
    if edition == "student":
        return None, (
            "no launch buttons in the student edition: the repository's notebooks hold the "
            "answers; set DMLBOOK_STUDENT_REPOSITORY=https://github.com/OWNER/REPO/tree/BRANCH/"
            "FOLDER to where the student notebooks are published"
        )
    return None, "no launch buttons: no GitHub repository (origin remote or $DMLBOOK_REPOSITORY)"


def apply_to_config(config: dict, target: LaunchTarget | None) -> None:
    """Set (or remove) the launch buttons of a Jupyter Book configuration in place.

    Without a target the ``launch_buttons`` section goes and the repository URL is emptied:
    Jupyter Book would otherwise fill in its own default repository (its project's).
    """
    if target is None:
        config.pop("launch_buttons", None)
        config["repository"] = {"url": "", "path_to_book": "", "branch": ""}
        return
    config["repository"] = {"url": target.repository, "path_to_book": target.path}
    config["repository"]["branch"] = target.branch


def write_manifest(out: Path, edition: str, target: LaunchTarget | None) -> Path:
    """Record what the build meant, beside the book's sources (``out/dmlbook-build.json``)."""
    manifest = out / MANIFEST
    launch = asdict(target) if target else None
    manifest.write_text(json.dumps({"edition": edition, "launch": launch}, indent=1) + "\n")
    return manifest


def read_manifest(html_root: Path) -> dict | None:
    """The manifest of a book rendered into ``<out>/_build/html`` (None if there is none)."""
    path = html_root.resolve().parents[1] / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href") or ""
        if tag == "a" and re.match(r"^https?://", href, re.IGNORECASE):
            self.links.append(href)


def external_links(html: str) -> list[str]:
    """Every ``<a href="http(s)://...">`` of a page, in order, without repeats."""
    parser = _Links()
    parser.feed(html)
    return list(dict.fromkeys(parser.links))


def _launch_problem(url: str, page: str, target: LaunchTarget | None) -> str | None:
    """Why a launch-service link is not the one the build meant for ``page`` (None if it is)."""
    if target is None:
        return f"launch link the build did not mean (it meant none): {url}"
    parts = urlsplit(url)
    if parts.netloc == "mybinder.org":
        tree = f"/v2/gh/{target.owner}/{target.repo}/{target.branch}"
        opened = parse_qs(parts.query).get("urlpath", [""])[0]
        ok = parts.path == tree and opened.endswith("/" + target.notebook(page))
    else:
        ok = parts.path == (
            f"/github/{target.owner}/{target.repo}/blob/{target.branch}/{target.notebook(page)}"
        )
    if ok:
        return None
    return (
        f"launch link to {url}, not to {target.repository} {target.branch} {target.notebook(page)}"
    )


def link_problems(html_root: Path, page: Path, manifest: dict | None) -> list[str]:
    """Every external link of ``page`` that does not point where the build meant it to."""
    if manifest is None:
        return [f"no {MANIFEST} beside the book: build it with `make book` to check its links"]
    target = LaunchTarget(**manifest["launch"]) if manifest.get("launch") else None
    name = page.relative_to(html_root).with_suffix("").as_posix()
    extra = html_root.resolve().parents[1] / "_sources_extra"  # text a generated page renders
    sources = sorted((html_root / "_sources").glob(f"{name}.*")) + sorted(extra.glob(f"{name}.*"))
    written = unquote(" ".join(s.read_text(errors="replace") for s in sources))
    problems = []
    for url in external_links(page.read_text(errors="replace")):
        if urlsplit(url).netloc in LAUNCH_HOSTS:
            problem = _launch_problem(url, name, target)
            if problem:
                problems.append(problem)
        elif unquote(url) not in written:
            problems.append(f"external link that no source of the page writes: {url}")
    return problems

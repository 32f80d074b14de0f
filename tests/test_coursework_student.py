"""The student kit (issue 28): dmlbook without solutions, checked by the leak scan.

Built from this checkout's chapters and masters with a stand-in wheel and release (the real ones
come from ``make coursework``; ``tests/test_coursework.py`` builds releases): the kit holds the
chapters without one answer cell and without the instructors' appendix, the releases, the wheel
and a README; a solution line, a hidden test or a chapter's answer planted anywhere in it (in a
zip included) is found, and the kit is then refused and removed.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import coursework_student as kit  # noqa: E402  (tools/ is not a package)

import coursework as cw  # noqa: E402

# Minutes of CPU, a browser or an install: left out of `make test-quick`.
pytestmark = pytest.mark.slow

MASTERS = [cw.master(name) for name in cw.assignments()]


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("kit")
    wheel = tmp / "dmlbook-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted((ROOT / "dmlbook").rglob("*.py")):
            zf.write(path, path.relative_to(ROOT).as_posix())
    release = tmp / "a1_gpw_classic.zip"
    with zipfile.ZipFile(release, "w") as zf:
        zf.writestr("a1_gpw_classic.ipynb", "def binomial_deviance(S, labels):\n    ...\n")
    archive = kit.build_kit(tmp / "out", wheel, [release], MASTERS)
    return {"tmp": tmp, "wheel": wheel, "release": release, "archive": archive}


def test_the_kit_holds_chapters_without_answers_releases_and_the_wheel(parts):
    folder = parts["archive"].with_suffix("")
    chapters = sorted(p.name for p in (folder / "book").glob("*.ipynb"))
    assert "01_what_is_dml.ipynb" in chapters and "91_instructors.ipynb" not in chapters
    for name in chapters:
        nb = nbformat.read(folder / "book" / name, as_version=4)
        assert not any("answer" in c.metadata.get("tags", []) for c in nb.cells), name
    assert (folder / "assignments" / "a1_gpw_classic.zip").is_file()
    assert (folder / parts["wheel"].name).is_file()
    assert f"pip install {parts['wheel'].name}" in (folder / "README.md").read_text()
    with zipfile.ZipFile(parts["archive"]) as zf:
        assert "README.md" in zf.namelist()


def test_the_repository_answers_are_what_the_scan_looks_for(parts):
    answers, public = kit.chapter_text(ROOT / "book")
    assert len(answers) > 100, "the chapters' answers are secrets"
    secrets = set().union(*(cw.secret_lines(m) for m in MASTERS))
    assert len(secrets) > 100
    folder = parts["archive"].with_suffix("")
    assert kit.kit_leaks(folder, MASTERS, ROOT / "book", ROOT / "dmlbook") == []


def _secret(what: str) -> str:
    """A line of the given kind that the scan must treat as secret (not public elsewhere)."""
    answers, public = kit.chapter_text(ROOT / "book")
    nb = nbformat.read(cw.master("a3_dro"), as_version=4)
    if what == "chapter answer":
        candidates = sorted(answers)
    elif what == "solution":
        candidates = ["return torch.softmax(losses / gamma, dim=0)"]
    else:
        hidden = [
            c.source for c in nb.cells if c.cell_type == "code" and "hidden: true" in c.source
        ]
        candidates = [
            line.strip() for line in hidden[0].split("# END TEST CONFIG\n")[1].splitlines()
        ]
    secrets = cw.secret_lines(cw.master("a3_dro")) | answers
    return next(
        line for line in candidates if line in secrets and line not in public and len(line) > 30
    )


@pytest.mark.parametrize("what", ["solution", "hidden test", "chapter answer"])
def test_a_secret_planted_in_the_kit_is_found(parts, what, tmp_path):
    line = _secret(what)
    (tmp_path / "kit").mkdir()
    with zipfile.ZipFile(tmp_path / "kit" / "a3_dro.zip", "w") as zf:
        zf.writestr("a3_dro.ipynb", f'{{"source": ["    {line}\\n"]}}')
    assert kit.kit_leaks(tmp_path / "kit", MASTERS, ROOT / "book", ROOT / "dmlbook") == [line]


def test_a_kit_with_a_leak_is_refused_and_removed(parts, tmp_path):
    release = tmp_path / "a3_dro.zip"
    with zipfile.ZipFile(release, "w") as zf:
        zf.writestr("a3_dro.ipynb", _secret("solution"))
    with pytest.raises(RuntimeError, match="secret line"):
        kit.build_kit(tmp_path / "out", parts["wheel"], [release], MASTERS)
    assert not (tmp_path / "out" / "student").exists()

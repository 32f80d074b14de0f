"""The student kit: everything a student needs, nothing that answers anything.

The repository holds the chapters' answers, the assignments' master notebooks (solutions and
hidden tests) and the grading tools: it is the instructor's copy. ``build_kit`` (run by ``make
coursework``) writes ``build/coursework/student/`` and its zip, ``student.zip``, to hand out::

    dmlbook-<version>-py3-none-any.whl   the package (``pip install`` it)
    book/NN_*.ipynb                       the chapters, with every ``answer`` cell removed (not
                                          the instructors' appendix)
    assignments/<name>.zip                the released assignments (public tests only)
    README.md                             how to install and start

and then scans all of it (the wheel's and the zips' members included) for any line of an
assignment's solution or hidden test and of a chapter's answer cells, except the lines that the
``dmlbook`` package itself holds (the package is public by design: the chapters print its
source). A kit with a leak is deleted and the build fails. Tested by
``tests/test_coursework_student.py``.
"""

from __future__ import annotations

import functools
import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coursework_master import lines_of, occurs, public_lines, released_text, secret_lines  # noqa: E402

from book import ANSWER_TAG, remove_answers  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
INSTRUCTORS_ONLY = ("91_instructors",)  # the appendix on setting and grading the coursework

README = """\
# dmlbook: the student kit

This folder is what you need to read the book, run its chapters and do its assignments.

1. Install Python 3.10 or newer, then, in a new virtual environment:

       python -m venv .venv
       . .venv/bin/activate                     # Windows: .venv\\Scripts\\activate
       pip install torch --index-url https://download.pytorch.org/whl/cpu
       pip install {wheel} jupyterlab otter-grader

   (the first `pip install` gives the CPU build of torch; leave it out on a GPU machine to
   get the CUDA build from PyPI.)
2. Open the chapters: `jupyter lab book/`. The exercises at the end of each chapter have no
   answers here: your instructor has them.
3. An assignment: unzip `assignments/<name>.zip`, open the notebook in JupyterLab, and read its
   section *How to submit*.
"""


@functools.cache
def chapter_text(book: Path) -> tuple[set[str], str]:
    """The lines of the chapters' answer cells, and the text of all their other cells."""
    answers: set[str] = set()
    public: list[str] = []
    for path in sorted(book.glob("[0-9][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if ANSWER_TAG in cell.metadata.get("tags", []):
                answers |= lines_of(cell.source)
            else:
                public.append(cell.source)
    return answers, "\n".join(public)


def kit_leaks(kit: Path, masters: list[Path], book: Path, package: Path) -> list[str]:
    """Secret lines found anywhere in ``kit``.

    Secret: a line of an assignment's solution or hidden test, or of a chapter's answer cell;
    except a line that the package's sources, the chapters' other cells or an assignment's
    release (prompts, provided code, public tests) also hold: public by design
    (``from dmlbook.evaluate import recall_at_k`` in a hidden test is no secret).
    """
    answers, public = chapter_text(book)
    public += "\n".join(p.read_text(errors="replace") for p in sorted(package.rglob("*.py")))
    secrets = set(answers)
    for master in masters:
        secrets |= secret_lines(master)
    for master in masters:  # one assignment's hidden line may be another's public one
        secrets -= public_lines(master)
    text = released_text(kit)
    return sorted(line for line in secrets if occurs(line, text) and line not in public)


def build_kit(
    out: Path,
    wheel: Path,
    releases: list[Path],
    masters: list[Path],
    book: Path = ROOT / "book",
    package: Path = ROOT / "dmlbook",
) -> Path:
    """Write the kit into ``out/student`` and ``out/student.zip``; raise ``RuntimeError`` on a leak."""
    kit = out / "student"
    shutil.rmtree(kit, ignore_errors=True)
    (kit / "book").mkdir(parents=True)
    (kit / "assignments").mkdir()
    shutil.copy2(wheel, kit / wheel.name)
    for chapter in sorted(book.glob("[0-9][0-9]_*.ipynb")):
        if chapter.stem in INSTRUCTORS_ONLY:
            continue
        shutil.copy2(chapter, kit / "book" / chapter.name)
        remove_answers(kit / "book" / chapter.name)
    for release in releases:
        shutil.copy2(release, kit / "assignments" / release.name)
    (kit / "README.md").write_text(README.format(wheel=wheel.name))
    found = kit_leaks(kit, masters, book, package)
    if found:
        shutil.rmtree(kit)
        raise RuntimeError(f"the student kit would hold {len(found)} secret line(s): {found[:5]}")
    archive = shutil.make_archive(str(out / "student"), "zip", kit)
    return Path(archive)

"""The reader's own copy of the book for JupyterLab (``make lab``), outside the repository's files.

Usage (through the Makefile)::

    python tools/lab.py prepare                       # build/lab-student/: the student edition
    python tools/lab.py prepare --edition instructor  # build/lab-instructor/: with the answers
    python tools/lab.py prepare --refresh             # start again from book/ (old copy kept)

``make lab`` serves a *working copy* of the chapters, never ``book/`` itself: JupyterLab saves
whatever the reader does (cleared outputs, notes, solved exercises) into the notebook it has
open, and in ``book/`` that would change tracked files, so that ``git status`` is no longer clean
and a ``git pull`` conflicts with the reader's notes. The copy lives under ``build/`` (ignored by
git): ``build/lab-student/`` holds the chapters with every answer cell removed, as the student
edition of ``tools/book.py`` removes them (the same function), and ``build/lab-instructor/``
keeps them.

The copy is made on first use. Later runs never overwrite a chapter in it: they add chapters that
``book/`` has gained, and name the chapters whose source in ``book/`` has changed since the copy
was made (a hidden manifest, ``.lab-source.json``, records each source's SHA-256). ``--refresh``
first moves the whole copy aside to ``<copy>.old-<UTC time>/`` (nothing is deleted), then copies
the book afresh.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book import EDITIONS, chapters, remove_answers  # noqa: E402  (tools/ is not a package)

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
MANIFEST = ".lab-source.json"


def default_copy(edition: str) -> Path:
    """Where ``make lab`` keeps the working copy of ``edition``."""
    return ROOT / "build" / f"lab-{edition}"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy_chapter(src: Path, dst: Path, edition: str) -> None:
    nb = nbformat.read(src, as_version=4)
    tmp = dst.with_name(f".{dst.name}.tmp")
    nbformat.write(nb, tmp)
    if edition == "student":
        remove_answers(tmp)
    tmp.replace(dst)


def prepare(
    edition: str = "student", dest: Path | None = None, book: Path = BOOK, refresh: bool = False
) -> tuple[Path, list[str], list[str], Path | None]:
    """Create or update the working copy of ``edition``; never overwrite a chapter in it.

    Returns
    -------
    (copy, added, changed, kept) : Path, list of str, list of str, Path or None
        The copy's folder, the chapters copied now, the chapters whose source changed in ``book``
        since they were copied (left as they are), and where ``refresh`` moved the old copy.
    """
    if edition not in EDITIONS:
        raise ValueError(f"edition={edition!r}: use one of {', '.join(EDITIONS)}")
    dest = Path(dest) if dest is not None else default_copy(edition)
    if dest.resolve() == Path(book).resolve() or Path(book).resolve() in dest.resolve().parents:
        raise ValueError(f"dest={dest} is inside the book {book}: the copy must live elsewhere")
    kept = None
    if refresh and dest.exists():
        kept = dest.with_name(f"{dest.name}.old-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        dest.rename(kept)
    dest.mkdir(parents=True, exist_ok=True)
    manifest_path = dest / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    added, changed = [], []
    for src in chapters(book=Path(book)):
        name = src.relative_to(book).as_posix()
        dst = dest / name
        if dst.exists():
            if manifest.get(name) not in (None, _digest(src)):
                changed.append(name)
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        _copy_chapter(src, dst, edition)
        manifest[name] = _digest(src)
        added.append(name)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return dest, added, changed, kept


def report(
    edition: str, copy: Path, added: list[str], changed: list[str], kept: Path | None
) -> str:
    """What ``make lab`` tells the reader before JupyterLab starts."""
    where = copy.relative_to(ROOT) if ROOT in copy.resolve().parents else copy
    lines = [f"JupyterLab opens your {edition} copy of the book: {where}/"]
    if edition == "student":
        lines.append(
            "  (no answers in it; `make lab EDITION=instructor` opens the chapters with them)"
        )
    if kept is not None:
        lines.append(f"  your previous copy was moved, untouched, to {kept}")
    if added:
        lines.append(f"  copied from book/ now: {', '.join(added)}")
    lines.append("  your edits stay in this copy; book/ and `git status` are not touched")
    if changed:
        lines.append(
            f"  changed in book/ since you copied them: {', '.join(changed)}; to start again from "
            f"the book, `make lab REFRESH=1` (your copy is moved aside first, not deleted)"
        )
    else:
        lines.append(
            "  to start again from the book: `make lab REFRESH=1` (your copy is kept aside)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="create or update the working copy; print its folder")
    p.add_argument("--edition", choices=EDITIONS, default="student")
    p.add_argument("--dest", type=Path, default=None, help="default: build/lab-<edition>/")
    p.add_argument("--refresh", action="store_true", help="move the copy aside, copy afresh")
    args = parser.parse_args(argv)
    copy, added, changed, kept = prepare(args.edition, args.dest, refresh=args.refresh)
    print(report(args.edition, copy, added, changed, kept), file=sys.stderr)
    print(copy)
    return 0


if __name__ == "__main__":
    sys.exit(main())

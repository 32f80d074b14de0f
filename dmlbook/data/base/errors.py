"""The errors of the data layer, and the fixes they suggest in one spelling that callers translate.

A data error tells the reader what to do: load a partial copy anyway, leave out images that do not
decode, or fetch the data set. Python users do that with a keyword or a call, command-line users
with a flag or a command, so the messages carry the Python spelling from the constants below, and
:func:`dmlbook.cli.cli_spelling` rewrites each one to its ``dmlbook`` flag (``--allow-partial``,
``--skip-bad-images``, ``dmlbook prepare cub --data DIR``). A test keeps both sides in step
(``tests/test_cli.py``); the error types, and the keywords and call the spellings name, are
tested in ``tests/data/base/test_errors.py``.
"""

from __future__ import annotations

__all__ = [
    "ALLOW_PARTIAL",
    "SKIP_BAD",
    "DownloadError",
    "IncompleteDatasetError",
    "listed",
    "prepare_call",
]

#: The opt-in for a copy with other image counts than the official split (e.g. a course subset).
ALLOW_PARTIAL = "allow_partial=True"
#: The opt-in for leaving out (and listing) images that cannot be decoded.
SKIP_BAD = "skip_bad=True"


def prepare_call(name: str) -> str:
    """The Python call that fetches data set ``name``: ``dmlbook.data.fetch.download.prepare('cub', data_dir)``."""
    return f"dmlbook.data.fetch.download.prepare({name!r}, data_dir)"


class IncompleteDatasetError(ValueError):
    """A data set folder holds fewer (or other) images than the official split.

    Raised by the benchmark loaders when the number of images or classes of a split differs from
    the published one; pass ``allow_partial=True`` to load such a copy anyway.
    """


class DownloadError(OSError):
    """A release file could not be fetched (no network, a moved URL); the message says what to do."""


def listed(items: list | tuple, limit: int = 5) -> str:
    """``"a, b, c, d, e and 7 more"``: the first ``limit`` items of a list for a message."""
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit:,} more" if len(items) > limit else "")

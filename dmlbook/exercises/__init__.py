"""Self-checks for the book's exercises: ``from dmlbook.exercises import check``.

``check("4.2", my_answer)`` prints whether the answer to Exercise 4.2 is right and, when it is
not, which section to re-read; it never shows the expected answer. The registry and its limits
are in :mod:`dmlbook.exercises.registry`; the entries in :mod:`.basics` (Chapters 1-9) and
:mod:`.advanced` (Chapters 10-15, the appendix).
"""

from . import advanced, basics  # noqa: F401  (registers the entries)
from .registry import EXERCISES, check

__all__ = ["EXERCISES", "check"]

"""``dmlbook.setup()``, the first call of every chapter; ``show_source``, which prints the code a
section discusses (the loss chapters show their implementation this way); and ``check_close``, the
assert a chapter writes under a number that comes out of training.

Tests: ``tests/chapters/test_notebook.py``.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import sys
import textwrap
import types
import typing
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import torch

from ..core.reproducibility import seed_everything
from ..core.validation import is_integer, is_number
from .openmp import POLICY_TOO_LATE
from .palette import book_rc
from .profile import Profile, current_profile

__all__ = [
    "available_cpus",
    "chapter_threads",
    "check_close",
    "setup",
    "show_signature",
    "show_source",
]


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; a container's limit shows here)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def chapter_threads(threads: int = 2) -> int:
    """The thread count :func:`setup` uses: ``threads``, at most the CPUs available, and 1 when
    torch was imported before dmlbook without ``OMP_WAIT_POLICY`` (idle threads would spin)."""
    if not is_integer(threads) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}.")
    return 1 if POLICY_TOO_LATE else min(threads, available_cpus())


def setup(seed: int = 0, threads: int = 2) -> Profile:
    """Prepare a chapter: seeds, a fixed thread count, print options and PNG figures.

    Figures take the book's colour-blind-safe colours, markers and line styles
    (:func:`dmlbook.chapters.palette.book_rc`).

    Parameters
    ----------
    seed : int
        Seed for Python, NumPy and torch.
    threads : int
        Number of CPU threads torch uses, at most the CPUs this process may use
        (:func:`chapter_threads`). A fixed count keeps floating-point reductions, and therefore
        printed numbers, identical from run to run on the same machine. Idle threads sleep
        because ``import dmlbook`` set ``OMP_WAIT_POLICY=PASSIVE`` before torch loaded; if torch
        was imported first (without that variable), one thread is used instead, with a warning
        that says how to avoid it.

    Returns
    -------
    Profile
        The profile selected by ``DMLBOOK_PROFILE`` / ``DMLBOOK_DATA``.
    """
    seed_everything(seed)
    count = chapter_threads(threads)
    if count < min(threads, available_cpus()):
        warnings.warn(
            "torch was imported before dmlbook, so its idle OpenMP threads spin and burn CPU; "
            "using 1 thread. Import dmlbook first (or set OMP_WAIT_POLICY=PASSIVE before "
            "starting Python) and restart the kernel to use more.",
            RuntimeWarning,
            stacklevel=2,
        )
    torch.set_num_threads(count)
    torch.set_printoptions(precision=4, sci_mode=False)
    np.set_printoptions(precision=4, suppress=True)
    try:
        import pandas as pd

        pd.set_option("display.precision", 3)
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    try:
        import matplotlib

        matplotlib.rcParams.update(
            {"figure.dpi": 80, "savefig.dpi": 80, "figure.figsize": (6, 3.6), **book_rc()}
        )
        from IPython import get_ipython

        ip = get_ipython()
        if ip is not None:
            from matplotlib_inline.backend_inline import set_matplotlib_formats

            ip.run_line_magic("matplotlib", "inline")
            set_matplotlib_formats("png")
    except ImportError:
        pass
    return current_profile()


def show_source(obj: Callable | type, docstring: str = "summary") -> None:
    """Print the source code of a function or class, as a chapter shows it.

    Parameters
    ----------
    obj : function or class
        What to show; ``inspect.getsource`` must find its file (anything defined in dmlbook).
    docstring : {"summary", "full", "none"}
        ``"summary"`` keeps only the docstring's first line (the parameter lists are in the
        API documentation, the chapter shows the computation), ``"full"`` keeps it all,
        ``"none"`` drops it.

    Nothing is returned, so that a cell ending in ``show_source(f)`` shows the code once.
    """
    if docstring not in ("summary", "full", "none"):
        raise ValueError(f"docstring must be 'summary', 'full' or 'none', not {docstring!r}")
    try:
        source = textwrap.dedent(inspect.getsource(obj))
    except (TypeError, OSError) as err:
        raise TypeError(
            f"show_source needs a function or class defined in a source file, not {obj!r}"
        ) from err
    lines = source.splitlines()
    node = ast.parse(source).body[0]
    body = node.body
    first = body[0] if body else None
    if (
        docstring != "full"
        and isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        indent = lines[first.lineno - 1][: first.col_offset]
        summary = first.value.value.strip().splitlines()[0] if first.value.value.strip() else ""
        keep = [f'{indent}"""{summary}"""'] if docstring == "summary" and summary else []
        lines = lines[: first.lineno - 1] + keep + lines[first.end_lineno :]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and body:
        header = lines[node.lineno - 1 : body[0].lineno - 1]
        lines[node.lineno - 1 : body[0].lineno - 1] = _packed(header)
    print("\n".join(lines))


def show_signature(obj: Callable | type) -> None:
    """Print ``name(parameters)`` of a function or loss class as its source declares them:
    ``margin: Real = 0.5``, the name of a declared range (:mod:`dmlbook.core.validation`), not its
    expansion ``Annotated[float, number in [-1e+06, 1e+06]]``."""
    signature = inspect.signature(obj, eval_str=True)
    names = {}
    for module in (sys.modules[obj.__module__], sys.modules["dmlbook.core.validation"]):
        for name, value in vars(module).items():
            if typing.get_origin(value) in (typing.Annotated, typing.Literal, types.UnionType):
                names.setdefault(value, name)

    class Written(str):
        def __repr__(self) -> str:
            return str(self)

    params = [
        p
        if p.annotation is p.empty
        else p.replace(annotation=Written(names.get(p.annotation) or inspect.formatannotation(
            p.annotation)))
        for p in signature.parameters.values()
    ]  # fmt: skip
    empty = inspect.Signature.empty
    out = signature.return_annotation
    shown = signature.replace(
        parameters=params,
        return_annotation=empty if out in (empty, None) else Written(inspect.formatannotation(out)),
    )
    print(f"{obj.__name__}{shown}")


def _packed(header: list[str], width: int = 100) -> list[str]:
    """A signature written one parameter a line, packed into as few lines of ``width`` as the
    parameters fill (the same code: a listing shows the computation, not the layout)."""
    text = " ".join(line.strip() for line in header)
    if len(header) < 2 or "#" in text:
        return header
    indent = header[0][: len(header[0]) - len(header[0].lstrip())]
    start = text.index("(")
    depth, quote, end, parts, last = 0, "", start, [], start + 1
    for i, c in enumerate(text[start:], start):  # the top-level commas of the parameter list
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                end = i
                break
        elif c == "," and depth == 1:
            parts.append(text[last:i].strip())
            last = i + 1
    parts = [p for p in [*parts, text[last:end].strip()] if p]
    out, line = [], indent + text[: start + 1]
    for k, part in enumerate(parts):
        piece = part + ("," if k < len(parts) - 1 else text[end:])
        if len(line) + len(piece) + 1 > width and line.strip():
            out.append(line.rstrip())
            line = indent + " " * 8
        line += piece + " "
    return [*out, line.rstrip()]


def check_close(
    value: float | Mapping, expected: float | Mapping, tol: float, what: str = "value"
) -> None:
    """Assert that a number that came out of training is within ``tol`` of the one the chapter printed.

    A chapter's trained numbers (recall after a few epochs in float32, a final loss) move in their
    last digits from one CPU or math library to another, so their printed form is not compared
    byte for byte under test (the cell carries the ``nbval-ignore-output`` tag). This assert is
    what still fails when the behaviour changes: ``expected`` is the value the chapter printed
    when it was written, ``tol`` the margin the spread between seeds supports.

    Parameters
    ----------
    value : float or mapping
        The number, or several by name (a dict or a pandas Series).
    expected : float or mapping
        The printed number, or a dict of them by name (every name must be in ``value``).
    tol : float
        Largest accepted ``|value - expected|``, in the units of ``value`` (points of recall when
        ``value`` is a percentage).
    what : str
        What the number is, for the message (``"R@1 (%)"``).

    Every chapter with a training cell uses it; CONTRIBUTING.md ("Chapters") says how to pick
    ``tol``.

    Raises
    ------
    AssertionError
        Naming every entry off by more than ``tol``, with both numbers.
    """
    if not (is_number(tol) and math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(expected, Mapping):
        if not hasattr(value, "__getitem__") or isinstance(value, (str, bytes)):
            raise TypeError(f"expected is a mapping, so value must be one too, not {type(value)}")
        pairs = {f"{what} [{name}]": (value[name], want) for name, want in expected.items()}
    else:
        pairs = {what: (value, expected)}
    off = [
        f"{name} = {float(got):.4g}, expected {float(want):.4g} +- {tol:g}"
        for name, (got, want) in pairs.items()
        if not abs(float(got) - float(want)) <= tol  # NaN is off too
    ]
    if off:
        raise AssertionError(
            "; ".join(off) + " (further than the spread between seeds: a change of behaviour)"
        )

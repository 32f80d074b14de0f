"""``dmlbook.setup()``, the first call of every chapter; ``show_source``, which prints the code a
section discusses (the loss chapters show their implementation this way); and ``check_close``, the
assert a chapter writes under a number that comes out of training.

Tests: ``tests/test_notebook.py``.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import textwrap
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import torch

from .openmp import POLICY_TOO_LATE
from .profile import Profile, current_profile
from .reproducibility import seed_everything

__all__ = ["available_cpus", "chapter_threads", "check_close", "setup", "show_source"]


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; a container's limit shows here)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def chapter_threads(threads: int = 2) -> int:
    """The thread count :func:`setup` uses: ``threads``, at most the CPUs available, and 1 when
    torch was imported before dmlbook without ``OMP_WAIT_POLICY`` (idle threads would spin)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}.")
    return 1 if POLICY_TOO_LATE else min(threads, available_cpus())


def setup(seed: int = 0, threads: int = 2) -> Profile:
    """Prepare a chapter: seeds, a fixed thread count, print options and PNG figures.

    Figures take the book's colour-blind-safe colours, markers and line styles
    (:func:`dmlbook.palette.book_rc`).

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

        from .palette import book_rc

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
    body = ast.parse(source).body[0].body
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
    print("\n".join(lines))


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
    if isinstance(tol, bool) or not (
        isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0
    ):
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

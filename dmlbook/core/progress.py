"""When to show a progress bar.

Every long loop in dmlbook (training, caching images, downloading, extracting, a grid of runs)
takes ``progress: bool | None``. ``True`` and ``False`` are obeyed; ``None``, the default, shows the
bar unless the environment variable ``TQDM_DISABLE`` is set to a true value. The variable is read
when the loop starts, not when tqdm is imported, so a notebook or test can set it at any time.
"""

from __future__ import annotations

import os

__all__ = ["progress_disabled"]

_FALSE = ("", "0", "false", "no", "off")


def progress_disabled(progress: bool | None) -> bool:
    """Whether to hide the bar: ``not progress``, or for ``None`` whether ``TQDM_DISABLE`` is set.

    Parameters
    ----------
    progress : bool or None
        The caller's choice; ``None`` defers to ``TQDM_DISABLE``.

    Returns
    -------
    bool
        The value to pass as tqdm's ``disable``.
    """
    if progress is not None:
        return not progress
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in _FALSE

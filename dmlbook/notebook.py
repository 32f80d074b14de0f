"""``dmlbook.setup()``: the first call of every chapter."""

from __future__ import annotations

import numpy as np
import torch

from .profile import Profile, current_profile
from .reproducibility import seed_everything

__all__ = ["setup"]


def setup(seed: int = 0, threads: int = 2) -> Profile:
    """Prepare a chapter: seeds, a fixed thread count, print options and PNG figures.

    Parameters
    ----------
    seed : int
        Seed for Python, NumPy and torch.
    threads : int
        Number of CPU threads torch uses. A fixed count keeps floating-point reductions, and
        therefore printed numbers, identical from run to run on the same machine.

    Returns
    -------
    Profile
        The profile selected by ``DMLBOOK_PROFILE`` / ``DMLBOOK_DATA``.
    """
    seed_everything(seed)
    torch.set_num_threads(threads)
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
            {"figure.dpi": 80, "savefig.dpi": 80, "figure.figsize": (6, 3.6)}
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

"""Deprecated location: split into :mod:`dmlbook.losses.ablation` (the Table 2 losses) and
:mod:`dmlbook.studies.ms_ablation` (the paper's numbers, reading and summarising results).

Importing this module warns (``DeprecationWarning``) and forwards every public name of both.
"""

import warnings

from ..studies.ms_ablation import *  # noqa: F403
from ..studies.ms_ablation import __all__ as _study_names
from .ablation import *  # noqa: F403
from .ablation import __all__ as _loss_names

__all__ = [*_loss_names, *_study_names]

warnings.warn(
    "dmlbook.losses.ms_ablation is split: import the Table 2 losses from dmlbook.losses.ablation "
    "and PAPER_TABLE_2, paper_table_2, read_ablation_csv, summarize_ablation from "
    "dmlbook.studies.ms_ablation.",
    DeprecationWarning,
    stacklevel=2,
)

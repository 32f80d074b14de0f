"""Deprecated location: moved to :mod:`dmlbook.reference.multi_similarity`.

Importing this module warns (``DeprecationWarning``) and hands back the new module itself.
"""

import sys
import warnings

from ..reference import multi_similarity as _moved

warnings.warn(
    "dmlbook.losses.ms_reference moved to dmlbook.reference.multi_similarity; "
    "import multi_similarity_loss_reference from dmlbook.reference.",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved

"""Deprecated location: moved to :mod:`dmlbook.studies.three_similarities`.

Importing this module warns (``DeprecationWarning``) and hands back the new module itself, so
every name (and any monkeypatch of it) is the same object as there.
"""

import sys
import warnings

from .studies import three_similarities as _moved

warnings.warn(
    "dmlbook.three_similarities moved to dmlbook.studies.three_similarities; "
    "import it as `from dmlbook.studies import three_similarities`.",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved

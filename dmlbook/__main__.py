"""``python -m dmlbook``: the ``dmlbook`` command (:func:`dmlbook.cli.main`), for environments
where the console script is not on ``PATH``. Parsing imports no torch (``tests/test_cli.py``)."""

import sys

from .cli import main

sys.exit(main())

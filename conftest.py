"""Root pytest configuration: settings every notebook kernel (nbval) and test inherits.

nbval starts each chapter's kernel from the pytest process, so environment variables set here
reach the chapters: progress bars are switched off so that stored and fresh outputs match.
"""

import os

os.environ["TQDM_DISABLE"] = "1"
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
# Idle OpenMP threads sleep instead of spinning: with two pytest workers (and their kernels) on two
# cores, spinning threads steal each other's time and training cells run many times slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

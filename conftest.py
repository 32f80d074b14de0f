"""Root pytest configuration: settings every notebook kernel (nbval) and test inherits.

nbval starts each chapter's kernel from the pytest process, so environment variables set here
reach the chapters: progress bars are switched off so that stored and fresh outputs match.
"""

import os

os.environ["TQDM_DISABLE"] = "1"
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

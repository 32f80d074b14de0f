"""Root pytest configuration: settings every notebook kernel (nbval) and test inherits.

nbval starts each chapter's kernel from the pytest process, so environment variables set here
reach the chapters: progress bars are switched off so that stored and fresh outputs match.

Chapters under test run on other math-library code paths than the ones their stored outputs were
made with (``make refresh`` executes them with the machine's defaults): every nbval run is then a
check that what nbval compares byte for byte does not depend on the CPU, the way another CPU
family would change it. Numbers that come out of float32 training do move under these settings;
their cells carry the ``nbval-ignore-output`` tag and assert them instead (CONTRIBUTING.md).
"""

import os

import pytest

os.environ["TQDM_DISABLE"] = "1"
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
# Idle OpenMP threads sleep instead of spinning: with two pytest workers (and their kernels) on two
# cores, spinning threads steal each other's time and training cells run many times slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The chapters' kernels only (a variable already set in the environment wins, so that
# `MKL_CBWR=AUTO ONEDNN_MAX_CPU_ISA=ALL make test-book` runs them on the machine's own paths):
# MKL's compatible code path (SSE2 kernels instead of the AVX2/AVX-512 ones it picks by CPU) and
# oneDNN (convolutions) limited to AVX2. Both change float32 training results in their last bits.
KERNEL_MATH = {"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Start a chapter's kernel (nbval does it in the notebook's setup) under ``KERNEL_MATH``."""
    if item.path.suffix != ".ipynb":
        return (yield)
    added = [key for key in KERNEL_MATH if key not in os.environ]
    os.environ.update({key: KERNEL_MATH[key] for key in added})
    try:
        return (yield)
    finally:  # the unit tests (and the processes they start) keep the machine's own paths
        for key in added:
            del os.environ[key]

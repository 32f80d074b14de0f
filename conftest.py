"""Root pytest configuration: settings every notebook kernel (nbval) and test inherits.

nbval starts each chapter's kernel from the pytest process, so environment variables set here
reach the chapters: progress bars are switched off so that stored and fresh outputs match.

`make test` never waits in silence: when nothing has been reported for 10 s, a line says which
tests are still running (or that the workers are still collecting), through
``tools/heartbeat.py``.

Chapters under test run on other math-library code paths than the ones their stored outputs were
made with (``make refresh`` executes them with the machine's defaults): every nbval run is then a
check that what nbval compares byte for byte does not depend on the CPU, the way another CPU
family would change it. Numbers that come out of float32 training do move under these settings;
their cells carry the ``nbval-ignore-output`` tag and assert them instead (CONTRIBUTING.md).
"""

import os
import sys
import time
from pathlib import Path

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


sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
from heartbeat import Heartbeat  # noqa: E402


class RunningTests:
    """Which tests are running (xdist reports their start to the controlling process too)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started: dict[str, float] = {}
        self.finished = 0
        self.heart: Heartbeat | None = None

    def status(self, elapsed: float) -> str:
        if not self.started:
            return f"[{elapsed:.0f} s] collecting or starting tests ..."
        nodeid, since = min(self.started.items(), key=lambda item: item[1])
        more = f" (and {len(self.started) - 1} more)" if len(self.started) > 1 else ""
        return f"[{elapsed:.0f} s] running for {time.monotonic() - since:.0f} s: {nodeid}{more}"

    def start(self) -> None:
        writer = self.config.pluginmanager.get_plugin("terminalreporter")
        if writer is not None:  # a line of its own, wherever the progress dots stand
            self.heart = Heartbeat(self.status, write=lambda line: writer.write(f"\n{line}\n"))
            self.heart.__enter__()

    def stop(self) -> None:
        if self.heart is not None:
            self.heart.__exit__()
            self.heart = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self):  # collection (xdist's workers) and the tests
        yield
        self.stop()

    def pytest_unconfigure(self) -> None:  # runs without a test loop too (--collect-only)
        self.stop()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started[nodeid] = time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.started.pop(nodeid, None)
        if self.heart is not None:
            self.heart.beat()


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controlling process (or the only one)
        running = RunningTests(config)
        config.pluginmanager.register(running, "dmlbook-running-tests")
        running.start()

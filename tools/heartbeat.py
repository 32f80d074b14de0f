"""No silent waits: a status line whenever a long step has printed nothing for a while.

Standard library only, because ``make install`` runs it before anything else is installed.

- :class:`Heartbeat` calls ``status(elapsed)`` after every ``every`` seconds without output and
  prints what it returns (``make book``: the cell a chapter is at; rendering: how long so far).
- :func:`run_filtered` runs a command, prints the lines a ``select`` function keeps (rewritten if
  it likes), beats between them, and returns the exit status and the last lines of the full
  output, so that a failure can still be shown whole.
- ``python tools/heartbeat.py pip ARGS...`` is ``make install``'s pip: one line per package
  collected, then, through pip's long silent "Installing collected packages", how many of them
  are in place every ten seconds; ``python tools/heartbeat.py run LABEL COMMAND...`` runs any
  command that way (``make install``'s ``python -m venv``).
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path

EVERY = 10.0


class Heartbeat:
    """Print ``status(elapsed_seconds)`` after every ``every`` s without a :meth:`beat`.

    Printed with ``end`` after it, or handed to ``write`` (pytest's terminal writer).
    """

    def __init__(
        self,
        status: Callable[[float], str | None],
        every: float | None = None,
        end: str = "\n",
        write: Callable[[str], object] | None = None,
    ) -> None:
        self.status = status
        self.every = EVERY if every is None else every
        self.write = write or (lambda line: print(line, end=end, flush=True))
        self._start = self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def beat(self) -> None:
        """Something was printed: the next status line is due ``every`` s from now."""
        self._last = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(min(0.5, self.every / 3)):
            now = time.monotonic()
            if now - self._last >= self.every:
                line = self.status(now - self._start)
                if line:
                    self.write(line)
                self._last = now

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def minutes(seconds: float) -> str:
    """``75`` -> ``"1 min 15 s"``."""
    m, s = divmod(int(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def run_filtered(
    cmd: list[str],
    select: Callable[[str], str | None],
    status: Callable[[float], str | None],
    cwd: Path | None = None,
    keep: int = 60,
) -> tuple[int, list[str]]:
    """Run ``cmd`` (stdout and stderr merged), print ``select(line)`` where it is not None.

    Returns the exit status and the last ``keep`` lines of the whole output.
    """
    tail: collections.deque[str] = collections.deque(maxlen=keep)
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    with Heartbeat(status) as heart:
        for raw in proc.stdout:
            line = re.sub(r"\x1b\[[0-9;]*m", "", raw.rstrip("\n"))
            tail.append(line)
            shown = select(line)
            if shown is not None:
                print(shown, flush=True)
                heart.beat()
    return proc.wait(), list(tail)


PIP_LINE = re.compile(r"^(Collecting|Processing|Installing collected|Successfully installed|ERROR)")


def pip_with_progress(
    args: list[str], python: str = sys.executable, site: Path | None = None
) -> int:
    """Run ``python -m pip ARGS`` with a line per package and the install's progress.

    ``site`` is where pip installs (default: this interpreter's site-packages).
    """
    site = Path(sysconfig.get_paths()["purelib"]) if site is None else site
    pending: list[str] = []

    def select(line: str) -> str | None:
        if line.startswith("Installing collected packages:"):
            names = line.split(":", 1)[1]
            pending[:] = [re.sub(r"[-_.]+", "_", n.strip()).lower() for n in names.split(",")]
            return f"installing {len(pending)} packages (the longest step: several minutes) ..."
        return line[:100] if PIP_LINE.match(line) else None

    def status(elapsed: float) -> str:
        if not pending:
            return f"  ... pip is still working ({minutes(elapsed)})"
        installed = {
            re.sub(r"[-_.]+", "_", p.name.split("-")[0]).lower() for p in site.glob("*.dist-info")
        }
        done = sum(name in installed for name in pending)
        return f"  ... {done} of {len(pending)} packages in place ({minutes(elapsed)})"

    code, tail = run_filtered([python, "-m", "pip", *args], select, status)
    if code:
        print("\n".join(tail[-25:]), file=sys.stderr)
    return code


def run_with_progress(label: str, cmd: list[str]) -> int:
    """Run ``cmd`` showing its output, and ``... still LABEL (N s)`` through its silences."""
    print(f"{label} ...", flush=True)
    code, tail = run_filtered(
        cmd, lambda line: line, lambda t: f"  ... still {label} ({minutes(t)})"
    )
    return code


USAGE = "usage: python tools/heartbeat.py pip ARGS... | run LABEL COMMAND..."

if __name__ == "__main__":
    if sys.argv[1:2] == ["pip"]:
        sys.exit(pip_with_progress(sys.argv[2:]))
    if sys.argv[1:2] == ["run"] and len(sys.argv) > 3:
        sys.exit(run_with_progress(sys.argv[2], sys.argv[3:]))
    sys.exit(USAGE)

"""tools/heartbeat.py: the status lines that keep `make install`, `make book` and `make test` from
waiting in silence (the intervals are shortened here; the real one is 10 s)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import heartbeat  # noqa: E402


def test_a_status_line_after_each_silence(capsys):
    with heartbeat.Heartbeat(lambda elapsed: f"still at it ({elapsed:.1f} s)", every=0.3) as h:
        h.beat()
        time.sleep(2.0)
    assert capsys.readouterr().out.count("still at it") >= 2


def test_run_filtered_shows_the_selected_lines_and_keeps_the_whole_tail(capsys):
    script = "import time; print('noise'); print('keep: a', flush=True); time.sleep(0.8); print('keep: b')"
    code, tail = heartbeat.run_filtered(
        [sys.executable, "-c", script],
        lambda line: line.upper() if line.startswith("keep") else None,
        lambda elapsed: "...",
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and tail == ["noise", "keep: a", "keep: b"]
    assert out[0] == "KEEP: A" and out[-1] == "KEEP: B"


@pytest.fixture
def fake_pip(tmp_path) -> Path:
    """A 'python' whose `-m pip install` announces three packages and installs one a second."""
    site = tmp_path / "site"
    site.mkdir()
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        "echo 'Collecting alpha-beta'\n"
        "echo 'Installing collected packages: alpha-beta, gamma, Delta_x'\n"
        f"sleep 1; mkdir {site}/alpha_beta-1.0.dist-info\n"
        f"sleep 1; mkdir {site}/gamma-2.dist-info\n"
        f"sleep 1; mkdir {site}/delta_x-3.dist-info\n"
        "echo 'Successfully installed alpha-beta-1.0 gamma-2 Delta_x-3'\n"
    )
    python.chmod(0o755)
    return python


def test_pip_says_how_many_packages_are_in_place(fake_pip, capsys, monkeypatch):
    monkeypatch.setattr(heartbeat, "EVERY", 0.3)
    site = fake_pip.parent / "site"
    assert heartbeat.pip_with_progress(["install", "x"], str(fake_pip), site) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "Collecting alpha-beta",
        "installing 3 packages (the longest step: several minutes) ...",
    ]
    counts = [
        line.split(" of ")[0].split()[-1] for line in out if " of 3 packages in place" in line
    ]
    assert counts and counts == sorted(counts) and counts[-1] in ("2", "3"), out
    assert out[-1].startswith("Successfully installed")

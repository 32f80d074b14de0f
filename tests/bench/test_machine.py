"""bench/machine.py: what a results header says about the CPU (issue 46: a timing names its ISA)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from machine import cpu_flags  # noqa: E402


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("fpu sse2 avx avx2 fma avx512f avx512bw", "AVX-512F, AVX2"),
        ("fpu sse2 avx avx2 fma", "AVX2"),
        ("fpu sse2 sse4_2", "neither AVX2 nor AVX-512"),
    ],
)
def test_cpu_flags_reads_the_flags_line(tmp_path, flags, expected):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n")
    assert cpu_flags(info) == expected


def test_cpu_flags_without_cpuinfo(tmp_path):
    assert cpu_flags(tmp_path / "missing") == "instruction set unknown"


@pytest.mark.skipif("AVX2" not in cpu_flags(), reason="needs a CPU with AVX2 to lower torch to it")
def test_cpu_description_names_the_kernels_torch_uses():
    code = "import machine; print(machine.cpu_description())"
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCH, env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "torch CPU capability AVX2" in out and "oneDNN capped at AVX2" in out

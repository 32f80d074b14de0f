"""Fixtures shared by the tests of :mod:`dmlbook.symbolic`'s printed proofs."""

from __future__ import annotations

import pytest


@pytest.fixture
def proof_rows(capsys):
    """A function returning the title and ``{step name: the rest of its line}`` of the verbose
    proof printed since the last call."""

    def read() -> tuple[str, dict[str, str]]:
        lines = capsys.readouterr().out.splitlines()
        rows = {}
        for line in lines[1:]:
            name, _, rest = line.strip().partition("  ")
            rows[name] = rest.strip()
        return lines[0], rows

    return read

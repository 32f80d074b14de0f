"""Fixtures shared by the unit tests (the root ``conftest.py`` sets the environment)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """Run the test on one torch thread (bit-for-bit reproducible training), then restore it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

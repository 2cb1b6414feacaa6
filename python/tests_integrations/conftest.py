"""Fixtures of the framework adapters' tests; the shared helpers are in _support.py (this folder
and python/examples are put on sys.path, as pytest's importlib mode does not)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "examples"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from _support import Verdicts  # noqa: E402

from agentbreaker import Monitor  # noqa: E402


@pytest.fixture
def monitor() -> Monitor:
    return Monitor(profile="coding-agent")


@pytest.fixture
def verdicts(monitor: Monitor) -> Verdicts:
    return Verdicts(monitor)

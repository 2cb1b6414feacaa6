"""Shared fixtures, and libtest-style result lines for tools/mutate_scenarios.py.

With ``AGENTBREAKER_LIBTEST_OUTPUT=1`` every conformance test also prints
``test <scenario> ... ok|FAILED`` (the format the suite's mutation check reads), so the Python
runner can be checked the same way as the Rust one::

    python3 tools/mutate_scenarios.py --runner \
        "python/.venv-test/bin/python -m pytest -q -p no:cacheprovider python/tests/test_conformance.py"
"""

from __future__ import annotations

import os
from typing import Any, List

import pytest

import agentbreaker as ab


@pytest.fixture
def clock() -> ab.ManualClock:
    return ab.ManualClock(0)


@pytest.fixture
def events() -> List[Any]:
    return []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get("AGENTBREAKER_LIBTEST_OUTPUT"):
        return
    if report.when != "call" and not (report.when == "setup" and report.failed):
        return
    if "test_scenario[" not in report.nodeid:
        return
    name = report.nodeid.split("test_scenario[", 1)[1][:-1]
    outcome = "ok" if report.passed else "FAILED"
    print(f"\ntest {name} ... {outcome}", flush=True)

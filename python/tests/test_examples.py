"""The README's example and the typed usage program run (mypy --strict checks them in
`make test-python`)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_readme_example_guards_an_agent_loop(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(HERE.parent / "examples" / "agent_loop.py"), run_name="__main__")
    assert capsys.readouterr().out == "stopped at iteration 4: circuit_open\nOPEN 3\n"


def test_typed_usage_runs(tmp_path: Path) -> None:
    program = runpy.run_path(str(HERE / "typed_usage.py"))
    program["main"](tmp_path)

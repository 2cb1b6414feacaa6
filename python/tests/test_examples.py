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


def test_readme_monitor_example_watches_an_agent(capsys: pytest.CaptureFixture[str]) -> None:
    example = HERE.parent / "examples" / "monitor_loop.py"
    runpy.run_path(str(example), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("nudge for the model: You have run `pytest -q`")
    assert lines[1].startswith("halted at step 5 (repeated_step): ")
    # The README shows the example's loop as it is in the file.
    readme = (HERE.parents[1] / "README.md").read_text()
    loop = example.read_text().split("monitor = Monitor(", 1)[1]
    assert "monitor = Monitor(" + loop.split("except AgentHalted")[0] in readme


def test_typed_usage_runs(tmp_path: Path) -> None:
    program = runpy.run_path(str(HERE / "typed_usage.py"))
    program["main"](tmp_path)

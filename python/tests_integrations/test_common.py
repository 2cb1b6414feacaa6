"""The adapters' shared part: events the Monitor refuses never stop an agent."""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any, Dict

import pytest

from agentbreaker import Monitor
from agentbreaker.exceptions import InternalError
from agentbreaker.integrations._common import Run, Watcher, json_safe, to_text


def test_json_safe() -> None:
    class Model:
        def model_dump(self, mode: str) -> Dict[str, Any]:
            return {"mode": mode, "when": datetime.date(2025, 1, 2)}

    value = {
        1: (1, 2),
        "when": datetime.datetime(2025, 1, 2, 3, 4, 5),
        "price": decimal.Decimal("9.50"),
        "tags": {"a"},
        "nan": math.nan,
        "big": 10**30,
        "model": Model(),
        "bytes": b"\x00\xff",
    }
    assert json_safe(value) == {
        "1": [1, 2],
        "when": "2025-01-02 03:04:05",
        "price": "9.50",
        "tags": ["a"],
        "nan": "nan",
        "big": str(10**30),
        "model": {"mode": "json", "when": "2025-01-02"},
        "bytes": "\x00\ufffd",
    }
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    json_safe(deep)  # no RecursionError


def test_to_text_never_raises() -> None:
    class Bad:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert to_text(Bad()) == "<Bad>"
    assert to_text({"b": 1, "a": [1, None]}) == '{"a": [1, null], "b": 1}'
    assert len(to_text("x" * 1_000_000)) < 70_000


def test_an_event_with_objects_is_watched_as_json() -> None:
    watcher = Watcher(Monitor(), "test")
    run = watcher.run("t")
    verdict = watcher.observe(run, {"type": "tool_use", "name": "schedule", "input": {"when": datetime.date(2025, 1, 2), "n": math.inf}})
    assert verdict["action"] == "continue" and verdict["taskId"] == "t"
    assert watcher.observe_errors == 0
    assert watcher.monitor.status()["tasks"][0]["toolCalls"] == 1


def test_a_refused_event_lets_the_agent_go_on() -> None:
    class Failing:
        def observe(self, event: Any) -> Any:
            raise InternalError("boom")

    watcher = Watcher(Monitor(), "test")
    watcher.monitor = Failing()  # type: ignore[assignment]
    with pytest.warns(RuntimeWarning, match="an event was not watched"):
        verdict = watcher.observe(watcher.run("t"), {"type": "alive"})
    assert verdict["action"] == "continue"
    assert watcher.observe_errors == 1
    watcher.close("t")  # its heartbeat is refused too: still no exception
    assert watcher.observe_errors == 2


def test_open_runs_are_bounded() -> None:
    from agentbreaker.integrations import _common

    watcher = Watcher(Monitor(), "test")
    for n in range(_common.MAX_OPEN_RUNS + 10):
        watcher.observe(watcher.run(f"run-{n}"), {"type": "alive"})
    assert len(watcher.monitor.status()["tasks"]) == _common.MAX_OPEN_RUNS
    assert isinstance(watcher.run("run-9"), Run)  # an old run comes back as a new one

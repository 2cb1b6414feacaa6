"""The adapters' shared part: events the Monitor refuses never stop an agent."""

from __future__ import annotations

import datetime
import decimal
import math
import threading
from typing import Any, Dict

import pytest

from agentbreaker import Monitor
from agentbreaker.exceptions import InternalError
from agentbreaker.integrations._common import Run, Watcher, json_safe, to_text
from _support import Recording


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


def test_a_held_event_reaches_the_monitor_before_the_runs_next_event() -> None:
    """A model call's held assistant event is given once, before any later event of its run,
    however many threads give their tool calls at once; a second hold and the run's end give it
    first too."""
    watcher = Watcher(Monitor(), "test")
    recording = Recording(watcher.monitor)
    watcher.monitor = recording  # type: ignore[assignment]
    run = watcher.run("t")
    watcher.hold(run, {"type": "assistant", "text": "eight calls at once"})
    assert recording.seen == []
    start = threading.Barrier(8)

    def tool_use(n: int) -> None:
        start.wait()
        watcher.observe(run, {"type": "tool_use", "name": "search", "input": {"query": n}, "id": f"c{n}"})

    threads = [threading.Thread(target=tool_use, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert recording.seen == ["assistant"] + ["tool_use"] * 8
    watcher.hold(run, {"type": "assistant", "text": "one"})
    watcher.hold(run, {"type": "assistant", "text": "two"})
    assert recording.seen[9:] == ["assistant"]
    watcher.close("t")
    assert recording.seen[9:] == ["assistant", "assistant", "heartbeat"]


def test_a_held_events_verdict_is_the_runs_once_given() -> None:
    watcher = Watcher(Monitor(budget={"maxTokenSpendCentsPerTask": 1}), "test")
    run = watcher.run("t")
    spend = {"input_tokens": 500_000, "output_tokens": 1_000}
    watcher.hold(run, {"type": "assistant", "text": "", "usage": spend})
    assert run.halt is None and watcher.monitor.status()["tasks"] == []
    watcher.flush(run)
    assert run.halt is not None and run.halt["reason"] == "token_spend_limit"
    assert watcher.last_verdict == run.halt


def test_a_listener_that_feeds_the_run_while_its_held_event_is_given() -> None:
    """The Monitor's listeners run inside `observe`: one that gives the same run an event while
    the held one is being given neither waits for itself nor has the held event given twice."""
    watcher = Watcher(Monitor(budget={"maxTokenSpendCentsPerTask": 1}), "test")
    recording = Recording(watcher.monitor)
    run = watcher.run("t")
    watcher.monitor.add_listener(lambda event: watcher.observe(run, {"type": "alive"}))
    watcher.monitor = recording  # type: ignore[assignment]
    spend = {"input_tokens": 500_000, "output_tokens": 1_000}
    watcher.hold(run, {"type": "assistant", "text": "", "usage": spend})
    flush = threading.Thread(target=watcher.flush, args=(run,), daemon=True)
    flush.start()
    flush.join(10)
    assert not flush.is_alive()
    assert recording.seen == ["assistant", "alive"]
    assert run.halt is not None and run.halt["reason"] == "token_spend_limit"

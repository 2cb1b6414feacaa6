"""The Monitor (contract section 11, docs/monitor.md) through the Python API: keyword and dict
configuration, verdict dicts, the warn-then-halt ladder, tick, status, snapshot/restore, reset,
listeners, threads, and `AgentHalted`."""

from __future__ import annotations

import pickle
import threading
from typing import Any, Dict, List

import pytest

import agentbreaker as ab
from agentbreaker.types import Event, MonitorEvent, Verdict


def failing_step(i: int, task: str = "session") -> List[MonitorEvent]:
    """One step of an agent that re-runs the same failing command."""
    return [
        {"type": "assistant", "text": "Let me run the tests.", "taskId": task},
        {"type": "tool_use", "name": "Bash", "id": f"{task}-{i}", "input": {"command": "pytest -q"},
         "taskId": task},
        {"type": "tool_result", "id": f"{task}-{i}", "ok": False, "text": "1 failed", "taskId": task},
    ]


def last_verdict(monitor: ab.Monitor, events: List[MonitorEvent]) -> Verdict:
    verdicts = [monitor.observe(e) for e in events]
    return verdicts[-1]


def test_keywords_and_a_contract_dict_configure_the_same_monitor() -> None:
    by_keywords = ab.Monitor(
        profile="seed", tool_limits={"web_fetch": 20}, warn_before=1, budget_warn_percent=50,
        stagnation={"repeatThreshold": 4}, budget={"maxIdleSecs": 60}, failure={"failureThreshold": 3},
    )
    by_dict = ab.Monitor({
        "profile": "seed", "toolLimits": {"web_fetch": 20}, "warnBefore": 1, "budgetWarnPercent": 50,
        "stagnation": {"repeatThreshold": 4}, "budget": {"maxIdleSecs": 60},
        "failure": {"failureThreshold": 3},
    })
    assert by_keywords.config == by_dict.config
    config = by_keywords.config
    assert config["toolLimits"] == {"web_fetch": 20}
    assert (config["warnBefore"], config["budgetWarnPercent"]) == (1, 50)
    assert config["stagnation"]["repeatThreshold"] == 4
    assert config["budget"]["maxIdleSecs"] == 60
    assert ab.Monitor().config["profile"] == "coding-agent"
    assert repr(ab.Monitor(profile="seed")) == "Monitor(profile='seed')"
    # Keywords override the positional dict.
    assert ab.Monitor({"warnBefore": 1}, warn_before=0).config["warnBefore"] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"profile": "fast"},
        {"profile": 3},
        {"tool_limits": {"x": -1}},
        {"tool_limits": [1]},
        {"warn_before": 1.5},
        {"budget_warn_percent": 101},
        {"stagnation": {"bogus": 1}},
        {"toolLimits": {"x": 1}},
        {"clock": "system"},
    ],
    ids=repr,
)
def test_bad_configs_are_invalid_config(kwargs: Dict[str, Any]) -> None:
    with pytest.raises(ab.InvalidConfigError) as e:
        ab.Monitor(**kwargs)
    assert e.value.code == "INVALID_CONFIG"


def test_every_event_gets_a_verdict_and_the_ladder_warns_then_halts() -> None:
    monitor = ab.Monitor(clock=ab.ManualClock())
    verdict = monitor.observe({"type": "assistant", "text": "hello"})
    assert verdict == {
        "action": "continue", "reason": None, "message": None, "nudge": None,
        "taskId": "session", "step": 1, "detail": None,
    }
    monitor.reset()
    actions = [last_verdict(monitor, failing_step(i)) for i in range(5)]
    assert [v["action"] for v in actions] == ["continue", "continue", "warn", "continue", "halt"]
    warn, halt = actions[2], actions[4]
    assert warn["reason"] == halt["reason"] == "repeated_step"
    assert warn["nudge"] and "pytest -q" in warn["nudge"]
    assert halt["step"] == 5 and halt["detail"] is not None and halt["detail"]["count"] == 5
    # A halted task stays halted; other tasks go on.
    assert monitor.observe({"type": "assistant", "text": "one more try"}) == halt
    assert monitor.observe({"type": "assistant", "text": "hi", "taskId": "other"})["action"] == "continue"


@pytest.mark.parametrize(
    "event",
    [
        [1],
        {"text": "no type"},
        {"type": 3},
        {"type": "assistant"},
        {"type": "tool_use", "name": ""},
        {"type": "tool_result", "ok": "yes"},
        {"type": "usage", "costCents": float("nan")},
        {"type": "progress", "files": 1.5},
        {"type": "heartbeat", "phase": "starting"},
        {"type": "alive", "taskId": 5},
        {"type": "assistant", "text": object()},
        # The shapes the framework adapters send are read straight from the dict; a value of
        # another type than the one expected goes the general way, which refuses it.
        {"type": "tool_use", "name": "Bash", "input": {1: "not a str key"}},
        {"type": "tool_result", "ok": 1, "text": "a number is not a bool"},
        {"type": "tool_result", "ok": True, "text": b"bytes"},
        {"type": "usage", "usage": {"input_tokens": True}},
        {"type": "usage", "usage": {"input_tokens": -1}},
        {"type": "usage", "usage": {"input_tokens": 2**64}},
        {"type": "usage", "usage": {"input_tokens": 1.5}},
        {"type": "usage", "usage": {"input_tokens": 10}, "model": 3},
        {"type": "assistant", "text": "hi", "taskId": ""},
        {"type": "assistant", "text": "hi", "taskId": None, "extra": {1, 2}},
        {"type": "assistant", "text": "\ud800"},
        {"type": "assistant", "text": "hi", "usage": {"input_tokens": "3"}},
    ],
    ids=repr,
)
def test_a_malformed_event_is_invalid_event_and_changes_nothing(event: Any) -> None:
    monitor = ab.Monitor(clock=ab.ManualClock())
    monitor.observe({"type": "assistant", "text": "hello"})
    before = monitor.snapshot()
    with pytest.raises(ab.InvalidEventError):
        monitor.observe(event)
    assert monitor.snapshot() == before


def test_events_read_straight_from_the_dict_count_as_through_json() -> None:
    # The same stream twice: once as plain dicts (read straight), once with a key the Monitor
    # does not read on every event (read through the general path). Same verdicts, same state.
    clock_a, clock_b = ab.ManualClock(), ab.ManualClock()
    straight = ab.Monitor(clock=clock_a, profile="seed", warn_before=1, budget={"maxTokenSpendCentsPerTask": 100})
    general = ab.Monitor(clock=clock_b, profile="seed", warn_before=1, budget={"maxTokenSpendCentsPerTask": 100})
    stream: List[Dict[str, Any]] = []
    for i in range(6):
        usage = {"usage": {"input_tokens": 20_000, "output_tokens": 500, "cache_read_input_tokens": 3,
                           "cache_creation_input_tokens": 4}, "model": "claude-sonnet-4"}
        # The spend as a usage event after the assistant one, or carried by it (every other step).
        model_call: List[Dict[str, Any]] = (
            [{"type": "assistant", "text": f"step {i}", "taskId": "t"}, {"type": "usage", **usage, "taskId": "t"}]
            if i % 2 else [{"type": "assistant", "text": f"step {i}", **usage, "taskId": "t"}]
        )
        stream += [
            *model_call,
            {"type": "tool_use", "name": "Bash", "input": {"command": "pytest", "n": [1, 2.5, None, True]},
             "id": f"c{i}", "taskId": "t"},
            {"type": "tool_result", "ok": False, "text": "1 failed", "id": f"c{i}", "name": "Bash", "taskId": "t"},
            {"type": "tool_use", "name": "Read"},
            {"type": "tool_result", "ok": True},
        ]
    seen = []
    for event in stream:
        a = straight.observe(dict(event))
        b = general.observe({**event, "x-framework": "extra"})
        assert a == b
        seen.append(a["action"])
        clock_a.advance(1000)
        clock_b.advance(1000)
    assert "warn" in seen and "halt" in seen
    assert straight.status() == general.status()
    assert straight.snapshot() == general.snapshot()


def test_observe_needs_an_event() -> None:
    # No event, or None, is not an event object: the same error as `null` in every binding.
    with pytest.raises(ab.InvalidEventError):
        ab.Monitor().observe()  # type: ignore[call-arg]
    with pytest.raises(ab.InvalidEventError):
        ab.Monitor().observe(None)  # type: ignore[arg-type]


def test_tick_reports_idle_and_duration_limits() -> None:
    clock = ab.ManualClock()
    monitor = ab.Monitor(profile="seed", budget={"maxIdleSecs": 10}, clock=clock)
    monitor.observe({"type": "assistant", "text": "working"})
    clock.set(5_000)
    assert monitor.tick() == []
    clock.set(9_000)
    (warning,) = monitor.tick()
    assert (warning["action"], warning["reason"]) == ("warn", "idle_timeout")
    clock.set(11_000)
    (halt,) = monitor.tick()
    assert (halt["action"], halt["reason"]) == ("halt", "idle_timeout")
    assert monitor.tick() == [], "a halt is reported once"
    assert monitor.status()["tasks"][0]["halted"] is True


def test_status_shows_every_task_and_rule() -> None:
    monitor = ab.Monitor(profile="seed", tool_limits={"Bash": 9}, clock=ab.ManualClock())
    for i in range(2):
        last_verdict(monitor, failing_step(i))
    status = monitor.status()
    assert status["profile"] == "seed" and status["ignoredEvents"] == 0
    (task,) = status["tasks"]
    assert (task["taskId"], task["steps"], task["toolCalls"]) == ("session", 2, 2)
    assert task["toolCallsByName"] == {"Bash": 2}
    assert task["rules"]["tool_call_limit"]["count"] == 2
    assert task["halted"] is False and task["halt"] is None
    monitor.observe({"type": "something_new"})
    assert monitor.status()["ignoredEvents"] == 1


def test_a_restored_monitor_continues_with_the_same_verdicts() -> None:
    events = [e for i in range(6) for e in failing_step(i)]
    whole = ab.Monitor(clock=ab.ManualClock())
    expected = [whole.observe(e) for e in events]
    first = ab.Monitor(clock=ab.ManualClock())
    got = [first.observe(e) for e in events[:7]]
    snapshot = first.snapshot()
    assert (snapshot["kind"], snapshot["version"]) == ("monitor", 1)
    second = ab.Monitor(clock=ab.ManualClock())
    second.restore(snapshot)
    got += [second.observe(e) for e in events[7:]]
    assert got == expected


@pytest.mark.parametrize(
    "snapshot",
    [{"kind": "budget", "version": 1}, {"version": 2}, "nope", {"tasks": object()}],
    ids=repr,
)
def test_a_bad_snapshot_is_invalid_snapshot(snapshot: Any) -> None:
    monitor = ab.Monitor()
    with pytest.raises(ab.InvalidSnapshotError):
        monitor.restore(snapshot)


def test_reset_forgets_everything_but_the_config() -> None:
    monitor = ab.Monitor(profile="seed", clock=ab.ManualClock())
    last_verdict(monitor, failing_step(0))
    monitor.reset()
    assert monitor.status()["tasks"] == []
    assert monitor.config["profile"] == "seed"


def test_listeners_get_every_warning_and_halt() -> None:
    monitor = ab.Monitor(clock=ab.ManualClock(7))
    seen: List[Event] = []
    monitor.add_listener(seen.append)

    @monitor.add_listener
    def broken(event: Event) -> None:
        raise RuntimeError("listener bug")

    for i in range(5):
        last_verdict(monitor, failing_step(i))
    # Every warning (one per rule that reached its warning point) and the halt.
    assert [e["type"] for e in seen] == ["verdict"] * len(seen)
    assert [e.get("action") for e in seen] == ["warn"] * (len(seen) - 1) + ["halt"]
    assert seen[0].get("reason") == "repeated_step" and seen[-1].get("reason") == "repeated_step"
    assert seen[-1]["atMs"] == 7
    assert monitor.listener_errors == len(seen)
    assert monitor.remove_listener(broken) and not monitor.remove_listener(broken)


def test_threads_share_one_monitor() -> None:
    monitor = ab.Monitor(profile="seed", clock=ab.ManualClock())
    halts: List[Verdict] = []

    def agent(task: str) -> None:
        for i in range(50):
            v = last_verdict(monitor, [
                {"type": "tool_use", "name": "Read", "id": f"{task}-{i}", "input": {"i": i}, "taskId": task},
                {"type": "tool_result", "id": f"{task}-{i}", "ok": True, "text": str(i), "taskId": task},
                {"type": "progress", "files": 1, "taskId": task},
            ])
            if v["action"] == "halt":
                halts.append(v)

    threads = [threading.Thread(target=agent, args=(f"t{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tasks = {t["taskId"]: t for t in monitor.status()["tasks"]}
    assert sorted(tasks) == ["t0", "t1", "t2", "t3"]
    # The seed's budget: 50 tool calls a task, a halt past it; 50 calls exactly is within it.
    assert all(t["toolCalls"] == 50 and not t["halted"] for t in tasks.values()) and halts == []


def test_agent_halted_carries_the_verdict() -> None:
    monitor = ab.Monitor(clock=ab.ManualClock())
    halt = [last_verdict(monitor, failing_step(i)) for i in range(5)][-1]
    with pytest.raises(ab.AgentBreakerError) as caught:
        raise ab.AgentHalted(halt)
    error = caught.value
    assert isinstance(error, ab.AgentHalted) and error.code == "HALTED"
    assert error.verdict == halt and str(error) == halt["message"]
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ab.AgentHalted and copy.verdict == halt
    from_message = ab.AgentHalted("stopped by hand")
    assert str(from_message) == "stopped by hand"
    assert from_message.verdict["action"] == "halt" and from_message.verdict["message"] == "stopped by hand"
    with pytest.raises(TypeError):
        ab.AgentHalted(42)  # type: ignore[arg-type]

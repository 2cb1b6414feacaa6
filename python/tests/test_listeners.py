"""Listeners: plain callables receiving event dicts; one that raises is isolated."""

from __future__ import annotations

import gc
import weakref
from typing import Any, List

import agentbreaker as ab
from agentbreaker.types import Event


def test_listener_receives_warning_and_state_change_dicts(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    received: List[Event] = []
    breaker.add_listener(received.append)
    clock.set(1_000)
    for _ in range(5):
        breaker.record_failure("Path not found")
    assert received == [
        {
            "type": "warning",
            "message": "Warning: 3 consecutive failures. 2 more will open circuit.",
            "atMs": 1_000,
        },
        {
            "type": "stateChange",
            "from": "CLOSED",
            "to": "OPEN",
            "reason": "5 consecutive failures detected",
            "slug": "consecutive_failures",
            "atMs": 1_000,
        },
    ]
    # Keys come in JSON object order (sorted), as in every binding.
    assert list(received[1]) == ["atMs", "from", "reason", "slug", "to", "type"]


def test_add_listener_works_as_a_decorator_and_remove_listener_by_identity(
    clock: ab.ManualClock,
) -> None:
    breaker = ab.StagnationBreaker(clock=clock)
    seen: List[str] = []

    @breaker.add_listener
    def on_event(event: Event) -> None:
        seen.append(event["type"])

    assert callable(on_event)  # the decorator returns the function itself
    for _ in range(3):
        breaker.record_progress(output_length=10)
    assert seen == ["stateChange"]
    assert breaker.remove_listener(on_event) is True
    assert breaker.remove_listener(on_event) is False
    breaker.record_progress(output_length=10)  # HALF_OPEN -> OPEN, nobody listening
    assert seen == ["stateChange"]


def test_bound_methods_are_removed_by_equality(clock: ab.ManualClock) -> None:
    class Collector:
        def __init__(self) -> None:
            self.events: List[Event] = []

        def on_event(self, event: Event) -> None:
            self.events.append(event)

    collector = Collector()
    breaker = ab.FailureBreaker(failure_threshold=1, clock=clock)
    breaker.add_listener(collector.on_event)
    assert breaker.remove_listener(collector.on_event)  # a new bound-method object, equal
    breaker.record_failure("x")
    assert collector.events == []


def test_a_raising_listener_is_isolated_and_counted(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=2, clock=clock)
    after: List[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("listener bug")

    breaker.add_listener(broken)
    breaker.add_listener(after.append)
    breaker.record_failure("a")
    breaker.record_failure("b")  # opens: one event, the broken listener raises
    assert breaker.state == "OPEN"
    assert [e["type"] for e in after] == ["stateChange"]
    assert breaker.listener_errors == 1
    # The breaker goes on working.
    assert breaker.should_allow_operation()[0] is False


def test_a_listener_may_call_back_into_the_breaker(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, clock=clock)
    states: List[Any] = []

    def on_event(event: Event) -> None:
        states.append(breaker.get_status()["state"])
        if event["type"] == "stateChange" and event["to"] == "OPEN":
            breaker.reset()  # emits OPEN -> CLOSED, delivered after this listener returns

    breaker.add_listener(on_event)
    breaker.record_failure("x")
    assert breaker.state == "CLOSED"
    assert states == ["OPEN", "CLOSED"]
    assert breaker.listener_errors == 0


def test_every_event_source_takes_listeners(clock: ab.ManualClock) -> None:
    budget = ab.BudgetBreaker(max_tool_calls_per_task=1, clock=clock)
    halts: List[Event] = []
    budget.add_listener(halts.append)
    budget.ingest({"type": "tool_use", "name": "search"})
    budget.ingest({"type": "tool_use", "name": "search"})
    assert [e["type"] for e in halts] == ["halt"]
    assert halts[0]["halt"]["slug"] == "tool_call_limit"  # type: ignore[typeddict-item]

    plan = ab.FixPlan(steps=[{"description": "Reproduce", "maxAttempts": 1}], clock=clock)
    warnings: List[Event] = []
    plan.add_listener(warnings.append)
    plan.should_exit("Still looking.")
    assert warnings[0]["message"] == "Step 1 skipped after 1 attempts: Reproduce"  # type: ignore[typeddict-item]

    agent_loop = ab.Loop(clock=clock)
    loop_events: List[Event] = []
    agent_loop.add_listener(loop_events.append)
    for _ in range(3):
        agent_loop.observe("Working on it.")
    assert [e["type"] for e in loop_events] == ["stateChange"]


def test_a_non_callable_listener_is_an_invalid_argument(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    try:
        breaker.add_listener("print")  # type: ignore[type-var]
    except ab.InvalidArgumentError as e:
        assert e.code == "INVALID_ARGUMENT"
        assert isinstance(e, TypeError)
    else:
        raise AssertionError("expected InvalidArgumentError")


def test_a_listener_referring_to_its_breaker_is_collected(clock: ab.ManualClock) -> None:
    class Owner:
        def __init__(self) -> None:
            self.breaker = ab.FailureBreaker(clock=clock)
            self.breaker.add_listener(self.on_event)  # owner -> breaker -> listener -> owner

        def on_event(self, event: Event) -> None:
            pass

    owner = Owner()
    ref = weakref.ref(owner)
    del owner
    gc.collect()
    assert ref() is None

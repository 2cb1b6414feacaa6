"""The breakers are shared between Python threads: counts are exact, thresholds never overshoot,
and the GIL is released while the core works (listeners re-acquire it)."""

from __future__ import annotations

import threading
from typing import Any, Callable, List

import agentbreaker as ab
from agentbreaker.types import Event

THREADS = 8
PER_THREAD = 2_000


def run_in_threads(work: Callable[[int], None], threads: int = THREADS) -> None:
    start = threading.Barrier(threads)
    errors: List[BaseException] = []

    def body(index: int) -> None:
        try:
            start.wait()
            work(index)
        except BaseException as e:  # surfaced below
            errors.append(e)

    pool = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []


def test_failures_from_many_threads_are_counted_exactly_and_open_once(
    clock: ab.ManualClock,
) -> None:
    total = THREADS * PER_THREAD
    breaker = ab.FailureBreaker(failure_threshold=total // 2, history_limit=10, clock=clock)
    received: List[Event] = []
    breaker.add_listener(received.append)

    def work(index: int) -> None:
        for _ in range(PER_THREAD):
            breaker.record_failure(f"worker {index} failed")

    run_in_threads(work)
    status = breaker.get_status()
    assert status["consecutiveFailures"] == total
    assert status["state"] == "OPEN"
    assert breaker.metrics()["totalFailures"] == total
    assert len(status["failureHistory"]) == 10
    opened = [e for e in received if e["type"] == "stateChange"]
    warnings = [e for e in received if e["type"] == "warning"]
    assert len(opened) == 1 and len(warnings) == 1
    assert breaker.listener_errors == 0


def test_guarded_calls_from_many_threads(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=10**9, clock=clock)
    counter = {"n": 0}
    lock = threading.Lock()

    @breaker
    def work_item(fail: bool) -> None:
        with lock:
            counter["n"] += 1
        if fail:
            raise ValueError("bad item")

    def work(index: int) -> None:
        for i in range(PER_THREAD):
            try:
                work_item(i % 4 == 0)
            except ValueError:
                pass

    run_in_threads(work)
    metrics = breaker.metrics()
    assert counter["n"] == THREADS * PER_THREAD
    assert metrics["totalFailures"] == THREADS * PER_THREAD // 4
    assert metrics["totalSuccesses"] == THREADS * PER_THREAD * 3 // 4


def test_only_one_thread_gets_the_half_open_probe(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, clock=clock)
    breaker.record_failure("down")
    clock.advance(30_000)
    granted: List[Any] = []
    refused: List[Any] = []

    def work(index: int) -> None:
        try:
            breaker.try_acquire()
            granted.append(index)
        except ab.CircuitOpenError:
            refused.append(index)

    run_in_threads(work, threads=16)
    assert len(granted) == 1 and len(refused) == 15


def test_budget_and_stagnation_counts_from_many_threads(clock: ab.ManualClock) -> None:
    budget = ab.BudgetBreaker(max_tool_calls_per_task=THREADS * PER_THREAD, clock=clock)
    stagnation = ab.StagnationBreaker(same_error_threshold=10**6, clock=clock)

    def work(index: int) -> None:
        for _ in range(PER_THREAD):
            assert budget.ingest({"type": "tool_use", "name": "search", "taskId": "t"}) is None
            stagnation.record_error("Disk full")

    run_in_threads(work)
    assert budget.snapshot()["tasks"][0]["toolCalls"] == THREADS * PER_THREAD
    assert stagnation.get_status()["errorCounts"] == {"Disk full": THREADS * PER_THREAD}
    halt = budget.ingest({"type": "tool_use", "name": "search", "taskId": "t"})
    assert halt is not None and halt["actual"] == THREADS * PER_THREAD + 1


def test_listeners_called_from_other_threads_see_every_event_once(
    clock: ab.ManualClock,
) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, cooldown_ms=0, clock=clock)
    received: List[Event] = []
    breaker.add_listener(received.append)

    def work(index: int) -> None:
        for _ in range(200):
            breaker.record_failure("x")  # CLOSED -> OPEN (once per cycle)
            if breaker.should_allow_operation()[0]:  # cooldown 0: OPEN -> HALF_OPEN probe
                breaker.record_success()  # HALF_OPEN -> CLOSED

    run_in_threads(work)
    changes = [(e["from"], e["to"]) for e in received if e["type"] == "stateChange"]
    # The transitions form one unbroken chain: every change starts where the previous ended.
    for (_, previous_to), (next_from, _) in zip(changes, changes[1:]):
        assert previous_to == next_from
    metrics = breaker.metrics()
    assert changes.count(("CLOSED", "OPEN")) == metrics["trips"]
    assert changes.count(("HALF_OPEN", "CLOSED")) == metrics["recoveries"]

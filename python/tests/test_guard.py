"""Guarded calls: the breaker as a decorator, a context manager and an async context manager."""

from __future__ import annotations

import asyncio
from typing import Any, List

import pytest

import agentbreaker as ab

OPEN_MESSAGE = (
    "Circuit breaker OPEN. 30 seconds remaining in cooldown. "
    "3 consecutive failures detected. Human intervention required."
)


def tripped(clock: ab.ManualClock, threshold: int = 3) -> ab.FailureBreaker:
    breaker = ab.FailureBreaker(failure_threshold=threshold, clock=clock)
    for _ in range(threshold):
        breaker.record_failure("Path not found: ServerScriptService.Main")
    assert breaker.state == "OPEN"
    return breaker


# --- decorator, sync ---------------------------------------------------------------------------


def test_decorator_passes_arguments_and_result_and_records_success(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    breaker.record_failure("transient")

    @breaker
    def add(a: int, b: int = 0) -> int:
        return a + b

    assert add(2, b=3) == 5
    assert breaker.get_status()["consecutiveFailures"] == 0
    assert breaker.metrics()["totalSuccesses"] == 1


def test_decorator_records_the_exception_text_and_reraises_it(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)

    @breaker
    def read(path: str) -> str:
        raise FileNotFoundError(f"Path not found: {path}")

    with pytest.raises(FileNotFoundError, match="Path not found: Main"):
        read("Main")
    history = breaker.get_status()["failureHistory"]
    assert [h["error"] for h in history] == ["Path not found: Main"]


def test_an_exception_without_text_is_recorded_by_its_class_name(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)

    class QuotaExceeded(Exception):
        pass

    with pytest.raises(QuotaExceeded):
        with breaker:
            raise QuotaExceeded()
    assert breaker.get_status()["failureHistory"][0]["error"] == "QuotaExceeded"


def test_decorator_refuses_without_calling_when_open(clock: ab.ManualClock) -> None:
    breaker = tripped(clock)
    calls: List[str] = []

    @breaker
    def tool() -> None:
        calls.append("ran")

    with pytest.raises(ab.CircuitOpenError) as refused:
        tool()
    assert calls == []
    assert str(refused.value) == OPEN_MESSAGE
    assert refused.value.code == "CIRCUIT_OPEN"
    assert isinstance(refused.value, ab.AgentBreakerError)
    # A refusal is not a failure.
    assert breaker.metrics()["totalFailures"] == 3


def test_decorator_keeps_the_function_metadata(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)

    @breaker
    def search(query: str) -> str:
        """Searches the web."""
        return query

    assert search.__name__ == "search"
    assert search.__doc__ == "Searches the web."
    assert search.__wrapped__("x") == "x"  # type: ignore[attr-defined]


def test_the_guarded_call_after_the_cooldown_is_the_probe(clock: ab.ManualClock) -> None:
    breaker = tripped(clock)
    clock.advance(30_000)

    @breaker
    def probe() -> str:
        return "ok"

    assert probe() == "ok"
    assert breaker.state == "CLOSED"
    assert breaker.metrics()["recoveries"] == 1


def test_call_is_the_explicit_form(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    assert breaker.call(max, 3, 7) == 7
    with pytest.raises(ZeroDivisionError):
        breaker.call(lambda: 1 / 0)
    assert breaker.get_status()["failureHistory"][0]["error"] == "division by zero"


# --- context managers --------------------------------------------------------------------------


def test_with_block_records_success_and_failure(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    with breaker as entered:
        assert entered is breaker
    assert breaker.metrics()["totalSuccesses"] == 1
    with pytest.raises(RuntimeError):
        with breaker:
            raise RuntimeError("tool crashed")
    assert breaker.get_status()["consecutiveFailures"] == 1


def test_with_block_is_refused_before_the_body_runs(clock: ab.ManualClock) -> None:
    breaker = tripped(clock)
    ran = False
    with pytest.raises(ab.CircuitOpenError):
        with breaker:
            ran = True
    assert not ran


def test_base_exceptions_that_are_not_errors_record_nothing(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)
    with pytest.raises(KeyboardInterrupt):
        with breaker:
            raise KeyboardInterrupt
    metrics = breaker.metrics()
    assert (metrics["totalFailures"], metrics["totalSuccesses"]) == (0, 0)


def test_a_probe_lost_to_cancellation_gives_its_permit_back_after_the_probe_timeout(
    clock: ab.ManualClock,
) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, probe_timeout_ms=5_000, clock=clock)
    breaker.record_failure("boom")
    clock.advance(30_000)
    with pytest.raises(KeyboardInterrupt):
        with breaker:  # the probe
            raise KeyboardInterrupt
    with pytest.raises(ab.CircuitOpenError, match="waiting for the test operation"):
        with breaker:
            pass
    clock.advance(5_000)
    with breaker:
        pass
    assert breaker.state == "CLOSED"


# --- async -------------------------------------------------------------------------------------


def test_decorating_a_coroutine_function_guards_each_await(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=2, clock=clock)
    calls: List[int] = []

    @breaker
    async def fetch(n: int) -> int:
        calls.append(n)
        await asyncio.sleep(0)
        if n < 0:
            raise ValueError(f"bad page {n}")
        return n * 10

    assert asyncio.iscoroutinefunction(fetch)

    async def main() -> Any:
        assert await fetch(4) == 40
        for n in (-1, -2):
            with pytest.raises(ValueError):
                await fetch(n)
        with pytest.raises(ab.CircuitOpenError):
            await fetch(5)

    asyncio.run(main())
    assert calls == [4, -1, -2]
    errors = [h["error"] for h in breaker.get_status()["failureHistory"]]
    assert errors == ["bad page -1", "bad page -2"]


def test_async_with_records_outcomes_and_refuses_when_open(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, clock=clock)

    async def main() -> None:
        async with breaker as entered:
            assert entered is breaker
            await asyncio.sleep(0)
        with pytest.raises(TimeoutError):
            async with breaker:
                raise TimeoutError("model timed out")
        with pytest.raises(ab.CircuitOpenError):
            async with breaker:
                pytest.fail("the body must not run")

    asyncio.run(main())
    assert breaker.metrics()["totalSuccesses"] == 1
    assert breaker.get_status()["failureHistory"][0]["error"] == "model timed out"


def test_a_cancelled_task_records_nothing(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)

    @breaker
    async def slow() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.ensure_future(slow())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    metrics = breaker.metrics()
    assert (metrics["totalFailures"], metrics["totalSuccesses"]) == (0, 0)


def test_call_async(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(clock=clock)

    async def double(x: int) -> int:
        return 2 * x

    assert asyncio.run(breaker.call_async(double, 21)) == 42
    assert breaker.metrics()["totalSuccesses"] == 1


def test_try_acquire_is_the_building_block(clock: ab.ManualClock) -> None:
    breaker = tripped(clock)
    with pytest.raises(ab.CircuitOpenError):
        breaker.try_acquire()
    clock.advance(30_000)
    assert breaker.try_acquire() == "Circuit breaker testing - one operation allowed"
    breaker.record_success()
    assert breaker.try_acquire() is None

"""The panic boundary (issue 10): a panic inside the core reaches Python as `InternalError` (code
``INTERNAL``), the process survives, and the object that panicked keeps working.

The panics come from the core's ``test-panic`` feature: ``record_failure`` panics while holding
the breaker's lock, and ``analyze`` panics, when given ``TRIGGER``. Only the wheel that
``make test-python-panic`` builds (``--features test-panic``, its own virtual environment) has
it; that target sets ``AGENTBREAKER_EXPECT_TEST_PANIC=1``. In every other build the trigger is an
ordinary string, and this file checks exactly that (a release build must never panic on it), so
each test runs in both builds and asserts what that build must do; a wheel built with the wrong
features fails here either way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any, Callable, List

import pytest

import agentbreaker as ab

TRIGGER = "agentbreaker:test-panic"
PANICS = os.environ.get("AGENTBREAKER_EXPECT_TEST_PANIC") == "1"


def state(breaker: ab.FailureBreaker) -> str:
    """The state, as a plain str (so the type checker does not narrow it between calls)."""
    return str(breaker.state)


def missing_key() -> int:
    return {"present": 1}["missing"]


def check_internal(call: Callable[[], Any]) -> ab.AgentBreakerError:
    """Asserts that `call` raises `InternalError` with code INTERNAL (in the test-panic build)."""
    with pytest.raises(ab.InternalError) as raised:
        call()
    error = raised.value
    assert error.code == "INTERNAL"
    assert isinstance(error, ab.AgentBreakerError) and isinstance(error, RuntimeError)
    assert "panic" in str(error)
    return error


def test_the_build_is_the_one_expected() -> None:
    """The trigger panics exactly in the test-panic build (a normal build never panics on it)."""
    if PANICS:
        check_internal(lambda: ab.analyze(TRIGGER))
    else:
        assert ab.analyze(TRIGGER)["completionSignal"]["detected"] is False


def test_a_panic_inside_the_breaker_lock_leaves_the_breaker_usable(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=3, clock=clock)
    seen: List[str] = []
    breaker.add_listener(lambda event: seen.append(f"{event['type']}:{event.get('to')}"))
    breaker.record_failure("Path not found: A")
    if PANICS:
        check_internal(lambda: breaker.record_failure(TRIGGER))
        # The panic happened before the failure was counted: the state is the one before.
        assert breaker.get_status()["consecutiveFailures"] == 1
        assert breaker.state == "CLOSED"
    else:
        breaker.record_failure(TRIGGER)
        assert breaker.get_status()["consecutiveFailures"] == 2
        breaker.record_success()
        breaker.record_failure("Path not found: A")
    # Same object, after the panic: the lock is not poisoned, the counts and the threshold hold,
    # listeners still hear about transitions, and the circuit opens, cools down and recovers.
    breaker.record_failure("Path not found: B")
    assert state(breaker) == "CLOSED"
    breaker.record_failure("Path not found: C")
    assert state(breaker) == "OPEN"
    assert breaker.get_status()["consecutiveFailures"] == 3
    allowed, message = breaker.should_allow_operation()
    assert not allowed and message is not None and "30 seconds remaining" in message
    clock.advance(30_000)
    assert breaker.should_allow_operation()[0]
    breaker.record_success()
    assert breaker.state == "CLOSED"
    assert seen[-3:] == ["stateChange:OPEN", "stateChange:HALF_OPEN", "stateChange:CLOSED"]
    assert breaker.metrics()["trips"] == 1


def test_a_panic_while_recording_a_guarded_failure(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=2, clock=clock)

    def tool() -> None:
        raise ValueError(TRIGGER)

    guarded = breaker(tool)
    attempts: List[Callable[[], None]] = [lambda: breaker.call(tool), guarded]
    for attempt in attempts:
        if PANICS:
            error = check_internal(attempt)
            # The caller's own exception is kept as the cause.
            assert isinstance(error.__cause__, ValueError) and str(error.__cause__) == TRIGGER
        else:
            with pytest.raises(ValueError):
                attempt()
    if PANICS:
        with pytest.raises(ab.InternalError):
            with breaker:
                raise ValueError(TRIGGER)
        assert breaker.get_status()["consecutiveFailures"] == 0
    else:
        breaker.reset()
    # The breaker goes on guarding calls: two real failures open it, and it refuses.
    assert breaker.call(lambda: "ok") == "ok"
    for _ in range(2):
        with pytest.raises(KeyError):
            breaker.call(missing_key)
    with pytest.raises(ab.CircuitOpenError):
        guarded()
    assert state(breaker) == "OPEN"


def test_a_panic_in_analyze_and_in_the_components_that_analyze() -> None:
    strategy = ab.ExitStrategy(type="auto")
    loop = ab.Loop(max_iterations=10)
    if PANICS:
        check_internal(lambda: ab.analyze(TRIGGER))
        check_internal(lambda: strategy.should_exit(TRIGGER))
        check_internal(lambda: loop.observe(TRIGGER))
    else:
        ab.analyze(TRIGGER)
        assert strategy.should_exit(TRIGGER)["exit"] is False
        loop.observe(TRIGGER)
    analysis = ab.analyze("All tasks complete. 12 passed.")
    assert analysis["completionSignal"]["detected"] and analysis["testsPassing"] == 12
    assert strategy.should_exit("All tasks complete.\nSTATUS: COMPLETE")["exit"] is True
    before = loop.get_status()["iteration"]
    decision = loop.observe("Still working on the parser; next steps: tests.", files_changed=1)
    assert decision["action"] == "continue"
    assert loop.get_status()["iteration"] == before + 1
    assert loop.observe("All tasks complete.\nSTATUS: COMPLETE")["reason"] == "completed"


def test_panics_on_many_threads_at_once() -> None:
    """Panics on several threads at once (GIL released around the core call) are all caught,
    and the breaker's counts stay exact."""
    breaker = ab.FailureBreaker(failure_threshold=1_000_000)
    errors: List[str] = []

    def worker() -> None:
        for _ in range(50):
            try:
                breaker.record_failure(TRIGGER)
            except ab.AgentBreakerError as e:
                errors.append(e.code)
            breaker.record_failure("real failure")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    status = breaker.get_status()
    if PANICS:
        assert errors == ["INTERNAL"] * 200
        assert status["consecutiveFailures"] == 200
    else:
        assert errors == [] and status["consecutiveFailures"] == 400
    assert breaker.metrics()["totalFailures"] == status["consecutiveFailures"]


def test_the_process_survives_a_panic() -> None:
    """A fresh interpreter that hits the panic exits normally, after printing its results."""
    program = (
        "import agentbreaker as ab\n"
        "b = ab.FailureBreaker(failure_threshold=1)\n"
        "try:\n"
        f"    b.record_failure({TRIGGER!r})\n"
        "    print('no panic')\n"
        "except ab.InternalError as e:\n"
        "    print(e.code)\n"
        "b.record_failure('boom')\n"
        "print(b.state)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == (["INTERNAL", "OPEN"] if PANICS else ["no panic", "OPEN"])

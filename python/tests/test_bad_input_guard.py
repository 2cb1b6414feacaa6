"""Bad input for the guarded call (`breaker.call`, `@breaker`, `with breaker:`): things that are
not callables or not exceptions, exceptions that cannot be turned into text, and the awkward ways
a guarded function gets used (as a method, from many threads, re-entrantly, from a listener).

The guarded call runs natively (one crossing per call, the GIL held on the fast path), so these
also pin down what the Python wrapper used to guarantee.
"""

# mypy: disable-error-code="arg-type,call-arg,misc"

from __future__ import annotations

import copy
import gc
import inspect
import pickle
import threading
import weakref
from typing import Any, Callable, List

import pytest

import agentbreaker as ab


def tripped(clock: ab.ManualClock) -> ab.FailureBreaker:
    breaker = ab.FailureBreaker(failure_threshold=1, clock=clock)
    breaker.record_failure("boom")
    return breaker


@pytest.mark.parametrize("not_callable", [42, None, "print", [print]], ids=repr)
def test_call_refuses_a_non_callable_without_asking_the_breaker(
    clock: ab.ManualClock, not_callable: Any
) -> None:
    breaker = tripped(clock)
    clock.advance(30_000)  # the next permission would be the half-open probe
    with pytest.raises(ab.InvalidArgumentError, match="func must be callable"):
        breaker.call(not_callable)
    # Not asked (still OPEN, the probe not used), nothing recorded.
    assert breaker.state == "OPEN"
    assert breaker.metrics()["totalFailures"] == 1
    assert breaker.call(lambda: "probe") == "probe"
    assert str(breaker.state) == "CLOSED"


def test_decorating_a_non_callable_is_refused() -> None:
    breaker = ab.FailureBreaker()
    with pytest.raises(ab.InvalidArgumentError, match="must be callable"):
        breaker(42)
    with pytest.raises(ab.InvalidArgumentError):
        ab._native.GuardedFunction(breaker, "not a function")


def test_exit_refuses_what_is_not_an_exception() -> None:
    breaker = ab.FailureBreaker()
    with pytest.raises(ab.InvalidArgumentError, match="exception or None"):
        breaker.__exit__(int, 42, None)
    assert breaker.metrics()["totalFailures"] == 0


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class Surrogates(Exception):
    def __str__(self) -> str:
        return "bad byte \udcff in a path"


@pytest.mark.parametrize(
    "exception, recorded",
    [
        (BrokenStr("x"), "BrokenStr"),
        (ValueError(""), "ValueError"),
        (Surrogates(), "bad byte \ufffd\ufffd\ufffd in a path"),  # its UTF-8 bytes, replaced
        (ValueError("é" * 5000), "é" * 2048),  # cut to 4096 bytes on a character boundary
    ],
    ids=["broken __str__", "empty text", "lone surrogate", "long text"],
)
def test_any_exception_is_recorded_and_propagates_unchanged(
    exception: Exception, recorded: str
) -> None:
    breaker = ab.FailureBreaker()

    def tool() -> None:
        raise exception

    attempts: List[Callable[[], None]] = [lambda: breaker.call(tool), breaker(tool)]
    for attempt in attempts:
        with pytest.raises(type(exception)) as raised:
            attempt()
        assert raised.value is exception
    with pytest.raises(type(exception)):
        with breaker:
            raise exception
    history = breaker.get_status()["failureHistory"]
    assert [h["error"] for h in history] == [recorded] * 3


def test_the_traceback_reaches_the_caller() -> None:
    breaker = ab.FailureBreaker()

    @breaker
    def deep() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError) as raised:
        deep()
    names = [entry.name for entry in raised.traceback]
    assert "deep" in names


MODULE_BREAKER = ab.FailureBreaker()


@MODULE_BREAKER
def module_level_tool(x: int) -> int:
    return x * 2


def test_a_decorated_function_pickles_and_copies_by_reference_as_a_function_does() -> None:
    assert pickle.loads(pickle.dumps(module_level_tool)) is module_level_tool
    assert copy.copy(module_level_tool) is module_level_tool
    assert copy.deepcopy(module_level_tool) is module_level_tool
    assert module_level_tool(2) == 4


class Service:
    breaker = ab.FailureBreaker(failure_threshold=2)

    def __init__(self, name: str) -> None:
        self.name = name

    @breaker
    def fetch(self, suffix: str = "") -> str:
        """Fetches."""
        return self.name + suffix

    @staticmethod
    @breaker
    def ping() -> str:
        return "pong"

    @classmethod
    @breaker
    def kind(cls) -> str:
        return cls.__name__


def test_a_decorated_method_binds_its_instance() -> None:
    Service.breaker.reset()
    a, b = Service("a"), Service("b")
    assert a.fetch("!") == "a!" and b.fetch(suffix="?") == "b?"
    assert Service.fetch(a) == "a"
    assert Service.ping() == "pong" and a.ping() == "pong"
    assert Service.kind() == "Service" and b.kind() == "Service"
    assert Service.breaker.metrics()["totalSuccesses"] == 7


def test_a_decorated_function_keeps_its_metadata_and_signature() -> None:
    breaker = ab.FailureBreaker()

    def search(query: str, limit: int = 10) -> List[str]:
        """Searches."""
        return [query] * limit

    guarded = breaker(search)
    assert guarded.__name__ == "search" and guarded.__doc__ == "Searches."
    assert guarded.__qualname__.endswith("search") and guarded.__module__ == __name__
    assert guarded.__wrapped__ is search  # type: ignore[attr-defined]
    assert str(inspect.signature(guarded)) == str(inspect.signature(search))
    assert not inspect.iscoroutinefunction(guarded)
    assert guarded.breaker is breaker  # type: ignore[attr-defined]
    assert "search" in repr(guarded)
    assert Service.fetch.__doc__ == "Fetches."


def test_a_decorated_function_in_a_reference_cycle_is_collected() -> None:
    breaker = ab.FailureBreaker()
    namespace: dict[str, Any] = {}
    exec("def f():\n    return f\n", namespace)  # f refers to itself through its globals
    guarded = breaker(namespace["f"])
    namespace["f"] = guarded
    probe = weakref.ref(guarded)
    del guarded, namespace
    gc.collect()
    assert probe() is None


def test_a_subclass_overriding_call_is_used_by_the_decorator() -> None:
    seen: List[str] = []

    class Logged(ab.FailureBreaker):
        def call(self, func: Any, /, *args: Any, **kwargs: Any) -> Any:
            seen.append(func.__name__)
            return super().call(func, *args, **kwargs)

    breaker = Logged()

    @breaker
    def tool(x: int) -> int:
        return x + 1

    assert tool(1) == 2 and seen == ["tool"]


def test_many_threads_share_one_guarded_function() -> None:
    breaker = ab.FailureBreaker(failure_threshold=10**9)

    @breaker
    def work(i: int) -> int:
        if i % 10 == 0:
            raise ValueError("every tenth fails")
        return i

    def worker() -> None:
        for i in range(1_000):
            try:
                work(i)
            except ValueError:
                pass

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    metrics = breaker.metrics()
    assert (metrics["totalSuccesses"], metrics["totalFailures"]) == (3_600, 400)


def test_threads_tripping_and_recovering_with_a_listener_do_not_deadlock() -> None:
    """Guarded calls (the GIL held on the fast path) racing failures (recorded with the GIL
    released) and transitions whose listener calls back into the breaker."""
    breaker = ab.FailureBreaker(failure_threshold=3, cooldown_ms=0, half_open_max_probes=4)
    events: List[str] = []
    breaker.add_listener(lambda event: events.append(f"{event['type']}:{breaker.state}"))

    def worker(seed: int) -> None:
        for i in range(300):
            try:
                breaker.call(lambda: 1 / 0 if (i + seed) % 4 else None)
            except (ZeroDivisionError, ab.CircuitOpenError):
                pass

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)  # a hang guard, not a speed bound
    assert not any(t.is_alive() for t in threads), "deadlock"
    metrics = breaker.metrics()
    assert metrics["totalFailures"] + metrics["totalSuccesses"] <= 1_200
    assert metrics["trips"] >= 1 and events and breaker.listener_errors == 0


def test_re_entrant_calls_and_listeners_that_call_back_do_not_deadlock(
    clock: ab.ManualClock,
) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, clock=clock)
    states: List[str] = []
    # A listener calling back into the breaker while a guarded call is being recorded.
    breaker.add_listener(lambda event: states.append(breaker.get_status()["state"]))

    @breaker
    def inner() -> str:
        return breaker.state

    @breaker
    def outer() -> str:
        return inner()

    assert outer() == "CLOSED"
    with pytest.raises(ZeroDivisionError):
        breaker.call(lambda: 1 / 0)  # opens: the listener runs, calls back
    clock.advance(30_000)
    assert breaker.call(lambda: "probe") == "probe"  # HALF_OPEN, then CLOSED
    assert states == ["OPEN", "HALF_OPEN", "CLOSED"]

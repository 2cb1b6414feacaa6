"""Errors: one exception class per code, and wrong Python types never crash the interpreter."""

# The calls below pass wrong types on purpose: the type checker rightly rejects them.
# mypy: disable-error-code="arg-type,call-arg,call-overload,dict-item"

from __future__ import annotations

import math
import pickle
from typing import Any, Callable, Dict, Type

import pytest

import agentbreaker as ab
from agentbreaker import exceptions

CODES: Dict[Type[ab.AgentBreakerError], str] = {
    exceptions.InvalidConfigError: "INVALID_CONFIG",
    exceptions.InvalidArgumentError: "INVALID_ARGUMENT",
    exceptions.InvalidEventError: "INVALID_EVENT",
    exceptions.InvalidSnapshotError: "INVALID_SNAPSHOT",
    exceptions.PersistenceError: "IO",
    exceptions.InternalError: "INTERNAL",
    exceptions.CircuitOpenError: "CIRCUIT_OPEN",
    exceptions.AgentHalted: "HALTED",
}


@pytest.mark.parametrize("cls", list(CODES), ids=lambda c: c.__name__)
def test_each_code_has_its_class(cls: Type[ab.AgentBreakerError]) -> None:
    assert issubclass(cls, exceptions.AgentBreakerError)
    assert cls.code == CODES[cls]
    assert cls.__module__ == "agentbreaker.exceptions"
    assert getattr(ab, cls.__name__) is cls


def test_python_builtin_bases() -> None:
    assert issubclass(ab.InvalidConfigError, ValueError) and issubclass(ab.InvalidConfigError, TypeError)
    assert issubclass(ab.InvalidArgumentError, ValueError) and issubclass(ab.InvalidArgumentError, TypeError)
    assert issubclass(ab.InvalidEventError, ValueError)
    assert issubclass(ab.InvalidSnapshotError, ValueError)
    assert issubclass(ab.PersistenceError, OSError)
    assert issubclass(ab.InternalError, RuntimeError)
    assert not issubclass(ab.CircuitOpenError, (ValueError, TypeError, OSError, RuntimeError))
    assert not issubclass(ab.AgentHalted, (ValueError, TypeError, OSError, RuntimeError))


def test_exceptions_pickle_by_reference() -> None:
    error = ab.InvalidConfigError("failureThreshold must be >= 1")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ab.InvalidConfigError and str(copy) == str(error)


def test_the_message_has_no_code_prefix() -> None:
    with pytest.raises(ab.InvalidConfigError) as e:
        ab.FailureBreaker(failure_threshold=0)
    assert str(e.value) == "failureThreshold must be >= 1"


def test_none_for_a_config_field_is_its_default() -> None:
    # None means "not given", as everywhere else in the API (decisions: null fields are defaults).
    b = ab.FailureBreaker(failure_threshold=None, cooldown_ms=10)
    for _ in range(4):
        b.record_failure("boom")
    after_four = b.state
    b.record_failure("boom")
    assert (after_four, b.state) == ("CLOSED", "OPEN")  # the default threshold, 5


# Every entry point with a wrong Python value: the right code, never a crash or PanicException.
WRONG: Dict[str, "tuple[Callable[[], Any], str]"] = {
    "config: str where an int belongs": (lambda: ab.FailureBreaker(failure_threshold="5"), "INVALID_CONFIG"),
    "config: bool where an int belongs": (lambda: ab.FailureBreaker(failure_threshold=True), "INVALID_CONFIG"),
    "config: float where a whole number belongs": (lambda: ab.FailureBreaker(cooldown_ms=1.5), "INVALID_CONFIG"),
    "config: whole-valued float": (lambda: ab.StagnationBreaker(no_progress_threshold=3.0), "INVALID_CONFIG"),
    "config: NaN": (lambda: ab.FailureBreaker(backoff_multiplier=math.nan), "INVALID_CONFIG"),
    "config: infinity": (lambda: ab.BudgetBreaker(similarity_jaccard_threshold=math.inf), "INVALID_CONFIG"),
    "config: int beyond 64 bits": (lambda: ab.FailureBreaker(cooldown_ms=2**64), "INVALID_CONFIG"),
    "config: unknown keyword": (lambda: ab.FailureBreaker(failure_treshold=5), "INVALID_CONFIG"),
    "config: camelCase keyword": (lambda: ab.StagnationBreaker(noProgressThreshold=3), "INVALID_CONFIG"),
    "config: unknown error_match": (lambda: ab.FailureBreaker(error_match="fuzzy"), "INVALID_CONFIG"),
    "config: object value": (lambda: ab.Loop(strategy=object()), "INVALID_CONFIG"),
    "config: clock of the wrong type": (lambda: ab.FailureBreaker(clock=1234), "INVALID_CONFIG"),
    "config: strategy without a type": (lambda: ab.ExitStrategy(threshold=80), "INVALID_CONFIG"),
    "config: fix plan without steps": (lambda: ab.FixPlan(), "INVALID_CONFIG"),
    "argument: int where a str belongs": (lambda: ab.FailureBreaker().record_failure(42), "INVALID_ARGUMENT"),
    "argument: None where a str belongs": (lambda: ab.FailureBreaker().record_failure(None), "INVALID_ARGUMENT"),
    "argument: missing": (lambda: ab.FailureBreaker().record_failure(), "INVALID_ARGUMENT"),
    "argument: bytes where a str belongs": (lambda: ab.analyze(b"done"), "INVALID_ARGUMENT"),
    "argument: lone surrogate": (lambda: ab.analyze("\ud800"), "INVALID_ARGUMENT"),
    "argument: NaN count": (lambda: ab.StagnationBreaker().record_progress(files_changed=math.nan), "INVALID_ARGUMENT"),
    "argument: bool count": (lambda: ab.StagnationBreaker().record_progress(output_length=True), "INVALID_ARGUMENT"),
    "argument: float count": (lambda: ab.StagnationBreaker().record_progress(tests_passing=2.0), "INVALID_ARGUMENT"),
    "argument: negative count": (lambda: ab.StagnationBreaker().record_progress(files_changed=-1), "INVALID_ARGUMENT"),
    "argument: non-bool transient": (lambda: ab.StagnationBreaker().record_error("x", transient="yes"), "INVALID_ARGUMENT"),
    "argument: step without an action": (lambda: ab.StagnationBreaker().record_step(), "INVALID_ARGUMENT"),
    "argument: step action not a str": (lambda: ab.StagnationBreaker().record_step(["ls"]), "INVALID_ARGUMENT"),
    "argument: step failed not a bool": (lambda: ab.StagnationBreaker().record_step("ls", "", 1), "INVALID_ARGUMENT"),
    "config: step threshold of one": (lambda: ab.StagnationBreaker(repeat_threshold=1), "INVALID_CONFIG"),
    "argument: clock ms as float": (lambda: ab.ManualClock().advance(1.5), "INVALID_ARGUMENT"),
    "argument: clock ms negative": (lambda: ab.ManualClock(-1), "INVALID_ARGUMENT"),
    "argument: clock ms as bool": (lambda: ab.ManualClock().set(True), "INVALID_ARGUMENT"),
    "argument: unknown circuit state": (lambda: ab.ExitStrategy(type="auto").should_exit("x", "open"), "INVALID_ARGUMENT"),
    "argument: unknown error_match": (lambda: ab.fingerprint("x", "fuzzy"), "INVALID_ARGUMENT"),
    "argument: env value not a str": (lambda: ab.config_from_env({"AGENTBREAKER_TOOL_CAP": 5}), "INVALID_ARGUMENT"),
    "argument: env key not a str": (lambda: ab.config_from_env({5: "5"}), "INVALID_ARGUMENT"),
    "argument: env not a mapping": (lambda: ab.config_from_env(["AGENTBREAKER_TOOL_CAP=5"]), "INVALID_ARGUMENT"),
    "argument: path of the wrong type": (lambda: ab.FailureBreaker().save(42), "INVALID_ARGUMENT"),
    "argument: observe output missing": (lambda: ab.Loop().observe(), "INVALID_ARGUMENT"),
    "argument: observe events without a budget": (lambda: ab.Loop().observe("x", events=[{"type": "tool_use", "name": "x"}]), "INVALID_ARGUMENT"),
    "event: not a dict": (lambda: ab.BudgetBreaker().ingest("tool_use"), "INVALID_EVENT"),
    "event: NaN tokens": (lambda: ab.BudgetBreaker().ingest({"type": "usage", "usage": {"input_tokens": math.nan}}), "INVALID_EVENT"),
    "event: negative tokens": (lambda: ab.BudgetBreaker().ingest({"type": "usage", "usage": {"output_tokens": -5}}), "INVALID_EVENT"),
    "event: non-str key": (lambda: ab.BudgetBreaker().ingest({1: "usage"}), "INVALID_EVENT"),
    "event: set value": (lambda: ab.BudgetBreaker().ingest({"type": "tool_use", "name": {"a"}}), "INVALID_EVENT"),
    "event: in a loop's events": (lambda: ab.Loop(budget={}).observe("x", events=[{"type": 5}]), "INVALID_EVENT"),
    "snapshot: not a dict": (lambda: ab.FailureBreaker().restore(42), "INVALID_SNAPSHOT"),
    "snapshot: None": (lambda: ab.StagnationBreaker().restore(None), "INVALID_ARGUMENT"),
    "snapshot: unconvertible value": (lambda: ab.FailureBreaker().restore(object()), "INVALID_SNAPSHOT"),
}


@pytest.mark.parametrize("case", list(WRONG), ids=list(WRONG))
def test_wrong_values_raise_the_right_code(case: str) -> None:
    call, code = WRONG[case]
    with pytest.raises(ab.AgentBreakerError) as e:
        call()
    assert e.value.code == code, f"{type(e.value).__name__}: {e.value}"
    assert str(e.value)  # a clear message


def test_deeply_nested_and_cyclic_values_are_refused() -> None:
    cyclic: Any = []
    cyclic.append(cyclic)
    with pytest.raises(ab.InvalidEventError, match="nested more than"):
        ab.BudgetBreaker().ingest({"type": "tool_use", "name": "x", "input": cyclic})


def nested(levels: int, inner: Any = None) -> Any:
    """`levels` lists, one inside the other, the innermost holding `inner` (or nothing)."""
    value: Any = [] if inner is None else [inner]
    for _ in range(levels - 1):
        value = [value]
    return value


def test_values_nest_at_most_127_containers_wherever_they_sit() -> None:
    """The limit every binding and JSON text have (contract 0.3), counted from the JSON the core
    gets: an event's own dict counts, and so do the observation and the list around a Loop's
    `events=`, as in Node's `observe({output, events: [...]})`."""
    bb = ab.BudgetBreaker()
    assert bb.ingest({"type": "tool_use", "name": "x", "input": nested(126, "deepest")}) is None
    assert bb.ingest({"type": "tool_use", "name": "y", "input": nested(126, "x"), "taskId": "t"}) is None
    for event in (
        {"type": "tool_use", "name": "x", "input": nested(127)},
        {"type": "tool_use", "name": "x", "input": nested(127), "taskId": "t"},
    ):
        with pytest.raises(ab.InvalidEventError, match="nested more than 127 levels"):
            bb.ingest(event)
    monitor = ab.Monitor(profile="seed")
    assert monitor.observe({"type": "tool_use", "name": "x", "input": nested(126)})["action"] == "continue"
    with pytest.raises(ab.InvalidEventError):
        monitor.observe({"type": "tool_use", "name": "x", "input": nested(127)})
    loop = ab.Loop(budget={})
    assert loop.observe("x", events=[{"type": "tool_use", "name": "x", "input": nested(124)}])["action"]
    with pytest.raises(ab.InvalidEventError, match=r"events\[0\] is nested more than 127"):
        loop.observe("x", events=[{"type": "tool_use", "name": "x", "input": nested(125)}])
    with pytest.raises(ab.InvalidArgumentError, match="nested more than 127"):
        ab.StagnationBreaker().record_step(action=nested(127, "a"))


def test_unknown_keyword_messages_suggest_the_snake_case_name() -> None:
    with pytest.raises(ab.InvalidConfigError, match="did you mean 'failure_threshold'"):
        ab.FailureBreaker(failureThreshold=5)


def test_a_failed_call_changes_nothing() -> None:
    breaker = ab.StagnationBreaker()
    with pytest.raises(ab.InvalidArgumentError):
        breaker.record_progress(files_changed=1, output_length="long")
    assert breaker.get_status()["outputTrend"] == []

"""The bad-input matrix of the Python binding (issue 10): every public entry point that takes a
value, against the same ten bad values; each cell is one test case. The expected outcome of every
cell is written in `TABLE` below, and docs/bad-input/python.md is generated from the same table
(`test_the_document_is_the_table` fails when they differ; regenerate it with
``python/.venv-test/bin/python python/tests/test_bad_input.py --write-doc``).

Each case asserts the documented outcome (the error code, or "accepted"), that nothing crashed or
leaked a foreign exception (a `PanicException`, a bare `TypeError`/`OverflowError`), that an
error's message is short (`MAX_MESSAGE`: a 10 MB value is never repeated whole), and that the
object the bad value was handed to (or a freshly built one, for constructors and functions) still
works afterwards.
"""

# The calls below pass wrong types on purpose: the type checker rightly rejects them.
# mypy: disable-error-code="arg-type,call-arg,call-overload,dict-item,misc"

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import pytest

import agentbreaker as ab

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input" / "python.md"

# --- the columns: the same ten bad values for every entry point ---------------------------------

BIG = "x" * (10 * 1024 * 1024)  # built once

COLUMNS: List[Tuple[str, str]] = [
    ("wrong type", "a value of another type (see the row's kind)"),
    ("None", "None"),
    ("NaN", "float('nan')"),
    ("+Inf", "float('inf')"),
    ("-Inf", "float('-inf')"),
    ("negative", "-1"),
    ("zero", "0"),
    ("2**64", "2**64 (one past the largest u64)"),
    ("1e300", "1e300"),
    ("10 MB str", "a 10 MiB str"),
]

# The "wrong type" value of each kind of parameter.
WRONG: Dict[str, Any] = {
    "int": "5",
    "float": "0.5",
    "str": 42,
    "bool": "yes",
    "dict": [1, 2],
    "list": {"a": 1},
    "callable": 42,
    "path": 42,
    "clock": "system",
    "exception": 42,
}


def column_values(kind: str) -> List[Any]:
    return [WRONG[kind], None, math.nan, math.inf, -math.inf, -1, 0, 2**64, 1e300, BIG]


# --- what the cells say ---------------------------------------------------------------------------

# The longest error message a cell may produce: the core cuts its messages at 1024 bytes (then
# "…"), so a refused 10 MB value is never repeated whole.
MAX_MESSAGE = 1100

CODES = {
    "C": "INVALID_CONFIG",
    "A": "INVALID_ARGUMENT",
    "E": "INVALID_EVENT",
    "S": "INVALID_SNAPSHOT",
    "IO": "IO",
    "ok": "accepted",
}

# --- the objects, and what "still works" means for each ------------------------------------------

STATES = {"CLOSED", "HALF_OPEN", "OPEN"}


def failure_works(b: ab.FailureBreaker) -> None:
    b.reset()
    b.record_failure("Path not found: Main")
    assert b.get_status()["consecutiveFailures"] == 1
    assert b.call(lambda: 7) == 7
    assert b.should_allow_operation() == (True, None) and b.state == "CLOSED"


def stagnation_works(s: ab.StagnationBreaker) -> None:
    s.reset()
    s.record_progress(files_changed=1, tests_passing=3, output_length=100)
    s.record_error("boom")
    assert s.check()["state"] == "CLOSED" and s.get_status()["errorCounts"]


def budget_works(b: ab.BudgetBreaker) -> None:
    b.reset()
    assert b.ingest({"type": "tool_use", "name": "Read", "input": {}}) is None
    assert b.snapshot()["tasks"][0]["toolCalls"] == 1


def strategy_works(s: ab.ExitStrategy) -> None:
    s.reset()
    decision = s.should_exit("still working")
    # (A plan of no steps says plan_complete at once: see docs/bad-input/python.md.)
    assert isinstance(decision["exit"], bool) and decision["reason"] in (None, "plan_complete")
    s.reset()
    assert isinstance(s.should_exit(ab.analyze("working"), "CLOSED")["exit"], bool)


def loop_works(loop: ab.Loop) -> None:
    loop.reset()
    assert loop.observe("still working", files_changed=1)["action"] == "continue"
    assert loop.get_status()["iteration"] == 1


def monitor_works(m: ab.Monitor) -> None:
    m.reset()
    assert m.observe({"type": "tool_use", "name": "Read", "input": {}})["action"] == "continue"
    assert m.status()["tasks"][0]["toolCalls"] == 1


def clock_works(c: ab.ManualClock) -> None:
    c.set(5)
    c.advance(1)
    assert c.now() == 6


def functions_work(_: Any) -> None:
    assert ab.analyze("All tasks complete.\nSTATUS: COMPLETE")["completionSignal"]["detected"]
    assert ab.fingerprint("error at 12:34") == ab.fingerprint("error at 56:78")
    assert ab.config_from_env({"AGENTBREAKER_TOOL_CAP": "7"})["config"]["maxToolCallsPerTask"] == 7


# --- the table -------------------------------------------------------------------------------------


class Row(NamedTuple):
    entry: str
    kind: str
    make: Optional[Callable[[], Any]]  # the object the value is handed to; None: a constructor/function
    call: Callable[[Any, Any], Any]  # (object, value) -> result
    works: Callable[[Any], None]  # the object (or the constructed result) still works
    cells: str  # one code per column (CODES), space-separated
    note: str = ""


def failure() -> ab.FailureBreaker:
    return ab.FailureBreaker(failure_threshold=3)


def stagnation() -> ab.StagnationBreaker:
    return ab.StagnationBreaker()


def budget() -> ab.BudgetBreaker:
    return ab.BudgetBreaker()


def strategy() -> ab.ExitStrategy:
    return ab.ExitStrategy(type="auto")


def loop() -> ab.Loop:
    return ab.Loop(max_iterations=50, budget={})


def clock() -> ab.ManualClock:
    return ab.ManualClock(0)


def monitor() -> ab.Monitor:
    return ab.Monitor()


def ctor(cls: Callable[..., Any], **fixed: Any) -> Callable[[str], Callable[[Any, Any], Any]]:
    """`cls(**fixed, <keyword>=value)`."""

    def keyword(name: str) -> Callable[[Any, Any], Any]:
        return lambda _, v: cls(**fixed, **{name: v})

    return keyword


F = ctor(ab.FailureBreaker)
S = ctor(ab.StagnationBreaker)
B = ctor(ab.BudgetBreaker)
L = ctor(ab.Loop)
M = ctor(ab.Monitor)


def event_field(**event: Any) -> Callable[[str], Callable[[Any, Any], Any]]:
    """`monitor.observe({**event, <field>: value})`."""

    def field(name: str) -> Callable[[Any, Any], Any]:
        return lambda m, v: m.observe({**event, name: v})

    return field

TABLE: List[Row] = [
    # -- clocks
    Row("ManualClock(start_ms)", "int", None, lambda _, v: ab.ManualClock(v), clock_works,
        "A ok A A A A ok A A A", "None: 0"),
    Row("ManualClock.set(ms)", "int", clock, lambda c, v: c.set(v), clock_works,
        "A A A A A A ok A A A"),
    Row("ManualClock.advance(ms)", "int", clock, lambda c, v: c.advance(v), clock_works,
        "A A A A A A ok A A A"),
    Row("<any breaker>(clock=)", "clock", None, F("clock"), failure_works,
        "C ok C C C C C C C C", "None is the system clock"),
    # -- FailureBreaker: configuration
    Row("FailureBreaker(config) (positional dict)", "dict", None, lambda _, v: ab.FailureBreaker(v),
        failure_works, "C ok C C C C C C C C", "None: the defaults"),
    Row("FailureBreaker(failure_threshold=)", "int", None, F("failure_threshold"), failure_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("FailureBreaker(warning_threshold=)", "int", None, F("warning_threshold"), failure_works,
        "C ok C C C C ok C C C", "None: automatic; 0: off"),
    Row("FailureBreaker(cooldown_ms=)", "int", None, F("cooldown_ms"), failure_works,
        "C ok C C C C ok C C C", "None: the default; 0: the next call after a trip is the probe"),
    Row("FailureBreaker(backoff_multiplier=)", "float", None, F("backoff_multiplier"), failure_works,
        "C ok C C C C C C ok C", "None: the default; 1e300: the cooldown is capped by max_cooldown_ms"),
    Row("FailureBreaker(max_cooldown_ms=)", "int", None, F("max_cooldown_ms"), failure_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("FailureBreaker(identical_error_threshold=)", "int", None, F("identical_error_threshold"),
        failure_works, "C ok C C C C ok C C C", "None: the default; 0: off"),
    Row("FailureBreaker(history_limit=)", "int", None, F("history_limit"), failure_works,
        "C ok C C C C ok C C C", "None: the default; 0: no history kept"),
    Row("FailureBreaker(half_open_max_probes=)", "int", None, F("half_open_max_probes"),
        failure_works, "C ok C C C C C C C C", "None: the default"),
    Row("FailureBreaker(probe_timeout_ms=)", "int", None, F("probe_timeout_ms"), failure_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("FailureBreaker(error_match=)", "str", None, F("error_match"), failure_works,
        "C ok C C C C C C C C", "None: the default (normalized)"),
    Row("FailureBreaker(state_path=)", "path", None, F("state_path"), failure_works,
        "C ok C C C C C C C IO", "None: no file; a 10 MB name is refused by the OS"),
    # -- FailureBreaker: methods
    Row("FailureBreaker.record_failure(error)", "str", failure, lambda b, v: b.record_failure(v),
        failure_works, "A A A A A A A A A ok", "10 MB: cut to 4096 bytes"),
    Row("FailureBreaker.call(func)", "callable", failure, lambda b, v: b.call(v), failure_works,
        "A A A A A A A A A A", "refused before the breaker is asked: nothing recorded"),
    Row("@FailureBreaker (decorating func)", "callable", failure, lambda b, v: b(v), failure_works,
        "A A A A A A A A A A", "refused when decorating"),
    Row("FailureBreaker.__exit__(exc)", "exception", failure,
        lambda b, v: b.__exit__(None if v is None else type(v), v, None), failure_works,
        "A ok A A A A A A A A", "None: a success is recorded"),
    Row("FailureBreaker.restore(snapshot)", "dict", failure, lambda b, v: b.restore(v),
        failure_works, "S A S S S S S S S S", "None: a missing argument"),
    Row("FailureBreaker.save(path)", "path", failure, lambda b, v: b.save(v), failure_works,
        "A A A A A A A A A IO", "a 10 MB name is refused by the OS"),
    Row("FailureBreaker.load(path)", "path", failure, lambda b, v: b.load(v), failure_works,
        "A A A A A A A A A IO", "a 10 MB name is refused by the OS"),
    Row("<any breaker>.add_listener(listener)", "callable", failure,
        lambda b, v: b.add_listener(v), failure_works, "A A A A A A A A A A"),
    Row("<any breaker>.remove_listener(listener)", "callable", failure,
        lambda b, v: b.remove_listener(v), failure_works, "ok ok ok ok ok ok ok ok ok ok",
        "returns False (never registered)"),
    # -- StagnationBreaker: configuration
    Row("StagnationBreaker(config) (positional dict)", "dict", None,
        lambda _, v: ab.StagnationBreaker(v), stagnation_works, "C ok C C C C C C C C",
        "None: the defaults"),
    Row("StagnationBreaker(no_progress_threshold=)", "int", None, S("no_progress_threshold"), stagnation_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("StagnationBreaker(same_error_threshold=)", "int", None, S("same_error_threshold"), stagnation_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("StagnationBreaker(output_decline_threshold=)", "int", None, S("output_decline_threshold"), stagnation_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("StagnationBreaker(repeat_threshold=)", "int", None, S("repeat_threshold"), stagnation_works,
        "C ok C C C C ok C C C", "None: the default; 0: off"),
    Row("StagnationBreaker(cycle_repeats=)", "int", None, S("cycle_repeats"), stagnation_works,
        "C ok C C C C ok C C C", "None: the default; 0: off"),
    Row("StagnationBreaker(max_cycle_length=)", "int", None, S("max_cycle_length"), stagnation_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("StagnationBreaker(fail_streak_threshold=)", "int", None, S("fail_streak_threshold"), stagnation_works,
        "C ok C C C C ok C C C", "None: the default; 0: off"),
    Row("StagnationBreaker(fail_streak_distinct=)", "int", None, S("fail_streak_distinct"), stagnation_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("StagnationBreaker(fail_window=)", "int", None, S("fail_window"), stagnation_works,
        "C ok C C C C ok C C C", "None: the default; 0: off"),
    Row("StagnationBreaker(fail_window_percent=)", "int", None, S("fail_window_percent"), stagnation_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("StagnationBreaker(error_match=)", "str", None, S("error_match"), stagnation_works,
        "C ok C C C C C C C C", "None: the default (normalized)"),
    # -- StagnationBreaker: methods
    Row("StagnationBreaker.record_progress(files_changed=)", "int", stagnation,
        lambda s, v: s.record_progress(files_changed=v), stagnation_works,
        "A ok A A A A ok A A A", "None: 0, as when left out"),
    Row("StagnationBreaker.record_progress(tests_passing=)", "int", stagnation,
        lambda s, v: s.record_progress(tests_passing=v), stagnation_works,
        "A ok A A A A ok A A A", "None: 0, as when left out"),
    Row("StagnationBreaker.record_progress(output_length=)", "int", stagnation,
        lambda s, v: s.record_progress(output_length=v), stagnation_works,
        "A ok A A A A ok A A A", "None: 0, as when left out"),
    Row("StagnationBreaker.record_error(error)", "str", stagnation,
        lambda s, v: s.record_error(v), stagnation_works, "A A A A A A A A A ok", "10 MB: cut to 4096 bytes"),
    Row("StagnationBreaker.record_error(transient=)", "bool", stagnation,
        lambda s, v: s.record_error("boom", transient=v), stagnation_works, "A ok A A A A A A A A", "None: False"),
    Row("StagnationBreaker.record_step(action)", "str", stagnation,
        lambda s, v: s.record_step(v), stagnation_works, "A A A A A A A A A ok", "10 MB: accepted"),
    Row("StagnationBreaker.record_step(result=)", "str", stagnation,
        lambda s, v: s.record_step("Read a.rs", result=v), stagnation_works, "A ok A A A A A A A ok", "None: empty"),
    Row("StagnationBreaker.record_step(failed=)", "bool", stagnation,
        lambda s, v: s.record_step("Read a.rs", failed=v), stagnation_works, "A ok A A A A A A A A", "None: False"),
    Row("StagnationBreaker.restore(snapshot)", "dict", stagnation, lambda s, v: s.restore(v),
        stagnation_works, "S A S S S S S S S S", "None: a missing argument"),
    # -- BudgetBreaker: configuration
    Row("BudgetBreaker(config) (positional dict)", "dict", None, lambda _, v: ab.BudgetBreaker(v),
        budget_works, "C ok C C C C C C C C", "None: the defaults"),
    Row("BudgetBreaker(max_tool_calls_per_task=)", "int", None, B("max_tool_calls_per_task"), budget_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(max_token_spend_cents_per_task=)", "int", None, B("max_token_spend_cents_per_task"), budget_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(max_task_duration_secs=)", "int", None, B("max_task_duration_secs"), budget_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(max_idle_secs=)", "int", None, B("max_idle_secs"), budget_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(loop_window=)", "int", None, B("loop_window"), budget_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(max_tokens_per_output=)", "int", None, B("max_tokens_per_output"), budget_works,
        "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(similarity_jaccard_threshold=)", "float", None,
        B("similarity_jaccard_threshold"), budget_works, "C ok C C C C C C C C", "None: the default"),
    Row("BudgetBreaker(prices=)", "dict", None, B("prices"), budget_works, "C ok C C C C C C C C",
        "None: the default table"),
    Row("BudgetBreaker(prices={'*': {'input': ...}})", "float", None,
        lambda _, v: ab.BudgetBreaker(prices={"*": {"input": v, "output": 1, "cacheWrite": 1,
                                                   "cacheRead": 1}}),
        budget_works, "C C C C C C ok C C C",
        "any price from 0 to 1e12 (cents per million tokens): above, spend could overflow"),
    # -- BudgetBreaker: events
    Row("BudgetBreaker.ingest(event)", "dict", budget, lambda b, v: b.ingest(v), budget_works,
        "E A E E E E E E E E", "None: a missing argument"),
    Row("BudgetBreaker.ingest({'type': ...})", "str", budget, lambda b, v: b.ingest({"type": v}),
        budget_works, "E E E E E E E E E ok", "10 MB: an unknown type, ignored (ignoredEvents)"),
    Row("BudgetBreaker.ingest({..., 'taskId': ...})", "str", budget,
        lambda b, v: b.ingest({"type": "tool_use", "name": "Read", "input": {}, "taskId": v}),
        budget_works, "E ok E E E E E E E E", "None: no taskId; 10 MB: over the taskId cap"),
    Row("BudgetBreaker.ingest({'type': 'assistant', 'text': ...})", "str", budget,
        lambda b, v: b.ingest({"type": "assistant", "text": v}), budget_works,
        "E E E E E E E E E ok", "10 MB: tokens capped at maxTokensPerOutput"),
    Row("BudgetBreaker.ingest({'type': 'tool_use', 'name': ...})", "str", budget,
        lambda b, v: b.ingest({"type": "tool_use", "name": v, "input": {}}), budget_works,
        "E E E E E E E E E ok", "10 MB: accepted"),
    Row("BudgetBreaker.ingest({'type': 'usage', ... 'input_tokens': ...})", "int", budget,
        lambda b, v: b.ingest({"type": "usage", "model": "m", "usage": {"input_tokens": v}}),
        budget_works, "E ok E E E E ok E E E", "None: 0"),
    Row("BudgetBreaker.ingest({'type': 'heartbeat', 'phase': ...})", "str", budget,
        lambda b, v: b.ingest({"type": "heartbeat", "taskId": "t1", "phase": v}), budget_works,
        "E E E E E E E E E E"),
    # -- analyzer, fingerprints, environment, profiles
    Row("analyze(text)", "str", None, lambda _, v: ab.analyze(v), functions_work,
        "A A A A A A A A A ok", "10 MB: analyzed"),
    Row("fingerprint(error)", "str", None, lambda _, v: ab.fingerprint(v), functions_work,
        "A A A A A A A A A ok", "10 MB: cut to 4096 bytes"),
    Row("fingerprint(error_match=)", "str", None, lambda _, v: ab.fingerprint("e", v),
        functions_work, "A ok A A A A A A A A", "None: normalized"),
    Row("config_from_env(env)", "dict", None, lambda _, v: ab.config_from_env(v), functions_work,
        "A ok A A A A A A A A", "None: os.environ"),
    Row("config_from_env({'AGENTBREAKER_TOOL_CAP': ...})", "str", None,
        lambda _, v: ab.config_from_env({"AGENTBREAKER_TOOL_CAP": v}), functions_work,
        "A A A A A A A A A ok", "10 MB: unparsable, the default with a warning"),
    Row("profile(name)", "str", None, lambda _, v: ab.profile(v), functions_work,
        "A A A A A A A A A ok", "10 MB: an unknown name, returns None"),
    # -- exit strategies
    Row("ExitStrategy(type=)", "str", None, lambda _, v: ab.ExitStrategy(type=v), strategy_works,
        "C C C C C C C C C C"),
    Row("ExitStrategy(type='auto', threshold=)", "int", None,
        lambda _, v: ab.ExitStrategy(type="auto", threshold=v), strategy_works,
        "C ok C C C C ok C C C", "None: 70"),
    Row("ExitStrategy(type='done_signals', window=)", "int", None,
        lambda _, v: ab.ExitStrategy(type="done_signals", window=v), strategy_works,
        "C ok C C C C C C C C", "None: 5"),
    Row("ExitStrategy(type='composite', members=)", "list", None,
        lambda _, v: ab.ExitStrategy(type="composite", members=v), strategy_works,
        "C C C C C C C C C C"),
    Row("ExitStrategy(type='composite', mode=)", "str", None,
        lambda _, v: ab.ExitStrategy(type="composite", members=[{"type": "auto"}], mode=v),
        strategy_works, "C ok C C C C C C C C", "None: any"),
    Row("ExitStrategy.should_exit(response)", "str", strategy, lambda s, v: s.should_exit(v),
        strategy_works, "A A A A A A A A A ok", "10 MB: analyzed"),
    Row("ExitStrategy.should_exit(circuit_state=)", "str", strategy,
        lambda s, v: s.should_exit("working", v), strategy_works, "A ok A A A A A A A A", "None: CLOSED"),
    Row("FixPlan(steps=)", "list", None, lambda _, v: ab.FixPlan(steps=v), strategy_works,
        "C C C C C C C C C C"),
    Row("FixPlan(markdown=)", "str", None, lambda _, v: ab.FixPlan(markdown=v), strategy_works,
        "C C C C C C C C C ok", "10 MB without a checklist: a plan of no steps (report)"),
    Row("FixPlan(max_attempts=)", "int", None,
        lambda _, v: ab.FixPlan(markdown="- [ ] parse", max_attempts=v), strategy_works,
        "C ok C C C C C C C C", "None: 3"),
    Row("FixPlan.from_markdown(markdown)", "str", None, lambda _, v: ab.FixPlan.from_markdown(v),
        strategy_works, "C A C C C C C C C ok", "None: a missing argument"),
    # -- the loop
    Row("Loop(max_iterations=)", "int", None, L("max_iterations"), loop_works,
        "C ok C C C C C C C C", "None: 50"),
    Row("Loop(strategy=)", "dict", None, L("strategy"), loop_works,
        "C ok C C C C C C C C", "None: the default (auto)"),
    Row("Loop(stagnation=)", "dict", None, L("stagnation"), loop_works,
        "C ok C C C C C C C C", "None: the defaults"),
    Row("Loop(budget=)", "dict", None, L("budget"), loop_works,
        "C ok C C C C C C C C", "None: no budget"),
    Row("Loop.observe(output)", "str", loop, lambda lp, v: lp.observe(v), loop_works,
        "A A A A A A A A A ok", "10 MB: analyzed"),
    Row("Loop.observe(files_changed=)", "int", loop,
        lambda lp, v: lp.observe("working", files_changed=v), loop_works,
        "A ok A A A A ok A A A", "None: 0, as when left out"),
    Row("Loop.observe(tests_passing=)", "int", loop,
        lambda lp, v: lp.observe("working", tests_passing=v), loop_works,
        "A ok A A A A ok A A A", "None: 0, as when left out"),
    Row("Loop.observe(error=)", "str", loop, lambda lp, v: lp.observe("working", error=v),
        loop_works, "A ok A A A A A A A ok", "None: no error; 10 MB: cut to 4096 bytes"),
    Row("Loop.observe(events=)", "list", loop, lambda lp, v: lp.observe("working", events=v),
        loop_works, "A ok A A A A A A A A", "None: no events"),
    # -- the monitor
    Row("Monitor(config) (positional dict)", "dict", None, lambda _, v: ab.Monitor(v),
        monitor_works, "C ok C C C C C C C C", "None: the defaults"),
    Row("Monitor(profile=)", "str", None, M("profile"), monitor_works,
        "C ok C C C C C C C C", "None: coding-agent; 10 MB: an unknown profile"),
    Row("Monitor(tool_limits=)", "dict", None, M("tool_limits"), monitor_works,
        "C ok C C C C C C C C", "None: no limits"),
    Row("Monitor(tool_limits={'web_fetch': ...})", "int", None,
        lambda _, v: ab.Monitor(tool_limits={"web_fetch": v}), monitor_works,
        "C C C C C C ok C C C", "0: no call of the tool allowed"),
    Row("Monitor(warn_before=)", "int", None, M("warn_before"), monitor_works,
        "C ok C C C C ok C C C", "None: 2; 0: no warnings; at most 1000"),
    Row("Monitor(budget_warn_percent=)", "int", None, M("budget_warn_percent"), monitor_works,
        "C ok C C C C ok C C C", "None: 80; 0: no budget warnings; at most 100"),
    Row("Monitor(failure=)", "dict", None, M("failure"), monitor_works,
        "C ok C C C C C C C C", "None: the profile's"),
    Row("Monitor(stagnation=)", "dict", None, M("stagnation"), monitor_works,
        "C ok C C C C C C C C", "None: the profile's"),
    Row("Monitor(budget=)", "dict", None, M("budget"), monitor_works,
        "C ok C C C C C C C C", "None: the profile's"),
    Row("Monitor.observe(event)", "dict", monitor, lambda m, v: m.observe(v), monitor_works,
        "E E E E E E E E E E", "None: not an event object (null in every binding)"),
    Row("Monitor.observe({'type': ...})", "str", monitor, event_field()("type"), monitor_works,
        "E E E E E E E E E ok", "10 MB: an unknown type, ignored (ignoredEvents)"),
    Row("Monitor.observe({..., 'taskId': ...})", "str", monitor,
        event_field(type="alive")("taskId"), monitor_works, "E ok E E E E E E E E",
        "None: the current task; 10 MB: over the taskId cap"),
    Row("Monitor.observe({'type': 'assistant', 'text': ...})", "str", monitor,
        event_field(type="assistant")("text"), monitor_works, "E E E E E E E E E ok",
        "10 MB: a step's text is cut to 8 KB"),
    Row("Monitor.observe({'type': 'tool_use', 'name': ...})", "str", monitor,
        event_field(type="tool_use")("name"), monitor_works, "E E E E E E E E E ok",
        "10 MB: accepted (kept cut short)"),
    Row("Monitor.observe({'type': 'tool_result', 'ok': ...})", "bool", monitor,
        event_field(type="tool_result")("ok"), monitor_works, "E E E E E E E E E E"),
    Row("Monitor.observe({'type': 'tool_result', 'text': ...})", "str", monitor,
        event_field(type="tool_result", ok=False)("text"), monitor_works, "E ok E E E E E E E ok",
        "None: empty; 10 MB: compared by its first and last 4 KB"),
    Row("Monitor.observe({'type': 'usage', 'costCents': ...})", "float", monitor,
        event_field(type="usage")("costCents"), monitor_works, "E E E E E E ok E E E",
        "None: no cost and no usage; from 0 to 1e15"),
    Row("Monitor.observe({'type': 'progress', 'files': ...})", "int", monitor,
        event_field(type="progress")("files"), monitor_works, "E ok E E E E ok E E E",
        "None: 0; also a list of paths"),
    Row("Monitor.observe({'type': 'progress', 'digest': ...})", "str", monitor,
        event_field(type="progress")("digest"), monitor_works, "E ok E E E E E E E ok",
        "None: no digest; 10 MB: accepted (kept cut short)"),
    Row("Monitor.observe({'type': 'heartbeat', 'phase': ...})", "str", monitor,
        event_field(type="heartbeat", taskId="t1")("phase"), monitor_works, "E E E E E E E E E E"),
    Row("Monitor.restore(snapshot)", "dict", monitor, lambda m, v: m.restore(v), monitor_works,
        "S S S S S S S S S S", "None: not a snapshot (null in every binding)"),

]


def cells(row: Row) -> List[str]:
    codes = row.cells.split()
    assert len(codes) == len(COLUMNS), f"{row.entry}: {len(codes)} cells"
    assert all(c in CODES for c in codes), row.entry
    return codes


CASES = [
    pytest.param(row, i, id=f"{row.entry} | {COLUMNS[i][0]}")
    for row in TABLE
    for i in range(len(COLUMNS))
]


def outcome(row: Row, obj: Any, value: Any) -> Tuple[str, Any]:
    """Runs one cell: ("ok", result) or (code letter, None). Anything but an AgentBreakerError
    (a PanicException, a bare TypeError, an OverflowError) fails the test, as does a message longer
    than MAX_MESSAGE."""
    try:
        result = row.call(obj, value)
    except ab.AgentBreakerError as e:
        letter = next(k for k, v in CODES.items() if v == e.code)
        assert len(str(e)) <= MAX_MESSAGE, f"{row.entry}: a message of {len(str(e))} characters"
        return letter, None
    return "ok", result


@pytest.mark.parametrize("row, column", CASES)
def test_cell(row: Row, column: int) -> None:
    value = column_values(row.kind)[column]
    obj = row.make() if row.make else None
    got, result = outcome(row, obj, value)
    assert got == cells(row)[column], f"{row.entry} with {COLUMNS[column][0]}: {CODES[got]}"
    # The object the value was handed to still works; so does what a constructor accepted, and
    # a fresh object of the kind.
    if obj is not None:
        row.works(obj)
    elif got == "ok" and result is not None:
        row.works(result)
    else:
        row.works(default_of(row))


def default_of(row: Row) -> Any:
    """A fresh default object of the row's kind (for constructor and function rows)."""
    defaults: Dict[Callable[[Any], None], Callable[[], Any]] = {
        failure_works: ab.FailureBreaker,
        stagnation_works: ab.StagnationBreaker,
        budget_works: ab.BudgetBreaker,
        strategy_works: lambda: ab.ExitStrategy(type="auto"),
        loop_works: ab.Loop,
        clock_works: ab.ManualClock,
        functions_work: lambda: None,
        monitor_works: ab.Monitor,
    }
    return defaults[row.works]()


# --- the document ----------------------------------------------------------------------------------


def render() -> str:
    head = ["entry point", "kind"] + [name for name, _ in COLUMNS] + ["note"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in TABLE:
        codes = [CODES[c] for c in cells(row)]
        entry = row.entry.replace("|", "\\|")
        lines.append(f"| `{entry}` | {row.kind} | " + " | ".join(codes) + f" | {row.note} |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- TABLE:BEGIN -->", "<!-- TABLE:END -->"


def test_the_document_is_the_table() -> None:
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"{DOC} has no table markers"
    table = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert table.strip() == render().strip(), (
        f"{DOC} differs from TABLE: regenerate it with `python {__file__} --write-doc`"
    )


def test_the_matrix_is_complete() -> None:
    assert len(CASES) == len(TABLE) * len(COLUMNS)
    assert len({row.entry for row in TABLE}) == len(TABLE), "an entry point is listed twice"


def write_doc() -> None:
    text = DOC.read_text()
    before = text.split(BEGIN, 1)[0]
    after = text.split(END, 1)[1]
    DOC.write_text(f"{before}{BEGIN}\n{render()}{END}{after}")


def observe() -> None:
    """Prints the outcome of every cell as the table's cell strings (to review, not to copy)."""
    for row in TABLE:
        got = []
        for value in column_values(row.kind):
            obj = row.make() if row.make else None
            try:
                letter, _ = outcome(row, obj, value)
            except BaseException as e:  # noqa: BLE001 - a survey
                letter = f"!{type(e).__name__}"
            got.append(letter)
        mark = "" if " ".join(got) == row.cells else "   <-- differs"
        print(f"{row.entry:60} {' '.join(got)}{mark}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-doc"]:
        write_doc()
    elif sys.argv[1:] == ["--observe"]:
        observe()
    else:
        sys.exit("usage: test_bad_input.py --write-doc | --observe")

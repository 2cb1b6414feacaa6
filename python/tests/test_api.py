"""The rest of the public API, beyond the conformance suite."""

from __future__ import annotations

import copy
import os
import re
import sysconfig
from pathlib import Path
from typing import List

import pytest

import agentbreaker as ab
from agentbreaker.types import Event


def test_the_installed_wheel_is_under_test() -> None:
    package = Path(ab.__file__).resolve().parent
    assert package.parent == Path(sysconfig.get_paths()["purelib"]).resolve()
    assert (package / "py.typed").exists()
    assert (package / "_native.pyi").exists()


def test_version_is_the_crate_version() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", ab.__version__)


def test_public_names() -> None:
    for name in ab.__all__:
        assert hasattr(ab, name), name
    assert ab.FailureBreaker.__module__ == "agentbreaker"
    assert issubclass(ab.FailureBreaker, ab._native.FailureBreaker)


# --- clocks -------------------------------------------------------------------------------------


def test_manual_clock() -> None:
    clock = ab.ManualClock(start_ms=5)
    clock.advance(10)
    assert clock.now() == 15
    clock.set(3)
    assert clock.now() == 3
    assert repr(clock) == "ManualClock(now=3)"
    assert ab.ManualClock().now() == 0


def test_system_clock_is_epoch_milliseconds() -> None:
    now = ab.SystemClock().now()
    assert now > 1_577_836_800_000  # after 2020-01-01
    breaker = ab.FailureBreaker(failure_threshold=1, clock=ab.SystemClock())
    breaker.record_failure("x")
    opened_at = breaker.get_status()["openedAt"]
    assert opened_at is not None and opened_at >= now


def test_one_clock_drives_several_breakers() -> None:
    clock = ab.ManualClock()
    failure = ab.FailureBreaker(failure_threshold=1, cooldown_ms=1_000, clock=clock)
    budget = ab.BudgetBreaker(max_task_duration_secs=1, clock=clock)
    failure.record_failure("x")
    budget.ingest({"type": "heartbeat", "taskId": "t", "phase": "starting"})
    clock.advance(1_500)
    assert failure.should_allow_operation() == (True, "Circuit breaker testing - one operation allowed")
    assert [h["slug"] for h in budget.tick()] == ["duration_limit"]


# --- FailureBreaker ---------------------------------------------------------------------------


def test_failure_breaker_defaults_are_the_seed_s() -> None:
    breaker = ab.FailureBreaker()
    config = breaker.config
    assert (config["failureThreshold"], config["cooldownMs"], config["errorMatch"]) == (5, 30_000, "normalized")
    assert breaker.should_allow_operation() == (True, None)
    assert repr(breaker) == "FailureBreaker(state='CLOSED', consecutive_failures=0)"


def test_identical_error_fast_trip_with_template_matching(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(identical_error_threshold=3, error_match="template", clock=clock)
    for script in ("Main", "MainHandler", "MainScript"):
        breaker.record_failure(f"Path not found: ServerScriptService.{script}")
    assert breaker.state == "OPEN"
    assert breaker.metrics()["trips"] == 1


def test_backoff_doubles_the_cooldown(clock: ab.ManualClock) -> None:
    breaker = ab.FailureBreaker(failure_threshold=1, backoff_multiplier=2.0, clock=clock)
    breaker.record_failure("x")
    clock.advance(30_000)
    assert breaker.should_allow_operation()[0]
    breaker.record_failure("still failing")
    assert breaker.get_status()["cooldownMs"] == 60_000


# --- StagnationBreaker ------------------------------------------------------------------------


def test_stagnation_breaker_half_opens_then_opens(clock: ab.ManualClock) -> None:
    breaker = ab.StagnationBreaker(clock=clock)
    breaker.record_progress(files_changed=3, tests_passing=4, output_length=900)
    for _ in range(3):
        breaker.record_progress(tests_passing=4, output_length=900)
    assert breaker.check() == {
        "allowContinue": True,
        "state": "HALF_OPEN",
        "reason": "No progress in 3 consecutive iterations",
        "slug": "no_progress",
    }
    breaker.record_progress(tests_passing=4, output_length=850)
    assert breaker.check()["allowContinue"] is False
    assert repr(breaker) == "StagnationBreaker(state='OPEN', consecutive_no_progress=4)"


def test_transient_errors_never_count(clock: ab.ManualClock) -> None:
    breaker = ab.StagnationBreaker(same_error_threshold=2, clock=clock)
    for _ in range(5):
        breaker.record_error("429 Too Many Requests", transient=True)
    assert breaker.state == "CLOSED"
    breaker.record_error("Disk full at 10:04:55")
    breaker.record_error("Disk full at 10:05:12")  # the same fingerprint
    assert breaker.check()["state"] == "OPEN"
    assert breaker.get_status()["errorCounts"] == {"Disk full at #": 2}


def test_step_detectors_open_on_a_repeated_step(clock: ab.ManualClock) -> None:
    breaker = ab.StagnationBreaker(repeat_threshold=3, fail_window=4, clock=clock)
    assert breaker.config["repeatThreshold"] == 3
    for _ in range(2):
        breaker.record_step("bash: cat main.py", "Error: No such file", failed=True)
    assert breaker.state == "CLOSED"
    breaker.record_step("bash: cat main.py", "Error: No such file", failed=True)
    decision = breaker.check()
    assert (decision["state"], decision["allowContinue"]) == ("OPEN", False)
    assert decision["reason"] is not None


def test_step_detectors_are_off_by_default(clock: ab.ManualClock) -> None:
    breaker = ab.StagnationBreaker(clock=clock)
    for _ in range(50):
        breaker.record_step("ls")
    assert breaker.state == "CLOSED"


# --- BudgetBreaker ----------------------------------------------------------------------------


def test_budget_breaker_halts_the_51st_tool_call(clock: ab.ManualClock) -> None:
    budget = ab.BudgetBreaker(clock=clock)
    budget.ingest({"type": "heartbeat", "taskId": "research", "phase": "starting"})
    for _ in range(50):
        assert budget.ingest({"type": "tool_use", "name": "web_fetch", "input": {"url": "x"}}) is None
    halt = budget.ingest({"type": "tool_use", "name": "web_fetch"})
    assert halt == {
        "kind": "ToolCallLimit",
        "slug": "tool_call_limit",
        "taskId": "research",
        "message": "tool calls: 51 of 50",
        "actual": 51,
        "limit": 50,
    }
    snapshot = budget.snapshot()
    assert snapshot["stack"] == ["research"] and snapshot["tasks"][0]["halted"] is True
    budget.reset()
    assert budget.snapshot()["tasks"] == []


def test_budget_spend_uses_model_prices(clock: ab.ManualClock) -> None:
    budget = ab.BudgetBreaker(
        max_token_spend_cents_per_task=1,
        prices={"tiny-model": {"input": 100, "output": 100}},
        clock=clock,
    )
    usage = {"input_tokens": 5_000, "output_tokens": 5_000}
    assert budget.ingest({"type": "usage", "model": "tiny-model", "usage": usage}) is None
    assert budget.snapshot()["tasks"][0]["spendCents"] == pytest.approx(1.0)
    halt = budget.ingest({"type": "usage", "model": "tiny-model", "usage": usage})
    assert halt is not None and halt["slug"] == "token_spend_limit"


def test_idle_timeout_via_tick(clock: ab.ManualClock) -> None:
    budget = ab.BudgetBreaker(max_idle_secs=60, clock=clock)
    budget.ingest({"type": "assistant", "text": "thinking", "taskId": "t1"})
    clock.advance(61_000)
    [halt] = budget.tick()
    assert halt["kind"] == "IdleTimeout" and halt["idleSecs"] == pytest.approx(61.0)
    assert budget.tick() == []  # reported once


# --- analyzer, fingerprints -------------------------------------------------------------------


def test_analyze() -> None:
    result = ab.analyze("All tasks complete, nothing left to do. 42 tests passed.")
    assert result == {
        "completionSignal": {
            "detected": True,
            "confidence": 90,
            "phrases": ["all tasks complete", "nothing left to do"],
        },
        "confidence": 90,
        "exitSignal": None,
        "testsPassing": 42,
        "testsFailing": None,
    }
    assert ab.analyze("EXIT_SIGNAL: false\nDone.")["confidence"] == 0


def test_fingerprint_modes() -> None:
    error = "Path not found: ServerScriptService.MainHandler (line 12:4)"
    assert ab.fingerprint(error, "exact") == error
    assert ab.fingerprint(error) == "Path not found: ServerScriptService.MainHandler (line #)"
    assert ab.fingerprint(error, error_match="template") == "Path not found: <path> (line #)"
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 3\nValueError: bad value 42'
    assert ab.fingerprint(traceback, "key_line") == "ValueError: bad value #"


# --- strategies and fix plans -----------------------------------------------------------------


def test_exit_strategies() -> None:
    auto = ab.ExitStrategy(type="auto", threshold=40)
    assert auto.should_exit("Done.") == {"exit": True, "reason": "completed"}
    assert auto.plan_status() is None
    breaker_strategy = ab.ExitStrategy(type="circuit_breaker")
    assert breaker_strategy.should_exit("", circuit_state="OPEN") == {"exit": True, "reason": "circuit_open"}
    composite = ab.ExitStrategy(
        type="composite", mode="all", members=[{"type": "auto"}, {"type": "circuit_breaker"}]
    )
    assert composite.should_exit("All tasks complete, nothing left to do.")["exit"] is False
    assert composite.should_exit("", circuit_state="OPEN") == {"exit": True, "reason": "completed"}
    composite.reset()
    assert composite.should_exit("", circuit_state="OPEN")["exit"] is False


def test_should_exit_takes_a_text_or_an_analysis() -> None:
    auto = ab.ExitStrategy(type="auto")
    text = "All tasks complete, nothing left to do."
    analysis = ab.analyze(text)
    assert auto.should_exit(analysis) == auto.should_exit(text) == {"exit": True, "reason": "completed"}
    recorded = copy.deepcopy(analysis)
    recorded["confidence"] = recorded["completionSignal"]["confidence"] = 10
    assert auto.should_exit(recorded)["exit"] is False  # the analysis given is what counts
    with pytest.raises(ab.InvalidArgumentError):
        auto.should_exit({"confidence": 5})  # type: ignore[arg-type]
    with pytest.raises(ab.InvalidArgumentError):
        auto.should_exit(42)  # type: ignore[arg-type]


def test_fix_plan_from_markdown() -> None:
    plan = ab.FixPlan.from_markdown(
        "# Plan\n- [x] Reproduce the crash\n- [ ] Fix the parser\n* [ ] Add a regression test\n",
        max_attempts=2,
    )
    assert isinstance(plan, ab.FixPlan) and isinstance(plan, ab.ExitStrategy)
    status = plan.get_status()
    assert [s["description"] for s in status["steps"]] == [
        "Reproduce the crash", "Fix the parser", "Add a regression test",
    ]
    assert status["currentStep"] == 1 and status["steps"][1]["maxAttempts"] == 2
    assert plan.should_exit("Fixed the parser. Done.") == {"exit": False, "reason": None}
    assert plan.should_exit("Added the test. Done.") == {"exit": True, "reason": "plan_complete"}
    assert plan.plan_status() == plan.get_status()


def test_fix_plan_from_steps_warns_when_skipping(clock: ab.ManualClock) -> None:
    plan = ab.FixPlan(steps=[{"description": "Find the leak", "maxAttempts": 1}], clock=clock)
    warnings: List[Event] = []
    plan.add_listener(warnings.append)
    clock.set(7)
    assert plan.should_exit("Still digging.") == {"exit": True, "reason": "plan_exhausted"}
    assert warnings == [{"type": "warning", "message": "Step 1 skipped after 1 attempts: Find the leak", "atMs": 7}]


# --- Loop -------------------------------------------------------------------------------------


def test_loop_continue_then_complete() -> None:
    agent_loop = ab.Loop(max_iterations=10)
    decision = agent_loop.observe("Refactored the parser.", files_changed=2)
    assert (decision["action"], decision["reason"], decision["iteration"]) == ("continue", None, 1)
    decision = agent_loop.observe("All tasks complete, nothing left to do. 42 tests passed.")
    assert (decision["action"], decision["reason"], decision["outcome"]) == ("exit", "completed", "success")
    with pytest.raises(ab.InvalidArgumentError):
        agent_loop.observe("one more?")
    status = agent_loop.get_status()
    assert status["exited"] is True and status["budget"] is None
    agent_loop.reset()
    assert agent_loop.get_status()["iteration"] == 0


def test_loop_with_a_budget_exits_budget_exceeded(clock: ab.ManualClock) -> None:
    agent_loop = ab.Loop(budget={"maxToolCallsPerTask": 2}, clock=clock)
    calls = [{"type": "tool_use", "name": "search"} for _ in range(3)]
    decision = agent_loop.observe("Searching.", files_changed=1, events=calls)
    assert (decision["action"], decision["reason"], decision["outcome"]) == ("exit", "budget_exceeded", "failure")
    assert decision["halt"] is not None and decision["halt"]["slug"] == "tool_call_limit"


def test_loop_stagnation_and_errors(clock: ab.ManualClock) -> None:
    agent_loop = ab.Loop(stagnation={"sameErrorThreshold": 2}, strategy={"type": "auto", "threshold": 90})
    agent_loop.observe("Trying.", error="ENOENT: main.py")
    decision = agent_loop.observe("Trying again.", error="ENOENT: main.py")
    assert (decision["reason"], decision["breaker"]["state"]) == ("circuit_open", "OPEN")
    assert repr(agent_loop) == "Loop(iteration=2, exited=True)"


# --- configuration as one dict ----------------------------------------------------------------


def test_a_config_dict_in_the_contract_s_shape_and_keywords_that_override_it() -> None:
    breaker = ab.FailureBreaker({"failureThreshold": 2, "cooldownMs": 5_000}, failure_threshold=3)
    assert (breaker.config["failureThreshold"], breaker.config["cooldownMs"]) == (3, 5_000)
    assert ab.Loop({"maxIterations": 1}).observe("Working.")["reason"] == "max_iterations"
    assert ab.ExitStrategy({"type": "auto", "threshold": 40}).should_exit("Done.")["exit"] is True
    assert ab.FixPlan({"markdown": "- [ ] one"}).get_status()["currentStep"] == 0
    assert ab.StagnationBreaker({"noProgressThreshold": 1}).config["noProgressThreshold"] == 1
    with pytest.raises(ab.InvalidConfigError):
        ab.FailureBreaker({"failure_threshold": 2})  # inside the dict, the contract's keys
    with pytest.raises(ab.InvalidConfigError):
        ab.BudgetBreaker([("maxIdleSecs", 5)])  # type: ignore[arg-type]


def test_profiles_configure_the_breakers() -> None:
    assert ab.profile_names() == ["seed", "coding-agent"]
    coding = ab.profile("coding-agent")
    assert coding is not None and coding["name"] == "coding-agent"
    failure = ab.FailureBreaker(coding["failure"])
    stagnation = ab.StagnationBreaker(coding["stagnation"])
    budget = ab.BudgetBreaker(coding["budget"])
    assert failure.config == coding["failure"]
    assert stagnation.config == coding["stagnation"]
    assert budget.config == coding["budget"]
    seed = ab.profile("seed")
    assert seed is not None and seed["failure"] == ab.FailureBreaker().config
    assert ab.profile("no-such-profile") is None


# --- environment ------------------------------------------------------------------------------


def test_config_from_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("AGENTBREAKER_", "BB_CIRCUIT_BREAKER_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AGENTBREAKER_TOOL_CAP", "20")
    monkeypatch.setenv("BB_CIRCUIT_BREAKER_IDLE_SECS", "oops")
    result = ab.config_from_env()
    assert result["config"]["maxToolCallsPerTask"] == 20
    assert result["config"]["maxIdleSecs"] == 300
    assert [w["variable"] for w in result["warnings"]] == ["BB_CIRCUIT_BREAKER_IDLE_SECS"]
    # The result's config builds a breaker as it is.
    budget = ab.BudgetBreaker(result["config"])
    assert budget.config == result["config"]


def test_config_from_env_with_a_mapping() -> None:
    result = ab.config_from_env({"AGENTBREAKER_JACCARD": "0.8", "PATH": "/bin"})
    expected = ab.config_from_env({})["config"]
    expected["similarityJaccardThreshold"] = 0.8
    assert result["config"] == expected
    assert result["warnings"] == []

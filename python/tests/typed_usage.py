"""A typed program using the public API: `mypy --strict` must accept it (make test-python), and
test_typing.py runs it. Not a test module itself."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import List, Optional

import agentbreaker
from agentbreaker import (
    AgentBreakerError,
    AgentHalted,
    BudgetBreaker,
    CircuitOpenError,
    ExitStrategy,
    FailureBreaker,
    FixPlan,
    Loop,
    ManualClock,
    Monitor,
    StagnationBreaker,
    analyze,
    config_from_env,
    fingerprint,
)
from agentbreaker.exceptions import InvalidConfigError
from agentbreaker.types import (
    Analysis,
    EnvConfig,
    Event,
    ExitDecision,
    FailureSnapshot,
    FailureStatus,
    Halt,
    LoopDecision,
    MonitorStatus,
    PlanStatus,
    State,
    Verdict,
    VerdictAction,
)


def guarded_calls(clock: ManualClock) -> List[str]:
    breaker = FailureBreaker(failure_threshold=2, cooldown_ms=1_000, clock=clock)
    log: List[str] = []

    @breaker
    def fetch(url: str, *, retries: int = 0) -> bytes:
        raise ConnectionError(f"cannot reach {url} ({retries} retries)")

    @breaker
    async def ask(prompt: str) -> str:
        return prompt.upper()

    for _ in range(3):
        try:
            data: bytes = fetch("https://example.com", retries=1)
            log.append(data.decode())
        except CircuitOpenError as refused:
            log.append(f"{refused.code}: {refused}")
        except ConnectionError as error:
            log.append(str(error))

    clock.advance(1_000)
    answer: str = asyncio.run(ask("done?"))
    log.append(answer)
    with breaker:
        log.append("inside with")

    async def use_async_with() -> None:
        async with breaker as same:
            state: State = same.state
            log.append(state)

    asyncio.run(use_async_with())
    log.append(str(breaker.call(len, "four")))
    allowed, message = breaker.should_allow_operation()
    if allowed and message is None:
        log.append("closed")
    return log


def persistence(clock: ManualClock, directory: Path) -> FailureStatus:
    breaker = FailureBreaker(clock=clock, state_path=directory / "state.json")
    breaker.record_failure("Path not found")
    snapshot: FailureSnapshot = breaker.snapshot()
    breaker.save(directory / "copy.json")
    other = FailureBreaker(clock=clock)
    loaded: bool = other.load(directory / "copy.json")
    assert loaded
    other.restore(snapshot)
    return other.get_status()


def listeners(clock: ManualClock) -> List[Event]:
    received: List[Event] = []
    stagnation = StagnationBreaker(no_progress_threshold=2, clock=clock)
    stagnation.add_listener(received.append)

    @stagnation.add_listener
    def log_changes(event: Event) -> None:
        if event["type"] == "stateChange":
            print(event["from"], "->", event["to"], event["reason"])

    for _ in range(3):
        stagnation.record_progress(files_changed=0, tests_passing=1, output_length=100)
    stagnation.record_error("429 Too Many Requests", transient=True)
    errors: int = stagnation.listener_errors
    assert errors == 0 and stagnation.remove_listener(log_changes)
    return received


def budget(clock: ManualClock) -> Optional[Halt]:
    breaker = BudgetBreaker(max_tool_calls_per_task=1, prices={"small": {"input": 10}}, clock=clock)
    breaker.ingest({"type": "heartbeat", "taskId": "t1", "phase": "starting"})
    breaker.ingest({"type": "tool_use", "name": "search", "input": {"q": "x"}})
    halt = breaker.ingest({"type": "tool_use", "name": "search"})
    halts: List[Halt] = breaker.tick()
    assert halts == []
    return halt


def strategies() -> List[ExitDecision]:
    analysis: Analysis = analyze("All tasks complete. 12 tests passed.")
    assert analysis["completionSignal"]["detected"]
    auto = ExitStrategy(type="auto", threshold=60)
    composite = ExitStrategy(type="composite", mode="any", members=[{"type": "circuit_breaker"}])
    plan = FixPlan(steps=[{"description": "Fix it", "maxAttempts": 2}], max_attempts=3)
    from_markdown = FixPlan.from_markdown("- [ ] step one\n- [x] step two")
    status: PlanStatus = from_markdown.get_status()
    assert status["currentStep"] == 0
    return [
        auto.should_exit("Done."),
        composite.should_exit("", circuit_state="OPEN"),
        plan.should_exit("Fixed it. Done."),
    ]


def coordinator(clock: ManualClock) -> LoopDecision:
    agent_loop = Loop(
        max_iterations=5,
        strategy={"type": "auto"},
        stagnation={"noProgressThreshold": 3},
        budget={"maxToolCallsPerTask": 10},
        clock=clock,
    )
    return agent_loop.observe(
        "Refactored the parser.",
        files_changed=2,
        tests_passing=10,
        events=[{"type": "tool_use", "name": "edit_file"}],
    )


def monitored(clock: ManualClock) -> List[VerdictAction]:
    monitor = Monitor(profile="seed", tool_limits={"web_fetch": 2}, warn_before=1, clock=clock)
    actions: List[VerdictAction] = []
    try:
        for i in range(5):
            verdict: Verdict = monitor.observe({"type": "tool_use", "name": "web_fetch", "id": str(i)})
            actions.append(verdict["action"])
            if verdict["action"] == "halt":
                raise AgentHalted(verdict)
    except AgentHalted as halted:
        reason = halted.verdict["reason"]
        assert reason == "tool_limit" and halted.code == "HALTED"
    status: MonitorStatus = monitor.status()
    assert status["tasks"][0]["toolCallsByName"]["web_fetch"] == 3
    monitor.restore(monitor.snapshot())
    assert monitor.tick() == []
    return actions


def environment() -> EnvConfig:
    config = config_from_env({"AGENTBREAKER_TOOL_CAP": "25"})
    assert fingerprint("Timeout after 30s", "normalized") == "Timeout after #s"
    try:
        FailureBreaker(failure_threshold=0)
    except InvalidConfigError as error:
        code: str = error.code
        assert code == "INVALID_CONFIG"
    except AgentBreakerError:
        raise
    return config


def main(directory: Path) -> None:
    clock = ManualClock(start_ms=0)
    print(agentbreaker.__version__)
    print(guarded_calls(clock))
    print(persistence(clock, directory))
    print(listeners(clock))
    print(budget(clock))
    print(strategies())
    print(coordinator(clock))
    print(monitored(clock))
    print(environment())


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))

"""AgentBreakerCapability on real pydantic-ai agent runs driven by
``pydantic_ai.models.function.FunctionModel``."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import itertools
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import RunCancelled, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agentbreaker import AgentHalted, Monitor
from agentbreaker.integrations.pydantic_ai import AgentBreakerCapability
from _support import REPEAT_THRESHOLD, Verdicts, assert_one_failed_step, assert_stuck_run_verdicts, failure_spotter

USAGE = RequestUsage(input_tokens=120, output_tokens=12)
# Enough for a 1-cent cap at the Sonnet 4 list rate the Monitor's price table uses by default.
BIG_USAGE = RequestUsage(input_tokens=500_000, output_tokens=1_000)
ModelFunction = Callable[[List[ModelMessage], AgentInfo], ModelResponse]


def call(name: str, args: Dict[str, Any], n: int, text: str = "") -> ModelResponse:
    parts: List[Any] = [ToolCallPart(name, args, tool_call_id=f"call_{n}")]
    if text:
        parts.insert(0, TextPart(text))
    return ModelResponse(parts=parts, usage=USAGE, model_name="function-model")


def stuck(name: str = "run_tests", args: Optional[Dict[str, Any]] = None) -> ModelFunction:
    """A stuck model: the same call, whatever it is told."""
    counter = itertools.count()

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        return call(name, args if args is not None else {"command": "pytest -q"}, next(counter), "Running the tests again.")

    return model


def scripted(steps: Sequence[ModelResponse], answer: str) -> ModelFunction:
    queue = list(steps)

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        if queue:
            return queue.pop(0)
        return ModelResponse(parts=[TextPart(answer)], usage=USAGE, model_name="function-model")

    return model


HEALTHY = [
    call("search", {"query": "login handler"}, 0, "Looking for the handler."),
    call("read_file", {"path": "app/auth.py"}, 1),
    call("write_file", {"path": "app/auth.py", "text": "fixed"}, 2),
    call("search", {"query": "test_login"}, 3),
    call("read_file", {"path": "tests/test_auth.py"}, 4),
    call("stats", {"page": "/login"}, 5),
]


def make_agent(model: ModelFunction, capabilities: Sequence[Any] = ()) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=list(capabilities))

    @agent.tool_plain
    def run_tests(command: str) -> str:
        """Run the test suite."""
        raise ToolFailed("FAILED tests/test_app.py::test_login - AssertionError: 401 != 200")

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the code."""
        return f"3 matches for {query}"

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    @agent.tool_plain
    def write_file(path: str, text: str) -> str:
        """Write a file."""
        return f"wrote {len(text)} bytes to {path}"

    @agent.tool_plain
    def stats(page: str) -> Dict[str, Any]:
        """A tool that answers with a dict."""
        return {"page": page, "visits": 3, "ratio": 0.5}

    @agent.tool_plain
    async def slow(seconds: float) -> str:
        """A slow tool."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @agent.tool_plain
    def blocking(seconds: float) -> str:
        """A slow tool that blocks its thread."""
        time.sleep(seconds)
        return f"slept {seconds}"

    @agent.tool_plain
    def explode(reason: str) -> str:
        """A tool with a bug."""
        raise ValueError(f"kaboom: {reason}")

    @agent.tool_plain
    def schedule(when: datetime.datetime, price: decimal.Decimal, tags: Set[str]) -> str:
        """A tool whose arguments pydantic-ai validates into Python objects."""
        return f"scheduled at {when.isoformat()} for {price}"

    @agent.tool
    def whoami(ctx: RunContext[None]) -> bytes:
        """A tool that answers with bytes."""
        return b"\x89PNG fake image"

    return agent


def tool_returns(messages: Sequence[ModelMessage]) -> List[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


def nudges(messages: Sequence[ModelMessage]) -> List[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and "[agentbreaker]" in str(p.content)
    ]


def test_stuck_agent_is_warned_then_cancelled(monitor: Monitor, verdicts: Verdicts) -> None:
    breaker = AgentBreakerCapability(monitor)
    agent = make_agent(stuck(), [breaker])
    with pytest.raises(RunCancelled) as raised:
        agent.run_sync("Fix the login test.")
    halt = assert_stuck_run_verdicts(verdicts)
    verdict = breaker.verdict(raised.value.run_id)
    assert verdict == {k: v for k, v in halt.items() if k not in ("type", "atMs")}
    assert breaker.verdict() == verdict  # the last run
    history = raised.value.all_messages()
    # The warning's nudge went into the model's next request.
    assert len(nudges(history)) == 1
    assert len(tool_returns(history)) < REPEAT_THRESHOLD + 1
    assert monitor.status()["tasks"] == []


def test_stuck_agent_raises_agent_halted_when_asked(monitor: Monitor, verdicts: Verdicts) -> None:
    agent = make_agent(stuck(), [AgentBreakerCapability(monitor, on_halt="raise")])
    with pytest.raises(AgentHalted) as raised:
        asyncio.run(agent.run("Fix the login test."))
    halt = assert_stuck_run_verdicts(verdicts)
    assert raised.value.verdict["reason"] == halt["reason"]
    assert monitor.status()["tasks"] == []


def test_healthy_agent_is_left_alone(monitor: Monitor, verdicts: Verdicts) -> None:
    plain = make_agent(scripted(HEALTHY, "The login bug is fixed.")).run_sync("Fix the login bug.")
    breaker = AgentBreakerCapability(monitor)
    result = make_agent(scripted(HEALTHY, "The login bug is fixed."), [breaker]).run_sync("Fix the login bug.")
    assert result.output == plain.output == "The login bug is fixed."
    assert verdicts.seen == [] and breaker.verdict() is None and breaker.last_verdict is None
    assert [type(p).__name__ for m in result.all_messages() for p in m.parts] == [
        type(p).__name__ for m in plain.all_messages() for p in m.parts
    ]
    assert monitor.status()["tasks"] == []


def test_one_capability_serves_runs_at_the_same_time(monitor: Monitor) -> None:
    breaker = AgentBreakerCapability(monitor)
    stuck_agent = make_agent(stuck(), [breaker])
    healthy_agent = make_agent(scripted(HEALTHY, "done"), [breaker])

    async def together() -> List[Any]:
        runs = [stuck_agent.run("go"), healthy_agent.run("go"), stuck_agent.run("go")]
        return list(await asyncio.gather(*runs, return_exceptions=True))

    first, healthy, second = asyncio.run(together())
    assert isinstance(first, RunCancelled) and isinstance(second, RunCancelled)
    assert breaker.verdict(first.run_id)["action"] == "halt"  # type: ignore[index]
    assert breaker.verdict(second.run_id)["action"] == "halt"  # type: ignore[index]
    assert healthy.output == "done" and breaker.verdict(healthy.run_id) is None
    assert monitor.status()["tasks"] == []


def test_usage_reaches_the_monitors_budget() -> None:
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 1})
    breaker = AgentBreakerCapability(monitor)
    expensive = ModelResponse(parts=[ToolCallPart("search", {"query": "x"}, tool_call_id="c0")], usage=BIG_USAGE)
    with pytest.raises(RunCancelled) as raised:
        make_agent(scripted([expensive], "done"), [breaker]).run_sync("go")
    assert breaker.verdict(raised.value.run_id)["reason"] == "token_spend_limit"  # type: ignore[index]
    assert tool_returns(raised.value.all_messages()) == []  # cancelled before its tool ran


def test_a_halt_on_a_model_call_whose_tool_call_is_refused() -> None:
    """The model's call has arguments the tool refuses: the halt its spend brings cancels the run
    before the model is asked again."""
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 1})
    breaker = AgentBreakerCapability(monitor)
    asked = itertools.count()

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = next(asked)
        return ModelResponse(parts=[ToolCallPart("search", {"wrong": n}, tool_call_id=f"c{n}")], usage=BIG_USAGE)

    with pytest.raises(RunCancelled) as raised:
        make_agent(model, [breaker]).run_sync("go")
    assert breaker.verdict(raised.value.run_id)["reason"] == "token_spend_limit"  # type: ignore[index]
    assert next(asked) == 1  # asked once


@pytest.mark.parametrize("name", ["slow", "blocking"])
def test_slow_tool(monitor: Monitor, verdicts: Verdicts, name: str) -> None:
    steps = [call(name, {"seconds": 0.3}, 0), call("search", {"query": "x"}, 1)]
    result = make_agent(scripted(steps, "done"), [AgentBreakerCapability(monitor)]).run_sync("go")
    assert result.output == "done"
    assert tool_returns(result.all_messages())[0].content == "slept 0.3"
    assert verdicts.seen == []


def test_tool_exception_ends_the_run_as_pydantic_ai_does() -> None:
    """A plain exception ends the run (pydantic-ai's behaviour, unchanged); it was recorded as
    a failed call first."""
    steps = [call("explode", {"reason": "x"}, 0)]
    with pytest.raises(ValueError, match="kaboom: x"):
        make_agent(scripted(steps, "never")).run_sync("go")
    monitor, verdicts = failure_spotter()
    with pytest.raises(ValueError, match="kaboom: x"):
        make_agent(scripted(steps, "never"), [AgentBreakerCapability(monitor)]).run_sync("go")
    assert_one_failed_step(verdicts)
    assert monitor.status()["tasks"] == []  # the run ended: its task too


def test_tool_failed_is_a_failed_call_the_model_reads() -> None:
    monitor, verdicts = failure_spotter()
    result = make_agent(scripted([call("run_tests", {"command": "pytest"}, 0)], "I could not run them."), [AgentBreakerCapability(monitor)]).run_sync("go")
    assert result.output == "I could not run them."
    assert_one_failed_step(verdicts)


@pytest.mark.parametrize("name,args", [("stats", {"page": "/"}), ("whoami", {})])
def test_tool_with_non_text_result(monitor: Monitor, verdicts: Verdicts, name: str, args: Dict[str, Any]) -> None:
    breaker = AgentBreakerCapability(monitor)
    with pytest.raises(RunCancelled) as raised:
        make_agent(stuck(name, args), [breaker]).run_sync("go")
    verdict = breaker.verdict(raised.value.run_id)
    assert verdict is not None and verdict["reason"] == "repeated_step"
    detail = verdict["detail"]
    assert detail is not None and detail["count"] == REPEAT_THRESHOLD


def test_capability_takes_monitor_settings() -> None:
    breaker = AgentBreakerCapability(tool_limits={"search": 1})
    assert breaker.monitor.config["toolLimits"] == {"search": 1}
    with pytest.raises(RunCancelled) as raised:
        make_agent(scripted(HEALTHY, "done"), [breaker]).run_sync("go")
    assert breaker.verdict(raised.value.run_id)["reason"] == "tool_limit"  # type: ignore[index]


def test_tool_arguments_that_are_not_json(monitor: Monitor, verdicts: Verdicts) -> None:
    """Validated arguments (a datetime, a Decimal, a set) are watched as their JSON form."""
    steps = [call("schedule", {"when": "2025-01-02T03:04:05", "price": "9.50", "tags": ["a", "b"]}, 0)]
    breaker = AgentBreakerCapability(monitor)
    result = make_agent(scripted(steps, "done"), [breaker]).run_sync("go")
    assert result.output == "done"
    assert tool_returns(result.all_messages())[0].content == "scheduled at 2025-01-02T03:04:05 for 9.50"
    assert breaker._watcher.observe_errors == 0 and verdicts.seen == []

"""AgentBreakerHooks, agentbreaker_tool_guardrail and agentbreaker_failure_error_function on real
OpenAI Agents SDK runs (``Runner.run``) driven by ``agents.testing.ScriptedModel``."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, Dict, List, Optional

import pytest
from agents import (
    Agent,
    FunctionTool,
    MaxTurnsExceeded,
    RunConfig,
    Runner,
    RunResult,
    Tool,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from agentbreaker import AgentHalted, Monitor
from agentbreaker.integrations.openai_agents import (
    AgentBreakerHooks,
    agentbreaker_failure_error_function,
    agentbreaker_tool_guardrail,
)
from _support import REPEAT_THRESHOLD, Recording, Verdicts, assert_one_failed_step, assert_stuck_run_verdicts, failure_spotter

set_tracing_disabled(True)


def usage(input_tokens: int = 120) -> Usage:
    return Usage(requests=1, input_tokens=input_tokens, output_tokens=12, total_tokens=input_tokens + 12)


def step(name: str, args: Dict[str, Any], n: int, text: str = "", input_tokens: int = 120) -> ModelStep:
    output: List[Any] = [function_call(name, args, call_id=f"call_{n}")]
    if text:
        output.insert(0, assistant_message(text, item_id=f"msg_{n}"))
    return ModelStep(output=output, usage=usage(input_tokens))


def answer(text: str) -> ModelStep:
    return ModelStep(output=[assistant_message(text, item_id="final")], usage=usage())


def stuck_model(name: str = "run_tests", args: Optional[Dict[str, Any]] = None, n: int = 40) -> ScriptedModel:
    """A stuck model: the same call again and again (more steps than any test lets it take)."""
    return ScriptedModel([step(name, args or {"command": "pytest -q"}, i, "Running the tests again.") for i in range(n)])


def run_tests_tool(**kwargs: Any) -> FunctionTool:
    def run_tests(command: str) -> str:
        """Run the test suite."""
        raise RuntimeError("FAILED tests/test_app.py::test_login - AssertionError: 401 != 200")

    return function_tool(run_tests, **kwargs)


def _search(query: str) -> str:
    """Search the code."""
    return f"3 matches for {query}"


def _read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def _write_file(path: str, text: str) -> str:
    """Write a file."""
    return f"wrote {len(text)} bytes to {path}"


def _stats(page: str) -> Dict[str, Any]:
    """A tool that answers with a dict."""
    return {"page": page, "visits": 3, "ratio": 0.5}


def healthy_tools(**kwargs: Any) -> List[Tool]:
    return [function_tool(f, name_override=f.__name__[1:], **kwargs) for f in (_search, _read_file, _write_file, _stats)]


search, read_file, write_file, stats = (function_tool(f, name_override=f.__name__[1:]) for f in (_search, _read_file, _write_file, _stats))


@function_tool
async def slow(seconds: float) -> str:
    """A slow tool."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@function_tool
def blocking(seconds: float) -> str:
    """A slow tool that blocks its thread."""
    time.sleep(seconds)
    return f"slept {seconds}"


def healthy_model() -> ScriptedModel:
    return ScriptedModel(
        [
            step("search", {"query": "login handler"}, 0, "Looking for the handler."),
            step("read_file", {"path": "app/auth.py"}, 1),
            step("write_file", {"path": "app/auth.py", "text": "fixed"}, 2),
            step("search", {"query": "test_login"}, 3),
            step("read_file", {"path": "tests/test_auth.py"}, 4),
            step("stats", {"page": "/login"}, 5),
            answer("The login bug is fixed."),
        ]
    )


HEALTHY_TOOLS: List[Tool] = [search, read_file, write_file, stats]


def run(agent: Agent[Any], hooks: Optional[AgentBreakerHooks] = None, run_config: Optional[RunConfig] = None) -> RunResult:
    async def go() -> RunResult:
        return await Runner.run(agent, "Fix the login test.", hooks=hooks, run_config=run_config, max_turns=60)

    return asyncio.run(go())


def tool_outputs(model: ScriptedModel) -> List[str]:
    """What the model read as the tools' results, in order (from its last call's input)."""
    last = model.last_call
    assert last is not None
    return [str(item["output"]) for item in last.input if isinstance(item, dict) and item.get("type") == "function_call_output"]


def test_stuck_agent_is_warned_then_halted(monitor: Monitor, verdicts: Verdicts) -> None:
    hooks = AgentBreakerHooks(monitor)
    model = stuck_model()
    agent = Agent("coder", model=model, tools=[run_tests_tool()])
    with pytest.raises(AgentHalted) as raised:
        run(agent, hooks, hooks.run_config())
    halt = assert_stuck_run_verdicts(verdicts)
    assert raised.value.verdict == {k: v for k, v in halt.items() if k not in ("type", "atMs")}
    assert hooks.halt == raised.value.verdict
    # The model made one call per step and no more; the run stopped before the next model call.
    assert len(model.calls) == halt["step"]
    # The warning's nudge reached the model as a user message after its input.
    nudges = [item for call in model.calls for item in call.input if isinstance(item, dict) and item.get("role") == "user" and "[agentbreaker]" in str(item.get("content"))]
    assert len(nudges) == 1
    assert monitor.status()["tasks"] == []  # the run's task was closed


def test_failures_are_seen_without_run_config(monitor: Monitor, verdicts: Verdicts) -> None:
    """Without run_config() the SDK's own error text marks the failed call; no nudge reaches
    the model, the halt still ends the run."""
    hooks = AgentBreakerHooks(monitor)
    model = stuck_model()
    with pytest.raises(AgentHalted):
        run(Agent("coder", model=model, tools=[run_tests_tool()]), hooks)
    halt = assert_stuck_run_verdicts(verdicts)
    assert halt["detail"]["failed"] is True
    assert len(model.calls) == halt["step"]


def test_custom_failure_error_function_is_wrapped(monitor: Monitor, verdicts: Verdicts) -> None:
    hooks = AgentBreakerHooks(monitor)
    model = stuck_model()

    def mine(context: Any, error: Exception) -> str:
        return f"the tests failed: {error}"

    tool = run_tests_tool(failure_error_function=agentbreaker_failure_error_function(hooks, mine))
    with pytest.raises(AgentHalted):
        run(Agent("coder", model=model, tools=[tool]), hooks)
    halt = assert_stuck_run_verdicts(verdicts)
    assert halt["detail"]["failed"] is True
    assert tool_outputs(model)[0].startswith("the tests failed: FAILED tests/test_app.py")


def test_guardrail_stops_calls_of_a_halted_run(verdicts: Verdicts) -> None:
    """A tool limit halts on the call that trips it: the guardrail keeps that call (and the
    ones after it in the same turn) from running, and the model reads why."""
    monitor = Monitor(tool_limits={"search": 2})
    Verdicts(monitor)
    hooks = AgentBreakerHooks(monitor)
    ran: List[str] = []

    def searcher(query: str) -> str:
        """Search."""
        ran.append(query)
        return f"found {query}"

    guarded = function_tool(searcher, name_override="search", tool_input_guardrails=[agentbreaker_tool_guardrail(hooks)])
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("search", {"query": q}, call_id=f"c{q}") for q in ("a", "b", "c", "d")], usage=usage()),
            answer("never"),
        ]
    )
    with pytest.raises(AgentHalted) as raised:
        run(Agent("coder", model=model, tools=[guarded]), hooks, hooks.run_config())
    assert raised.value.verdict["reason"] == "tool_limit"
    assert ran == ["a", "b"]
    assert len(model.calls) == 1


def test_guardrail_passes_healthy_calls(monitor: Monitor, verdicts: Verdicts) -> None:
    hooks = AgentBreakerHooks(monitor)
    tools = healthy_tools(tool_input_guardrails=[agentbreaker_tool_guardrail(hooks)])
    result = run(Agent("coder", model=healthy_model(), tools=tools), hooks, hooks.run_config())
    assert result.final_output == "The login bug is fixed."
    assert verdicts.seen == []


def test_healthy_agent_is_left_alone(monitor: Monitor, verdicts: Verdicts) -> None:
    plain = run(Agent("coder", model=healthy_model(), tools=HEALTHY_TOOLS))
    hooks = AgentBreakerHooks(monitor)
    model = healthy_model()
    result = run(Agent("coder", model=model, tools=HEALTHY_TOOLS), hooks, hooks.run_config())
    assert result.final_output == plain.final_output == "The login bug is fixed."
    assert verdicts.seen == [] and hooks.halt is None and hooks.last_verdict is None
    assert [str(i) for i in result.to_input_list()] == [str(i) for i in plain.to_input_list()]
    assert monitor.status()["tasks"] == []


def test_hooks_serve_run_after_run(monitor: Monitor, verdicts: Verdicts) -> None:
    hooks = AgentBreakerHooks(monitor)
    for _ in range(2):
        with pytest.raises(AgentHalted):
            run(Agent("coder", model=stuck_model(), tools=[run_tests_tool()]), hooks, hooks.run_config())
    assert hooks.halt is not None
    result = run(Agent("coder", model=healthy_model(), tools=HEALTHY_TOOLS), hooks, hooks.run_config())
    assert result.final_output == "The login bug is fixed."
    assert verdicts.actions.count("halt") == 2
    assert hooks.halt is None  # the last run was not halted


def test_a_run_that_ends_by_an_exception_leaves_nothing_to_the_next(monitor: Monitor, verdicts: Verdicts) -> None:
    """A run ended by max_turns never reaches on_agent_end: the next run still starts from zero
    (its own steps, not the first run's, bring the halt) and the first run's task is closed."""
    hooks = AgentBreakerHooks(monitor)
    first = Agent("coder", model=stuck_model(), tools=[run_tests_tool()])
    with pytest.raises(MaxTurnsExceeded):
        asyncio.run(Runner.run(first, "Fix the login test.", hooks=hooks, run_config=hooks.run_config(), max_turns=3))
    assert len(monitor.status()["tasks"]) == 1  # left open: the SDK gave the hooks no end
    model = stuck_model()
    with pytest.raises(AgentHalted) as raised:
        run(Agent("coder", model=model, tools=[run_tests_tool()]), hooks, hooks.run_config())
    assert raised.value.verdict["reason"] == "repeated_step"
    assert len(model.calls) == raised.value.verdict["step"] == REPEAT_THRESHOLD
    assert monitor.status()["tasks"] == []


def test_usage_reaches_the_monitors_budget() -> None:
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 1})
    hooks = AgentBreakerHooks(monitor)
    ran: List[str] = []

    def searcher(query: str) -> str:
        """Search."""
        ran.append(query)
        return "x"

    with pytest.raises(AgentHalted) as raised:
        # 500k input tokens: more than a cent at the default price (the Sonnet 4 list rate).
        model = ScriptedModel([step("search", {"query": "x"}, 0, input_tokens=500_000), answer("never")])
        run(Agent("coder", model=model, tools=[function_tool(searcher, name_override="search")]), hooks)
    assert raised.value.verdict["reason"] == "token_spend_limit"
    assert ran == []  # halted on the first model call, before its tool ran


@pytest.mark.parametrize("tool", [slow, blocking])
def test_slow_tool(monitor: Monitor, verdicts: Verdicts, tool: FunctionTool) -> None:
    hooks = AgentBreakerHooks(monitor)
    model = ScriptedModel([step(tool.name, {"seconds": 0.3}, 0), step("search", {"query": "x"}, 1), answer("done")])
    result = run(Agent("coder", model=model, tools=[tool, search]), hooks, hooks.run_config())
    assert result.final_output == "done"
    assert tool_outputs(model)[0] == "slept 0.3"
    assert verdicts.seen == []


@pytest.mark.parametrize("with_run_config", [True, False])
def test_tool_exception_is_a_failed_call(with_run_config: bool) -> None:
    monitor, verdicts = failure_spotter()
    hooks = AgentBreakerHooks(monitor)
    model = ScriptedModel([step("run_tests", {"command": "pytest"}, 0), answer("I could not run them.")])
    config = hooks.run_config() if with_run_config else None
    recording = Recording(monitor)
    hooks._watcher.monitor = recording  # type: ignore[assignment]
    result = run(Agent("coder", model=model, tools=[run_tests_tool()]), hooks, config)
    assert result.final_output == "I could not run them."
    assert_one_failed_step(verdicts)
    # With run_config() the formatter saw the exception itself (SDKs whose formatter is told
    # of exceptions: 0.22 on); otherwise the SDK's text tells.
    (failed,) = [e for e in recording.events if e["type"] == "tool_result"]
    told = "error" in {f.name for f in dataclasses.fields(ToolErrorFormatterArgs)}
    expected = "RuntimeError: FAILED tests/" if with_run_config and told else "An error occurred while running the tool."
    assert failed["text"].startswith(expected), failed
    # The SDK's own text reached the model.
    assert tool_outputs(model)[0].startswith("An error occurred while running the tool.")


def test_successful_call_is_not_a_failure() -> None:
    monitor, verdicts = failure_spotter()
    hooks = AgentBreakerHooks(monitor)
    model = ScriptedModel([step("search", {"query": "x"}, 0), answer("ok")])
    run(Agent("coder", model=model, tools=[search]), hooks, hooks.run_config())
    assert verdicts.seen == []


def test_tool_exception_without_failure_function_ends_the_run_as_the_sdk_does(monitor: Monitor) -> None:
    hooks = AgentBreakerHooks(monitor)
    model = ScriptedModel([step("run_tests", {"command": "pytest"}, 0), answer("never")])
    with pytest.raises(Exception, match="FAILED tests/test_app.py"):
        run(Agent("coder", model=model, tools=[run_tests_tool(failure_error_function=None)]), hooks, hooks.run_config())


def test_tool_with_non_text_result(monitor: Monitor, verdicts: Verdicts) -> None:
    hooks = AgentBreakerHooks(monitor)
    with pytest.raises(AgentHalted) as raised:
        run(Agent("coder", model=stuck_model("stats", {"page": "/"}), tools=[stats]), hooks, hooks.run_config())
    assert raised.value.verdict["reason"] == "repeated_step"
    detail = raised.value.verdict["detail"]
    assert detail is not None and detail["count"] == REPEAT_THRESHOLD


def test_run_config_keeps_the_users_own_filter_and_formatter(monitor: Monitor) -> None:
    hooks = AgentBreakerHooks(monitor)
    filtered: List[int] = []

    def mine(data: CallModelData[Any]) -> ModelInputData:
        filtered.append(len(data.model_data.input))
        return data.model_data

    formatted: List[str] = []

    def formatter(args: Any) -> str:
        formatted.append(args.call_id)
        return "custom failure text"

    config = hooks.run_config(RunConfig(call_model_input_filter=mine, tool_error_formatter=formatter, workflow_name="w"))
    assert config.workflow_name == "w"
    model = ScriptedModel([step("run_tests", {"command": "pytest"}, 0), answer("ok")])
    run(Agent("coder", model=model, tools=[run_tests_tool()]), hooks, config)
    assert len(filtered) == 2
    if "tool_exception" in str(ToolErrorFormatterArgs.__dataclass_fields__["kind"].type):
        assert formatted == ["call_0"]  # openai-agents 0.22 and newer
        assert tool_outputs(model) == ["custom failure text"]
    else:  # 0.21 formats only approval rejections and unknown tools
        assert formatted == []

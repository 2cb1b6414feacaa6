"""AgentBreakerMiddleware and AgentBreakerCallbackHandler on real LangChain v1 agents
(``create_agent``) driven by langchain_core's fake chat model."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from agentbreaker import AgentHalted, Monitor
from agentbreaker.integrations.langchain import (
    AgentBreakerCallbackHandler,
    AgentBreakerMiddleware,
)
from _support import REPEAT_THRESHOLD, Recording, Verdicts, assert_one_failed_step, assert_stuck_run_verdicts, failure_spotter

USAGE = {"input_tokens": 120, "output_tokens": 12, "total_tokens": 132}
# Enough for a 1-cent cap at the Sonnet 4 list rate the Monitor's price table uses by default.
BIG_USAGE = {"input_tokens": 500_000, "output_tokens": 1_000, "total_tokens": 501_000}


class ScriptedChatModel(GenericFakeChatModel):
    """langchain_core's fake chat model, with the ``bind_tools`` that ``create_agent`` needs."""

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> "ScriptedChatModel":
        return self


def call(name: str, args: Dict[str, Any], n: int, text: str = "", usage: Dict[str, int] = USAGE) -> AIMessage:
    return AIMessage(
        content=text,
        tool_calls=[{"name": name, "args": args, "id": f"call_{n}", "type": "tool_call"}],
        usage_metadata=usage,
    )


def forever(name: str, args: Dict[str, Any]) -> Iterator[AIMessage]:
    """A stuck model: the same call, whatever it is told."""
    for n in itertools.count():
        yield call(name, args, n, "Let me run the tests again.")


def script(steps: List[AIMessage], answer: str) -> Iterator[AIMessage]:
    yield from steps
    yield AIMessage(content=answer, usage_metadata=USAGE)


def make_run_tests() -> BaseTool:
    @tool
    def run_tests(command: str) -> str:
        """Run the test suite."""
        raise ToolException("FAILED tests/test_app.py::test_login - AssertionError: 401 != 200")

    run_tests.handle_tool_error = True
    return run_tests


@tool
def search(query: str) -> str:
    """Search the code."""
    return f"3 matches for {query}"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def write_file(path: str, text: str) -> str:
    """Write a file."""
    return f"wrote {len(text)} bytes to {path}"


@tool
def slow(seconds: float) -> str:
    """A slow tool."""
    time.sleep(seconds)
    return f"slept {seconds}"


@tool
def explode(reason: str) -> str:
    """A tool with a bug."""
    raise ValueError(f"kaboom: {reason}")


@tool
def screenshot(page: str) -> List[Dict[str, Any]]:
    """A tool that answers with content blocks, not text."""
    return [{"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}]


@tool
def stats(page: str) -> Dict[str, Any]:
    """A tool that answers with a dict."""
    return {"page": page, "visits": 3, "ratio": 0.5}


HEALTHY_STEPS = [
    call("search", {"query": "login handler"}, 0, "Looking for the handler."),
    call("read_file", {"path": "app/auth.py"}, 1),
    call("write_file", {"path": "app/auth.py", "text": "fixed"}, 2),
    call("search", {"query": "test_login"}, 3),
    call("read_file", {"path": "tests/test_auth.py"}, 4),
    call("stats", {"page": "/login"}, 5),
]


def healthy_agent(middleware: Sequence[Any]) -> Any:
    model = ScriptedChatModel(messages=script(list(HEALTHY_STEPS), "The login bug is fixed."))
    return create_agent(model, [search, read_file, write_file, stats], middleware=list(middleware))


def tool_messages(out: Dict[str, Any]) -> List[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def stuck_agent(middleware: AgentBreakerMiddleware, tools: Optional[List[BaseTool]] = None, name: str = "run_tests") -> Any:
    model = ScriptedChatModel(messages=forever(name, {"command": "pytest -q"} if name == "run_tests" else {"page": "/"}))
    return create_agent(model, tools or [make_run_tests()], middleware=[middleware])


def check_halted_run(out: Dict[str, Any], verdicts: Verdicts) -> None:
    halt = assert_stuck_run_verdicts(verdicts)
    assert out["agentbreaker_verdict"] == {k: v for k, v in halt.items() if k not in ("type", "atMs")}
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert last.content.startswith("[agentbreaker] Run halted (")  # type: ignore[union-attr]
    assert halt["message"] in last.content
    results = tool_messages(out)
    assert len(results) <= REPEAT_THRESHOLD
    # The warning's nudge was appended to a tool result the model read before the halt.
    nudged = [m for m in results if "[agentbreaker]" in str(m.content)]
    assert nudged and nudged[0].status == "error"


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_stuck_agent_is_warned_then_ended(monitor: Monitor, verdicts: Verdicts, mode: str) -> None:
    agent = stuck_agent(AgentBreakerMiddleware(monitor))
    request = {"messages": [HumanMessage("Fix the login test.")]}
    if mode == "invoke":
        out = agent.invoke(request, {"recursion_limit": 200})
    else:
        out = asyncio.run(agent.ainvoke(request, {"recursion_limit": 200}))
    check_halted_run(out, verdicts)


def test_stuck_agent_raises_agent_halted_when_asked(monitor: Monitor, verdicts: Verdicts) -> None:
    agent = stuck_agent(AgentBreakerMiddleware(monitor, on_halt="raise"))
    with pytest.raises(AgentHalted) as raised:
        agent.invoke({"messages": [HumanMessage("Fix the login test.")]}, {"recursion_limit": 200})
    halt = assert_stuck_run_verdicts(verdicts)
    assert raised.value.verdict["reason"] == halt["reason"]
    assert raised.value.code == "HALTED"
    assert monitor.status()["tasks"] == []  # the run's task was closed


def test_one_middleware_serves_many_runs(monitor: Monitor) -> None:
    """Each run is its own task: a halt does not carry over to the next run, and runs at the
    same time keep their own counts."""
    middleware = AgentBreakerMiddleware(monitor)
    for _ in range(3):
        out = stuck_agent(middleware).invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 200})
        assert out["agentbreaker_verdict"]["action"] == "halt"
        assert len(tool_messages(out)) == REPEAT_THRESHOLD
    out = healthy_agent([middleware]).invoke({"messages": [HumanMessage("go")]})
    assert out["agentbreaker_verdict"] is None

    async def both() -> List[Dict[str, Any]]:
        runs = [stuck_agent(middleware).ainvoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 200}) for _ in range(2)]
        return list(await asyncio.gather(*runs))

    for out in asyncio.run(both()):
        assert out["agentbreaker_verdict"]["action"] == "halt"
        assert len(tool_messages(out)) == REPEAT_THRESHOLD
    assert monitor.status()["tasks"] == []


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_healthy_agent_is_left_alone(monitor: Monitor, verdicts: Verdicts, mode: str) -> None:
    request = {"messages": [HumanMessage("Fix the login bug.")]}
    plain = healthy_agent([]).invoke(request)
    guarded = healthy_agent([AgentBreakerMiddleware(monitor)])
    out = guarded.invoke(request) if mode == "invoke" else asyncio.run(guarded.ainvoke(request))
    assert verdicts.seen == []
    assert out["agentbreaker_verdict"] is None
    assert out["messages"][-1].content == "The login bug is fixed."
    # The same conversation as without the middleware.
    assert [m.content for m in out["messages"]] == [m.content for m in plain["messages"]]


def test_usage_reaches_the_monitors_budget() -> None:
    """The model's usage_metadata is spend: a tiny cap halts the run on a model call."""
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 1})
    model = ScriptedChatModel(messages=script([call("search", {"query": "x"}, 0, usage=BIG_USAGE)], "never"))
    agent = create_agent(model, [search], middleware=[AgentBreakerMiddleware(monitor)])
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert out["agentbreaker_verdict"]["reason"] == "token_spend_limit"
    # Halted after the first model call: its pending tool call was closed, never run.
    results = tool_messages(out)
    assert len(results) == 1 and results[0].status == "error"
    assert results[0].content.startswith("[agentbreaker] Not run")  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_model_calls_event_comes_before_its_tool_calls(mode: str) -> None:
    """The Monitor sees each model call, then its calls and their results (three at once here,
    run on threads or tasks), then the run's end."""
    three = AIMessage(
        content="Three reads.",
        tool_calls=[{"name": "read_file", "args": {"path": f"app/{n}.py"}, "id": f"call_{n}", "type": "tool_call"} for n in range(3)],
        usage_metadata=USAGE,
    )
    model = ScriptedChatModel(messages=script([three, call("search", {"query": "x"}, 3)], "done"))
    middleware = AgentBreakerMiddleware()
    recording = Recording(middleware.monitor)
    middleware._watcher.monitor = recording  # type: ignore[assignment]
    agent = create_agent(model, [read_file, search], middleware=[middleware])
    go: Any = {"messages": [HumanMessage("go")]}
    out = agent.invoke(go) if mode == "invoke" else asyncio.run(agent.ainvoke(go))
    assert out["messages"][-1].content == "done"
    seen = recording.seen
    assert seen[0] == "assistant" and sorted(seen[1:7]) == ["tool_result"] * 3 + ["tool_use"] * 3
    assert seen[7:] == ["assistant", "tool_use", "tool_result", "assistant", "heartbeat"]
    uses = [n for n, kind in enumerate(seen[1:7]) if kind == "tool_use"]
    assert uses[0] == 0  # a result never comes before a call


def test_a_halt_on_a_model_call_comes_before_the_other_middlewares_tool_hooks() -> None:
    """Spend over the cap on a model call that asks for a tool: the run ends halted at once, not
    after a human-in-the-loop middleware listed before the breaker asks to approve the call."""
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 1})
    model = ScriptedChatModel(messages=script([call("search", {"query": "x"}, 0, usage=BIG_USAGE)], "never"))
    approval = HumanInTheLoopMiddleware(interrupt_on={"search": True})
    middleware: List[Any] = [approval, AgentBreakerMiddleware(monitor)]
    agent = create_agent(model, [search], middleware=middleware, checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "1"}})
    assert "__interrupt__" not in out
    assert out["agentbreaker_verdict"]["reason"] == "token_spend_limit"
    assert out["messages"][-1].content.startswith("[agentbreaker] Run halted (")


def test_slow_tool(monitor: Monitor, verdicts: Verdicts) -> None:
    model = ScriptedChatModel(messages=script([call("slow", {"seconds": 0.3}, 0), call("search", {"query": "x"}, 1)], "done"))
    out = create_agent(model, [slow, search], middleware=[AgentBreakerMiddleware(monitor)]).invoke({"messages": [HumanMessage("go")]})
    assert out["messages"][-1].content == "done"
    assert tool_messages(out)[0].content == "slept 0.3"
    assert verdicts.seen == [] and out["agentbreaker_verdict"] is None


def test_tool_exception_is_a_failed_call_and_goes_on_as_langchain_does() -> None:
    """By default the tool's exception ends the run, exactly as without the middleware; the
    failure was recorded first."""
    def agent(middleware: List[Any]) -> Any:
        model = ScriptedChatModel(messages=script([call("explode", {"reason": "x"}, 0)], "unreachable"))
        return create_agent(model, [explode], middleware=middleware)

    with pytest.raises(ValueError, match="kaboom: x") as plain:
        agent([]).invoke({"messages": [HumanMessage("go")]})
    spotter, verdicts = failure_spotter()
    with pytest.raises(ValueError, match="kaboom: x") as guarded:
        agent([AgentBreakerMiddleware(spotter)]).invoke({"messages": [HumanMessage("go")]})
    assert type(guarded.value) is type(plain.value)
    assert_one_failed_step(verdicts)
    (task,) = spotter.status()["tasks"]
    assert task["toolCalls"] == 1 and task["unpairedResults"] == 0


def test_tool_exception_as_message_lets_the_agent_loop_and_be_halted(monitor: Monitor, verdicts: Verdicts) -> None:
    middleware = AgentBreakerMiddleware(monitor, tool_errors="message")
    model = ScriptedChatModel(messages=forever("explode", {"reason": "x"}))
    out = create_agent(model, [explode], middleware=[middleware]).invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 200})
    check_halted_run(out, verdicts)
    first = tool_messages(out)[0]
    assert first.status == "error" and first.content == "Error: ValueError: kaboom: x"


@pytest.mark.parametrize("name", ["screenshot", "stats"])
def test_tools_that_answer_with_non_text(monitor: Monitor, verdicts: Verdicts, name: str) -> None:
    """Content blocks and dicts: watched, nudged (a text block is added) and halted."""
    out = stuck_agent(AgentBreakerMiddleware(monitor), [screenshot, stats], name).invoke(
        {"messages": [HumanMessage("go")]}, {"recursion_limit": 200}
    )
    assert out["agentbreaker_verdict"]["action"] == "halt"
    assert out["agentbreaker_verdict"]["reason"] == "repeated_step"
    results = tool_messages(out)
    assert len(results) == REPEAT_THRESHOLD
    nudged = [m for m in results if "[agentbreaker]" in str(m.content)]
    assert nudged
    if name == "screenshot":
        assert isinstance(nudged[0].content, list)
        assert nudged[0].content[0]["type"] == "image"  # type: ignore[index]
        assert nudged[0].content[-1]["type"] == "text"  # type: ignore[index]


def test_middleware_takes_monitor_settings_or_a_monitor() -> None:
    middleware = AgentBreakerMiddleware(profile="coding-agent", tool_limits={"search": 2})
    assert middleware.monitor.config["toolLimits"] == {"search": 2}
    with pytest.raises(TypeError):
        AgentBreakerMiddleware(Monitor(), profile="seed")
    with pytest.raises(ValueError):
        AgentBreakerMiddleware(on_halt="explode")  # type: ignore[arg-type]


# --- the callback handler ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_callback_handler_raises_agent_halted_on_a_stuck_agent(monitor: Monitor, verdicts: Verdicts, mode: str) -> None:
    handler = AgentBreakerCallbackHandler(monitor)
    model = ScriptedChatModel(messages=forever("run_tests", {"command": "pytest -q"}))
    agent = create_agent(model, [make_run_tests()])
    config: Any = {"callbacks": [handler], "recursion_limit": 200}
    with pytest.raises(AgentHalted) as raised:
        if mode == "invoke":
            agent.invoke({"messages": [HumanMessage("go")]}, config)
        else:
            asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}, config))
    halt = assert_stuck_run_verdicts(verdicts)
    assert raised.value.verdict["reason"] == halt["reason"]
    assert handler.halt is not None and handler.warnings and handler.warnings[0]["action"] == "warn"
    handler.reset()
    assert handler.halt is None and monitor.status()["tasks"] == []


def test_callback_handler_leaves_a_healthy_agent_alone(monitor: Monitor, verdicts: Verdicts) -> None:
    handler = AgentBreakerCallbackHandler(monitor)
    out = healthy_agent([]).invoke({"messages": [HumanMessage("go")]}, {"callbacks": [handler]})
    assert out["messages"][-1].content == "The login bug is fixed."
    assert verdicts.seen == [] and handler.halt is None
    (task,) = monitor.status()["tasks"]
    assert task["toolCalls"] == len(HEALTHY_STEPS) and task["unpairedResults"] == 0
    assert task["spendCents"] > 0


def test_callback_handler_records_tool_exceptions() -> None:
    monitor, verdicts = failure_spotter()
    handler = AgentBreakerCallbackHandler(monitor)
    model = ScriptedChatModel(messages=script([call("explode", {"reason": "x"}, 0)], "unreachable"))
    with pytest.raises(ValueError, match="kaboom"):
        create_agent(model, [explode]).invoke({"messages": [HumanMessage("go")]}, {"callbacks": [handler]})
    assert_one_failed_step(verdicts)
    (task,) = monitor.status()["tasks"]
    assert task["toolCalls"] == 1 and task["unpairedResults"] == 0

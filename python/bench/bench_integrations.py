"""What each framework adapter costs per tool call (`make bench-python-integrations`), written as
target/bench/python-integrations.jsonl in tools/bench_table.py's format.

Each framework runs a healthy agent on its own test double: `--calls` model turns, each asking
for one tool call (a different search every time, so nothing is ever warned), then an answer. The
agent runs in three variants, interleaved round after round in this one process:

- alone: no adapter;
- no-op: the framework's hook points the adapter uses (the same middleware hooks, RunHooks and
  RunConfig callbacks, capability hooks, Claude hook callbacks and stream wrapper), doing nothing;
- agentbreaker: the adapter.

The figure (``ours_ns``) is the adapter's own cost: agentbreaker minus no-op, per tool call (a
tool call and the model turn that asked for it), the median over the rounds of each round's
difference. What merely having hooks costs (no-op minus alone) is the framework's overhead and is
given in the note. Times are the process's CPU time (`time.process_time_ns`), not wall time, so
other work on the machine does not count; the garbage collector is paused while a run is timed.

`--smoke` runs every variant of every framework once with 3 calls and checks the outcome
(`make test-python-integrations` runs it), timing nothing that matters.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from agentbreaker import Monitor

GOAL_NS = 20_000  # issue 17: at most 20 µs per tool call on top of the framework's own overhead
VARIANTS = ("alone", "no-op", "agentbreaker")

Run = Callable[[], Any]
"""Runs the agent once and returns its final answer."""


# The searches of a run: different words (the Monitor compares steps after normalizing, and
# `q1`, `q2` normalize alike: an agent searching them would be a loop).
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def query_of(i: int) -> str:
    return WORDS[i % len(WORDS)] + ("" if i < len(WORDS) else f" {WORDS[i // len(WORDS) % len(WORDS)]}")


def answer_of(k: int) -> str:
    return f"done after {k} searches"


# --- LangChain --------------------------------------------------------------------------------


def langchain_runs(k: int) -> Tuple[str, Dict[str, Run], Monitor]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware, hook_config
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool

    from agentbreaker.integrations.langchain import AgentBreakerMiddleware

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "Scripted":
            return self

    def script() -> Iterator[AIMessage]:
        usage: Any = {"input_tokens": 120, "output_tokens": 12, "total_tokens": 132}
        turns = [
            AIMessage(content="", tool_calls=[{"name": "search", "args": {"query": query_of(i)}, "id": f"c{i}", "type": "tool_call"}], usage_metadata=usage)
            for i in range(k)
        ]
        return itertools.cycle([*turns, AIMessage(content=answer_of(k), usage_metadata=usage)])

    @tool
    def search(query: str) -> str:
        """Search."""
        return f"results for {query}"

    class NoOp(AgentMiddleware):
        def before_agent(self, state: Any, runtime: Any) -> None:
            return None

        @hook_config(can_jump_to=["end"])
        def before_model(self, state: Any, runtime: Any) -> None:
            return None

        @hook_config(can_jump_to=["end"])
        def after_model(self, state: Any, runtime: Any) -> None:
            return None

        def after_agent(self, state: Any, runtime: Any) -> None:
            return None

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            return await handler(request)

    monitor = Monitor()
    agents = {
        "alone": create_agent(Scripted(messages=script()), [search]),
        "no-op": create_agent(Scripted(messages=script()), [search], middleware=[NoOp()]),
        "agentbreaker": create_agent(Scripted(messages=script()), [search], middleware=[AgentBreakerMiddleware(monitor)]),
    }

    def runner(agent: Any) -> Run:
        return lambda: agent.invoke({"messages": [HumanMessage("go")]})["messages"][-1].content

    return "langchain " + importlib.metadata.version("langchain"), {v: runner(a) for v, a in agents.items()}, monitor


# --- OpenAI Agents SDK --------------------------------------------------------------------------


def openai_agents_runs(k: int) -> Tuple[str, Dict[str, Run], Monitor]:
    from agents import Agent, RunConfig, RunHooks, Runner, Usage, function_tool, set_tracing_disabled
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from agentbreaker.integrations.openai_agents import AgentBreakerHooks

    set_tracing_disabled(True)

    @function_tool
    def search(query: str) -> str:
        """Search."""
        return f"results for {query}"

    def model() -> ScriptedModel:
        usage = Usage(requests=1, input_tokens=120, output_tokens=12, total_tokens=132)
        steps = [ModelStep(output=[function_call("search", {"query": query_of(i)}, call_id=f"c{i}")], usage=usage) for i in range(k)]
        return ScriptedModel([*steps, ModelStep(output=[assistant_message(answer_of(k))], usage=usage)])

    class NoOp(RunHooks[Any]):
        async def on_agent_start(self, context: Any, agent: Any) -> None:
            pass

        async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
            pass

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            pass

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            pass

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            pass

        async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
            pass

    async def passthrough(data: Any) -> Any:
        return data.model_data

    async def no_format(args: Any) -> None:
        return None

    monitor = Monitor()
    hooks = AgentBreakerHooks(monitor)
    noop_config = RunConfig(call_model_input_filter=passthrough, tool_error_formatter=no_format)
    breaker_config = hooks.run_config()

    def runner(variant: str) -> Run:
        def run() -> Any:
            agent = Agent("bench", model=model(), tools=[search])
            if variant == "alone":
                coro = Runner.run(agent, "go", max_turns=k + 2)
            elif variant == "no-op":
                coro = Runner.run(agent, "go", max_turns=k + 2, hooks=NoOp(), run_config=noop_config)
            else:
                coro = Runner.run(agent, "go", max_turns=k + 2, hooks=hooks, run_config=breaker_config)
            return asyncio.run(coro).final_output

        return run

    return "openai-agents " + importlib.metadata.version("openai-agents"), {v: runner(v) for v in VARIANTS}, monitor


# --- pydantic-ai --------------------------------------------------------------------------------


def pydantic_ai_runs(k: int) -> Tuple[str, Dict[str, Run], Monitor]:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    from agentbreaker.integrations.pydantic_ai import AgentBreakerCapability

    usage = RequestUsage(input_tokens=120, output_tokens=12)

    def model(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = sum(1 for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart))
        if done < k:
            return ModelResponse(parts=[ToolCallPart("search", {"query": query_of(done)}, tool_call_id=f"c{done}")], usage=usage)
        return ModelResponse(parts=[TextPart(answer_of(k))], usage=usage)

    class NoOp(AbstractCapability[Any]):
        async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
            return response

        async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
            return await handler(args)

        async def after_run(self, ctx: Any, *, result: Any) -> Any:
            return result

        async def on_run_error(self, ctx: Any, *, error: BaseException) -> Any:
            raise error

    monitor = Monitor()

    def agent(capabilities: List[Any]) -> Agent[None, str]:
        built: Agent[None, str] = Agent(FunctionModel(model), capabilities=capabilities)

        @built.tool_plain
        def search(query: str) -> str:
            """Search."""
            return f"results for {query}"

        return built

    agents = {"alone": agent([]), "no-op": agent([NoOp()]), "agentbreaker": agent([AgentBreakerCapability(monitor)])}

    def runner(built: Agent[None, str]) -> Run:
        return lambda: built.run_sync("go").output

    return "pydantic-ai " + importlib.metadata.version("pydantic-ai-slim"), {v: runner(a) for v, a in agents.items()}, monitor


# --- Claude Agent SDK ---------------------------------------------------------------------------


def claude_agent_sdk_runs(k: int) -> Tuple[str, Dict[str, Run], Monitor]:
    from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, ResultMessage, query

    from agentbreaker.integrations.claude_agent_sdk import hooks, track_spend

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from _fake_claude_cli import FakeClaudeCLI

    turns = [("", [("Grep", {"pattern": query_of(i)})]) for i in range(k)]

    def run_tool(name: str, args: Dict[str, Any]) -> Tuple[bool, Any]:
        return True, f"results for {args['pattern']}"

    async def nothing(data: Any, tool_use_id: Any, context: Any) -> Any:
        return {}

    async def passthrough(messages: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for message in messages:
            yield message

    monitor = Monitor()
    breaker_hooks = hooks(monitor)
    noop_hooks: Any = {event: [HookMatcher(matcher=None, hooks=[nothing])] for event in breaker_hooks}

    def runner(variant: str) -> Run:
        def run() -> Any:
            async def go() -> Any:
                cli = FakeClaudeCLI(turns, run_tool, answer_of(k))
                if variant == "alone":
                    stream = query(prompt="go", options=ClaudeAgentOptions(), transport=cli)
                elif variant == "no-op":
                    stream = passthrough(query(prompt="go", options=ClaudeAgentOptions(hooks=noop_hooks), transport=cli))
                else:
                    stream = track_spend(monitor, query(prompt="go", options=ClaudeAgentOptions(hooks=breaker_hooks), transport=cli))
                result = None
                async for message in stream:
                    if isinstance(message, ResultMessage):
                        result = message.result
                return result

            return asyncio.run(go())

        return run

    return "claude-agent-sdk " + importlib.metadata.version("claude-agent-sdk"), {v: runner(v) for v in VARIANTS}, monitor


FRAMEWORKS: Dict[str, Tuple[str, Callable[[int], Tuple[str, Dict[str, Run], Monitor]]]] = {
    "langchain": ("AgentBreakerMiddleware (create_agent)", langchain_runs),
    "openai-agents": ("AgentBreakerHooks + run_config() (Runner.run)", openai_agents_runs),
    "pydantic-ai": ("AgentBreakerCapability (Agent.run_sync)", pydantic_ai_runs),
    "claude-agent-sdk": ("hooks() + track_spend() (query)", claude_agent_sdk_runs),
}


def timed(run: Run) -> Tuple[float, Any]:
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        result = run()
        return float(time.process_time_ns() - start), result
    finally:
        gc.enable()


def measure(name: str, k: int, rounds: int, smoke: bool) -> Dict[str, Any]:
    adapter, build = FRAMEWORKS[name]
    version, runs, monitor = build(k)
    verdicts: List[Any] = []
    monitor.add_listener(verdicts.append)
    for variant in VARIANTS:  # warm-up, and the outcome every variant must give
        _, result = timed(runs[variant])
        if result != answer_of(k):
            raise SystemExit(f"{name} ({variant}): the agent answered {result!r}, not {answer_of(k)!r}")
    if monitor.status()["tasks"] and name != "claude-agent-sdk":  # a Claude session stays open
        raise SystemExit(f"{name}: a run left its task open: {monitor.status()['tasks']}")
    monitor.reset()
    times: Dict[str, List[float]] = {v: [] for v in VARIANTS}
    rng = random.Random(17)
    for _ in range(rounds):
        order = list(VARIANTS)
        rng.shuffle(order)
        for variant in order:
            elapsed, _ = timed(runs[variant])
            times[variant].append(elapsed)
        # Every round starts afresh (the Claude session's task would otherwise count the runs'
        # calls against its budgets); not timed.
        monitor.reset()
    if verdicts:
        raise SystemExit(f"{name}: the healthy agent was warned or halted: {verdicts[0]}")

    def per_call(xs: List[float]) -> float:
        return statistics.median(xs) / k

    ours = statistics.median(b - n for b, n in zip(times["agentbreaker"], times["no-op"])) / k
    hooks_cost = statistics.median(n - a for n, a in zip(times["no-op"], times["alone"])) / k
    note = (
        f"{version}, its test double, {k} tool calls a run, median of {rounds} interleaved rounds, CPU time; "
        f"framework alone {per_call(times['alone']) / 1e3:.0f} µs a call, its hooks doing nothing "
        f"{hooks_cost / 1e3:+.1f} µs, the adapter {per_call(times['agentbreaker']) / 1e3:.0f} µs in all"
    )
    return {
        "surface": "python",
        "operation": f"{name} adapter per tool call: {adapter}",
        "ours_ns": round(ours, 1),
        "peer": None,
        "peer_ns": None,
        "max": GOAL_NS,
        "note": note,
    }


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--only", choices=sorted(FRAMEWORKS), action="append")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    calls, rounds = (3, 1) if args.smoke else (args.calls, args.rounds)
    rows = []
    for name in args.only or FRAMEWORKS:
        row = measure(name, calls, rounds, args.smoke)
        rows.append(row)
        print(f"{row['operation']}: {row['ours_ns'] / 1e3:.1f} µs ({row['note']})", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


if __name__ == "__main__":
    main()

"""agentbreaker in an OpenAI Agents SDK run: `pip install 'agentbreaker[openai-agents]'`, then two
lines.

The model here is the SDK's own test double (`agents.testing.ScriptedModel`) scripted to be
stuck (the same failing test command, turn after turn), so the example runs offline; a real model
is used the same way. `run_config=hooks.run_config()` passes the nudge to the model and tells the
hooks which tool calls raised; the halt is `AgentHalted`, raised out of `Runner.run`.
"""

import asyncio

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, function_call

from agentbreaker import AgentHalted
from agentbreaker.integrations.openai_agents import AgentBreakerHooks

set_tracing_disabled(True)  # offline: no trace export


@function_tool
def run_tests(command: str) -> str:
    """Run the test suite."""
    raise RuntimeError("FAILED tests/test_login.py::test_login - AssertionError: 401 != 200")


stuck = ScriptedModel([ModelStep(output=[function_call("run_tests", {"command": "pytest -q"}, call_id=f"call_{n}")]) for n in range(30)])
agent = Agent("coder", instructions="Fix the failing test.", model=stuck, tools=[run_tests])


async def main() -> None:
    hooks = AgentBreakerHooks()
    try:
        await Runner.run(agent, "Fix the login test.", hooks=hooks, run_config=hooks.run_config(), max_turns=30)
    except AgentHalted as halted:
        print("halted:", halted.verdict["reason"], "at step", halted.verdict["step"])
        print("why:", halted)
    for call in stuck.calls:
        for item in call.input:
            if isinstance(item, dict) and "[agentbreaker]" in str(item.get("content")):
                print("the model read:", item["content"])
    print("model calls:", len(stuck.calls))


asyncio.run(main())

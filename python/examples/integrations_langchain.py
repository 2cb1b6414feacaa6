"""agentbreaker in a LangChain v1 agent: `pip install 'agentbreaker[langchain]'`, then two lines.

The model here is langchain_core's fake chat model scripted to be stuck (it re-runs the same
failing test command whatever it is told), so the example runs offline; use a real one the same
way (`create_agent("anthropic:claude-sonnet-4-5", ...)`). The middleware appends a nudge to the
third identical result and ends the run at the fifth, with a last message that says why.
"""

import itertools
from typing import Any, Iterator, Sequence

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException, tool

from agentbreaker.integrations.langchain import AgentBreakerMiddleware


class StuckModel(GenericFakeChatModel):
    """Offline stand-in for a chat model: scripted answers, tools accepted and ignored."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "StuckModel":
        return self


def same_call_forever() -> Iterator[AIMessage]:
    for n in itertools.count():
        call = {"name": "run_tests", "args": {"command": "pytest -q"}, "id": f"call_{n}", "type": "tool_call"}
        yield AIMessage(content="Let me run the tests again.", tool_calls=[call])


def make_run_tests() -> BaseTool:
    @tool
    def run_tests(command: str) -> str:
        """Run the test suite."""
        raise ToolException("FAILED tests/test_login.py::test_login - AssertionError: 401 != 200")

    run_tests.handle_tool_error = True  # the model reads the failure
    return run_tests


model = StuckModel(messages=same_call_forever())
tools = [make_run_tests()]

agent = create_agent(model, tools, middleware=[AgentBreakerMiddleware()])
out = agent.invoke({"messages": [HumanMessage("Fix the login test.")]}, {"recursion_limit": 100})

for message in out["messages"]:
    if isinstance(message, ToolMessage) and "[agentbreaker]" in message.text:
        print("the model read:", message.text.split("\n\n")[-1])
print("verdict:", out["agentbreaker_verdict"]["reason"], "at step", out["agentbreaker_verdict"]["step"])
print("last message:", out["messages"][-1].text)

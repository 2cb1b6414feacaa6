"""agentbreaker in a pydantic-ai agent: `pip install 'agentbreaker[pydantic-ai]'`, then two lines.

The model here is pydantic-ai's own test double (`FunctionModel`) scripted to be stuck (the same
failing test command, request after request), so the example runs offline; a real model is used
the same way. The nudge goes into the model's next request; the halt cancels the run
(`RunCancelled`), and the capability says why.
"""

import itertools
from typing import List

from pydantic_ai import Agent
from pydantic_ai.exceptions import RunCancelled, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentbreaker.integrations.pydantic_ai import AgentBreakerCapability

calls = itertools.count()


def stuck(messages: List[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart("run_tests", {"command": "pytest -q"}, tool_call_id=f"call_{next(calls)}")])


breaker = AgentBreakerCapability()
agent = Agent(FunctionModel(stuck), capabilities=[breaker])


@agent.tool_plain
def run_tests(command: str) -> str:
    """Run the test suite."""
    raise ToolFailed("FAILED tests/test_login.py::test_login - AssertionError: 401 != 200")


try:
    agent.run_sync("Fix the login test.")
except RunCancelled as cancelled:
    verdict = breaker.verdict(cancelled.run_id)
    assert verdict is not None
    print("cancelled:", verdict["reason"], "at step", verdict["step"])
    print("why:", verdict["message"])
    for message in cancelled.all_messages():
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and "[agentbreaker]" in str(part.content):
                    print("the model read:", part.content)

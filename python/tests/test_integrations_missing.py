"""The framework adapters in the core environment, where no framework is installed: importing one
raises an ImportError that names the extra to install (their own tests run in
`make test-python-integrations`)."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

ADAPTERS = [
    ("langchain", "langchain", "langchain"),
    ("openai_agents", "agents", "openai-agents"),
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("claude_agent_sdk", "claude_agent_sdk", "claude-agent-sdk"),
]


@pytest.mark.parametrize("adapter,framework,extra", ADAPTERS)
def test_adapter_without_its_framework_names_the_extra(adapter: str, framework: str, extra: str) -> None:
    if importlib.util.find_spec(framework) is not None:
        pytest.skip(f"{framework} is installed here")
    with pytest.raises(ImportError) as raised:
        importlib.import_module(f"agentbreaker.integrations.{adapter}")
    assert f"pip install 'agentbreaker[{extra}]'" in str(raised.value)
    assert str(raised.value).startswith(f"agentbreaker.integrations.{adapter} needs ")


def test_import_agentbreaker_imports_no_framework() -> None:
    import agentbreaker.integrations  # noqa: F401

    assert not {"langchain", "langgraph", "agents", "pydantic_ai", "claude_agent_sdk"} & set(sys.modules)

"""agentbreaker inside the agent frameworks: one thin adapter per framework onto `Monitor`.

Each module imports its framework when it is imported itself, never before; ``import
agentbreaker`` imports none of them. Install a framework with its extra::

    pip install 'agentbreaker[langchain]'          # agentbreaker.integrations.langchain
    pip install 'agentbreaker[openai-agents]'      # agentbreaker.integrations.openai_agents
    pip install 'agentbreaker[pydantic-ai]'        # agentbreaker.integrations.pydantic_ai
    pip install 'agentbreaker[claude-agent-sdk]'   # agentbreaker.integrations.claude_agent_sdk
    pip install 'agentbreaker[otel]'               # agentbreaker.integrations.otel

LangChain and pydantic-ai need Python 3.11 or newer (the wheel itself supports 3.9); the OpenAI
Agents SDK and the Claude Agent SDK need 3.10. What each adapter emits, how a halt reaches you and
what you see: docs/integrations.md.
"""

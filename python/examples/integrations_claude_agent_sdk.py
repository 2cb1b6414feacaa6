"""agentbreaker in a Claude Agent SDK session: `pip install 'agentbreaker[claude-agent-sdk]'`,
then two lines (and `track_spend` for spend caps).

The SDK runs the Claude Code CLI; here a scripted stand-in for it (`_fake_claude_cli.py`, a
`Transport`) plays a stuck session (the same failing `pytest -q`, turn after turn) so the example
runs offline: drop `transport=` to use the real CLI. The hooks add the nudge to Claude's context
at the third identical failure and stop the session at the fifth.
"""

import asyncio
import itertools

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

from agentbreaker import Monitor
from agentbreaker.integrations.claude_agent_sdk import hooks, track_spend
from _fake_claude_cli import FakeClaudeCLI

cli = FakeClaudeCLI(
    itertools.repeat(("Running the tests again.", [("Bash", {"command": "pytest -q"})])),
    lambda name, args: (False, "Exit code 1\nFAILED tests/test_login.py::test_login - AssertionError: 401 != 200"),
)


async def main() -> None:
    monitor = Monitor(profile="coding-agent")
    options = ClaudeAgentOptions(hooks=hooks(monitor))
    async for message in track_spend(monitor, query(prompt="Fix the login test.", options=options, transport=cli)):
        if isinstance(message, ResultMessage):
            print("session ended:", message.result)
            print("cost:", message.total_cost_usd, "USD after", message.num_turns, "turns")
    print("Claude read:", cli.context[0])


asyncio.run(main())

"""Watching an agent with a Monitor: the README's Python example, runnable as is.

A fake agent re-runs the same failing command step after step. Every event it emits goes to the
Monitor, which answers with a verdict: `warn` comes with a nudge to pass on to the model, `halt`
stops the agent (here by raising `AgentHalted`).
"""

from typing import List

from agentbreaker import AgentHalted, Monitor
from agentbreaker.types import MonitorEvent


def agent_step(step: int) -> List[MonitorEvent]:
    """One model call and its tool call: the same failing test run every time."""
    call = {"type": "tool_use", "name": "Bash", "id": f"t{step}", "input": {"command": "pytest -q"}}
    return [
        {"type": "assistant", "text": "Let me run the tests again."},
        call,
        {"type": "tool_result", "id": f"t{step}", "ok": False, "text": "1 failed, 40 passed"},
    ]


monitor = Monitor(profile="coding-agent", tool_limits={"web_fetch": 20})
try:
    for step in range(100):  # an agent that re-runs the same failing command
        for event in agent_step(step):  # its assistant, tool_use and tool_result events
            verdict = monitor.observe(event)
            if verdict["action"] == "warn":
                print("nudge for the model:", verdict["nudge"])
            elif verdict["action"] == "halt":
                raise AgentHalted(verdict)
except AgentHalted as halted:
    print(f"halted at step {halted.verdict['step']} ({halted.verdict['reason']}): {halted}")

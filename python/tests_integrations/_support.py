"""Shared pieces of the framework adapters' tests (run by `make test-python-integrations` in their
own virtual environment: the frameworks are not installed with the core wheel's tests).

No test uses the network or an API key: every agent runs against its framework's own test
double, scripted to loop (a stuck agent) or to work and finish (a healthy agent).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

from agentbreaker import Monitor

# Never let a developer's key make a test talk to a provider (the OpenAI Agents SDK exports
# traces when one is set).
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(_key, None)
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

# The coding-agent profile: the same step 5 times halts (repeated_step), and so do 5 failed steps
# in a row with at most 2 distinct errors (fail_streak); warnings come 2 steps earlier.
REPEAT_THRESHOLD = 5
WARN_AT = REPEAT_THRESHOLD - 2


class Verdicts:
    """A Monitor listener that keeps the warn and halt verdicts."""

    def __init__(self, monitor: Monitor) -> None:
        self.seen: List[Dict[str, Any]] = []
        monitor.add_listener(self)

    def __call__(self, event: Any) -> None:
        if event.get("type") == "verdict":
            self.seen.append(dict(event))

    @property
    def actions(self) -> List[str]:
        return [v["action"] for v in self.seen]


def assert_stuck_run_verdicts(verdicts: Verdicts) -> Dict[str, Any]:
    """A stuck agent: warned first, then halted (once), for a reason that names the loop."""
    assert verdicts.actions[0] == "warn", verdicts.seen
    assert verdicts.actions.count("halt") == 1, verdicts.seen
    halt = next(v for v in verdicts.seen if v["action"] == "halt")
    assert halt["reason"] in ("repeated_step", "fail_streak"), halt
    assert halt["detail"]["count"] <= halt["detail"]["threshold"] == REPEAT_THRESHOLD
    assert halt["step"] <= REPEAT_THRESHOLD
    return halt


def failure_spotter() -> "tuple[Monitor, Verdicts]":
    """A Monitor that warns on the first failed step (a fail streak of 3 with the warning 2 steps
    early): the way to see that an adapter reported a call as failed (``ok: False``)."""
    monitor = Monitor(stagnation={"failStreakThreshold": 3})
    return monitor, Verdicts(monitor)


def assert_one_failed_step(verdicts: Verdicts) -> None:
    assert [(v["action"], v["reason"]) for v in verdicts.seen] == [("warn", "fail_streak")], verdicts.seen


class Recording:
    """A Monitor (in place of an adapter's own: ``adapter._watcher.monitor``) that also writes down the type of every event it is given."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.seen: List[str] = []
        self.events: List[Dict[str, Any]] = []

    def observe(self, event: Dict[str, Any]) -> Any:
        self.seen.append(event["type"])
        self.events.append(dict(event))
        return self.monitor.observe(event)

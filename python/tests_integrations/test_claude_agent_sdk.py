"""hooks() and track_spend() on real Claude Agent SDK sessions (``query``), the CLI's side played
by a scripted Transport (python/examples/_fake_claude_cli.py)."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ResultMessage, query

from agentbreaker import Monitor
from agentbreaker.integrations.claude_agent_sdk import SpendTracker, hooks, track_spend
from _support import REPEAT_THRESHOLD, Verdicts, assert_one_failed_step, assert_stuck_run_verdicts, failure_spotter

from _fake_claude_cli import FakeClaudeCLI, Turn

BASH_FAILS = "Exit code 1\nFAILED tests/test_app.py::test_login - AssertionError: 401 != 200"


def run_tool(name: str, args: Dict[str, Any]) -> Tuple[bool, Any]:
    if name == "Bash" and args.get("command") == "pytest -q":
        return False, BASH_FAILS
    if name == "Bash" and args.get("command", "").startswith("sleep"):
        time.sleep(0.3)
        return True, {"stdout": "", "stderr": "", "interrupted": False}
    if name == "Screenshot":
        return True, [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    if name == "Read":
        return True, {"type": "text", "file": {"filePath": args["file_path"], "content": "def login(): ...", "numLines": 1}}
    return True, {"stdout": f"ran {args}", "stderr": "", "interrupted": False}


def stuck() -> Iterator[Turn]:
    while True:
        yield ("Running the tests again.", [("Bash", {"command": "pytest -q"})])


HEALTHY: List[Turn] = [
    ("Looking for the handler.", [("Grep", {"pattern": "def login"})]),
    ("", [("Read", {"file_path": "app/auth.py"})]),
    ("", [("Edit", {"file_path": "app/auth.py", "old_string": "a", "new_string": "b"})]),
    ("", [("Bash", {"command": "pytest -q tests/test_auth.py"})]),
    ("", [("Read", {"file_path": "tests/test_auth.py"})]),
    ("", [("Grep", {"pattern": "401"})]),
]


def session(cli: FakeClaudeCLI, monitor: Optional[Monitor], spend: bool = True) -> List[Any]:
    options = ClaudeAgentOptions(hooks=hooks(monitor) if monitor is not None else None)

    async def go() -> List[Any]:
        stream = query(prompt="Fix the login test.", options=options, transport=cli)
        if monitor is not None and spend:
            stream = track_spend(monitor, stream)
        return [message async for message in stream]

    return asyncio.run(go())


def test_stuck_session_is_warned_then_stopped(monitor: Monitor, verdicts: Verdicts) -> None:
    cli = FakeClaudeCLI(stuck(), run_tool)
    messages = session(cli, monitor)
    halt = assert_stuck_run_verdicts(verdicts)
    # The CLI ran the call until the halt and no further; the session stopped with the reason.
    assert len(cli.ran) <= REPEAT_THRESHOLD
    assert cli.stopped is not None and cli.stopped.startswith("[agentbreaker] Run halted (")
    assert halt["message"] in cli.stopped
    result = messages[-1]
    assert isinstance(result, ResultMessage) and result.result == cli.stopped
    # Claude read the warning's nudge before the halt.
    assert any(c.startswith("[agentbreaker] ") for c in cli.context)
    # Every answer was one Claude Code accepts.
    stops = [a for _, a in cli.answers if a.get("continue") is False]
    assert stops and all(a["stopReason"] for a in stops)


def test_halted_session_denies_every_later_call(monitor: Monitor, verdicts: Verdicts) -> None:
    """A CLI that goes on after ``continue: false`` (or parallel calls of the same turn): each
    later call is denied with the reason."""
    turns = [("again", [("Bash", {"command": "pytest -q"})])] * REPEAT_THRESHOLD + [("more", [("Bash", {"command": "ls"}), ("Read", {"file_path": "x"})])]
    cli = FakeClaudeCLI(turns, run_tool)
    cli_stop = cli._hooks

    async def ignore_stop(event: str, payload: Dict[str, Any], tool_use_id: Optional[str]) -> Any:
        async for request in cli_stop(event, payload, tool_use_id):
            yield request
        cli.stopped = None  # this CLI does not stop

    cli._hooks = ignore_stop  # type: ignore[method-assign]
    session(cli, monitor)
    pre = [a for event, a in cli.answers if event == "PreToolUse"]
    assert [a.get("hookSpecificOutput", {}).get("permissionDecision") for a in pre[-2:]] == ["deny", "deny"]
    assert ("Bash", {"command": "ls"}) not in cli.ran


def test_healthy_session_is_left_alone(monitor: Monitor, verdicts: Verdicts) -> None:
    plain = FakeClaudeCLI(list(HEALTHY), run_tool, "The login bug is fixed.")
    plain_messages = session(plain, None)
    cli = FakeClaudeCLI(list(HEALTHY), run_tool, "The login bug is fixed.")
    messages = session(cli, monitor)
    assert verdicts.seen == []
    assert cli.stopped is None and cli.context == []
    assert all(answer == {} for _, answer in cli.answers)
    assert len(cli.answers) == 2 * len(HEALTHY) + 1  # Pre and Post per call, then Stop
    assert [type(m).__name__ for m in messages] == [type(m).__name__ for m in plain_messages]
    assert messages[-1].result == "The login bug is fixed."


def test_spend_is_fed_from_the_message_stream(monitor: Monitor) -> None:
    cli = FakeClaudeCLI(list(HEALTHY), run_tool)
    messages = session(cli, monitor)
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    (task,) = monitor.status()["tasks"]
    # The result's total_cost_usd is what the query cost: the Monitor's spend ends there.
    assert task["spendCents"] == pytest.approx(result.total_cost_usd * 100)  # type: ignore[operator]


def test_spend_tracker_counts_a_message_id_once() -> None:
    monitor = Monitor()
    tracker = SpendTracker(monitor)
    usage = {"input_tokens": 1000, "output_tokens": 10}
    for output in (10, 10, 50):  # one response as three messages; the last has the real output
        tracker.observe(AssistantMessage(content=[], model="claude-sonnet-4-5", usage={**usage, "output_tokens": output}, message_id="msg_1"))
    once = monitor.status()["tasks"][0]["spendCents"]
    other = Monitor()
    SpendTracker(other).observe(AssistantMessage(content=[], model="claude-sonnet-4-5", usage={**usage, "output_tokens": 50}, message_id="m"))
    assert once == pytest.approx(other.status()["tasks"][0]["spendCents"])


def test_spend_cap_halts_the_session() -> None:
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 2})
    verdicts = Verdicts(monitor)
    cli = FakeClaudeCLI(list(HEALTHY), run_tool)
    session(cli, monitor)
    assert verdicts.actions[-1] == "halt" and verdicts.seen[-1]["reason"] == "token_spend_limit"
    # The next tool call after the cap was denied and the session stopped.
    assert cli.stopped is not None and len(cli.ran) < len(HEALTHY)


def test_interrupt_is_awaited_once_on_a_spend_halt() -> None:
    monitor = Monitor(budget={"maxTokenSpendCentsPerTask": 2})
    calls: List[int] = []

    async def interrupt() -> None:
        calls.append(1)

    async def go() -> None:
        cli = FakeClaudeCLI(list(HEALTHY), run_tool)
        stream = query(prompt="go", options=ClaudeAgentOptions(hooks=hooks(monitor)), transport=cli)
        async for _ in track_spend(monitor, stream, interrupt=interrupt):
            pass

    asyncio.run(go())
    assert calls == [1]


def test_slow_tool(monitor: Monitor, verdicts: Verdicts) -> None:
    cli = FakeClaudeCLI([("", [("Bash", {"command": "sleep 0.3"})]), ("", [("Grep", {"pattern": "x"})])], run_tool)
    messages = session(cli, monitor)
    assert verdicts.seen == [] and messages[-1].result == "Done."


def test_tool_failure_is_a_failed_call() -> None:
    monitor, verdicts = failure_spotter()
    cli = FakeClaudeCLI([("", [("Bash", {"command": "pytest -q"})])], run_tool)
    session(cli, monitor)
    assert [event for event, _ in cli.answers] == ["PreToolUse", "PostToolUseFailure", "Stop"]
    assert_one_failed_step(verdicts)
    assert monitor.status()["tasks"][0]["unpairedResults"] == 0


@pytest.mark.parametrize("tool", ["Screenshot", "Read"])
def test_tool_with_non_text_result(monitor: Monitor, verdicts: Verdicts, tool: str) -> None:
    args = {"page": "/"} if tool == "Screenshot" else {"file_path": "app/auth.py"}
    cli = FakeClaudeCLI(itertools.repeat(("", [(tool, args)])), run_tool)
    session(cli, monitor)
    halt = verdicts.seen[-1]
    assert halt["action"] == "halt" and halt["reason"] == "repeated_step"
    assert cli.stopped is not None


def test_subagent_calls_count_for_their_own_task(monitor: Monitor) -> None:
    callbacks = hooks(monitor)
    pre = callbacks["PreToolUse"][0].hooks[0]
    post = callbacks["PostToolUseFailure"][0].hooks[0]
    stop = callbacks["SubagentStop"][0].hooks[0]
    base = {"session_id": "s", "transcript_path": "/t", "cwd": "/", "agent_id": "agent-7", "agent_type": "explore"}

    async def go() -> List[Any]:
        answers = []
        for n in range(REPEAT_THRESHOLD):
            call = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": f"t{n}"}
            answers.append(await pre(call, f"t{n}", {"signal": None}))  # type: ignore[arg-type]
            failure = {**call, "hook_event_name": "PostToolUseFailure", "error": "make: *** [all] Error 2"}
            answers.append(await post(failure, f"t{n}", {"signal": None}))  # type: ignore[arg-type]
        tasks = [t["taskId"] for t in monitor.status()["tasks"]]
        await stop({**base, "hook_event_name": "SubagentStop", "stop_hook_active": False, "agent_transcript_path": "/a"}, None, {"signal": None})  # type: ignore[arg-type]
        return [answers, tasks]

    answers, tasks = asyncio.run(go())
    assert tasks == ["agent-7"]
    assert answers[-1]["continue_"] is False
    assert monitor.status()["tasks"] == []  # SubagentStop closed it


def result_message(session_id: str, total_cost_usd: float) -> ResultMessage:
    return ResultMessage(
        subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=1,
        session_id=session_id, total_cost_usd=total_cost_usd,
    )


def test_spend_of_a_session_with_several_queries_is_counted_once() -> None:
    """A ResultMessage's total_cost_usd is the session's running total: with a tracker per query
    (``track_spend(monitor, client.receive_response())``) each query adds what it cost."""
    monitor = Monitor()

    def spent() -> float:
        return float(monitor.status()["tasks"][0]["spendCents"])

    SpendTracker(monitor).observe(result_message("s1", 0.05))
    assert spent() == pytest.approx(5.0)
    SpendTracker(monitor).observe(result_message("s1", 0.10))
    assert spent() == pytest.approx(10.0)
    SpendTracker(monitor).observe(result_message("s2", 0.02))  # another session: its own total
    assert spent() == pytest.approx(12.0)
    SpendTracker(monitor).observe(result_message("s1", 0.01))  # s1's totals were reset (/clear)
    assert spent() == pytest.approx(13.0)


def test_a_reset_monitor_lifts_the_halt_of_the_session(monitor: Monitor, verdicts: Verdicts) -> None:
    """The hooks deny every call of a halted session until ``monitor.reset()``, not after it."""
    matchers = hooks(monitor)
    callbacks: List[Any] = [matchers[event][0].hooks[0] for event in ("PreToolUse", "PostToolUseFailure", "UserPromptSubmit")]
    pre, failed, prompt = callbacks
    context: Any = {"signal": None}

    def call(n: int, command: str) -> List[Any]:
        data: Any = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": f"t{n}"}
        before = asyncio.run(pre(data, f"t{n}", context))
        after = asyncio.run(failed({**data, "hook_event_name": "PostToolUseFailure", "error": BASH_FAILS}, f"t{n}", context))
        return [before, after]

    answers = [answer for n in range(REPEAT_THRESHOLD) for answer in call(n, "pytest -q")]
    assert answers[-1].get("continue_") is False and verdicts.actions[-1] == "halt"
    assert asyncio.run(prompt({"hook_event_name": "UserPromptSubmit", "prompt": "go on"}, None, context)) != {}
    monitor.reset()
    assert asyncio.run(prompt({"hook_event_name": "UserPromptSubmit", "prompt": "go on"}, None, context)) == {}
    data: Any = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "t99"}
    assert asyncio.run(pre(data, "t99", context)) == {}

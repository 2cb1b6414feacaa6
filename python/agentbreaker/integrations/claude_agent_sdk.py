"""agentbreaker for the Claude Agent SDK (``claude-agent-sdk``).

Two lines guard a session::

    monitor = Monitor()
    options = ClaudeAgentOptions(hooks=hooks(monitor))

`hooks` returns the ``hooks=`` dict of ``HookMatcher``s. The SDK calls them in-process for every
tool call of Claude Code: ``PreToolUse`` gives ``tool_use``, ``PostToolUse`` and
``PostToolUseFailure`` give ``tool_result`` (ok on success only, as Claude Code fires them),
``Stop`` gives ``assistant`` (the last answer), ``SubagentStop`` ends the subagent's task. A
subagent's calls count for its own task (``agent_id``), the rest for the Monitor's current task.

The answers are the ones ``agentbreaker hook`` gives Claude Code (docs/hooks.md): a warning adds
the nudge as ``additionalContext`` (Claude reads it) and the message as ``systemMessage`` (you
see it); a halt denies the call with the reason (``permissionDecision: "deny"``) and stops the
session (``continue_: False`` with ``stopReason``); every later call of a halted task is denied.
``Stop`` is never blocked.

`track_spend` (or `SpendTracker`) feeds the SDK's message stream into the Monitor's spend: each
``AssistantMessage``'s ``usage`` once per message id, priced by the Monitor's table as it comes,
then the ``ResultMessage``'s ``total_cost_usd`` (the CLI's own figure for the query) corrects the
total. Hooks carry no token counts; without the tracker spend caps see nothing.

Needs ``pip install 'agentbreaker[claude-agent-sdk]'`` (Python 3.10 or newer).
"""

from __future__ import annotations

import math
import re
import weakref
from collections import OrderedDict
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional, cast

try:
    from claude_agent_sdk import (
        AssistantMessage,
        HookContext,
        HookInput,
        HookJSONOutput,
        HookMatcher,
        ResultMessage,
    )
    from claude_agent_sdk.types import HookEvent
except ImportError as _error:  # pragma: no cover - the message is tested in a venv without it
    from ._common import missing_framework

    raise missing_framework("claude_agent_sdk", "claude-agent-sdk", "the Claude Agent SDK", _error, (3, 10)) from _error

from .._native import Monitor
from ..types import Verdict
from ._common import TAG, Run, Watcher, halt_context, halt_text, nudge_text, skipped_text, to_text, usage_event

__all__ = ["SpendTracker", "hooks", "track_spend"]

HookCallback = Callable[[HookInput, Optional[str], HookContext], Awaitable[HookJSONOutput]]

_EXIT_CODE = re.compile(r"^Exit code \d+$")


def _failure_text(error: str) -> str:
    """Claude Code's failure text starts with ``Exit code N`` and then the output: the Monitor
    tells errors apart by their first line, so the exit code goes to the end."""
    first, _, rest = error.partition("\n")
    if rest.strip() and _EXIT_CODE.match(first.strip()):
        return f"{rest}\n{first}"
    return error


class _Hooks:
    """The callbacks of `hooks`, over one watcher."""

    def __init__(self, monitor: Monitor, task_id: Optional[str]) -> None:
        self.watcher = Watcher(monitor, "claude")
        self.task = task_id or ""

    def _run(self, data: Any) -> Run:
        agent = data.get("agent_id")
        return self.watcher.run(agent if isinstance(agent, str) and agent else self.task)

    async def pre_tool_use(self, data: HookInput, tool_use_id: Optional[str], context: HookContext) -> HookJSONOutput:
        raw = cast(Dict[str, Any], data)
        run = self._run(raw)
        event: Dict[str, Any] = {"type": "tool_use", "name": raw.get("tool_name") or "?", "input": raw.get("tool_input")}
        call_id = raw.get("tool_use_id") or tool_use_id
        if call_id:
            event["id"] = call_id
        verdict = self.watcher.observe(run, event)
        if run.halt is not None:
            return cast(
                HookJSONOutput,
                {
                    "continue_": False,
                    "stopReason": halt_text(run.halt),
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": skipped_text(run.halt),
                    },
                },
            )
        if verdict["action"] == "warn":
            self.watcher.take_nudges(run)
            return cast(
                HookJSONOutput,
                {
                    "systemMessage": f"{TAG} {verdict['message']}",
                    "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": nudge_text(verdict)},
                },
            )
        return {}

    def _post(self, raw: Dict[str, Any], tool_use_id: Optional[str], ok: bool, text: str, hook: str) -> HookJSONOutput:
        run = self._run(raw)
        event: Dict[str, Any] = {"type": "tool_result", "ok": ok, "text": text, "name": raw.get("tool_name") or "?"}
        call_id = raw.get("tool_use_id") or tool_use_id
        if call_id:
            event["id"] = call_id
        verdict = self.watcher.observe(run, event)
        if run.halt is not None:
            return cast(
                HookJSONOutput,
                {
                    "continue_": False,
                    "stopReason": halt_text(run.halt),
                    "hookSpecificOutput": {"hookEventName": hook, "additionalContext": halt_context(run.halt)},
                },
            )
        if verdict["action"] == "warn":
            self.watcher.take_nudges(run)
            return cast(
                HookJSONOutput,
                {
                    "systemMessage": f"{TAG} {verdict['message']}",
                    "hookSpecificOutput": {"hookEventName": hook, "additionalContext": nudge_text(verdict)},
                },
            )
        return {}

    async def post_tool_use(self, data: HookInput, tool_use_id: Optional[str], context: HookContext) -> HookJSONOutput:
        raw = cast(Dict[str, Any], data)
        return self._post(raw, tool_use_id, True, to_text(raw.get("tool_response")), "PostToolUse")

    async def post_tool_use_failure(self, data: HookInput, tool_use_id: Optional[str], context: HookContext) -> HookJSONOutput:
        raw = cast(Dict[str, Any], data)
        error = raw.get("error")
        text = _failure_text(error) if isinstance(error, str) else to_text(error)
        return self._post(raw, tool_use_id, False, text, "PostToolUseFailure")

    async def stop(self, data: HookInput, tool_use_id: Optional[str], context: HookContext) -> HookJSONOutput:
        """The end of a turn: its last answer closes the step. Never blocked: a halted session
        is only told to stay stopped."""
        raw = cast(Dict[str, Any], data)
        run = self.watcher.run(self.task)
        text = raw.get("last_assistant_message")
        if isinstance(text, str):
            self.watcher.observe(run, {"type": "assistant", "text": text})
        else:
            self.watcher.observe(run, {"type": "alive"})
        if run.halt is not None:
            return cast(HookJSONOutput, {"continue_": False, "stopReason": halt_text(run.halt)})
        return {}

    async def subagent_stop(self, data: HookInput, tool_use_id: Optional[str], context: HookContext) -> HookJSONOutput:
        agent = cast(Dict[str, Any], data).get("agent_id")
        if isinstance(agent, str) and agent:
            self.watcher.close(agent)
        return {}

    async def user_prompt_submit(self, data: HookInput, tool_use_id: Optional[str], context: HookContext) -> HookJSONOutput:
        """A new prompt in a halted session: Claude and you are told its calls will be denied."""
        run = self.watcher.run(self.task)
        if run.halt is not None:
            self.watcher.observe(run, {"type": "alive"})  # still halted, or reset since?
        halt = run.halt
        if halt is None:
            return {}
        return cast(
            HookJSONOutput,
            {
                "systemMessage": halt_text(halt),
                "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": skipped_text(halt)},
            },
        )


def hooks(monitor: Monitor, *, task_id: Optional[str] = None, timeout: Optional[float] = None) -> Dict[HookEvent, List[HookMatcher]]:
    """The ``hooks=`` of ``ClaudeAgentOptions`` that feed every tool call to ``monitor``.

    Args:
        monitor: the Monitor (share it with `track_spend` so spend caps apply).
        task_id: the session's task in the Monitor (default: the Monitor's current task);
            subagents' calls count for their own ``agent_id``.
        timeout: the matchers' timeout in seconds (the SDK's default: 60).

    Merge them with hooks of your own by adding the lists:
    ``{**mine, "PreToolUse": mine["PreToolUse"] + ours["PreToolUse"]}``.
    """
    callbacks = _Hooks(monitor, task_id)

    def matcher(callback: HookCallback) -> List[HookMatcher]:
        return [HookMatcher(matcher=None, hooks=[callback], timeout=timeout)]

    return {
        "PreToolUse": matcher(callbacks.pre_tool_use),
        "PostToolUse": matcher(callbacks.post_tool_use),
        "PostToolUseFailure": matcher(callbacks.post_tool_use_failure),
        "Stop": matcher(callbacks.stop),
        "SubagentStop": matcher(callbacks.subagent_stop),
        "UserPromptSubmit": matcher(callbacks.user_prompt_submit),
    }


# The last running total (`total_cost_usd`) of each session, per Monitor. A ResultMessage gives
# what its whole session has cost so far, and a `ClaudeSDKClient` session carries many queries,
# each with a `track_spend` (a tracker) of its own: what a query cost is the total past the last.
_SESSION_TOTALS: "weakref.WeakKeyDictionary[Monitor, OrderedDict[str, float]]" = weakref.WeakKeyDictionary()
_KEEP_SESSIONS = 1024  # per Monitor

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
# How many message ids the tracker remembers (one response's messages come together).
_KEEP_IDS = 64


class SpendTracker:
    """Feeds the SDK's messages into ``monitor``'s spend (call ``observe`` with each message).

    An ``AssistantMessage``'s ``usage`` counts once per ``message_id`` (a response with several
    content blocks comes as several messages repeating it; a later figure that is larger counts
    the difference), priced by the Monitor's price table for ``model``. The ``ResultMessage``
    ends a query: its ``total_cost_usd`` is the session's running total, so the query cost what
    it adds to the session's last one (remembered across trackers, per Monitor and session);
    the part of that the table did not already count is added as ``costCents``.

    ``halt`` is the halt verdict once spend has halted the task: the next tool call is then
    denied by `hooks`, which stops the session.
    """

    def __init__(self, monitor: Monitor, *, task_id: Optional[str] = None) -> None:
        self._watcher = Watcher(monitor, "claude")
        self._run = self._watcher.run(task_id or "")
        self._seen: "OrderedDict[str, Dict[str, int]]" = OrderedDict()
        # The task's spend when the current query's first message came (None between queries).
        self._base: Optional[float] = None

    @property
    def monitor(self) -> Monitor:
        return self._watcher.monitor

    @property
    def halt(self) -> Optional[Verdict]:
        return self._run.halt

    def _spent(self) -> float:
        status = self.monitor.status()
        task = self._run.task or (status["stack"][-1] if status["stack"] else "session")
        for entry in status["tasks"]:
            if entry["taskId"] == task:
                return float(entry["spendCents"])
        return 0.0

    def observe(self, message: Any) -> Optional[Verdict]:
        """Feed one message; the verdict of the spend it added (None if it added none)."""
        if isinstance(message, AssistantMessage):
            return self._assistant(message)
        if isinstance(message, ResultMessage):
            return self._result(message)
        return None

    def _assistant(self, message: AssistantMessage) -> Optional[Verdict]:
        usage = message.usage
        if not isinstance(usage, dict):
            return None
        figures = {key: int(usage.get(key) or 0) for key in _USAGE_KEYS}
        key = message.message_id or getattr(message, "uuid", None) or str(id(message))
        before = self._seen.get(key)
        if before is not None:
            delta = {k: max(0, figures[k] - before[k]) for k in _USAGE_KEYS}
            self._seen[key] = {k: max(figures[k], before[k]) for k in _USAGE_KEYS}
        else:
            delta = figures
            self._seen[key] = figures
            while len(self._seen) > _KEEP_IDS:
                self._seen.popitem(last=False)
        if not any(delta.values()):
            return None
        if self._base is None:
            self._base = self._spent()
        event = usage_event(
            delta["input_tokens"],
            delta["output_tokens"],
            delta["cache_read_input_tokens"],
            delta["cache_creation_input_tokens"],
            message.model or None,
        )
        assert event is not None
        return self._observe(event)

    def _observe(self, event: Dict[str, Any]) -> Verdict:
        verdict = self._watcher.observe(self._run, event)
        self._run.nudges.clear()  # a spend warning is not passed to Claude (last_verdict, listeners)
        return verdict

    def _result(self, message: ResultMessage) -> Optional[Verdict]:
        base, self._base = self._base, None
        total = message.total_cost_usd
        if not isinstance(total, (int, float)) or not math.isfinite(total) or total <= 0:
            return None
        totals = _SESSION_TOTALS.setdefault(self.monitor, OrderedDict())
        before = totals.pop(message.session_id, 0.0)
        totals[message.session_id] = total
        while len(totals) > _KEEP_SESSIONS:
            totals.popitem(last=False)
        # A total below the last one: the totals were reset since (a `/clear` gives a new
        # session id in SDKs that tell, `ConversationResetMessage`; this covers the others).
        cost = total - before if total >= before else total
        counted = self._spent() - base if base is not None else 0.0
        extra = cost * 100.0 - counted
        if extra <= 0:
            return None
        return self._observe({"type": "usage", "costCents": extra})


async def track_spend(
    monitor: Monitor,
    messages: AsyncIterator[Any],
    *,
    task_id: Optional[str] = None,
    interrupt: Optional[Callable[[], Awaitable[None]]] = None,
) -> AsyncIterator[Any]:
    """Yields ``messages`` (``query(...)``, ``client.receive_response()``) unchanged, feeding each
    into ``monitor``'s spend (`SpendTracker`).

    ``interrupt`` (``client.interrupt`` of a ``ClaudeSDKClient``) is awaited once when spend
    halts the task, to stop the session at once rather than at its next tool call.
    """
    tracker = SpendTracker(monitor, task_id=task_id)
    interrupted = False
    async for message in messages:
        verdict = tracker.observe(message)
        if verdict is not None and verdict["action"] == "halt" and interrupt is not None and not interrupted:
            interrupted = True
            await interrupt()
        yield message

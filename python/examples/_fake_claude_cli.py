"""A scripted stand-in for the Claude Code CLI, so the Claude Agent SDK example and tests run offline.

The SDK talks to the CLI over a `Transport` (JSON lines). `FakeClaudeCLI` plays the CLI's side:
the `initialize` handshake, the user's prompt, then the scripted turns: an assistant message (with
usage) per turn, each tool call through the SDK's `PreToolUse` hooks (a deny skips the call, a
``continue: false`` stops the session), the tool's result, the `PostToolUse`/`PostToolUseFailure`
hooks, the `Stop` hook, and a `result` message with the query's cost. What the hooks answered is
kept in ``answers``, the context they added for Claude in ``context``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Callable, Dict, Iterable, List, Optional, Tuple

from claude_agent_sdk import Transport

#: A turn: Claude's text and its tool calls (name, input).
Turn = Tuple[str, List[Tuple[str, Dict[str, Any]]]]
#: Runs a tool: (ok, output). Not ok is a failure (Claude Code's PostToolUseFailure).
ToolRunner = Callable[[str, Dict[str, Any]], Tuple[bool, Any]]

USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 3000}
COST_PER_TURN_USD = 0.0125


class FakeClaudeCLI(Transport):
    def __init__(self, turns: Iterable[Turn], run_tool: ToolRunner, answer: str = "Done.") -> None:
        self.turns = iter(turns)
        self.run_tool = run_tool
        self.answer = answer
        self.inbox: "asyncio.Queue[Dict[str, Any]]" = asyncio.Queue()
        self.hook_ids: Dict[str, List[str]] = {}
        self.answers: List[Tuple[str, Dict[str, Any]]] = []
        self.context: List[str] = []
        self.ran: List[Tuple[str, Dict[str, Any]]] = []
        self.stopped: Optional[str] = None
        self._ready = False
        self._requests = 0
        self._session = "session-1"

    async def connect(self) -> None:
        self._ready = True

    def is_ready(self) -> bool:
        return self._ready

    async def end_input(self) -> None:
        pass

    async def close(self) -> None:
        self._ready = False

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            if line.strip():
                await self.inbox.put(json.loads(line))

    async def _next(self, wanted: Callable[[Dict[str, Any]], bool]) -> Dict[str, Any]:
        while True:
            message = await self.inbox.get()
            if wanted(message):
                return message

    def _base(self, event: str) -> Dict[str, Any]:
        return {"session_id": self._session, "transcript_path": "/tmp/fake.jsonl", "cwd": "/tmp", "hook_event_name": event}

    async def _hooks(self, event: str, payload: Dict[str, Any], tool_use_id: Optional[str]) -> AsyncIterator[Dict[str, Any]]:
        """Call every hook registered for ``event``; their answers land in ``self.answers``."""
        for callback_id in self.hook_ids.get(event, []):
            self._requests += 1
            request_id = f"cli_req_{self._requests}"
            yield {
                "type": "control_request",
                "request_id": request_id,
                "request": {"subtype": "hook_callback", "callback_id": callback_id, "input": payload, "tool_use_id": tool_use_id},
            }
            reply = await self._next(lambda m: m.get("type") == "control_response" and m["response"].get("request_id") == request_id)
            answer = reply["response"].get("response") or {}
            self.answers.append((event, answer))
            context = (answer.get("hookSpecificOutput") or {}).get("additionalContext")
            if context:
                self.context.append(context)
            if answer.get("continue") is False and self.stopped is None:
                self.stopped = answer.get("stopReason") or "stopped by a hook"

    def _result(self, turns: int, text: str) -> Dict[str, Any]:
        return {
            "type": "result",
            "subtype": "success",
            "duration_ms": 10,
            "duration_api_ms": 8,
            "is_error": False,
            "num_turns": turns,
            "session_id": self._session,
            "result": text,
            "total_cost_usd": round(COST_PER_TURN_USD * turns, 6),
            "usage": {k: v * turns for k, v in USAGE.items()},
            "stop_reason": "hook_stopped" if self.stopped else "end_turn",
        }

    async def read_messages(self) -> AsyncIterator[Dict[str, Any]]:
        init = await self._next(lambda m: m.get("type") == "control_request")
        for event, matchers in (init["request"].get("hooks") or {}).items():
            self.hook_ids[event] = [cid for matcher in matchers for cid in matcher["hookCallbackIds"]]
        yield {"type": "control_response", "response": {"subtype": "success", "request_id": init["request_id"], "response": {}}}
        await self._next(lambda m: m.get("type") == "user")
        turns = 0
        for text, calls in self.turns:
            turns += 1
            content: List[Dict[str, Any]] = [{"type": "text", "text": text}]
            ids = [f"toolu_{turns}_{i}" for i in range(len(calls))]
            content += [{"type": "tool_use", "id": tid, "name": name, "input": args} for tid, (name, args) in zip(ids, calls)]
            yield {
                "type": "assistant",
                "session_id": self._session,
                "parent_tool_use_id": None,
                "message": {"id": f"msg_{turns}", "model": "claude-sonnet-4-5", "role": "assistant", "content": content, "usage": USAGE, "stop_reason": "tool_use"},
            }
            for tid, (name, args) in zip(ids, calls):
                start = len(self.answers)
                pre = {**self._base("PreToolUse"), "tool_name": name, "tool_input": args, "tool_use_id": tid}
                async for request in self._hooks("PreToolUse", pre, tid):
                    yield request
                denied = [a for _, a in self.answers[start:] if (a.get("hookSpecificOutput") or {}).get("permissionDecision") == "deny"]
                if denied:
                    ok, output = False, denied[0]["hookSpecificOutput"].get("permissionDecisionReason", "denied")
                else:
                    self.ran.append((name, args))
                    ok, output = self.run_tool(name, args)
                yield {
                    "type": "user",
                    "session_id": self._session,
                    "parent_tool_use_id": None,
                    "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": str(output), "is_error": not ok}]},
                }
                if not denied:
                    if ok:
                        post = {**self._base("PostToolUse"), "tool_name": name, "tool_input": args, "tool_response": output, "tool_use_id": tid}
                        hooks = self._hooks("PostToolUse", post, tid)
                    else:
                        post = {**self._base("PostToolUseFailure"), "tool_name": name, "tool_input": args, "error": str(output), "tool_use_id": tid}
                        hooks = self._hooks("PostToolUseFailure", post, tid)
                    async for request in hooks:
                        yield request
                if self.stopped:
                    yield self._result(turns, self.stopped)
                    return
        turns += 1
        yield {
            "type": "assistant",
            "session_id": self._session,
            "parent_tool_use_id": None,
            "message": {"id": f"msg_{turns}", "model": "claude-sonnet-4-5", "role": "assistant", "content": [{"type": "text", "text": self.answer}], "usage": USAGE, "stop_reason": "end_turn"},
        }
        async for request in self._hooks("Stop", {**self._base("Stop"), "stop_hook_active": False, "last_assistant_message": self.answer}, None):
            yield request
        yield self._result(turns, self.answer)

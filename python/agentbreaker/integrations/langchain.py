"""agentbreaker for LangChain v1 agents and any LangChain/LangGraph runnable.

Two lines guard an agent::

    from agentbreaker.integrations.langchain import AgentBreakerMiddleware
    agent = create_agent(model, tools, middleware=[AgentBreakerMiddleware()])

`AgentBreakerMiddleware` (for ``create_agent``) feeds every model call (``assistant`` and
``usage`` events) and every tool call (``tool_use``, ``tool_result``) of a run to a `Monitor`.
On a warning the nudge is appended to the tool's result, so the model reads it; on a halt the
run ends (``jump_to: "end"``) with a last AI message saying why, and the halt verdict is in the
result's ``agentbreaker_verdict``; ``on_halt="raise"`` raises `AgentHalted` instead.

`AgentBreakerCallbackHandler` watches any runnable through its callbacks
(``config={"callbacks": [handler]}``) and raises `AgentHalted` on a halt; callbacks cannot
change what the model reads, so its warnings are only recorded.

Needs ``pip install 'agentbreaker[langchain]'`` (LangChain v1, Python 3.11 or newer).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Union
from uuid import UUID

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
    from langchain.agents.middleware.types import (
        OmitFromInput,
        PrivateStateAttr,
        ToolCallRequest,
    )
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, LLMResult
    from langgraph.errors import GraphBubbleUp
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as _error:  # pragma: no cover - the message is tested in a venv without it
    from ._common import missing_framework

    raise missing_framework("langchain", "langchain", "LangChain v1", _error, (3, 11)) from _error

from typing_extensions import Annotated, Awaitable, NotRequired

from .._native import Monitor
from ..exceptions import AgentHalted
from ..types import Verdict
from ._common import (
    Run,
    Watcher,
    error_text,
    halt_text,
    make_monitor,
    new_task_id,
    skipped_text,
    add_usage,
    to_text,
)

__all__ = ["AgentBreakerCallbackHandler", "AgentBreakerMiddleware", "AgentBreakerState"]

OnHalt = Literal["end", "raise"]
ToolErrors = Literal["raise", "message"]
_ToolResult = Union[ToolMessage, Command[Any]]


class AgentBreakerState(AgentState[Any]):
    """The agent state with the breaker's two fields.

    ``agentbreaker_verdict``: the run's last warn or halt verdict (None while it is healthy);
    a halted run ends with its halt verdict here. ``agentbreaker_task``: the run's task id in the
    Monitor (private to the graph).
    """

    agentbreaker_verdict: NotRequired[Annotated[Optional[Dict[str, Any]], OmitFromInput]]
    agentbreaker_task: NotRequired[Annotated[str, PrivateStateAttr]]


def _with_usage(event: Dict[str, Any], message: AIMessage) -> Dict[str, Any]:
    """``event`` (the message's ``assistant`` event) with the token counts of the message's
    ``usage_metadata``, if it has one.

    LangChain's ``input_tokens`` is the sum of every kind of input token; the Monitor's counts
    cache reads and cache writes apart, as Anthropic's API does, so they are taken out.
    """
    meta = message.usage_metadata
    if not meta:
        return event
    details = meta.get("input_token_details") or {}
    cache_read = int(details.get("cache_read") or 0)
    cache_write = int(details.get("cache_creation") or 0)
    metadata = message.response_metadata
    model = (metadata.get("model_name") or metadata.get("model")) if metadata else None
    return add_usage(
        event,
        int(meta.get("input_tokens") or 0) - cache_read - cache_write,
        int(meta.get("output_tokens") or 0),
        cache_read,
        cache_write,
        model if isinstance(model, str) else None,
    )


def _tool_message_text(message: ToolMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return to_text(content)
    return to_text(message.text) if message.text else to_text(content)


def _with_nudges(message: ToolMessage, nudges: Sequence[str]) -> ToolMessage:
    """The tool message with the nudges after its content (text or content blocks)."""
    text = "\n\n".join(nudges)
    content = message.content
    if isinstance(content, str):
        new: Union[str, List[Union[str, Dict[Any, Any]]]] = f"{content}\n\n{text}" if content else text
    else:
        new = [*content, {"type": "text", "text": text}]
    return message.model_copy(update={"content": new})


class AgentBreakerMiddleware(AgentMiddleware[AgentBreakerState, Any, Any]):
    """A `Monitor` on every model call and tool call of a ``create_agent`` agent.

    Args:
        monitor: the Monitor to feed (else a new one from ``monitor_config``: ``profile=``,
            ``tool_limits=``, ``warn_before=``, ... as `Monitor` takes them).
        on_halt: ``"end"`` (default) ends the run with a last AI message that says why and the
            verdict in ``agentbreaker_verdict``; ``"raise"`` raises `AgentHalted` from the run.
        tool_errors: what a tool's exception does. ``"raise"`` (default, LangChain's own
            behaviour) records the failed call and lets the exception end the run;
            ``"message"`` turns it into an error `ToolMessage` the model reads, so the agent
            can recover (or loop, and be halted).

    Every run (``invoke``/``ainvoke``/``stream``) is its own task in the Monitor, so one
    middleware serves any number of runs, one after another or at once. The latest warn or halt
    verdict of any run is ``last_verdict``.
    """

    state_schema = AgentBreakerState

    def __init__(
        self,
        monitor: Optional[Monitor] = None,
        *,
        on_halt: OnHalt = "end",
        tool_errors: ToolErrors = "raise",
        **monitor_config: Any,
    ) -> None:
        super().__init__()
        if on_halt not in ("end", "raise"):
            raise ValueError(f"on_halt must be 'end' or 'raise', not {on_halt!r}")
        if tool_errors not in ("raise", "message"):
            raise ValueError(f"tool_errors must be 'raise' or 'message', not {tool_errors!r}")
        self.on_halt: OnHalt = on_halt
        self.tool_errors: ToolErrors = tool_errors
        self._watcher = Watcher(make_monitor(monitor, monitor_config), "langchain")
        # Runs whose state carries no task (a graph resumed from a checkpoint written before this
        # middleware was added) share this one.
        self._fallback_task = new_task_id("langchain")

    @property
    def monitor(self) -> Monitor:
        return self._watcher.monitor

    @property
    def last_verdict(self) -> Optional[Verdict]:
        """The latest warn or halt verdict of any run (None before the first)."""
        return self._watcher.last_verdict

    def _run(self, state: Any) -> Run:
        task = state.get("agentbreaker_task") if isinstance(state, dict) else None
        return self._watcher.run(task or self._fallback_task)

    # --- the run ----------------------------------------------------------------------------

    def before_agent(self, state: AgentBreakerState, runtime: Runtime[Any]) -> Dict[str, Any] | None:
        task = new_task_id("langchain")
        self._watcher.run(task)
        return {"agentbreaker_task": task, "agentbreaker_verdict": None}

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentBreakerState, runtime: Runtime[Any]) -> Dict[str, Any] | None:
        run = self._run(state)
        if run.halt is not None:
            return self._halt(run, [])
        if run.dirty:
            run.dirty = False
            return {"agentbreaker_verdict": dict(run.latest) if run.latest else None}
        return None

    @hook_config(can_jump_to=["end"])
    def after_model(self, state: AgentBreakerState, runtime: Runtime[Any]) -> Dict[str, Any] | None:
        messages = state.get("messages") or []
        message = messages[-1] if messages else None
        if not isinstance(message, AIMessage):
            return None
        run = self._run(state)
        watcher = self._watcher
        content = message.content
        text = content if isinstance(content, str) else str(message.text)
        watcher.observe(run, _with_usage({"type": "assistant", "text": text}, message))
        if run.halt is not None:
            return self._halt(run, message.tool_calls)
        if run.dirty:
            run.dirty = False
            return {"agentbreaker_verdict": dict(run.latest) if run.latest else None}
        return None

    def after_agent(self, state: AgentBreakerState, runtime: Runtime[Any]) -> Dict[str, Any] | None:
        run = self._watcher.close(state.get("agentbreaker_task") or self._fallback_task)
        if run is None or not run.dirty:
            return None
        if run.halt is not None and self.on_halt == "raise":
            raise AgentHalted(run.halt)
        return {"agentbreaker_verdict": dict(run.latest) if run.latest else None}

    def _halt(self, run: Run, pending: Sequence[Any]) -> Dict[str, Any]:
        """End the run: close its pending tool calls, say why, put the verdict on the state."""
        verdict = run.halt
        assert verdict is not None
        if self.on_halt == "raise":
            self._watcher.close(run.task)
            raise AgentHalted(verdict)
        run.dirty = False
        closing: List[BaseMessage] = [
            ToolMessage(
                content=skipped_text(verdict),
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
            for call in pending
            if call.get("id")
        ]
        closing.append(AIMessage(content=halt_text(verdict)))
        return {"jump_to": "end", "messages": closing, "agentbreaker_verdict": dict(verdict)}

    # --- tool calls -------------------------------------------------------------------------

    def _tool_use(self, request: ToolCallRequest) -> tuple[Run, Optional[ToolMessage]]:
        """Feed the call; a call of a halted run is answered without being run."""
        run = self._run(request.state)
        call = request.tool_call
        event: Dict[str, Any] = {"type": "tool_use", "name": call["name"] or "?", "input": call["args"]}
        if call.get("id"):
            event["id"] = call["id"]
        self._watcher.observe(run, event)
        if run.halt is None:
            return run, None
        skipped = ToolMessage(
            content=skipped_text(run.halt),
            tool_call_id=call.get("id") or "",
            name=call["name"],
            status="error",
        )
        return run, skipped

    def _failed(self, run: Run, request: ToolCallRequest, error: BaseException) -> Optional[ToolMessage]:
        """A tool raised: record the failure; the error message to answer with, or None to let
        the exception go on."""
        call = request.tool_call
        text = error_text(error)
        event: Dict[str, Any] = {"type": "tool_result", "ok": False, "text": text, "name": call["name"]}
        if call.get("id"):
            event["id"] = call["id"]
        self._watcher.observe(run, event)
        if self.tool_errors == "raise":
            return None
        failed = ToolMessage(
            content=f"Error: {text}", tool_call_id=call.get("id") or "", name=call["name"], status="error"
        )
        return self._answer(run, failed)

    def _done(self, run: Run, request: ToolCallRequest, result: _ToolResult) -> _ToolResult:
        """The tool answered: record its result, add the nudges of the verdicts."""
        call = request.tool_call
        event: Dict[str, Any] = {"type": "tool_result", "name": call["name"]}
        if call.get("id"):
            event["id"] = call["id"]
        if isinstance(result, ToolMessage):
            event["ok"] = result.status != "error"
            event["text"] = _tool_message_text(result)
        else:  # a Command: the tool changed the graph's state; its messages are its result
            update = getattr(result, "update", None)
            found = update.get("messages") if isinstance(update, dict) else None
            texts = [_tool_message_text(m) for m in found or () if isinstance(m, ToolMessage)]
            event["ok"] = True
            event["text"] = "\n".join(texts)
        self._watcher.observe(run, event)
        if isinstance(result, ToolMessage):
            return self._answer(run, result)
        return result

    def _answer(self, run: Run, message: ToolMessage) -> ToolMessage:
        nudges = self._watcher.take_nudges(run)
        return _with_nudges(message, nudges) if nudges else message

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], _ToolResult],
    ) -> _ToolResult:
        run, skipped = self._tool_use(request)
        if skipped is not None:
            return skipped
        try:
            result = handler(request)
        except GraphBubbleUp:  # an interrupt or a Command to a parent graph: not a failure
            raise
        except Exception as error:
            failed = self._failed(run, request, error)
            if failed is None:
                raise
            return failed
        return self._done(run, request, result)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[_ToolResult]],
    ) -> _ToolResult:
        run, skipped = self._tool_use(request)
        if skipped is not None:
            return skipped
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as error:
            failed = self._failed(run, request, error)
            if failed is None:
                raise
            return failed
        return self._done(run, request, result)


class AgentBreakerCallbackHandler(BaseCallbackHandler):
    """A `Monitor` on any LangChain or LangGraph runnable, through its callbacks.

    Pass it per run: ``runnable.invoke(input, config={"callbacks": [handler]})``. Model calls
    give ``assistant`` and ``usage`` events, tool calls ``tool_use`` and ``tool_result``; a halt
    raises `AgentHalted` out of the run (``raise_error = True``). A halt found when a tool starts
    stops it before it runs.

    Callbacks cannot change what the model reads: warnings are only recorded (``warnings``,
    ``last_verdict``, the Monitor's listeners). Use `AgentBreakerMiddleware` with
    ``create_agent`` to pass nudges on.

    One handler is one task in the Monitor: runs that share a handler share its counters (a
    halted handler halts every later run until ``reset()``).
    """

    raise_error = True
    # Called in the event loop's thread, in order, even under ``ainvoke``: it takes microseconds.
    run_inline = True

    def __init__(self, monitor: Optional[Monitor] = None, *, task_id: Optional[str] = None, **monitor_config: Any) -> None:
        super().__init__()
        self._watcher = Watcher(make_monitor(monitor, monitor_config), "langchain")
        self._task = task_id or new_task_id("langchain")
        self._fixed_task = task_id is not None
        self._calls: Dict[UUID, tuple[Optional[str], str]] = {}
        self.warnings: List[Verdict] = []

    @property
    def monitor(self) -> Monitor:
        return self._watcher.monitor

    @property
    def last_verdict(self) -> Optional[Verdict]:
        return self._watcher.last_verdict

    @property
    def halt(self) -> Optional[Verdict]:
        """The halt verdict, once the handler's task is halted."""
        return self._watcher.run(self._task).halt

    def reset(self) -> None:
        """Forget the task (a halt too): the next run starts from zero."""
        self._watcher.close(self._task)
        self._calls.clear()
        self.warnings.clear()
        if not self._fixed_task:
            self._task = new_task_id("langchain")

    def _observe(self, event: Dict[str, Any]) -> None:
        run = self._watcher.run(self._task)
        verdict = self._watcher.observe(run, event)
        if verdict["action"] == "warn":
            self.warnings.append(verdict)
            del run.nudges[:]
        elif verdict["action"] == "halt":
            raise AgentHalted(verdict)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, parent_run_id: Optional[UUID] = None, **kwargs: Any) -> Any:
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
                    message = generation.message
                    self._observe(_with_usage({"type": "assistant", "text": message.text}, message))
                else:
                    self._observe({"type": "assistant", "text": generation.text})

    def on_tool_start(
        self,
        serialized: Dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: Optional[UUID] = None,
        tags: Optional[List[str]] = None,
        metadata: Optional[Dict[str, Any]] = None,
        inputs: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Any:
        name = (serialized or {}).get("name") or kwargs.get("name") or "?"
        call_id = kwargs.get("tool_call_id")
        self._calls[run_id] = (call_id if isinstance(call_id, str) else None, str(name))
        event: Dict[str, Any] = {"type": "tool_use", "name": str(name), "input": inputs if inputs is not None else input_str}
        if isinstance(call_id, str) and call_id:
            event["id"] = call_id
        self._observe(event)

    def _result(self, run_id: UUID, ok: bool, text: str) -> None:
        call_id, name = self._calls.pop(run_id, (None, "?"))
        event: Dict[str, Any] = {"type": "tool_result", "ok": ok, "text": text, "name": name}
        if call_id:
            event["id"] = call_id
        self._observe(event)

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: Optional[UUID] = None, **kwargs: Any) -> Any:
        if isinstance(output, ToolMessage):
            self._result(run_id, output.status != "error", _tool_message_text(output))
        else:
            self._result(run_id, True, to_text(output))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, parent_run_id: Optional[UUID] = None, **kwargs: Any) -> Any:
        if isinstance(error, GraphBubbleUp):
            self._calls.pop(run_id, None)
            return
        self._result(run_id, False, error_text(error))

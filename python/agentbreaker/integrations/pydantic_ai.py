"""agentbreaker for pydantic-ai agents (a capability).

Two lines guard an agent::

    breaker = AgentBreakerCapability()
    agent = Agent(model, capabilities=[breaker])

Every model response gives ``assistant`` and ``usage`` events, every tool call ``tool_use`` and
``tool_result`` (a tool that raised, or asked for a retry, is a failed call). A warning's nudge is
queued for the model's next request (``ctx.enqueue``). A halt cancels the run the framework's way
(``ctx.cancel()``): ``agent.run`` raises ``RunCancelled``, and ``breaker.verdict(e.run_id)`` (or
``breaker.verdict()`` for the last run) says why. ``on_halt="raise"`` raises `AgentHalted`
instead. A call made after the halt is not run.

Each run is its own task in the Monitor (by ``ctx.run_id``), so one capability serves every run
of an agent, one after another or at once.

Needs ``pip install 'agentbreaker[pydantic-ai]'`` (pydantic-ai 2.30 or newer, Python 3.11 or
newer).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Dict, Literal, Optional

try:
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import ValidatedToolArgs, WrapToolExecuteHandler
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import ToolDefinition
except ImportError as _error:  # pragma: no cover - the message is tested in a venv without it
    from ._common import missing_framework

    raise missing_framework("pydantic_ai", "pydantic-ai", "pydantic-ai", _error, (3, 11)) from _error

from .._native import Monitor
from ..exceptions import AgentHalted
from ..types import Verdict
from ._common import Run, Watcher, add_usage, error_text, make_monitor, new_task_id, skipped_text, to_text

__all__ = ["AgentBreakerCapability"]

OnHalt = Literal["cancel", "raise"]

# How many ended runs' verdicts `verdict(run_id)` remembers.
_KEEP = 256


class AgentBreakerCapability(AbstractCapability[Any]):
    """A `Monitor` on every model response and tool call of a pydantic-ai agent.

    Args:
        monitor: the Monitor to feed (else a new one from ``monitor_config``: ``profile=``,
            ``tool_limits=``, ``warn_before=``, ... as `Monitor` takes them).
        on_halt: ``"cancel"`` (default) cancels the run (``RunCancelled``); ``"raise"`` raises
            `AgentHalted` out of ``agent.run``.
    """

    def __init__(self, monitor: Optional[Monitor] = None, *, on_halt: OnHalt = "cancel", **monitor_config: Any) -> None:
        if on_halt not in ("cancel", "raise"):
            raise ValueError(f"on_halt must be 'cancel' or 'raise', not {on_halt!r}")
        self.on_halt: OnHalt = on_halt
        self._watcher = Watcher(make_monitor(monitor, monitor_config), "pydantic-ai")
        self._fallback_task = new_task_id("pydantic-ai")
        self._ended: "OrderedDict[str, Optional[Verdict]]" = OrderedDict()
        self._last_run: Optional[str] = None

    @property
    def monitor(self) -> Monitor:
        return self._watcher.monitor

    @property
    def last_verdict(self) -> Optional[Verdict]:
        """The latest warn or halt verdict of any run."""
        return self._watcher.last_verdict

    def verdict(self, run_id: Optional[str] = None) -> Optional[Verdict]:
        """The last warn or halt verdict of the run ``run_id`` (``RunCancelled.run_id``,
        ``AgentRunResult.run_id``), or of the last run that ended; None if it had none.

        A halted run's is its halt verdict (``verdict["action"] == "halt"``)."""
        key = run_id or self._last_run
        if key is None:
            return None
        if key in self._ended:
            return self._ended[key]
        run = self._watcher._runs.get(key)  # a run still going
        return run.latest if run is not None else None

    def _run(self, ctx: RunContext[Any]) -> Run:
        return self._watcher.run(ctx.run_id or self._fallback_task)

    def _react(self, ctx: RunContext[Any], run: Run) -> None:
        """Pass the nudges on to the model; stop the run on a halt."""
        if run.halt is not None:
            if self.on_halt == "raise":
                self._end(run.task)
                raise AgentHalted(run.halt)
            ctx.cancel()
            return
        for nudge in self._watcher.take_nudges(run):
            ctx.enqueue(nudge)

    def _end(self, task: str) -> None:
        run = self._watcher.close(task)
        if run is None:
            return
        self._ended[task] = run.latest
        self._last_run = task
        while len(self._ended) > _KEEP:
            self._ended.popitem(last=False)

    # --- the run -----------------------------------------------------------------------------

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        run = self._run(ctx)
        texts = [part.content for part in response.parts if isinstance(part, TextPart)]
        usage = response.usage
        # pydantic-ai's input_tokens include the cached ones; the Monitor's do not.
        cache_read, cache_write = usage.cache_read_tokens, usage.cache_write_tokens
        event = add_usage(
            {"type": "assistant", "text": "\n".join(texts)},
            usage.input_tokens - cache_read - cache_write,
            usage.output_tokens,
            cache_read,
            cache_write,
            response.model_name,
        )
        self._watcher.observe(run, event)
        self._react(ctx, run)
        return response

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        run = self._run(ctx)
        watcher = self._watcher
        event: Dict[str, Any] = {"type": "tool_use", "name": call.tool_name, "input": args}
        if call.tool_call_id:
            event["id"] = call.tool_call_id
        watcher.observe(run, event)
        if run.halt is not None:
            self._react(ctx, run)
            return skipped_text(run.halt)
        result_event: Dict[str, Any] = {"type": "tool_result", "name": call.tool_name}
        if call.tool_call_id:
            result_event["id"] = call.tool_call_id
        try:
            result = await handler(args)
        except Exception as error:  # a plain exception, ModelRetry, ToolFailed: a failed call
            result_event["ok"] = False
            result_event["text"] = error_text(error)
            watcher.observe(run, result_event)
            self._react(ctx, run)
            raise
        result_event["ok"] = True
        result_event["text"] = to_text(result)
        watcher.observe(run, result_event)
        self._react(ctx, run)
        return result

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        self._end(ctx.run_id or self._fallback_task)
        return result

    async def on_run_error(self, ctx: RunContext[Any], *, error: BaseException) -> AgentRunResult[Any]:
        self._end(ctx.run_id or self._fallback_task)
        raise error

"""agentbreaker for the OpenAI Agents SDK (``openai-agents``).

Two lines guard a run::

    hooks = AgentBreakerHooks()
    result = await Runner.run(agent, "...", hooks=hooks, run_config=hooks.run_config())

`AgentBreakerHooks` is a ``RunHooks``: every model call gives ``assistant`` and ``usage`` events,
every tool call ``tool_use`` and ``tool_result``. A halt raises `AgentHalted` out of
``Runner.run`` before the next model call (from ``on_llm_start``, whose exceptions the SDK passes
on unchanged; one raised in a tool hook would reach you wrapped in ``UserError``).

``hooks.run_config()`` (or ``hooks.run_config(your_run_config)``) adds the two things hooks
cannot do: the nudge of a warning reaches the model as a user message before its next call
(``call_model_input_filter``), and a tool that raised is recorded as failed
(``tool_error_formatter``; the SDK otherwise hands the model a generic error text and the hooks a
plain string). For a tool with a ``failure_error_function`` of its own, wrap it with
`agentbreaker_failure_error_function`.

`agentbreaker_tool_guardrail` (a tool input guardrail) stops the calls of a halted run before
they run: the model reads the nudge as the call's result. Add it to each function tool
(``function_tool(fn, tool_input_guardrails=[agentbreaker_tool_guardrail(hooks)])``).

One `AgentBreakerHooks` watches one run at a time (hooks are passed per run); it starts a new
task in the Monitor after a run ends, so it can be reused run after run.

Needs ``pip install 'agentbreaker[openai-agents]'`` (Python 3.10 or newer).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import replace
from typing import Any, Awaitable, Callable, Dict, Optional, Set, Union

try:
    from agents import (
        Agent,
        ModelResponse,
        RunConfig,
        RunContextWrapper,
        RunHooks,
        Tool,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
    )
    from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
    from agents.run_context import AgentHookContext
    from agents.tool_context import ToolContext
except ImportError as _error:  # pragma: no cover - the message is tested in a venv without it
    from ._common import missing_framework

    raise missing_framework("openai_agents", "openai-agents", "the OpenAI Agents SDK", _error, (3, 10)) from _error

from .._native import Monitor
from ..exceptions import AgentHalted
from ..types import Verdict
from ._common import Run, Watcher, add_usage, error_text, make_monitor, new_task_id, skipped_text, to_text

__all__ = [
    "AgentBreakerHooks",
    "agentbreaker_failure_error_function",
    "agentbreaker_tool_guardrail",
]

# The first words of the SDK's own text for a tool that raised (default_tool_error_function):
# "An error occurred while running the tool. Please try again." (0.21 adds the error). A result
# that starts with them is a failed call even when no formatter of ours saw the exception.
_SDK_TOOL_ERROR = "An error occurred while running the tool."

ToolErrorFunction = Callable[[RunContextWrapper[Any], Exception], Union[str, Awaitable[str]]]


def _input(arguments: Optional[str]) -> Any:
    """A call's arguments (a JSON string in the SDK) as the value they encode."""
    if not arguments:
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


class AgentBreakerHooks(RunHooks[Any]):
    """A `Monitor` on an OpenAI Agents SDK run (``Runner.run(..., hooks=hooks)``).

    Args:
        monitor: the Monitor to feed (else a new one from ``monitor_config``: ``profile=``,
            ``tool_limits=``, ``warn_before=``, ... as `Monitor` takes them).
        task_id: the run's task in the Monitor (default: a new id per run).

    ``halt`` is the verdict that halted the last run (None if none did, from the start of the
    next run), ``last_verdict`` the latest warn or halt verdict; the Monitor's listeners see
    every one as it happens. One hooks object watches one run at a time: give runs that go on
    at once a hooks object each (they may share a Monitor).
    """

    def __init__(self, monitor: Optional[Monitor] = None, *, task_id: Optional[str] = None, **monitor_config: Any) -> None:
        self._watcher = Watcher(make_monitor(monitor, monitor_config), "openai-agents")
        self._fixed_task = task_id
        self._task = task_id or new_task_id("openai-agents")
        # Calls the guardrail has already reported (it runs before on_tool_start), and calls
        # whose exception a formatter of ours saw.
        self._reported: Set[str] = set()
        self._failed: Dict[str, str] = {}
        self.halt: Optional[Verdict] = None

    @property
    def monitor(self) -> Monitor:
        return self._watcher.monitor

    @property
    def last_verdict(self) -> Optional[Verdict]:
        return self._watcher.last_verdict

    def _run(self) -> Run:
        return self._watcher.run(self._task)

    def _end_run(self) -> None:
        """The run is over: the next one is a new task."""
        self._watcher.close(self._task)
        self._task = self._fixed_task or new_task_id("openai-agents")
        self._reported.clear()
        self._failed.clear()

    def reset(self) -> None:
        """Forget the current run (its halt too)."""
        self._end_run()
        self.halt = None

    # --- helpers for RunConfig and tools -----------------------------------------------------

    def run_config(self, base: Optional[RunConfig] = None) -> RunConfig:
        """``base`` (or a default RunConfig) with the breaker's input filter and tool error
        formatter, each calling the one ``base`` had."""
        config = base if base is not None else RunConfig()
        previous_filter = config.call_model_input_filter
        previous_formatter = config.tool_error_formatter

        async def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
            if previous_filter is not None:
                result = previous_filter(data)
                model_data = await result if inspect.isawaitable(result) else result
                data = replace(data, model_data=model_data)
            return self.call_model_input_filter(data)

        async def tool_error_formatter(args: ToolErrorFormatterArgs[Any]) -> Optional[str]:
            self.tool_error_formatter(args)
            if previous_formatter is None:
                return None
            result = previous_formatter(args)
            return await result if inspect.isawaitable(result) else result

        return replace(
            config,
            call_model_input_filter=call_model_input_filter,
            tool_error_formatter=tool_error_formatter,
        )

    def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A ``RunConfig.call_model_input_filter``: the nudges of the warnings since the last
        model call go to the model as a user message after its input."""
        nudges = self._watcher.take_nudges(self._run())
        if not nudges:
            return data.model_data
        message: Any = {"role": "user", "content": "\n\n".join(nudges)}
        return ModelInputData(input=[*data.model_data.input, message], instructions=data.model_data.instructions)

    def tool_error_formatter(self, args: ToolErrorFormatterArgs[Any]) -> None:
        """A ``RunConfig.tool_error_formatter``: records that the call failed and with what;
        returns None, so the model reads the SDK's own text."""
        kind: str = args.kind  # "tool_exception" (and `error`) came in 0.22
        if kind == "tool_exception":
            error = getattr(args, "error", None)
            self._failed[args.call_id] = error_text(error) if isinstance(error, BaseException) else args.default_message

    def _mark_failed(self, context: RunContextWrapper[Any], error: Exception) -> None:
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self._failed[call_id] = error_text(error)

    # --- the events --------------------------------------------------------------------------

    def _tool_use(self, name: str, arguments: Optional[str], call_id: Optional[str]) -> Verdict:
        event: Dict[str, Any] = {"type": "tool_use", "name": name or "?", "input": _input(arguments)}
        if call_id:
            event["id"] = call_id
        return self._watcher.observe(self._run(), event)

    def _tool_result(self, name: str, call_id: Optional[str], ok: bool, text: str) -> Verdict:
        event: Dict[str, Any] = {"type": "tool_result", "ok": ok, "text": text, "name": name}
        if call_id:
            event["id"] = call_id
        return self._watcher.observe(self._run(), event)

    def _raise_if_halted(self) -> None:
        halt = self._run().halt
        if halt is not None:
            self.halt = halt
            self._end_run()
            raise AgentHalted(halt)

    async def on_agent_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        # A run's first agent starts before any model call; a handoff's agent, or a run resumed
        # from its RunState, after some (the run's usage counts them). So a start without a
        # request is a new run: one before it that ended without on_agent_end (max_turns, an
        # exception, a cancellation) is closed here, and its counts and halt are not inherited.
        if context.usage.requests == 0:
            self._end_run()
            self.halt = None
        self._raise_if_halted()

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: Optional[str],
        input_items: list[Any],
    ) -> None:
        self._raise_if_halted()

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        texts = []
        for item in response.output:
            if getattr(item, "type", None) == "message":
                for part in getattr(item, "content", ()):
                    text = getattr(part, "text", None)
                    if isinstance(text, str):
                        texts.append(text)
        event: Dict[str, Any] = {"type": "assistant", "text": "\n".join(texts)}
        usage = response.usage
        if usage is not None:
            details = getattr(usage, "input_tokens_details", None)
            cached = int(getattr(details, "cached_tokens", 0) or 0)
            model = agent.model if isinstance(agent.model, str) else None
            add_usage(event, int(usage.input_tokens) - cached, int(usage.output_tokens), cached, 0, model)
        self._watcher.observe(self._run(), event)
        self._raise_if_halted()

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str) and call_id in self._reported:
            self._reported.discard(call_id)
            return
        arguments = getattr(context, "tool_arguments", None)
        self._tool_use(tool.name, arguments if isinstance(arguments, str) else None, call_id if isinstance(call_id, str) else None)

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object) -> None:
        call_id = getattr(context, "tool_call_id", None)
        call_id = call_id if isinstance(call_id, str) else None
        failure = self._failed.pop(call_id, None) if call_id else None
        text = to_text(result)
        if failure is not None:
            self._tool_result(tool.name, call_id, False, failure)
        else:
            self._tool_result(tool.name, call_id, not text.startswith(_SDK_TOOL_ERROR), text)

    async def on_agent_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        halt = self._run().halt
        self._end_run()
        if halt is not None:  # halted by the last tool calls of a run that ends without the model
            self.halt = halt
            raise AgentHalted(halt)


def agentbreaker_tool_guardrail(hooks: AgentBreakerHooks) -> ToolInputGuardrail[Any]:
    """A tool input guardrail that stops the calls of a halted run before they run.

    It reports the call to the hooks' Monitor itself (the SDK runs guardrails before
    ``on_tool_start``), so a call that trips a budget (``tool_limits``, ``maxToolCallsPerTask``)
    is not run either. A rejected call's result says why and carries the nudge (it is in the
    run's items); the run then ends with `AgentHalted` before the next model call, so the model
    reads it only if you go on with the run's history.
    """

    def agentbreaker(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context: ToolContext[Any] = data.context
        call_id = context.tool_call_id
        name = context.tool_name
        verdict = hooks._tool_use(name, context.tool_arguments, call_id)
        halt = hooks._run().halt
        if halt is None:
            if call_id:
                hooks._reported.add(call_id)
            return ToolGuardrailFunctionOutput.allow(output_info=verdict)
        message = skipped_text(halt)
        hooks._tool_result(name, call_id, False, message)
        return ToolGuardrailFunctionOutput.reject_content(message, output_info=halt)

    return ToolInputGuardrail(guardrail_function=agentbreaker, name="agentbreaker")


def agentbreaker_failure_error_function(
    hooks: AgentBreakerHooks, inner: Optional[ToolErrorFunction] = None
) -> Callable[[RunContextWrapper[Any], Exception], Awaitable[str]]:
    """A ``failure_error_function`` for ``function_tool`` that records the failure with the hooks
    and answers the model as ``inner`` does (default: the error's type and message)."""

    async def failure_error_function(context: RunContextWrapper[Any], error: Exception) -> str:
        hooks._mark_failed(context, error)
        if inner is None:
            return f"Error: {error_text(error)}"
        result = inner(context, error)
        return await result if inspect.isawaitable(result) else result

    return failure_error_function

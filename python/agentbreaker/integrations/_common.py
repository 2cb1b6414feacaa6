"""What every framework adapter shares: the monitor, the per-run bookkeeping, the texts.

Nothing here imports a framework.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import uuid
import warnings
from typing import Any, Dict, List, Mapping, Optional

from .._native import Monitor
from ..exceptions import AgentBreakerError, InvalidEventError
from ..types import MonitorEvent, Verdict

#: Every text the adapters put in front of the model or the user starts with this tag.
TAG = "[agentbreaker]"

# A tool result longer than this is sent to the Monitor as its head and its tail: the Monitor
# compares at most the first and last 4 KB of a result, so nothing it reads is lost, and a
# 10 MB tool output costs no more to watch than a 64 KB one.
_CLIP = 32 * 1024

# The most runs an adapter keeps open. A run that ends by an exception the adapter never sees
# (a tool's error raised out of the run, a recursion limit, a cancelled task) is not closed by it;
# past this many, the oldest open run is closed, so the Monitor's task table (4096 tasks) never
# fills up however many runs fail.
MAX_OPEN_RUNS = 1024


def missing_framework(
    module: str, extra: str, framework: str, error: ImportError, python: tuple[int, int]
) -> ImportError:
    """The ImportError raised when an adapter's framework is not installed."""
    need = ""
    if sys.version_info < python:
        need = f" (it needs Python {python[0]}.{python[1]} or newer; this is {sys.version.split()[0]})"
    text = (
        f"agentbreaker.integrations.{module} needs {framework}{need}: "
        f"pip install 'agentbreaker[{extra}]' ({error})"
    )
    return ImportError(text, name=error.name)


def make_monitor(monitor: Optional[Monitor], config: Mapping[str, Any]) -> Monitor:
    """The monitor an adapter uses: the one given, or a new one built from ``config``."""
    if monitor is None:
        return Monitor(**config)
    if config:
        raise TypeError(
            "pass either monitor= or the Monitor's settings "
            f"({', '.join(sorted(config))}), not both"
        )
    if not isinstance(monitor, Monitor):
        raise TypeError(f"monitor must be an agentbreaker.Monitor, not {type(monitor).__name__}")
    return monitor


def new_task_id(prefix: str) -> str:
    """A task id for one run (the Monitor keeps counters per task)."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def clip(text: str) -> str:
    if len(text) <= 2 * _CLIP:
        return text
    return text[:_CLIP] + "\n…\n" + text[-_CLIP:]


def to_text(value: Any) -> str:
    """A tool's output as the text the Monitor compares: strings as they are, JSON-like values
    as compact JSON (keys sorted, so the same value gives the same text), anything else by
    ``str``. Never raises."""
    if isinstance(value, str):
        return clip(value)
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return clip(bytes(value).decode("utf-8", "replace"))
    try:
        if isinstance(value, (dict, list, tuple, int, float, bool)):
            return clip(json.dumps(value, sort_keys=True, default=str, ensure_ascii=False))
        return clip(str(value))
    except Exception:  # a __str__ that raises, a dict with mixed key types, ...
        return f"<{type(value).__name__}>"


def add_usage(
    event: Dict[str, Any],
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    model: Optional[str] = None,
) -> Dict[str, Any]:
    """``event`` with the token counts of a model call (``usage``, and ``model``), unchanged when
    they count nothing. On an ``assistant`` event the Monitor counts them as the usage event right
    after it (contract §11): one call instead of two per model call. ``input_tokens`` excludes
    the cache reads and writes, as the Monitor counts them (Anthropic's convention). Counts of
    zero are left out: every key costs time to hand over."""
    usage: Dict[str, int] = {}
    if input_tokens > 0:
        usage["input_tokens"] = input_tokens
    if output_tokens > 0:
        usage["output_tokens"] = output_tokens
    if cache_read > 0:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write > 0:
        usage["cache_creation_input_tokens"] = cache_write
    if usage:
        event["usage"] = usage
        if model:
            event["model"] = model
    return event


def usage_event(
    input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0, model: Optional[str] = None
) -> Optional[Dict[str, Any]]:
    """A ``usage`` event (None when it counts nothing), as `add_usage` counts."""
    event = add_usage({"type": "usage"}, input_tokens, output_tokens, cache_read, cache_write, model)
    return event if "usage" in event else None


_INT_RANGE = (-(2**63), 2**64 - 1)


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as the JSON values the Monitor takes: dict keys as strings, tuples and sets as
    lists, a number it cannot hold (NaN, an integer past 64 bits) and any other object as text
    (a pydantic model by its JSON form). For tool arguments a framework validated into Python
    objects (pydantic-ai's datetimes, Decimals, models)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if _INT_RANGE[0] <= value <= _INT_RANGE[1] else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= 64:
        return to_text(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(item, depth + 1) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return json_safe(dump(mode="json"), depth + 1)
        except Exception:
            pass
    return to_text(value)


def error_text(error: BaseException) -> str:
    """A failed call's text: the exception's type and message."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def nudge_text(verdict: Verdict) -> str:
    """What the model is told on a warning (the verdict's nudge)."""
    return f"{TAG} {verdict.get('nudge') or verdict['message']}"


def halt_text(verdict: Verdict) -> str:
    """What the user is told when the run is halted."""
    return f"{TAG} Run halted ({verdict['reason']}): {verdict['message']}"


def halt_context(verdict: Verdict) -> str:
    """What the model is told when the run is halted after a call it made (with the nudge)."""
    nudge = verdict.get("nudge")
    return f"{halt_text(verdict)}\n{nudge}" if nudge else halt_text(verdict)


def skipped_text(verdict: Verdict) -> str:
    """The result of a call that was not run because its task is halted (with the nudge: what
    the model reads)."""
    text = f"{TAG} Not run: the run is halted ({verdict['reason']}): {verdict['message']}"
    nudge = verdict.get("nudge")
    return f"{text}\n{nudge}" if nudge else text


class Run:
    """One run's bookkeeping: its task, its halt, the nudges waiting for the model."""

    __slots__ = ("task", "halt", "latest", "nudges", "dirty")

    def __init__(self, task: str) -> None:
        self.task = task
        self.halt: Optional[Verdict] = None
        # The last warn or halt verdict of the run (None while it is healthy).
        self.latest: Optional[Verdict] = None
        self.nudges: List[str] = []
        # `latest` changed since the framework last saw it.
        self.dirty = False


class Watcher:
    """A monitor and the runs it watches; the part of every adapter that talks to the Monitor.

    Thread-safe: frameworks run parallel tool calls on threads; the Monitor has its own lock and
    the run table and the runs' nudges are only changed under ``_lock``.
    """

    def __init__(self, monitor: Monitor, prefix: str) -> None:
        self.monitor = monitor
        self.prefix = prefix
        self.last_verdict: Optional[Verdict] = None
        self.observe_errors = 0
        self._runs: Dict[str, Run] = {}  # in the order they opened
        self._lock = threading.Lock()

    def run(self, task: str) -> Run:
        run = self._runs.get(task)
        if run is not None:
            return run
        oldest: List[str] = []
        with self._lock:
            run = self._runs.get(task)
            if run is None:
                run = self._runs[task] = Run(task)
                stale = len(self._runs) - MAX_OPEN_RUNS
                if stale > 0:
                    oldest = list(self._runs)[:stale]
        for old in oldest:
            self.close(old)
        return run

    def observe(self, run: Run, event: Dict[str, Any]) -> Verdict:
        """Feed one event of ``run`` to the monitor and remember what came of it (a run whose
        task is ``""`` counts for the Monitor's current task)."""
        if run.task:
            event["taskId"] = run.task
        try:
            verdict = self.monitor.observe(event)
        except AgentBreakerError as error:
            verdict = self._observe_again(event, error)
        else:
            # A halted task answers every later event with its halt until the Monitor is reset:
            # any other answer for a run still open means it was, and the run goes on. (A run
            # the adapter closed keeps its halt: its late events reach a new task.)
            if run.halt is not None and verdict["action"] != "halt" and self._runs.get(run.task) is run:
                run.halt = None
        action = verdict["action"]
        if action != "continue":
            self._note(run, verdict)
        return verdict

    def _observe_again(self, event: Dict[str, Any], error: AgentBreakerError) -> Verdict:
        """An event the Monitor refused (a tool input holding a datetime, a NaN, ...) is made
        JSON-safe and given again; if it is still refused (or the Monitor failed), the agent goes
        on: the adapter never stops a run by a fault of its own. Counted in ``observe_errors``."""
        if isinstance(error, InvalidEventError):
            try:
                return self.monitor.observe(json_safe(event))
            except AgentBreakerError as again:
                error = again
        self.observe_errors += 1
        if self.observe_errors == 1:
            warnings.warn(f"agentbreaker: an event was not watched ({error.code}: {error})", RuntimeWarning, stacklevel=3)
        task = event.get("taskId")
        return {
            "action": "continue",
            "reason": None,
            "message": None,
            "nudge": None,
            "taskId": task if isinstance(task, str) else None,
            "step": 0,
            "detail": None,
        }

    def _note(self, run: Run, verdict: Verdict) -> None:
        self.last_verdict = verdict
        run.latest = verdict
        run.dirty = True
        if verdict["action"] == "halt":
            run.halt = verdict
        elif verdict.get("nudge"):
            with self._lock:  # parallel tool calls: a nudge is given once, to one of them
                run.nudges.append(nudge_text(verdict))

    def take_nudges(self, run: Run) -> List[str]:
        if not run.nudges:
            return run.nudges
        with self._lock:
            nudges, run.nudges = run.nudges, []
        return nudges

    def close(self, task: str) -> Optional[Run]:
        """The run is over: the Monitor forgets its task (its halt is kept by the adapter and in
        what the framework returned) and a new run starts from zero."""
        with self._lock:
            run = self._runs.pop(task, None)
        if run is not None and task:
            done: MonitorEvent = {"type": "heartbeat", "taskId": task, "phase": "done"}
            try:
                self.monitor.observe(done)
            except AgentBreakerError as error:
                self._observe_again(dict(done), error)
        return run

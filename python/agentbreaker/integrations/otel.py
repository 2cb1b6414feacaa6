"""OpenTelemetry metrics and span events for a `Monitor` or any breaker (docs/observability.md).

Needs ``opentelemetry-api`` (the ``otel`` extra: ``pip install 'agentbreaker[otel]'``)::

    from agentbreaker import Monitor
    from agentbreaker.integrations.otel import instrument

    monitor = Monitor(profile="coding-agent")
    instrument(monitor)               # the global meter provider; or meter_provider=provider

The instruments are the core's vocabulary (`agentbreaker.metric_definitions()`, defined once in
the Rust core): the counters ``agentbreaker.halts`` and ``agentbreaker.warnings`` (attribute
``reason``, the rule's slug), ``agentbreaker.state_changes`` (``breaker``, ``from``, ``to``),
``agentbreaker.tool_calls`` and ``agentbreaker.spend`` (cents), and the histogram
``agentbreaker.task.steps`` (``outcome``). ``task=True`` adds the ``task`` attribute (one series
per task: at most 1000 task values per instrumentation, later tasks as ``task="_other"``).

Every warning and halt also becomes an event on the current span (``agentbreaker.warning``,
``agentbreaker.halt``, with ``agentbreaker.reason``, ``.task``, ``.step``, ``.message``,
``.nudge``), and a breaker's state change an ``agentbreaker.state_change`` event; without an
active recording span nothing is added.

A Monitor reports its updates to one recorder (`Monitor.set_metrics_recorder`): the metrics of a
later `instrument` call on the same Monitor replace the earlier one's (whose `uninstrument()` then
leaves the later one alone). A breaker is instrumented through a listener.
`Instrumentation.uninstrument()` undoes it.
"""

from __future__ import annotations

import threading
import weakref
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple, Type, Union

from .. import _native
from .._native import BudgetBreaker, ExitStrategy, Loop, Monitor, StagnationBreaker
from .._native import FailureBreaker as _NativeFailureBreaker
from ..types import Event, MetricUpdate

try:
    # Type-checked where the extra is installed (make test-python-otel); the core test environment
    # checks this package without it.
    from opentelemetry import metrics as _metrics  # type: ignore[import-not-found, unused-ignore]
    from opentelemetry import trace as _trace  # type: ignore[import-not-found, unused-ignore]
except ImportError as e:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "agentbreaker.integrations.otel needs opentelemetry-api: pip install 'agentbreaker[otel]'"
    ) from e

__all__ = [
    "MAX_TASKS",
    "OTHER_TASK",
    "SCOPE",
    "SPAN_EVENT_HALT",
    "SPAN_EVENT_STATE_CHANGE",
    "SPAN_EVENT_WARNING",
    "Instrumentation",
    "instrument",
]

SCOPE = "agentbreaker"
"""The instrumentation scope (meter name)."""
SPAN_EVENT_WARNING = "agentbreaker.warning"
SPAN_EVENT_HALT = "agentbreaker.halt"
SPAN_EVENT_STATE_CHANGE = "agentbreaker.state_change"
MAX_TASKS = 1000
"""The most task values one instrumentation reports (``task=True``); later tasks count as
`OTHER_TASK` (as the Node adapter does)."""
OTHER_TASK = "_other"

Instrumentable = Union[
    Monitor, _NativeFailureBreaker, StagnationBreaker, BudgetBreaker, Loop, ExitStrategy
]

_BREAKERS: Tuple[Tuple[type, str], ...] = (
    (Monitor, "monitor"),
    (_NativeFailureBreaker, "failure"),
    (StagnationBreaker, "stagnation"),
    (BudgetBreaker, "budget"),
    (Loop, "loop"),
    (ExitStrategy, "strategy"),
)

# Instruments per meter provider (kept alive here, so an id is never reused): creating the same
# instrument twice on one meter makes the SDK warn.
_Record = Callable[[float, Mapping[str, str]], None]
_cache: Dict[int, Tuple[Any, Dict[str, _Record]]] = {}
_cache_lock = threading.Lock()


def _instruments(provider: Any) -> Dict[str, _Record]:
    with _cache_lock:
        hit = _cache.get(id(provider))
        if hit is not None and hit[0] is provider:
            return hit[1]
        meter = provider.get_meter(SCOPE, _native.__version__)
        table: Dict[str, _Record] = {}
        for d in _native.metric_definitions():
            if d["instrument"] == "counter":
                table[d["name"]] = meter.create_counter(
                    d["name"], unit=d["unit"], description=d["description"]
                ).add
            else:
                try:
                    h = meter.create_histogram(
                        d["name"],
                        unit=d["unit"],
                        description=d["description"],
                        explicit_bucket_boundaries_advisory=d.get("buckets"),
                    )
                except TypeError:  # opentelemetry-api before 1.23: no advisory buckets
                    h = meter.create_histogram(d["name"], unit=d["unit"], description=d["description"])
                table[d["name"]] = h.record
        _cache[id(provider)] = (provider, table)
        return table


def _recorder(table: Dict[str, _Record], task: bool) -> Callable[[List[MetricUpdate]], None]:
    get = table.get
    # With task=True: the task values seen so far (at most MAX_TASKS); a later task is `_other`.
    tasks: Set[str] = set()
    tasks_lock = threading.Lock()

    def task_value(task_id: str) -> str:
        if task_id in tasks:
            return task_id
        with tasks_lock:
            if task_id in tasks or len(tasks) < MAX_TASKS:
                tasks.add(task_id)
                return task_id
        return OTHER_TASK

    def record(updates: List[MetricUpdate]) -> None:
        for name, value, attributes in updates:
            add = get(name)
            if add is None:
                continue
            if task:
                task_id = attributes.get("task")
                if task_id is not None and task_id not in tasks:
                    folded = task_value(task_id)
                    if folded != task_id:
                        attributes = {**attributes, "task": folded}
            add(value, attributes)

    return record


# The Monitors' live recorders (a Monitor has one): only the instrumentation whose recorder is
# live may remove it. Keyed by id, with a weak reference (a Monitor subclass may define __eq__):
# an entry goes with its Monitor.
_live: Dict[int, Tuple["weakref.ReferenceType[Monitor]", Callable[[List[MetricUpdate]], None]]] = {}
_live_lock = threading.Lock()


def _set_live(monitor: Monitor, record: Callable[[List[MetricUpdate]], None], task: bool) -> None:
    key = id(monitor)

    def gone(ref: "weakref.ReferenceType[Monitor]") -> None:
        with _live_lock:
            hit = _live.get(key)
            if hit is not None and hit[0] is ref:
                del _live[key]

    with _live_lock:
        monitor.set_metrics_recorder(record, task=task)
        _live[key] = (weakref.ref(monitor, gone), record)


def _clear_live(monitor: Monitor, record: Callable[[List[MetricUpdate]], None]) -> None:
    key = id(monitor)
    with _live_lock:
        hit = _live.get(key)
        if hit is None or hit[0]() is not monitor or hit[1] is not record:
            return  # replaced by a later instrument(): that one stays
        del _live[key]
        monitor.set_metrics_recorder(None)


def _attributes(pairs: Mapping[str, Any]) -> Dict[str, Union[str, int]]:
    """OpenTelemetry attributes cannot be None: the missing ones are left out."""
    return {f"agentbreaker.{k}": v for k, v in pairs.items() if v is not None}


def _span_event(event: Mapping[str, Any], breaker: str) -> None:
    span = _trace.get_current_span()
    if not span.is_recording():
        return
    kind = event.get("type")
    if kind == "verdict":
        name = SPAN_EVENT_HALT if event.get("action") == "halt" else SPAN_EVENT_WARNING
        attrs = _attributes(
            {
                "reason": event.get("reason"),
                "task": event.get("taskId"),
                "step": event.get("step"),
                "message": event.get("message"),
                "nudge": event.get("nudge"),
            }
        )
    elif kind == "halt":
        halt = event.get("halt") or {}
        name = SPAN_EVENT_HALT
        attrs = _attributes(
            {
                "reason": halt.get("slug"),
                "task": halt.get("taskId"),
                "message": halt.get("message"),
                "breaker": breaker,
            }
        )
    elif kind == "warning":
        name = SPAN_EVENT_WARNING
        attrs = _attributes({"reason": "warning", "message": event.get("message"), "breaker": breaker})
    elif kind == "stateChange":
        name = SPAN_EVENT_STATE_CHANGE
        attrs = _attributes(
            {
                "breaker": breaker,
                "from": event.get("from"),
                "to": event.get("to"),
                "message": event.get("reason"),
            }
        )
    else:
        return
    span.add_event(name, attrs)


class Instrumentation:
    """What `instrument` set up; `uninstrument()` (or leaving a ``with`` block) undoes it."""

    __slots__ = ("target", "breaker", "_listener", "_monitor_recorder", "_active")

    def __init__(
        self,
        target: Instrumentable,
        breaker: str,
        listener: Optional[Callable[[Event], object]],
        monitor_recorder: Optional[Callable[[List[MetricUpdate]], None]],
    ) -> None:
        self.target = target
        self.breaker = breaker
        self._listener = listener
        self._monitor_recorder = monitor_recorder
        self._active = True

    def uninstrument(self) -> None:
        """Stops the metrics and span events of this instrumentation (idempotent). A Monitor's
        metrics stop only while they are this instrumentation's: after a later `instrument` of the
        same Monitor replaced them, that one's go on."""
        if not self._active:
            return
        self._active = False
        if self._listener is not None:
            self.target.remove_listener(self._listener)
        if self._monitor_recorder is not None and isinstance(self.target, Monitor):
            _clear_live(self.target, self._monitor_recorder)

    def __enter__(self) -> "Instrumentation":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.uninstrument()

    def __repr__(self) -> str:
        state = "active" if self._active else "removed"
        return f"Instrumentation({self.breaker}, {state})"


def instrument(
    obj: Instrumentable,
    meter_provider: Optional[Any] = None,
    *,
    task: bool = False,
    span_events: bool = True,
    breaker: Optional[str] = None,
) -> Instrumentation:
    """Reports `obj`'s metrics to OpenTelemetry and its warnings and halts as span events.

    `obj` is a `Monitor` or a breaker (`FailureBreaker`, `StagnationBreaker`, `BudgetBreaker`,
    `Loop`, `ExitStrategy`). `meter_provider` defaults to the global one (until the application
    sets one, the API's no-op proxy: the instruments start recording once it does). `task=True`
    adds the ``task`` attribute (at most `MAX_TASKS` task values, later tasks as `OTHER_TASK`);
    `span_events=False` leaves spans alone; `breaker` overrides the
    ``breaker`` attribute of state changes (default: the kind of `obj`).
    """
    kind = next((name for cls, name in _BREAKERS if isinstance(obj, cls)), None)
    if kind is None:
        raise TypeError(
            f"instrument() takes a Monitor or a breaker, not {type(obj).__name__}"
        )
    name = breaker or kind
    provider = meter_provider if meter_provider is not None else _metrics.get_meter_provider()
    record = _recorder(_instruments(provider), task)

    if isinstance(obj, Monitor):
        _set_live(obj, record, task)
        listener: Optional[Callable[[Event], object]] = None
        if span_events:

            def on_verdict(event: Event) -> None:
                _span_event(event, name)

            listener = on_verdict
            obj.add_listener(listener)
        return Instrumentation(obj, name, listener, monitor_recorder=record)

    updates = _native.metric_updates

    def on_event(event: Event) -> None:
        record(updates(event, name, task=task))
        if span_events:
            _span_event(event, name)

    obj.add_listener(on_event)
    return Instrumentation(obj, name, on_event, monitor_recorder=None)

"""agentbreaker.integrations.otel with the real OpenTelemetry SDK (make test-python-otel): the
exact counts of a scripted stuck session (one warning, one halt, reason repeated_step) and a
healthy one (none) read back from an InMemoryMetricReader, span events from an
InMemorySpanExporter, and the breakers' listener events."""

from __future__ import annotations

import sys
from typing import Any, Dict, FrozenSet, List, Mapping, Tuple

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentbreaker
from agentbreaker import BudgetBreaker, FailureBreaker, Monitor, StagnationBreaker
from agentbreaker.integrations import otel
from agentbreaker.integrations.otel import Instrumentation, instrument

Key = Tuple[str, FrozenSet[Tuple[str, Any]]]


def stuck() -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []
    for i in range(8):
        out += [
            {"type": "assistant", "text": "Let me check the build again."},
            {"type": "tool_use", "name": "Bash", "id": f"t{i}", "input": {"command": "make check"}},
            {"type": "tool_result", "id": f"t{i}", "ok": True, "text": "nothing to be done"},
        ]
    return out


def healthy() -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = [{"type": "heartbeat", "taskId": "fix", "phase": "starting"}]
    for i, w in enumerate(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]):
        out += [
            {"type": "assistant", "text": f"Now the {w} module."},
            {"type": "tool_use", "name": "Edit", "id": f"t{i}", "input": {"file": f"{w}.py"}},
            {"type": "progress", "files": [f"{w}.py"]},
            {"type": "tool_result", "id": f"t{i}", "ok": True, "text": f"edited {w}.py"},
            {"type": "usage", "costCents": 1.5},
        ]
    out.append({"type": "heartbeat", "taskId": "fix", "phase": "done"})
    return out


def monitor() -> Monitor:
    # repeatThreshold 4 with the default warnBefore 2: the warning at the 2nd identical step, the
    # halt at the 4th.
    return Monitor({"stagnation": {"repeatThreshold": 4}})


def read(reader: InMemoryMetricReader) -> Tuple[Dict[Key, Any], Dict[str, str]]:
    """{(name, attributes): value, or (count, sum) for a histogram}, and name -> unit."""
    points: Dict[Key, Any] = {}
    units: Dict[str, str] = {}
    data = reader.get_metrics_data()
    if data is None:
        return points, units
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            assert sm.scope.name == "agentbreaker"
            assert sm.scope.version == agentbreaker.__version__
            for m in sm.metrics:
                units[m.name] = m.unit or ""
                for p in m.data.data_points:
                    key = (m.name, frozenset((p.attributes or {}).items()))
                    if isinstance(p, HistogramDataPoint):
                        points[key] = (p.count, p.sum)
                    elif isinstance(p, NumberDataPoint):
                        points[key] = p.value
                    else:
                        raise AssertionError(f"unexpected data point {p!r}")
    return points, units


def total(points: Mapping[Key, Any], name: str) -> float:
    return float(sum(v for (n, _), v in points.items() if n == name and not isinstance(v, tuple)))


def attrs(**kv: str) -> FrozenSet[Tuple[str, str]]:
    return frozenset(kv.items())


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def provider(reader: InMemoryMetricReader) -> MeterProvider:
    return MeterProvider(metric_readers=[reader])


@pytest.fixture
def spans() -> Tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


def test_stuck_session_one_warning_one_halt(
    reader: InMemoryMetricReader,
    provider: MeterProvider,
    spans: Tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    m = monitor()
    inst = instrument(m, meter_provider=provider)
    assert isinstance(inst, Instrumentation)
    tp, exporter = spans
    verdicts = []
    with tp.get_tracer("agent").start_as_current_span("agent.run"):
        for e in stuck():
            verdicts.append(m.observe(e))
    assert sum(v["action"] == "warn" for v in verdicts) == 1
    assert sum(v["action"] == "halt" for v in verdicts) > 1  # a halted task repeats its halt
    points, units = read(reader)
    assert points[("agentbreaker.warnings", attrs(reason="repeated_step"))] == 1
    assert total(points, "agentbreaker.warnings") == 1
    assert points[("agentbreaker.halts", attrs(reason="repeated_step"))] == 1
    assert total(points, "agentbreaker.halts") == 1
    assert points[("agentbreaker.tool_calls", frozenset())] == 4
    assert points[("agentbreaker.task.steps", attrs(outcome="halted"))] == (1, 4)
    assert units["agentbreaker.halts"] == "{halt}"
    assert units["agentbreaker.task.steps"] == "{step}"
    # One span event per warning and per halt, on the current span.
    (span,) = exporter.get_finished_spans()
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert [n for n, _ in events] == ["agentbreaker.warning", "agentbreaker.halt"]
    for _, a in events:
        assert a["agentbreaker.reason"] == "repeated_step"
        assert a["agentbreaker.task"] == "session"
        assert isinstance(a["agentbreaker.message"], str) and a["agentbreaker.nudge"]
    assert events[0][1]["agentbreaker.step"] == 2 and events[1][1]["agentbreaker.step"] == 4


def test_healthy_session_no_warning_no_halt(
    reader: InMemoryMetricReader, provider: MeterProvider
) -> None:
    m = monitor()
    instrument(m, meter_provider=provider, task=True)
    for e in healthy():
        assert m.observe(e)["action"] == "continue"
    points, _ = read(reader)
    assert total(points, "agentbreaker.warnings") == 0
    assert total(points, "agentbreaker.halts") == 0
    assert points[("agentbreaker.tool_calls", attrs(task="fix"))] == 6
    assert points[("agentbreaker.spend", attrs(task="fix"))] == pytest.approx(9.0)
    assert points[("agentbreaker.task.steps", attrs(outcome="done"))] == (1, 6)


def test_the_instruments_are_the_core_vocabulary(
    reader: InMemoryMetricReader, provider: MeterProvider
) -> None:
    m = monitor()
    instrument(m, meter_provider=provider)
    for e in stuck():
        m.observe(e)
    _, units = read(reader)
    vocabulary = {d["name"]: d for d in agentbreaker._native.metric_definitions()}
    assert set(vocabulary) == {
        "agentbreaker.halts", "agentbreaker.warnings", "agentbreaker.state_changes",
        "agentbreaker.tool_calls", "agentbreaker.spend", "agentbreaker.task.steps",
    }
    for name, unit in units.items():
        assert vocabulary[name]["unit"] == unit
    assert vocabulary["agentbreaker.spend"]["prometheusName"] == "agentbreaker_spend_total"


def test_uninstrument_and_a_second_instrument(
    reader: InMemoryMetricReader, provider: MeterProvider
) -> None:
    m = monitor()
    with instrument(m, meter_provider=provider):
        m.observe({"type": "tool_use", "name": "Read"})
    m.observe({"type": "tool_use", "name": "Read"})
    points, _ = read(reader)
    assert points[("agentbreaker.tool_calls", frozenset())] == 1
    # Instrumenting again on the same provider reuses its instruments (no duplicate warning).
    instrument(m, meter_provider=provider)
    m.observe({"type": "tool_use", "name": "Read"})
    points, _ = read(reader)
    assert points[("agentbreaker.tool_calls", frozenset())] == 2


def test_breakers_state_changes_warnings_and_halts(
    reader: InMemoryMetricReader,
    provider: MeterProvider,
    spans: Tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    fb = FailureBreaker(failure_threshold=3, warning_threshold=2)
    instrument(fb, meter_provider=provider)
    bb = BudgetBreaker(max_tool_calls_per_task=1)
    instrument(bb, meter_provider=provider, task=True)
    sb = StagnationBreaker()
    instrument(sb, meter_provider=provider, breaker="planner")
    tp, exporter = spans
    with tp.get_tracer("agent").start_as_current_span("agent.run"):
        for _ in range(3):
            fb.record_failure("Error: Path not found")
        bb.ingest({"type": "tool_use", "name": "fetch", "taskId": "t1"})
        bb.ingest({"type": "tool_use", "name": "fetch", "taskId": "t1"})
    points, _ = read(reader)
    key = frozenset({("breaker", "failure"), ("from", "CLOSED"), ("to", "OPEN")})
    assert points[("agentbreaker.state_changes", key)] == 1
    assert points[("agentbreaker.warnings", attrs(reason="warning"))] >= 1
    assert points[("agentbreaker.halts", attrs(reason="tool_call_limit", task="t1"))] == 1
    names = [e.name for e in exporter.get_finished_spans()[0].events]
    assert "agentbreaker.state_change" in names and "agentbreaker.halt" in names


def test_without_a_meter_provider_nothing_breaks() -> None:
    # The API's global proxy (no SDK configured): instrumented, observed, nothing recorded.
    m = monitor()
    inst = instrument(m)
    for e in stuck():
        m.observe(e)
    inst.uninstrument()
    inst.uninstrument()
    with pytest.raises(TypeError):
        instrument(object())  # type: ignore[arg-type]


def test_a_raising_recorder_does_not_break_observe(monkeypatch: pytest.MonkeyPatch) -> None:
    m = Monitor()
    calls: List[Any] = []
    unraisable: List[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(u.exc_value))

    def bad(updates: List[Any]) -> None:
        calls.append(updates)
        raise RuntimeError("recorder")

    m.set_metrics_recorder(bad)
    assert m.observe({"type": "tool_use", "name": "x"})["action"] == "continue"
    assert calls == [[("agentbreaker.tool_calls", 1.0, {})]]
    assert [type(e) for e in unraisable] == [RuntimeError]
    m.set_metrics_recorder(None)
    m.observe({"type": "tool_use", "name": "x"})
    assert len(calls) == 1
    with pytest.raises(TypeError):
        m.set_metrics_recorder(42)  # type: ignore[arg-type]


def test_uninstrumenting_a_replaced_instrumentation_leaves_the_live_one() -> None:
    r1, r2 = InMemoryMetricReader(), InMemoryMetricReader()
    p1, p2 = MeterProvider(metric_readers=[r1]), MeterProvider(metric_readers=[r2])
    m = monitor()
    first = instrument(m, meter_provider=p1)
    second = instrument(m, meter_provider=p2)  # replaces the first one's metrics
    m.observe({"type": "tool_use", "name": "Read"})
    first.uninstrument()  # not live: the second goes on
    m.observe({"type": "tool_use", "name": "Read"})
    assert read(r1)[0] == {}
    assert read(r2)[0][("agentbreaker.tool_calls", frozenset())] == 2
    second.uninstrument()  # live: the Monitor's metrics stop
    m.observe({"type": "tool_use", "name": "Read"})
    assert read(r2)[0][("agentbreaker.tool_calls", frozenset())] == 2
    # Uninstrumented in the order they were made, or the other way: the same.
    third = instrument(m, meter_provider=p1)
    with instrument(m, meter_provider=p2):
        third.uninstrument()
        m.observe({"type": "tool_use", "name": "Read"})
    m.observe({"type": "tool_use", "name": "Read"})
    assert read(r1)[0] == {}
    assert read(r2)[0][("agentbreaker.tool_calls", frozenset())] == 3


def test_task_attribute_reports_at_most_max_tasks_values_then_other(
    reader: InMemoryMetricReader, provider: MeterProvider
) -> None:
    # As the Node adapter and docs/observability.md: 1000 task values, then "_other".
    MAX_TASKS, OTHER_TASK = 1000, "_other"
    m = Monitor()
    instrument(m, meter_provider=provider, task=True)
    bb = BudgetBreaker(max_tool_calls_per_task=1)
    instrument(bb, meter_provider=provider, task=True)
    for i in range(MAX_TASKS + 500):
        m.observe({"type": "tool_use", "name": "Read", "taskId": f"task-{i}"})
        m.observe({"type": "heartbeat", "taskId": f"task-{i}", "phase": "done"})
    # A task seen before the cap keeps its own value.
    m.observe({"type": "tool_use", "name": "Read", "taskId": "task-7"})
    points, _ = read(reader)
    calls = {
        dict(a).get("task"): v for (n, a), v in points.items() if n == "agentbreaker.tool_calls"
    }
    assert len(calls) == MAX_TASKS + 1
    assert calls[OTHER_TASK] == 500
    assert calls["task-7"] == 2 and calls[f"task-{MAX_TASKS - 1}"] == 1
    assert f"task-{MAX_TASKS}" not in calls
    assert total(points, "agentbreaker.tool_calls") == MAX_TASKS + 501
    # A breaker's instrumentation has its own cap.
    for i in range(MAX_TASKS + 2):
        bb.ingest({"type": "tool_use", "name": "fetch", "taskId": f"b{i}"})
        bb.ingest({"type": "tool_use", "name": "fetch", "taskId": f"b{i}"})
    points, _ = read(reader)
    halts = {dict(a)["task"]: v for (n, a), v in points.items() if n == "agentbreaker.halts"}
    assert len(halts) == MAX_TASKS + 1 and halts[OTHER_TASK] == 2
    assert (otel.MAX_TASKS, otel.OTHER_TASK) == (MAX_TASKS, OTHER_TASK)

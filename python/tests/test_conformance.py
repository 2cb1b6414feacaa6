"""The Python runner of the shared conformance suite (tests/conformance/README.md).

One test per scenario file under ``AGENTBREAKER_CONFORMANCE_DIR`` (default: the repository's
``tests/conformance``), named by its path without ``.json``. Each op is mapped onto the public
Python API (keyword-argument constructors, snake_case methods, the ``@breaker`` decorator for
guarded calls); results are partial-matched as the suite's README says. An unknown top-level key,
subject, op, step key or argument fails the test rather than being skipped.

``AGENTBREAKER_CONFORMANCE_STORE`` set to a Redis URL runs every ``failure`` scenario with its
state in that store (contract §12; ``make test-redis``), each on a key prefix of its own, as the Rust
runner does: after the last step a second breaker on the same key must see the same status, and
the store must have stayed reachable throughout.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import agentbreaker as ab

SUITE = Path(
    os.environ.get("AGENTBREAKER_CONFORMANCE_DIR")
    or Path(__file__).resolve().parents[2] / "tests" / "conformance"
)

TOP_KEYS = {"description", "subject", "config", "configError", "spec", "steps"}
STEP_KEYS = {"op", "at", "args", "repeat", "expect", "expectError"}


def _scenario_files() -> List[Path]:
    if not SUITE.is_dir():
        raise RuntimeError(f"conformance suite not found: {SUITE}")
    files = [p for p in SUITE.rglob("*.json") if p.name != "schema.json"]
    return sorted(files, key=lambda p: p.relative_to(SUITE).as_posix())


def _name(path: Path) -> str:
    return path.relative_to(SUITE).with_suffix("").as_posix()


FILES = _scenario_files()

STORE = os.environ.get("AGENTBREAKER_CONFORMANCE_STORE") or None
"""A Redis URL: the ``failure`` scenarios run with their state in it."""


def store_keywords(path: Path) -> Dict[str, Any]:
    """``store``, a key prefix of the scenario's own (new in every run) and a generous
    ``store_timeout_ms`` (a busy machine must not turn a slow answer into an outage)."""
    key = f"conformance-py:{os.getpid()}:{time.time_ns()}:{path.stem}"
    return {"store": STORE, "key": key, "store_timeout_ms": 5000}


class ScenarioError(AssertionError):
    """A mismatch between the scenario and what the Python API did."""


# --- conversions between the scenario's camelCase keys and Python's snake_case keywords --------


def _snake(key: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), key)


def _camel(keyword: str) -> str:
    first, *rest = keyword.split("_")
    return first + "".join(word.capitalize() for word in rest)


def keywords(obj: Dict[str, Any]) -> Dict[str, Any]:
    """A scenario object's camelCase keys as Python keyword names (values unchanged)."""
    out = {}
    for key, value in obj.items():
        keyword = _snake(key)
        if _camel(keyword) != key:
            raise ScenarioError(f"key {key!r} has no snake_case spelling that maps back to it")
        out[keyword] = value
    return out


def substitute_tmp(value: Any, tmp: Path) -> Any:
    if isinstance(value, str) and value.startswith("$TMP/"):
        return str(tmp / value[len("$TMP/"):])
    if isinstance(value, list):
        return [substitute_tmp(v, tmp) for v in value]
    if isinstance(value, dict):
        return {k: substitute_tmp(v, tmp) for k, v in value.items()}
    return value


# --- matching ----------------------------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def partial_match(expected: Any, actual: Any, path: str = "$") -> None:
    """``expect`` semantics: every key given matches, recursively; arrays elementwise with equal
    length; numbers within 1e-9; ``null`` matches only None (or an absent key)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise ScenarioError(f"at {path}: expected an object {expected!r}, got {actual!r}")
        for key, value in expected.items():
            partial_match(value, actual.get(key), f"{path}.{key}")
    elif isinstance(expected, list):
        if not isinstance(actual, list):
            raise ScenarioError(f"at {path}: expected a list {expected!r}, got {actual!r}")
        if len(expected) != len(actual):
            raise ScenarioError(
                f"at {path}: expected {len(expected)} elements, got {len(actual)}: {actual!r}"
            )
        for i, (e, a) in enumerate(zip(expected, actual)):
            partial_match(e, a, f"{path}[{i}]")
    elif _is_number(expected):
        if not _is_number(actual) or not math.isclose(expected, actual, rel_tol=0, abs_tol=1e-9):
            raise ScenarioError(f"at {path}: expected {expected!r}, got {actual!r}")
    elif expected is None or isinstance(expected, (bool, str)):
        if type(actual) is not type(expected) or actual != expected:
            raise ScenarioError(f"at {path}: expected {expected!r}, got {actual!r}")
    else:
        raise ScenarioError(f"at {path}: unsupported expected value {expected!r}")


# --- subjects ----------------------------------------------------------------------------------

Op = Callable[[Dict[str, Any]], Any]


class GuardedFunctionFailed(Exception):
    """What the function of a `call` step raises when the step gives an `error`."""


def only(args: Dict[str, Any], *allowed: str) -> None:
    unknown = set(args) - set(allowed)
    if unknown:
        raise ScenarioError(f"unknown argument(s) {sorted(unknown)}")


def no_args(run: Callable[[], Any]) -> Op:
    """An op without arguments."""

    def op(args: Dict[str, Any]) -> Any:
        only(args)
        return run()

    return op


def positional(args: Dict[str, Any], name: str) -> List[Any]:
    """A required positional argument, left out when the scenario leaves it out (the API then
    raises its error, as a Python call without the argument would)."""
    return [args[name]] if name in args else []


def failure_ops(breaker: ab.FailureBreaker) -> Dict[str, Op]:
    def record_failure(args: Dict[str, Any]) -> None:
        only(args, "error")
        breaker.record_failure(*positional(args, "error"))

    def should_allow_operation(args: Dict[str, Any]) -> Dict[str, Any]:
        only(args)
        allowed, message = breaker.should_allow_operation()
        return {"allowed": allowed, "message": message}

    def call(args: Dict[str, Any]) -> Dict[str, Any]:
        only(args, "error")
        error = args.get("error")
        if error is not None and not isinstance(error, str):
            raise ScenarioError("call: error must be a string")
        ran: List[bool] = []

        @breaker
        def guarded() -> None:
            ran.append(True)
            if error is not None:
                raise GuardedFunctionFailed(error)

        try:
            guarded()
        except GuardedFunctionFailed:
            return {"called": True, "ok": False}
        except ab.CircuitOpenError:
            if ran:
                raise ScenarioError("the guarded function ran although the call was refused")
            raise
        return {"called": True, "ok": True}

    def save(args: Dict[str, Any]) -> None:
        only(args, "path")
        breaker.save(*positional(args, "path"))

    def load(args: Dict[str, Any]) -> Dict[str, Any]:
        only(args, "path")
        return {"loaded": breaker.load(*positional(args, "path"))}

    def restore(args: Dict[str, Any]) -> None:
        only(args, "snapshot")
        breaker.restore(*positional(args, "snapshot"))

    return {
        "recordSuccess": no_args(breaker.record_success),
        "recordFailure": record_failure,
        "shouldAllowOperation": should_allow_operation,
        "getStatus": no_args(breaker.get_status),
        "metrics": no_args(breaker.metrics),
        "reset": no_args(breaker.reset),
        "snapshot": no_args(breaker.snapshot),
        "restore": restore,
        "call": call,
        "save": save,
        "load": load,
    }


def stagnation_ops(breaker: ab.StagnationBreaker) -> Dict[str, Op]:
    def record_progress(args: Dict[str, Any]) -> None:
        only(args, "filesChanged", "testsPassing", "outputLength")
        breaker.record_progress(**keywords(args))

    def record_error(args: Dict[str, Any]) -> None:
        only(args, "error", "transient")
        extra = {"transient": args["transient"]} if "transient" in args else {}
        breaker.record_error(*positional(args, "error"), **extra)

    def record_step(args: Dict[str, Any]) -> None:
        only(args, "action", "result", "failed")
        extra = {k: args[k] for k in ("result", "failed") if k in args}
        breaker.record_step(*positional(args, "action"), **extra)

    def restore(args: Dict[str, Any]) -> None:
        only(args, "snapshot")
        breaker.restore(*positional(args, "snapshot"))

    return {
        "recordProgress": record_progress,
        "recordError": record_error,
        "recordStep": record_step,
        "check": no_args(breaker.check),
        "getStatus": no_args(breaker.get_status),
        "reset": no_args(breaker.reset),
        "snapshot": no_args(breaker.snapshot),
        "restore": restore,
    }


def budget_ops(breaker: ab.BudgetBreaker) -> Dict[str, Op]:
    def ingest(args: Dict[str, Any]) -> Dict[str, Any]:
        only(args, "event")
        return {"halt": breaker.ingest(*positional(args, "event"))}

    return {
        "ingest": ingest,
        "tick": no_args(lambda: {"halts": breaker.tick()}),
        "snapshot": no_args(breaker.snapshot),
        "reset": no_args(breaker.reset),
    }


def analyzer_ops() -> Dict[str, Op]:
    def analyze(args: Dict[str, Any]) -> Any:
        only(args, "text")
        return ab.analyze(*positional(args, "text"))

    return {"analyze": analyze}


def strategy_ops(strategy: ab.ExitStrategy) -> Dict[str, Op]:
    def should_exit(args: Dict[str, Any]) -> Any:
        only(args, "text", "circuitState")
        extra = {"circuit_state": args["circuitState"]} if "circuitState" in args else {}
        # As the suite says: the runner analyzes the text and hands the analysis on.
        return strategy.should_exit(ab.analyze(args.get("text", "")), **extra)

    ops: Dict[str, Op] = {
        "shouldExit": should_exit,
        "reset": no_args(strategy.reset),
    }
    if isinstance(strategy, ab.FixPlan):
        plan = strategy
        ops["getStatus"] = no_args(plan.get_status)
    return ops


def loop_ops(agent_loop: ab.Loop) -> Dict[str, Op]:
    def observe(args: Dict[str, Any]) -> Any:
        only(args, "output", "filesChanged", "testsPassing", "error", "events")
        rest = keywords({k: v for k, v in args.items() if k != "output"})
        return agent_loop.observe(*positional(args, "output"), **rest)

    return {
        "observe": observe,
        "getStatus": no_args(agent_loop.get_status),
        "reset": no_args(agent_loop.reset),
    }


def monitor_ops(monitor: ab.Monitor) -> Dict[str, Op]:
    snapshots: List[Any] = []  # the result of the latest `snapshot` step, for "$last_snapshot"

    def observe(args: Dict[str, Any]) -> Any:
        only(args, "event")
        return monitor.observe(*positional(args, "event"))

    def snapshot(args: Dict[str, Any]) -> Any:
        only(args)
        snapshots[:] = [monitor.snapshot()]
        return snapshots[0]

    def restore(args: Dict[str, Any]) -> None:
        only(args, "snapshot")
        if args.get("snapshot") == "$last_snapshot":
            if not snapshots:
                raise ScenarioError('restore of "$last_snapshot" before any snapshot step')
            args = {"snapshot": snapshots[0]}
        monitor.restore(*positional(args, "snapshot"))

    return {
        "observe": observe,
        "tick": no_args(lambda: {"verdicts": monitor.tick()}),
        "status": no_args(monitor.status),
        "snapshot": snapshot,
        "restore": restore,
        "reset": no_args(monitor.reset),
    }


def env_ops() -> Dict[str, Op]:
    def config_from_env(args: Dict[str, Any]) -> Any:
        only(args, "env")
        if "env" not in args:
            raise ScenarioError("configFromEnv needs env (None would read the process environment)")
        return ab.config_from_env(args["env"])

    return {"configFromEnv": config_from_env}


def build(
    subject: str,
    config: Dict[str, Any],
    clock: ab.ManualClock,
    events: List[Any],
    store: Optional[Dict[str, Any]] = None,
) -> Tuple[Dict[str, Op], Any]:
    """Builds the subject through its constructor and returns its ops and the object (with
    ``store``, the FailureBreaker gets those keywords too)."""
    if subject in ("analyzer", "env"):
        if config:
            raise ScenarioError(f"{subject} takes no config")
        return (analyzer_ops() if subject == "analyzer" else env_ops()), None
    kwargs = keywords(config)
    source: Any
    ops: Dict[str, Op]
    if subject == "failure":
        source = ab.FailureBreaker(clock=clock, **kwargs, **(store or {}))
        ops = failure_ops(source)
    elif subject == "stagnation":
        source = ab.StagnationBreaker(clock=clock, **kwargs)
        ops = stagnation_ops(source)
    elif subject == "budget":
        source = ab.BudgetBreaker(clock=clock, **kwargs)
        ops = budget_ops(source)
    elif subject == "strategy":
        source = ab.ExitStrategy(clock=clock, **kwargs)
        ops = strategy_ops(source)
    elif subject == "fixPlan":
        source = ab.FixPlan(clock=clock, **kwargs)
        ops = strategy_ops(source)
    elif subject == "loop":
        source = ab.Loop(clock=clock, **kwargs)
        ops = loop_ops(source)
    elif subject == "monitor":
        source = ab.Monitor(clock=clock, **kwargs)
        ops = monitor_ops(source)
    else:
        raise ScenarioError(f"unknown subject {subject!r}")
    source.add_listener(events.append)
    return ops, source


# --- running -----------------------------------------------------------------------------------


def run_step(
    ops: Dict[str, Op], step: Dict[str, Any], clock: ab.ManualClock, events: List[Any], tmp: Path
) -> None:
    unknown = set(step) - STEP_KEYS
    if unknown:
        raise ScenarioError(f"unknown step key(s) {sorted(unknown)}")
    op = step["op"]
    args = substitute_tmp(step.get("args", {}), tmp)
    if not isinstance(args, dict):
        raise ScenarioError("args must be an object")
    if op == "events":
        only(args)
        run: Op = lambda _args: {"events": drain(events)}
    elif op in ops:
        run = ops[op]
    else:
        raise ScenarioError(f"unknown op {op!r} for this subject")
    repeat = step.get("repeat", 1)
    expect_error: Optional[str] = step.get("expectError")
    if "at" in step:
        clock.set(step["at"])
    result: Any = None
    for _ in range(repeat):
        try:
            result = run(args)
        except ab.AgentBreakerError as e:
            if expect_error is None:
                raise ScenarioError(f"unexpected {type(e).__name__} ({e.code}): {e}") from e
            if e.code != expect_error:
                raise ScenarioError(
                    f"expected {expect_error}, got {type(e).__name__} ({e.code}): {e}"
                ) from e
        else:
            if expect_error is not None:
                raise ScenarioError(f"expected {expect_error}, got result {result!r}")
    if expect_error is None and "expect" in step:
        partial_match(step["expect"], result)


def drain(events: List[Any]) -> List[Any]:
    """What the listener received since the previous `events` step."""
    received = list(events)
    events.clear()
    return received


def run_scenario(path: Path, tmp: Path) -> None:
    scenario = json.loads(path.read_text(encoding="utf-8"))
    unknown = set(scenario) - TOP_KEYS
    if unknown:
        raise ScenarioError(f"unknown top-level key(s) {sorted(unknown)}")
    clock = ab.ManualClock(0)
    events: List[Any] = []
    config = substitute_tmp(scenario.get("config") or {}, tmp)
    config_error = scenario.get("configError")
    store = store_keywords(path) if STORE and scenario["subject"] == "failure" else None
    try:
        ops, source = build(scenario["subject"], config, clock, events, store)
    except ab.AgentBreakerError as e:
        if config_error is None:
            raise ScenarioError(f"construction failed: {type(e).__name__} ({e.code}): {e}") from e
        if e.code != config_error:
            raise ScenarioError(f"construction failed with {e.code}, expected {config_error}") from e
        return
    if config_error is not None:
        raise ScenarioError(f"construction succeeded, expected {config_error}")
    for i, step in enumerate(scenario["steps"]):
        try:
            run_step(ops, step, clock, events, tmp)
        except ScenarioError as e:
            raise ScenarioError(f"step {i} ({step.get('op')}): {e}") from e
    if store is not None:
        check_shared(source, config, clock, store)


def check_shared(
    breaker: ab.FailureBreaker, config: Dict[str, Any], clock: ab.ManualClock, store: Dict[str, Any]
) -> None:
    """The state really is in the store: a second breaker on the key sees the same status, and
    the store never went away during the scenario."""
    status = breaker.store_status()
    if status is None or status["mode"] != "shared" or status["outages"] != 0:
        raise ScenarioError(f"the store was not reachable throughout: {status!r}")
    twin = ab.FailureBreaker(clock=clock, **keywords(config), **store)
    mine, theirs = breaker.get_status(), twin.get_status()
    if mine != theirs:
        raise ScenarioError(f"a second breaker on the same key sees another status:\n{mine!r}\n{theirs!r}")


@pytest.mark.parametrize("path", FILES, ids=[_name(p) for p in FILES])
def test_scenario(path: Path, tmp_path: Path) -> None:
    run_scenario(path, tmp_path)


def test_suite_is_not_empty() -> None:
    assert FILES, f"no scenarios under {SUITE}"

"""The Python surface's benchmark (`make bench-python`): agentbreaker's guarded call and breaker
calls beside their peers, measured in this one process, written as target/bench/python.jsonl
(the protocol of tools/bench_table.py: one JSON object per measured operation and peer).

Method: every contender is a zero-argument loop body run `n` times per repetition, with `n`
calibrated in the warm-up so one repetition lasts about `--seconds` (0.3 s by default). The
contenders of one operation run interleaved (ours, peer, ours, peer, ...), 7 repetitions each;
the figure is the median ns per operation. The loop body is unrolled 10 times, so the loop's own
cost is a few ns per operation, included in every contender's figure alike.

Peers:
- pybreaker (`@CircuitBreaker()` on the same no-op): the Python circuit breaker most people use.
- loopguard (`@loopguard` on the same no-op): an agent-loop guard that counts repeated calls with
  the same arguments in a time window. It has no failure counting, so it is compared on the
  decorator's cost only; `max_repeats` is set out of reach and the window to 1 ms, so the no-op
  is never refused and its history stays short.
- `MiniBreaker` below: the smallest honest pure-Python equivalent of `should_allow_operation` +
  `record_success` (a state, a counter, a threshold, a time check, and a lock, since agentbreaker's
  breakers are thread-safe).

`--smoke` runs every contender a few hundred times and checks the outcome, without timing
anything that matters (`make test-python` runs it, so this file cannot rot unnoticed).

`--redis URL` (`make bench-python-redis`, a redis-server from tools/with_redis.sh) measures instead
the breakers whose state lives in Redis (contract section 12), on that server, in this one process:
- a guarded no-op call through `FailureBreaker(store=URL, key=...)` beside pybreaker's
  `CircuitBreaker(state_storage=CircuitRedisStorage(...))` with a redis-py client on the same
  server (issue 19: at least 5 times cheaper). In CLOSED ours answers from its view of the shared
  state (kept current by pub/sub) with no round trip; pybreaker reads the state from Redis on
  every call and writes the counter on every success.
- a guarded call that fails (the threshold out of reach): ours is one script call; pybreaker's
  failure path is several commands.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from itertools import cycle, repeat
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import loopguard
import pybreaker
import redis

import agentbreaker as ab

UNROLL = 10
REPETITIONS = 7

Body = Callable[[int], float]
"""Runs the operation `n * UNROLL` times and returns the elapsed ns."""


def loop_of(f: Callable[[], object]) -> Body:
    def body(n: int) -> float:
        clock = time.perf_counter_ns
        start = clock()
        for _ in repeat(None, n):
            f(); f(); f(); f(); f(); f(); f(); f(); f(); f()  # fmt: skip
        return float(clock() - start)

    return body


def pair_loop_of(first: Callable[[], object], second: Callable[[], object]) -> Body:
    """Each operation is `first()` then `second()` (two calls, no wrapper frame)."""

    def body(n: int) -> float:
        clock = time.perf_counter_ns
        start = clock()
        for _ in repeat(None, n):
            first(); second(); first(); second(); first(); second(); first(); second()  # fmt: skip
            first(); second(); first(); second(); first(); second(); first(); second()  # fmt: skip
            first(); second(); first(); second()  # fmt: skip
        return float(clock() - start)

    return body


def cycle_loop_of(f: Callable[[Any], object], items: List[Any]) -> Body:
    """Each operation is `f(item)` with the next of `items`, round and round."""

    def body(n: int) -> float:
        clock = time.perf_counter_ns
        it = cycle(items)
        start = clock()
        for _ in repeat(None, n):
            f(next(it)); f(next(it)); f(next(it)); f(next(it)); f(next(it))  # fmt: skip
            f(next(it)); f(next(it)); f(next(it)); f(next(it)); f(next(it))  # fmt: skip
        return float(clock() - start)

    return body


class MiniBreaker:
    """The smallest honest pure-Python breaker: a state, a consecutive-failure counter, a
    threshold and a cooldown checked against a monotonic clock, under a lock."""

    __slots__ = ("_lock", "state", "failures", "threshold", "cooldown_s", "opened_at")

    def __init__(self, threshold: int = 5, cooldown_s: float = 30.0) -> None:
        self._lock = threading.Lock()
        self.state = "CLOSED"
        self.failures = 0
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.opened_at = 0.0

    def should_allow_operation(self) -> Tuple[bool, Optional[str]]:
        with self._lock:
            if self.state == "CLOSED":
                return (True, None)
            if self.state == "OPEN" and time.monotonic() - self.opened_at >= self.cooldown_s:
                self.state = "HALF_OPEN"
                return (True, "Circuit breaker testing - one operation allowed")
            return (False, "Circuit breaker OPEN")

    def record_success(self) -> None:
        with self._lock:
            self.failures = 0
            if self.state == "HALF_OPEN":
                self.state = "CLOSED"

    def record_failure(self) -> None:
        with self._lock:
            self.failures += 1
            if self.state == "HALF_OPEN" or self.failures >= self.threshold:
                self.state = "OPEN"
                self.opened_at = time.monotonic()


def noop() -> None:
    return None


# 4 KB of a realistic agent response for `analyze`.
RESPONSE_4K = (
    (
        "I updated src/parser.rs to handle the empty-input case and added two regression tests.\n"
        "Running the suite now: 41 passed, 0 failed in 3.2s.\n"
        "Next steps: the remaining TODO in lexer.rs is still in progress, and I still need to\n"
        "review the error messages for the CLI.\n"
    )
    * 16
)[:4096] + "\nAll tasks complete. Ready for review.\nSTATUS: COMPLETE\n"


class Contender:
    def __init__(self, name: str, body: Body, check: Callable[[], None]) -> None:
        self.name = name
        self.body = body
        self.check = check
        self.n = 1
        self.samples: List[float] = []


def calibrate(c: Contender, seconds: float) -> None:
    """Warm-up: doubles `n` until one repetition lasts `seconds`."""
    n = 64
    while True:
        elapsed = c.body(n)
        if elapsed >= seconds * 1e9 or n >= 1 << 26:
            c.n = max(1, int(n * seconds * 1e9 / max(elapsed, 1.0)))
            return
        n *= 2 if elapsed >= seconds * 1e8 else 8


def measure(contenders: List[Contender], seconds: float, repetitions: int) -> None:
    for c in contenders:
        calibrate(c, seconds)
    for _ in range(repetitions):
        for c in contenders:
            c.samples.append(c.body(c.n) / (c.n * UNROLL))
    for c in contenders:
        c.check()


def smoke(contenders: List[Contender]) -> None:
    for c in contenders:
        c.n = 30
        c.samples = [c.body(c.n) / (c.n * UNROLL)]
        c.check()


def median(c: Contender) -> float:
    return round(statistics.median(c.samples), 1)


def expect(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"bench-python: {what}")


def guarded_call() -> Tuple[List[Contender], Callable[[List[Contender]], List[Dict[str, Any]]]]:
    ours_breaker = ab.FailureBreaker()
    ours = ours_breaker(noop)

    pyb = pybreaker.CircuitBreaker()
    theirs = pyb(noop)

    lg = loopguard.loopguard(max_repeats=10**12, window=0.001)(noop)

    def check_ours() -> None:
        m = ours_breaker.metrics()
        expect(ours_breaker.state == "CLOSED" and m["totalFailures"] == 0, "ours did not stay CLOSED")
        expect(m["totalSuccesses"] > 0, "ours recorded no successes")

    def check_pybreaker() -> None:
        expect(pyb.current_state == "closed" and pyb.fail_counter == 0, "pybreaker left CLOSED")

    def check_loopguard() -> None:
        expect(lg() is None, "loopguard refused the no-op")

    contenders = [
        Contender("ours", loop_of(ours), check_ours),
        Contender("pybreaker", loop_of(theirs), check_pybreaker),
        Contender("loopguard", loop_of(lg), check_loopguard),
    ]

    def rows(cs: List[Contender]) -> List[Dict[str, Any]]:
        o, p, l = cs
        op = "guarded no-op call (decorator)"
        return [
            row(op, o, p, min_ratio=10, note="@breaker vs @CircuitBreaker()"),
            row(op, o, l, note="@breaker vs @loopguard (repeat counter, never trips here)"),
        ]

    return contenders, rows


def allow_and_record() -> Tuple[List[Contender], Callable[[List[Contender]], List[Dict[str, Any]]]]:
    ours = ab.FailureBreaker()
    mini = MiniBreaker()

    def check_ours() -> None:
        expect(ours.should_allow_operation() == (True, None), "ours refused")
        expect(ours.metrics()["totalSuccesses"] > 0, "ours recorded no successes")

    def check_mini() -> None:
        expect(mini.should_allow_operation() == (True, None), "MiniBreaker refused")

    contenders = [
        Contender("ours", pair_loop_of(ours.should_allow_operation, ours.record_success), check_ours),
        Contender(
            "pure-Python MiniBreaker",
            pair_loop_of(mini.should_allow_operation, mini.record_success),
            check_mini,
        ),
    ]

    def rows(cs: List[Contender]) -> List[Dict[str, Any]]:
        o, m = cs
        return [row("should_allow_operation + record_success", o, m, note="CLOSED")]

    return contenders, rows


def ours_only() -> Tuple[List[Contender], Callable[[List[Contender]], List[Dict[str, Any]]]]:
    stagnation = ab.StagnationBreaker()

    def progress_and_check() -> object:
        stagnation.record_progress(files_changed=1, tests_passing=40, output_length=1200)
        return stagnation.check()

    def check_stagnation() -> None:
        expect(stagnation.check()["allowContinue"], "the stagnation breaker stopped")

    budget = ab.BudgetBreaker(max_tool_calls_per_task=10**15)
    event = {"type": "tool_use", "name": "Read", "input": {"file_path": "src/main.rs"}}
    ingest = budget.ingest

    def check_budget() -> None:
        expect(ingest(event) is None, "the budget breaker halted")

    def analyze() -> object:
        return ab.analyze(RESPONSE_4K)

    def check_analyze() -> None:
        expect(ab.analyze(RESPONSE_4K)["completionSignal"]["detected"], "analyze found no signal")

    contenders = [
        Contender("stagnation", loop_of(progress_and_check), check_stagnation),
        Contender("budget", loop_of(lambda: ingest(event)), check_budget),
        Contender("analyze", loop_of(analyze), check_analyze),
    ]

    def rows(cs: List[Contender]) -> List[Dict[str, Any]]:
        s, b, a = cs
        return [
            row("stagnation record_progress + check", s, None),
            row("budget ingest (tool_use dict)", b, None),
            row(f"analyze ({len(RESPONSE_4K.encode())} B response)", a, None),
        ]

    return contenders, rows


def monitor_observe() -> Tuple[List[Contender], Callable[[List[Contender]], List[Dict[str, Any]]]]:
    """The Monitor's `observe(dict)` (issue 15: at most 5 us): an agent's steps, each a tool call,
    its result with 1 KB of text and a progress event with a new digest, so that no rule halts
    the task (a halted task answers every event with its halt, which would be cheaper). Budgets
    are raised out of reach; every other rule of the coding-agent profile is on."""
    monitor = ab.Monitor(profile="coding-agent", budget={"maxToolCallsPerTask": 10**15})
    text = ("test_parser.py::test_case PASSED [ 42%]\n" * 32)[:1024]
    events: List[Dict[str, Any]] = []
    for i in range(1000):  # more digests than a task remembers (256): every one is new again
        # Names in letters: steps are compared with their numbers normalized away.
        name = "".join("ghijklmnopqrstuvwxyz"[i // 20**k % 20] for k in range(3))
        events += [
            {"type": "tool_use", "name": "Bash", "id": f"t{i}", "input": {"command": f"pytest -k {name}"}},
            {"type": "tool_result", "id": f"t{i}", "ok": True, "text": f"{name} {text}"},
            {"type": "progress", "files": 1, "digest": f"{i:016x}"},
        ]

    def check() -> None:
        (task,) = monitor.status()["tasks"]
        expect(not task["halted"] and task["toolCalls"] > 0, "the monitor halted the task")

    contenders = [Contender("monitor", cycle_loop_of(monitor.observe, events), check)]

    def rows(cs: List[Contender]) -> List[Dict[str, Any]]:
        r = row("monitor observe (tool_use, tool_result with 1 KB text, progress)", cs[0], None,
                note="per event, the three in turn")
        r["max"] = 5000
        return [r]

    return contenders, rows


class Boom(Exception):
    """What the failing guarded call raises."""


def boom() -> None:
    raise Boom("tool server down")


def redis_guarded_calls(url: str) -> List[Tuple[List[Contender], Callable[[List[Contender]], List[Dict[str, Any]]]]]:
    """The groups of `--redis URL`: breakers with their state in Redis, ours beside pybreaker's
    CircuitRedisStorage, each on a key of its own on the same server."""
    stamp = f"{time.time_ns()}"
    client = redis.Redis.from_url(url)  # pybreaker needs bytes replies (no decode_responses)

    def pybreaker_on_redis(name: str, fail_max: int) -> pybreaker.CircuitBreaker:
        storage = pybreaker.CircuitRedisStorage(
            pybreaker.STATE_CLOSED, client, namespace=f"bench:{stamp}:{name}"
        )
        return pybreaker.CircuitBreaker(fail_max=fail_max, state_storage=storage)

    def ours_on_redis(name: str, threshold: int) -> ab.FailureBreaker:
        return ab.FailureBreaker(
            store=url, key=f"bench:{stamp}:{name}", failure_threshold=threshold,
            store_timeout_ms=1000,
        )

    def shared(b: ab.FailureBreaker) -> bool:
        status = b.store_status()
        return status is not None and status["mode"] == "shared" and status["outages"] == 0

    # A guarded no-op call in CLOSED.
    ours_breaker = ours_on_redis("ok", 5)
    ours = ours_breaker(noop)
    pyb = pybreaker_on_redis("ok", 5)
    theirs = pyb(noop)

    def check_ours() -> None:
        m = ours_breaker.metrics()
        expect(ours_breaker.state == "CLOSED" and m["totalSuccesses"] > 0, "ours left CLOSED")
        expect(shared(ours_breaker), f"ours lost the store: {ours_breaker.store_status()}")

    def check_pybreaker() -> None:
        expect(pyb.current_state == "closed" and pyb.fail_counter == 0, "pybreaker left CLOSED")

    no_op = [
        Contender("ours", loop_of(ours), check_ours),
        Contender("pybreaker + CircuitRedisStorage", loop_of(theirs), check_pybreaker),
    ]

    def no_op_rows(cs: List[Contender]) -> List[Dict[str, Any]]:
        o, p = cs
        return [row("guarded no-op call, state in Redis", o, p, min_ratio=5,
                    note="@breaker with store= vs @CircuitBreaker(state_storage=CircuitRedisStorage)"
                         "; local redis-server")]

    # A guarded call that fails, the threshold out of reach: each failure is recorded in Redis.
    ours_failing_breaker = ours_on_redis("fail", 2**31)
    ours_failing = ours_failing_breaker(boom)
    pyb_failing = pybreaker_on_redis("fail", 2**31)
    theirs_failing = pyb_failing(boom)

    def failing(f: Callable[[], object]) -> Callable[[], None]:
        def call() -> None:
            try:
                f()
            except Boom:
                pass

        return call

    def check_ours_failing() -> None:
        m = ours_failing_breaker.metrics()
        expect(ours_failing_breaker.state == "CLOSED" and m["totalFailures"] > 0, "ours opened")
        expect(shared(ours_failing_breaker), "ours lost the store")

    def check_pybreaker_failing() -> None:
        expect(pyb_failing.current_state == "closed" and pyb_failing.fail_counter > 0,
               "pybreaker opened or counted nothing")

    fails = [
        Contender("ours", loop_of(failing(ours_failing)), check_ours_failing),
        Contender("pybreaker + CircuitRedisStorage", loop_of(failing(theirs_failing)),
                  check_pybreaker_failing),
    ]

    def fail_rows(cs: List[Contender]) -> List[Dict[str, Any]]:
        o, p = cs
        return [row("guarded call that fails, state in Redis", o, p,
                    note="each failure recorded in Redis (threshold out of reach); local "
                         "redis-server")]

    return [(no_op, no_op_rows), (fails, fail_rows)]


def row(
    operation: str,
    ours: Contender,
    peer: Optional[Contender],
    min_ratio: Optional[float] = None,
    note: Optional[str] = None,
) -> Dict[str, Any]:
    r: Dict[str, Any] = {
        "surface": "python",
        "operation": operation,
        "ours_ns": median(ours),
        "peer": peer.name if peer else None,
        "peer_ns": median(peer) if peer else None,
    }
    if min_ratio is not None:
        r["min_ratio"] = min_ratio
    if note:
        r["note"] = note
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", default="target/bench/python.jsonl")
    ap.add_argument("--seconds", type=float, default=0.3, help="length of one repetition")
    ap.add_argument("--smoke", action="store_true", help="run every contender briefly; no timing")
    ap.add_argument("--redis", metavar="URL",
                    help="measure the Redis-backed breakers on this server instead")
    args = ap.parse_args()

    groups = (
        redis_guarded_calls(args.redis)
        if args.redis
        else [group() for group in (guarded_call, allow_and_record, ours_only, monitor_observe)]
    )
    lines: List[str] = []
    for contenders, rows in groups:
        if args.smoke:
            smoke(contenders)
        else:
            measure(contenders, args.seconds, REPETITIONS)
        for r in rows(contenders):
            lines.append(json.dumps(r))
            if not args.smoke:
                peer = f"   {r['peer']}: {r['peer_ns']} ns" if r["peer"] else ""
                print(f"{r['operation']}: ours {r['ours_ns']} ns{peer}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"bench-python: {len(lines)} rows{' (smoke run)' if args.smoke else ''} in {out}")


if __name__ == "__main__":
    main()

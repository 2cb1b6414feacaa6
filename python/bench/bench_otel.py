"""What `agentbreaker.integrations.otel.instrument(monitor)` costs per `observe` when no meter
provider is configured (issue 22: at most 5 us), written as target/bench/python-otel.jsonl in the
protocol of tools/bench_table.py. `make bench-python-otel` runs it in an environment with the
release wheel and opentelemetry-api only (no SDK): the instruments are the API's proxies.

Method (as bench_python.py): two Monitors fed the same stream (a tool call, its result with 1 KB
of text, a progress event, in turn: every third event reports a tool call to the recorder), one
instrumented, measured interleaved, 7 repetitions of about 0.3 s each; the row is the difference
of the medians, per event.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from itertools import cycle, repeat
from pathlib import Path
from typing import Any, Callable, Dict, List

import agentbreaker as ab
from agentbreaker.integrations.otel import instrument

UNROLL = 10
REPETITIONS = 7


def events() -> List[Dict[str, Any]]:
    text = ("test_parser.py::test_case PASSED [ 42%]\n" * 32)[:1024]
    out: List[Dict[str, Any]] = []
    for i in range(1000):
        name = "".join("ghijklmnopqrstuvwxyz"[i // 20**k % 20] for k in range(3))
        out += [
            {"type": "tool_use", "name": "Bash", "id": f"t{i}", "input": {"command": f"pytest -k {name}"}},
            {"type": "tool_result", "id": f"t{i}", "ok": True, "text": f"{name} {text}"},
            {"type": "progress", "files": 1, "digest": f"{i:016x}"},
        ]
    return out


def body_of(observe: Callable[[Dict[str, Any]], object], stream: List[Dict[str, Any]]) -> Callable[[int], float]:
    it = cycle(stream)

    def body(n: int) -> float:
        nxt = it.__next__
        clock = time.perf_counter_ns
        start = clock()
        for _ in repeat(None, n):
            observe(nxt()); observe(nxt()); observe(nxt()); observe(nxt()); observe(nxt())  # fmt: skip
            observe(nxt()); observe(nxt()); observe(nxt()); observe(nxt()); observe(nxt())  # fmt: skip
        return float(clock() - start)

    return body


def calibrate(body: Callable[[int], float], seconds: float) -> int:
    n = 64
    while True:
        elapsed = body(n)
        if elapsed >= seconds * 1e9 or n >= 1 << 24:
            return max(1, int(n * seconds * 1e9 / max(elapsed, 1.0)))
        n *= 2 if elapsed >= seconds * 1e8 else 8


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", default="target/bench/python-otel.jsonl")
    ap.add_argument("--seconds", type=float, default=0.3)
    args = ap.parse_args()

    def monitor() -> ab.Monitor:
        return ab.Monitor(profile="coding-agent", budget={"maxToolCallsPerTask": 10**15})

    stream = events()
    plain = monitor()
    instrumented = monitor()
    instrument(instrumented)  # no meter provider configured: the API's global proxy
    bodies = {"plain": body_of(plain.observe, stream), "instrumented": body_of(instrumented.observe, stream)}
    ns = {k: calibrate(b, args.seconds) for k, b in bodies.items()}
    samples: Dict[str, List[float]] = {k: [] for k in bodies}
    for _ in range(REPETITIONS):
        for k, b in bodies.items():
            samples[k].append(b(ns[k]) / (ns[k] * UNROLL))
    for m in (plain, instrumented):
        (task,) = m.status()["tasks"]
        if task["halted"] or task["toolCalls"] == 0:
            sys.exit("bench-python-otel: the monitor halted the task")
    med = {k: statistics.median(v) for k, v in samples.items()}
    overhead = max(0.0, med["instrumented"] - med["plain"])
    row = {
        "surface": "python",
        "operation": "otel instrument(monitor): cost per observe, no meter provider",
        "ours_ns": round(overhead, 1),
        "peer": None,
        "peer_ns": None,
        "max": 5000,
        "note": f"observe {med['instrumented']:.0f} ns instrumented, {med['plain']:.0f} ns not; "
        "tool_use, tool_result, progress in turn",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(row) + "\n")
    print(f"{row['operation']}: {row['ours_ns']} ns ({row['note']})")


if __name__ == "__main__":
    main()

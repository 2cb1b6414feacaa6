"""What an `observe` costs when the caches are cold, and which caches (docs/integrations.md,
"Which caches").

Inside a framework's loop an `observe` costs several times what it costs in a tight loop, because
the framework's own code evicts the Monitor's between two calls. This script times an `observe`
right after one kind of disturbance at a time, outside any framework:

- ``cache``: 16 MB written through huge pages (the L1 and L2 caches emptied, the TLBs untouched);
- ``itlb``: one jump through each of 2 048 code pages (the instruction TLB emptied, little cache);
- ``dtlb``: a byte read from each of 4 096 data pages (the data TLB emptied, little cache);

then each event kind on its own, after an emptied L2 cache and after emptied caches, beside two Python
baselines (an empty function's call and ``repr(monitor)``). Figures are medians in µs of
``time.perf_counter_ns`` around the one call. Linux only (``mmap`` with huge-page advice and an
executable mapping; without one the ``itlb`` row is left out). ``--smoke`` runs a few events of
each to check the script (``make test-python``).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import mmap
import statistics
import struct
import time
from typing import Any, Callable, Dict, List, Optional

from agentbreaker import Monitor

PAGE = 4096


def jump_chain(pages: int) -> Optional[Callable[[], None]]:
    """A function that jumps once through each of ``pages`` code pages (None where the system
    refuses an executable mapping)."""
    try:
        code = mmap.mmap(-1, pages * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, AttributeError):
        return None
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        code.madvise(mmap.MADV_NOHUGEPAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(code))
    # Each page's jump at another offset, so the lines do not compete for one cache set.
    offsets = [i * PAGE + (i * 64) % PAGE for i in range(pages)]
    for here, there in zip(offsets, offsets[1:]):
        code[here : here + 5] = b"\xe9" + struct.pack("<i", there - (here + 5))  # jmp rel32
    code[offsets[-1]] = 0xC3  # ret
    function = ctypes.CFUNCTYPE(None)(base + offsets[0])
    keep = (code, function)

    def jump() -> None:
        keep[1]()

    return jump


def huge_buffer(size: int) -> mmap.mmap:
    buffer = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        buffer.madvise(mmap.MADV_HUGEPAGE)
    buffer[:] = b"\1" * size
    return buffer


def disturbances() -> Dict[str, Callable[[], None]]:
    written = huge_buffer(16 << 20)
    zeros = bytes(len(written))
    pages = mmap.mmap(-1, 4096 * PAGE)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        pages.madvise(mmap.MADV_NOHUGEPAGE)
    pages[:] = b"\3" * len(pages)
    view = memoryview(pages)

    def cache() -> None:
        written[:] = zeros

    def dtlb() -> None:
        total = 0
        for offset in range(0, len(view), PAGE):
            total += view[offset]

    found: Dict[str, Callable[[], None]] = {"warm": lambda: None, "cache": cache}
    jump = jump_chain(2048)
    if jump is not None:
        found["itlb"] = jump
    found["dtlb"] = dtlb
    return found


def tool_call(i: int) -> List[Dict[str, Any]]:
    """The three events of one tool call, as the framework adapters send them."""
    return [
        {"type": "assistant", "text": f"I will search for item {i}", "taskId": "t",
         "usage": {"input_tokens": 100, "output_tokens": 20}},
        {"type": "tool_use", "name": "search", "input": {"query": f"item {i}"}, "id": f"c{i}", "taskId": "t"},
        {"type": "tool_result", "name": "search", "ok": True, "text": f"result {i} " * 10, "id": f"c{i}",
         "taskId": "t"},
    ]


def median_us(times: List[int]) -> float:
    return statistics.median(times) / 1000


def by_disturbance(monitor: Monitor, rounds: int) -> None:
    for name, disturb in disturbances().items():
        times: List[List[int]] = [[], [], []]
        for i in range(rounds):
            if i % 100 == 0:  # a new task now and then: the task's history stays short
                monitor.observe({"type": "heartbeat", "taskId": "t", "phase": "done"})
            for k, event in enumerate(tool_call(i)):
                disturb()
                start = time.perf_counter_ns()
                monitor.observe(event)
                times[k].append(time.perf_counter_ns() - start)
        figures = [median_us(t) for t in times]
        print(f"{name:6s} assistant {figures[0]:6.2f}  tool_use {figures[1]:6.2f}  "
              f"tool_result {figures[2]:6.2f}  together {sum(figures):6.2f} µs")


def by_kind(monitor: Monitor, rounds: int) -> None:
    """Each event kind alone, after each of two disturbances: ``L2`` (2 MB read: the L2 cache
    mostly emptied, the L3 cache kept, as between two calls in a framework's loop) and ``all``
    (16 MB written each time: the L3 cache thrashed as well, so lines come from memory)."""
    read = huge_buffer(1 << 20)
    view, copy = memoryview(read), bytes(read)
    written = huge_buffer(16 << 20)
    zeros = bytes(len(written))

    def l2() -> bool:
        return view == copy  # equal, so both are read to the end

    def everything() -> None:
        written[:] = zeros

    def empty(x: int) -> int:
        return x

    def alive(i: int) -> Dict[str, Any]:
        return {"type": "alive"}

    def no_event(i: int) -> None:
        return None

    events: Dict[str, Callable[[int], Any]] = {
        "assistant": lambda i: tool_call(i)[0],
        "tool_use": lambda i: tool_call(i)[1],
        "tool_result": lambda i: tool_call(i)[2],
        "alive": alive,
        "empty function": no_event,
        "repr(monitor)": no_event,
    }
    for label, disturb in (("L2", l2), ("all", everything)):
        times: Dict[str, List[int]] = {name: [] for name in events}
        for i in range(rounds):
            if i % 50 == 0:
                monitor.observe({"type": "heartbeat", "taskId": "t", "phase": "done"})
            for name, make in events.items():
                event = make(i)  # built before the disturbance: only the call is timed
                disturb()
                start = time.perf_counter_ns()
                if name == "empty function":
                    empty(i)
                elif name == "repr(monitor)":
                    repr(monitor)
                else:
                    monitor.observe(event)
                times[name].append(time.perf_counter_ns() - start)
        print(f"{label:4s} " + "  ".join(f"{name} {median_us(spent):.2f}" for name, spent in times.items()) + " µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a few events of each, to check the script")
    args = parser.parse_args()
    rounds = 3 if args.smoke else args.rounds
    gc.disable()
    by_disturbance(Monitor(), rounds)
    by_kind(Monitor(), rounds)


if __name__ == "__main__":
    main()

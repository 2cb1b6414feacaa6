#!/usr/bin/env python3
"""Summarizes fuzz runs from their libFuzzer logs, as the Markdown table docs/reliability.md keeps.

    python3 fuzz/summary.py [--prefix long] <log dir> <target>...   # reads <log dir>/long-<target>.log

Per target: seconds run, executions, executions per second, corpus entries and bytes at the end
(the committed seeds plus what the run added), new entries, peak RSS, and the result.
"""

import pathlib
import re
import sys

STATUS = re.compile(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\d+)(b|Kb|Mb)")
UNIT = {"b": 1, "Kb": 1024, "Mb": 1024 * 1024}


def human(n):
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def summarize(log):
    text = log.read_text(errors="replace")
    stats = dict(re.findall(r"^stat::(\w+):\s+(\d+)", text, re.M))
    done = re.search(r"^Done (\d+) runs in (\d+) second", text, re.M)
    last = None
    for line in text.splitlines():
        m = STATUS.match(line)
        if m:
            last = m
    crashed = re.search(r"(panicked at|ERROR: libFuzzer|SUMMARY: libFuzzer)", text)
    return {
        "seconds": done.group(2) if done else "?",
        "execs": int(stats.get("number_of_executed_units", done.group(1) if done else 0)),
        "per_sec": stats.get("average_exec_per_sec", "?"),
        "corpus": f"{last.group(4)} / {human(int(last.group(5)) * UNIT[last.group(6)])}" if last else "?",
        "cov": last.group(2) if last else "?",
        "new": stats.get("new_units_added", "?"),
        "rss": stats.get("peak_rss_mb", "?"),
        "result": "crash: " + crashed.group(1) if crashed else ("ok" if done else "unfinished"),
    }


def main():
    args = sys.argv[1:]
    prefix = "long"
    if args[:1] == ["--prefix"]:
        prefix, args = args[1], args[2:]
    logs = pathlib.Path(args[0])
    print("| target | seconds | executions | exec/s | corpus (entries / size) | coverage | new | peak RSS (MB) | result |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for target in args[1:]:
        log = logs / f"{prefix}-{target}.log"
        if not log.exists():
            print(f"| {target} | – | – | – | – | – | – | – | not run |")
            continue
        s = summarize(log)
        print(f"| {target} | {s['seconds']} | {s['execs']:,} | {s['per_sec']} | {s['corpus']} | "
              f"{s['cov']} | {s['new']} | {s['rss']} | {s['result']} |")


if __name__ == "__main__":
    main()

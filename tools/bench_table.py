#!/usr/bin/env python3
"""Prints the benchmark table of `make bench` from target/bench/*.jsonl (and can write it into
docs/benchmarks.md).

Each surface's benchmark writes one JSON object per measured operation:

    {"surface": "python", "operation": "guarded no-op call", "ours_ns": 412.0,
     "peer": "pybreaker", "peer_ns": 5210.0, "note": "optional text"}

`peer` and `peer_ns` are null for an operation without a peer (an absolute figure); several
peers of one operation are several lines. Ratio = peer_ns / ours_ns (above 1: we are faster).

Optional fields:
    "unit": "bytes"      the two figures are bytes, not nanoseconds (memory rows)
    "max": 25            the issue's bound on `ours` (in the row's unit): the goal column says
                         whether it was met
    "min_ratio": 10      the issue's bound on the ratio against this peer

Usage: tools/bench_table.py [--dir target/bench] [--markdown docs/benchmarks.md]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURFACES = ["rust", "python", "node", "lua", "c"]


def load(directory):
    rows = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                float(r["ours_ns"])
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{n}: not a benchmark line ({e}): {line[:120]}")
            rows.append(r)
    order = {s: i for i, s in enumerate(SURFACES)}
    rows.sort(key=lambda r: (order.get(r["surface"], 99), ))
    return rows


def fmt_ns(v):
    if v is None:
        return "-"
    v = float(v)
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.1f} ns"


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "bytes":
        v = float(v)
        return f"{v / 1024:.2f} KiB" if v >= 1024 else f"{v:.0f} B"
    return fmt_ns(v)


def goal(r, ratio):
    """The issue's bound for this row and whether the run met it ("" when the row has none)."""
    parts, met = [], True
    if r.get("max") is not None:
        parts.append(f"<= {fmt(r['max'], r.get('unit'))}")
        met = met and float(r["ours_ns"]) <= float(r["max"])
    if r.get("min_ratio") is not None and ratio is not None:
        parts.append(f">= {float(r['min_ratio']):g}x")
        met = met and ratio >= float(r["min_ratio"])
    if not parts:
        return "-"
    return " and ".join(parts) + (": met" if met else ": MISSED")


def table(rows):
    head = ("surface", "operation", "ours", "peer", "peer figure", "ratio", "goal")
    body = []
    for r in rows:
        peer_ns = r.get("peer_ns")
        unit = r.get("unit")
        ratio = float(peer_ns) / float(r["ours_ns"]) if peer_ns and float(r["ours_ns"]) > 0 else None
        op = r["operation"] + (f" ({r['note']})" if r.get("note") else "")
        body.append((r["surface"], op, fmt(r["ours_ns"], unit), r.get("peer") or "-",
                     fmt(peer_ns, unit), f"{ratio:.1f}x" if ratio is not None else "-", goal(r, ratio)))
    return head, body


def text_table(head, body):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else [len(h) for h in head]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def machine():
    cpu = "unknown CPU"
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                cpu = l.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except Exception:
            return "not found"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "rustc": version(["rustc", "--version"]),
        "python": platform.python_version(),
        "node": version(["node", "--version"]),
        "lua": version(["lua5.4", "-v"]),
        "luajit": version(["luajit", "-v"]),
    }


def markdown(head, body, info):
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(str(c) for c in b) + " |" for b in body]
    return "\n".join(md), info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(ROOT / "target" / "bench"))
    ap.add_argument("--markdown", help="write the table into this file between the BENCH markers")
    args = ap.parse_args()
    rows = load(args.dir)
    if not rows:
        sys.exit(f"no benchmark results in {args.dir}")
    head, body = table(rows)
    print(text_table(head, body))
    if args.markdown:
        info = machine()
        md, _ = markdown(head, body, info)
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        block = (
            f"Measured {when} on {info['cpu']} ({info['cores']} cores), {info['os']}; "
            f"{info['rustc']}, Python {info['python']}, Node {info['node']}, {info['lua']}, "
            f"{info['luajit']}. Command: `make bench`.\n\n{md}\n"
        )
        path = Path(args.markdown)
        text = path.read_text() if path.exists() else "<!-- BENCH:BEGIN -->\n<!-- BENCH:END -->\n"
        start, end = "<!-- BENCH:BEGIN -->", "<!-- BENCH:END -->"
        if start not in text or end not in text:
            sys.exit(f"{path} has no {start} / {end} markers")
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        path.write_text(f"{before}{start}\n{block}{end}{after}")
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()

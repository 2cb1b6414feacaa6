#!/usr/bin/env python3
"""Turns criterion's estimates (target/criterion/<group>/<function>/new/) into the benchmark lines
of tools/bench_table.py: in each group, the function `agentbreaker` is ours and every other
function is a peer (one line per peer; a group without peers is one line with peer null).

Usage: tools/criterion_jsonl.py [--criterion target/criterion] [--goals GOALS.json] OUT.jsonl

GOALS maps a group name to {"max": ns} and/or {"min_ratio": x} (the issue's bounds).
"""

import argparse
import json
import sys
from pathlib import Path


def estimates(criterion):
    """{group: {function: median ns}} of the latest run."""
    out = {}
    for bench in Path(criterion).glob("*/*/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        out.setdefault(meta["group_id"], {})[meta["function_id"]] = est["median"]["point_estimate"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--criterion", default="target/criterion")
    ap.add_argument("--goals", help="JSON file of per-group bounds")
    ap.add_argument("out")
    args = ap.parse_args()
    goals = json.loads(Path(args.goals).read_text()) if args.goals else {}
    groups = estimates(args.criterion)
    if not groups:
        sys.exit(f"no criterion results under {args.criterion}")
    lines = []
    for group, fns in sorted(groups.items()):
        if "agentbreaker" not in fns:
            continue
        ours = fns["agentbreaker"]
        goal = goals.get(group, {})
        peers = sorted((f, ns) for f, ns in fns.items() if f != "agentbreaker") or [(None, None)]
        for peer, peer_ns in peers:
            row = {"surface": "rust", "operation": group, "ours_ns": round(ours, 2),
                   "peer": peer, "peer_ns": None if peer_ns is None else round(peer_ns, 2)}
            if "max" in goal:
                row["max"] = goal["max"]
            if "min_ratio" in goal and peer is not None:
                row["min_ratio"] = goal["min_ratio"]
            lines.append(json.dumps(row))
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} lines -> {args.out}")


if __name__ == "__main__":
    main()

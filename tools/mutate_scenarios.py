#!/usr/bin/env python3
"""Mutation check of the conformance suite: the suite must check what it states.

Every expected value in every scenario (each scalar leaf under a step's `expect`, each
`expectError`, each `configError`, each empty list or object an `expect` names) is changed, one at a
time, and a conformance runner must then FAIL that scenario. A scenario that still passes with a
changed expectation checks nothing at that spot; this script lists every such survivor and exits 1.

The mutations are batched: round k changes the k-th expected value of every scenario that has one,
writes that mutated suite to a temporary directory and runs the runner once on it, so the whole
check costs (largest number of expected values in one scenario) runner runs.

Usage: tools/mutate_scenarios.py [--runner CMD] [--suite DIR]
  --runner  a command that runs the conformance suite named by AGENTBREAKER_CONFORMANCE_DIR and
            prints libtest-style lines `test <name> ... ok|FAILED` (default: the Rust runner,
            built once with cargo)
"""

import argparse
import copy
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODES = ["INVALID_CONFIG", "INVALID_ARGUMENT", "INVALID_EVENT", "INVALID_SNAPSHOT", "IO",
         "INTERNAL", "CIRCUIT_OPEN"]


def sites(scenario):
    """Every spot whose expected value can be changed, as a path of keys/indices."""
    out = []
    if "configError" in scenario:
        out.append(("configError",))
    for i, step in enumerate(scenario.get("steps", [])):
        if "expectError" in step:
            out.append(("steps", i, "expectError"))
        if "expect" in step:
            out.extend(_leaves(step["expect"], ("steps", i, "expect")))
    return out


def _leaves(value, path):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))
    else:
        yield path


def mutated(value, path):
    """A different value for the leaf at `path` (a value no correct runner can match)."""
    if path[-1] in ("expectError", "configError"):
        return "INVALID_ARGUMENT" if value == "INVALID_CONFIG" else "INVALID_CONFIG"
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + " (mutated)"
    if value is None:
        return "mutated"
    if isinstance(value, list):
        return [{"mutated": True}]
    if isinstance(value, dict):
        return {"mutatedKey": "mutated"}
    raise TypeError(type(value))


def apply(scenario, path):
    s = copy.deepcopy(scenario)
    parent = s
    for key in path[:-1]:
        parent = parent[key]
    before = parent[path[-1]]
    parent[path[-1]] = mutated(before, path)
    return s, before, parent[path[-1]]


def default_runner():
    out = subprocess.run(
        ["cargo", "test", "--test", "conformance", "--no-run", "--message-format=json"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
                and msg["target"]["name"] == "conformance":
            return [msg["executable"]]
    sys.exit("could not find the conformance test binary")


def run_suite(runner, suite):
    env = dict(os.environ, AGENTBREAKER_CONFORMANCE_DIR=str(suite))
    proc = subprocess.run(runner, env=env, capture_output=True, text=True)
    results = {}
    for m in re.finditer(r"^test (\S+)\s+\.\.\. (ok|FAILED)", proc.stdout, re.M):
        results[m.group(1)] = m.group(2)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runner", help="runner command (default: the Rust runner)")
    ap.add_argument("--suite", default=str(ROOT / "tests" / "conformance"))
    args = ap.parse_args()
    suite = Path(args.suite)
    runner = shlex.split(args.runner) if args.runner else default_runner()

    scenarios = {}
    for path in sorted(suite.rglob("*.json")):
        if path.name == "schema.json":
            continue
        name = path.relative_to(suite).with_suffix("").as_posix()
        scenarios[name] = json.loads(path.read_text())

    baseline = run_suite(runner, suite)
    broken = sorted(n for n in scenarios if baseline.get(n) != "ok")
    if broken:
        print("the unmutated suite must pass first; failing:", ", ".join(broken))
        return 1

    all_sites = {n: sites(s) for n, s in scenarios.items()}
    rounds = max((len(v) for v in all_sites.values()), default=0)
    total = sum(len(v) for v in all_sites.values())
    survivors = []
    for k in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            batch = {}
            for name, s in scenarios.items():
                if k < len(all_sites[name]):
                    m, before, after = apply(s, all_sites[name][k])
                    target = Path(tmp) / (name + ".json")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(json.dumps(m))
                    batch[name] = (all_sites[name][k], before, after)
            results = run_suite(runner, tmp)
            for name, (path, before, after) in batch.items():
                if results.get(name) != "FAILED":
                    survivors.append((name, path, before, after, results.get(name)))
    for name, path, before, after, got in survivors:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        print(f"SURVIVED {name}{where}: {json.dumps(before)} -> {json.dumps(after)} ({got})")
    print(f"{total} expected values mutated in {len(scenarios)} scenarios over {rounds} runs: "
          f"{total - len(survivors)} caught, {len(survivors)} survived")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets from the conformance scenarios and the example streams.

    python3 fuzz/seed_corpus.py <out dir>      # one sub-directory per target

The committed corpus (fuzz/corpus/<target>) is these seeds plus what the fuzzer found, minimized
with `cargo fuzz cmin`; rerun this only to start a corpus afresh.
"""

import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "conformance"


def scenarios():
    for path in sorted(SUITE.rglob("*.json")):
        if path.name == "schema.json":
            continue
        yield json.loads(path.read_text())


def write(out, target, data):
    if isinstance(data, str):
        data = data.encode()
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def main():
    out = pathlib.Path(sys.argv[1])
    for s in scenarios():
        subject, steps = s["subject"], s["steps"]
        if subject == "budget" and "configError" not in s:
            lines = [dumps(s.get("config", {}))]
            now = 0
            for step in steps:
                if "at" in step and step["at"] > now:
                    advance, now = step["at"] - now, step["at"]
                else:
                    advance = 0
                if step["op"] == "ingest":
                    event = step["args"]["event"]
                    if isinstance(event, dict) and advance:
                        event = dict(event, advanceMs=advance)
                    lines += [dumps(event)] * step.get("repeat", 1)
                elif step["op"] == "reset":
                    lines.append("reset")
            write(out, "budget_event", "\n".join(lines))
        for step in steps:
            args = step.get("args", {})
            op = step["op"]
            if op in ("analyze", "shouldExit") and isinstance(args.get("text"), str):
                write(out, "analyzer", args["text"])
            if op == "observe" and isinstance(args.get("output"), str):
                write(out, "analyzer", args["output"])
            if op == "restore":
                write(out, "restore", dumps(args.get("snapshot")))
            if op == "snapshot" and subject in ("failure", "stagnation") and "expect" in step:
                write(out, "restore", dumps(step["expect"]))
            if op == "configFromEnv" and isinstance(args.get("env"), dict):
                env = args["env"]
                write(out, "env_config", "\n".join(
                    f"{k}={str(v).replace(chr(10), chr(0))}" for k, v in env.items()))
            for key in ("error", "result"):
                if isinstance(args.get(key), str) and op in (
                        "recordFailure", "recordError", "call", "observe", "recordStep"):
                    write(out, "fingerprint", args[key])
        markdown = s.get("config", {}).get("markdown") if isinstance(s.get("config"), dict) else None
        if isinstance(markdown, str):
            write(out, "fix_plan", markdown)
    for stream in sorted((ROOT / "examples").glob("*.jsonl")):
        write(out, "cli_streams", stream.read_bytes())
    write(out, "fix_plan", "# Plan\n- [ ] Fix the build\n  * [x] Read the log\n+ [X] Done\n1. [ ] no\n")


if __name__ == "__main__":
    main()

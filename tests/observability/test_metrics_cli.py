"""`--metrics-file` of `agentbreaker run`, `loop` and `hook`, and `agentbreaker status
--prometheus`: the written text is parsed with prometheus_client's own parser (the format
node_exporter's textfile collector reads), and the exact counts of a scripted stuck session (one
warning, one halt, reason repeated_step) and a healthy one (none) are read back."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

from conftest import (
    CONFIG,
    healthy_events,
    parse,
    run,
    stuck_events,
    total,
    value,
    write_agent,
)


def test_the_vocabulary_and_its_prometheus_names(tmp_path: Path) -> None:
    m = tmp_path / "m.prom"
    agent = write_agent(tmp_path, [])
    r = run(["run", "-q", "--format", "events", "--metrics-file", str(m), "--", *agent])
    assert r.returncode == 0, r.stderr
    types, samples = parse(m.read_text())
    assert types == {
        "agentbreaker_halts": "counter",
        "agentbreaker_warnings": "counter",
        "agentbreaker_state_changes": "counter",
        "agentbreaker_tool_calls": "counter",
        "agentbreaker_spend": "counter",
        "agentbreaker_task_steps": "histogram",
    }
    # Nothing happened but the run: the counters without attributes read 0, the others have no
    # series, and the run's task (open from the agent's start, which counts as a sign of life)
    # ended with 0 steps.
    ended = (("outcome", "ended"),)
    buckets = ["1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "+Inf"]
    assert samples == {
        ("agentbreaker_tool_calls_total", ()): 0.0,
        ("agentbreaker_spend_total", ()): 0.0,
        **{("agentbreaker_task_steps_bucket", (("le", le), *ended)): 1 for le in buckets},
        ("agentbreaker_task_steps_count", ended): 1,
        ("agentbreaker_task_steps_sum", ended): 0,
    }


def test_run_stuck_session_one_warning_one_halt(tmp_path: Path, config_file: Path) -> None:
    m = tmp_path / "metrics" / "agentbreaker.prom"
    m.parent.mkdir()
    agent = write_agent(tmp_path, stuck_events(), delay=0.02)
    r = run(["run", "-q", "--config", str(config_file), "--format", "events",
             "--metrics-file", str(m), "--", *agent])
    assert r.returncode == 3, r.stderr
    assert "stopped by rule repeated_step" in r.stderr
    _, s = parse(m.read_text())
    assert value(s, "agentbreaker_warnings_total", reason="repeated_step") == 1
    assert total(s, "agentbreaker_warnings_total") == 1
    assert value(s, "agentbreaker_halts_total", reason="repeated_step") == 1
    assert total(s, "agentbreaker_halts_total") == 1
    assert value(s, "agentbreaker_tool_calls_total") == 4
    assert value(s, "agentbreaker_spend_total") == 0
    assert value(s, "agentbreaker_task_steps_count", outcome="halted") == 1
    assert value(s, "agentbreaker_task_steps_sum", outcome="halted") == 4
    assert value(s, "agentbreaker_task_steps_bucket", outcome="halted", le="2") == 0
    assert value(s, "agentbreaker_task_steps_bucket", outcome="halted", le="5") == 1
    assert total(s, "agentbreaker_state_changes_total") == 0
    # Only the file is left in its folder (the temporary files were renamed over it).
    assert [p.name for p in m.parent.iterdir()] == ["agentbreaker.prom"]


def test_run_healthy_session_no_warning_no_halt(tmp_path: Path, config_file: Path) -> None:
    m = tmp_path / "m.prom"
    agent = write_agent(tmp_path, healthy_events())
    r = run(["run", "-q", "--config", str(config_file), "--format", "events",
             "--metrics-file", str(m), "--metrics-task", "--", *agent])
    assert r.returncode == 0, r.stderr
    _, s = parse(m.read_text())
    assert total(s, "agentbreaker_halts_total") == 0
    assert total(s, "agentbreaker_warnings_total") == 0
    # --metrics-task: the task attribute.
    assert value(s, "agentbreaker_tool_calls_total", task="session") == 6
    assert value(s, "agentbreaker_spend_total", task="session") == 9.0
    # The session task was still open at exit: its steps are observed as "ended".
    assert value(s, "agentbreaker_task_steps_count", outcome="ended") == 1
    assert value(s, "agentbreaker_task_steps_sum", outcome="ended") == 6


def test_run_writes_at_most_once_a_second_and_never_a_partial_file(tmp_path: Path) -> None:
    m = tmp_path / "m.prom"
    # 3 s of tool calls, 10 a second.
    events = [{"type": "tool_use", "name": "Read", "input": {"path": f"f{i}"}} for i in range(30)]
    agent = write_agent(tmp_path, events, delay=0.1)
    seen: List[Tuple[int, int]] = []
    texts: List[str] = []
    stop = threading.Event()

    def watch() -> None:
        last = None
        while not stop.is_set():
            try:
                st = os.stat(m)
                key = (st.st_ino, st.st_mtime_ns)
                if key != last:
                    last = key
                    seen.append(key)
                    texts.append(m.read_text())
            except FileNotFoundError:
                pass
            time.sleep(0.002)

    t = threading.Thread(target=watch)
    t.start()
    started = time.monotonic()
    r = run(["run", "-q", "--format", "events", "--metrics-file", str(m), "--", *agent])
    took = time.monotonic() - started
    time.sleep(0.05)
    stop.set()
    t.join()
    assert r.returncode == 0, r.stderr
    versions = len({ino for ino, _ in seen})
    # The start, about one a second while calls come in, the exit.
    assert 3 <= versions <= int(took) + 3, (versions, took)
    counts = []
    for text in texts:
        _, s = parse(text)  # every version read is a whole file
        counts.append(value(s, "agentbreaker_tool_calls_total"))
    assert counts == sorted(counts) and counts[-1] == 30, counts


def hook_event(session: str, project: Path, transcript: Path, name: str,
               **fields: Any) -> str:
    e: Dict[str, Any] = {
        "session_id": session, "transcript_path": str(transcript), "cwd": str(project),
        "hook_event_name": name, "permission_mode": "default",
    }
    e.update(fields)
    return json.dumps(e)


def hook_session(tmp_path: Path, session: str, commands: List[str], state: Path,
                 metrics: Path, end: bool = False) -> List[Dict[str, Any]]:
    """Runs a Claude Code session's hook calls; returns each call's parsed reply (or {})."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "agentbreaker.toml").write_text(CONFIG)
    transcript = tmp_path / f"{session}.jsonl"
    transcript.touch()
    ev = lambda name, **f: hook_event(session, project, transcript, name, **f)  # noqa: E731
    calls = [ev("SessionStart", source="startup"), ev("UserPromptSubmit", prompt="fix the build")]
    for i, cmd in enumerate(commands):
        calls.append(ev("PreToolUse", tool_name="Bash", tool_input={"command": cmd},
                        tool_use_id=f"call_{i}"))
        calls.append(ev("PostToolUse", tool_name="Bash", tool_input={"command": cmd},
                        tool_response={"stdout": f"ran {cmd.split()[-1]}" if "healthy" in session
                                       else "nothing to be done", "stderr": "",
                                       "interrupted": False},
                        tool_use_id=f"call_{i}"))
    if end:
        calls.append(ev("SessionEnd", reason="exit"))
    replies = []
    for c in calls:
        r = run(["hook", "--agent", "claude", "--state-dir", str(state),
                 "--metrics-file", str(metrics)], stdin=c)
        assert r.returncode == 0, r.stderr
        replies.append(json.loads(r.stdout) if r.stdout.strip() else {})
    return replies


def test_hook_sessions_status_prometheus_and_session_end(tmp_path: Path) -> None:
    state = tmp_path / "state"
    m = tmp_path / "hook.prom"
    replies = hook_session(tmp_path, "stuck-1", ["make check"] * 6, state, m)
    denied = [i for i, r in enumerate(replies)
              if r.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"]
    assert denied, replies  # the calls after the halt are denied
    _, s = parse(m.read_text())
    assert value(s, "agentbreaker_warnings_total", reason="repeated_step") == 1
    assert total(s, "agentbreaker_warnings_total") == 1
    assert value(s, "agentbreaker_halts_total", reason="repeated_step") == 1
    assert total(s, "agentbreaker_halts_total") == 1
    assert value(s, "agentbreaker_tool_calls_total") == 4  # the denied calls are not counted
    assert value(s, "agentbreaker_task_steps_count", outcome="halted") == 1

    # status --prometheus prints the same counters from the sessions' states.
    r = run(["status", "--prometheus", "--state-dir", str(state)])
    assert r.returncode == 0, r.stderr
    assert parse(r.stdout)[1] == s

    # A healthy session beside it: its calls add up, no warning, no halt.
    healthy = [f"pytest -q tests/test_{w}.py" for w in ["alpha", "bravo", "charlie"]]
    replies = hook_session(tmp_path, "healthy-2", healthy, state, m)
    assert all("hookSpecificOutput" not in r or
               r["hookSpecificOutput"].get("permissionDecision") != "deny" for r in replies)
    _, s2 = parse(m.read_text())
    assert total(s2, "agentbreaker_halts_total") == 1
    assert total(s2, "agentbreaker_warnings_total") == 1
    assert value(s2, "agentbreaker_tool_calls_total") == 7

    # Both sessions end: the totals never go down (the ended sessions' counters are kept),
    # and the healthy session's open task is observed as "ended".
    for session in ["stuck-1", "healthy-2"]:
        project = tmp_path / "project"
        r = run(["hook", "--agent", "claude", "--state-dir", str(state), "--metrics-file", str(m)],
                stdin=hook_event(session, project, tmp_path / f"{session}.jsonl", "SessionEnd",
                                 reason="exit"))
        assert r.returncode == 0, r.stderr
    _, s3 = parse(m.read_text())
    assert total(s3, "agentbreaker_halts_total") == 1
    assert value(s3, "agentbreaker_tool_calls_total") == 7
    assert value(s3, "agentbreaker_task_steps_count", outcome="ended") == 1
    assert value(s3, "agentbreaker_task_steps_sum", outcome="ended") == 3
    r = run(["status", "--prometheus", "--state-dir", str(state)])
    assert parse(r.stdout)[1] == s3
    names: Set[str] = {p.name for p in state.iterdir()}
    assert "retired.metrics.json" in names
    assert not any(n.endswith(".tmp") for n in names), names


def test_loop_counts_its_breakers_state_changes(tmp_path: Path) -> None:
    """`loop` with iterations that change nothing: the loop's stagnation breaker opens; each
    iteration's task ends `done`."""
    m = tmp_path / "loop.prom"
    agent = write_agent(tmp_path, [{"type": "assistant", "text": "I looked around."}])
    work = tmp_path / "work"
    work.mkdir()
    r = run(["loop", "-q", "--format", "events", "--max-iterations", "10",
             "--state-dir", str(tmp_path / "ab"), "--metrics-file", str(m), "--", *agent],
            cwd=work)
    _, s = parse(m.read_text())
    opened = value(s, "agentbreaker_state_changes_total", breaker="loop", **{"from": "HALF_OPEN"},
                   to="OPEN") + value(s, "agentbreaker_state_changes_total", breaker="loop",
                                      **{"from": "CLOSED"}, to="OPEN")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert opened == 1, s
    iterations = value(s, "agentbreaker_task_steps_count", outcome="done")
    assert iterations >= 2, s
    assert total(s, "agentbreaker_halts_total") == 0

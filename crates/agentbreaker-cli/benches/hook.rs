//! `make bench-hook`: the latency of one `agentbreaker hook` call as an agent sees it — process
//! start, reading the event, the lock, loading and saving the session, reading the transcript —
//! over a session of 500 tool calls (a PreToolUse and a PostToolUse each, so 1000 calls), beside
//! `/bin/true` (the floor: a process that does nothing) and a Python hook that only parses its
//! stdin (what users write today). Writes target/bench/hook.jsonl in tools/bench_table.py's format
//! (`AGENTBREAKER_BENCH_OUT` names another file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentbreaker");
const TOOL_CALLS: usize = 500;

/// The events of a healthy 500-tool-call Claude Code session, with the transcript lines written
/// before each.
fn session(project: &Path, transcript: &Path) -> Vec<(Option<String>, Value)> {
    let base = |name: &str| {
        json!({"session_id": "bench-session", "transcript_path": transcript, "cwd": project,
               "hook_event_name": name, "permission_mode": "default"})
    };
    // Words, not numbers, tell the calls apart: the Monitor compares calls with their numbers
    // normalized away, so `case_1`, `case_2`, ... would be one repeated call.
    const WORDS: [&str; 23] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra",
        "tango", "uniform", "victor", "whiskey",
    ];
    let word = |n: usize| format!("{}_{}", WORDS[n % 23], WORDS[(n / 23 + n / 7) % 23]);
    let mut out = Vec::new();
    for n in 0..TOOL_CALLS {
        let w = word(n);
        let (tool, input, response) = match n % 5 {
            0 => (
                "Bash",
                json!({"command": format!("cargo test -p {w} -- {w}_case")}),
                json!({"stdout": format!("running tests of {w}\ntest result: ok"),
                       "stderr": "", "interrupted": false}),
            ),
            1 => (
                "Read",
                json!({"file_path": project.join(format!("src/{w}.rs"))}),
                json!({"type": "text", "file": {"content": format!("fn {w}() {{}}\n").repeat(40)}}),
            ),
            2 => (
                "Edit",
                json!({"file_path": project.join("src/lib.rs"), "old_string": "a",
                       "new_string": w.clone()}),
                json!({"filePath": project.join("src/lib.rs"), "structuredPatch": []}),
            ),
            3 => (
                "Grep",
                json!({"pattern": format!("fn {w}"), "path": "src"}),
                json!({"numFiles": 1, "filenames": [format!("src/{w}.rs")]}),
            ),
            _ => (
                "Glob",
                json!({"pattern": format!("src/**/{w}*.rs")}),
                json!({"filenames": []}),
            ),
        };
        let usage = json!({"type": "assistant", "message": {"id": format!("msg_{n}"),
            "model": "claude-sonnet-4-5-20250929", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": format!("t{n}"), "name": tool, "input": input}],
            "usage": {"input_tokens": 3, "output_tokens": 120, "cache_creation_input_tokens": 800,
                      "cache_read_input_tokens": 20000}}});
        let mut pre = base("PreToolUse");
        pre["tool_name"] = json!(tool);
        pre["tool_input"] = input.clone();
        pre["tool_use_id"] = json!(format!("t{n}"));
        let mut post = pre.clone();
        post["hook_event_name"] = json!("PostToolUse");
        post["tool_response"] = response;
        out.push((Some(usage.to_string()), pre));
        out.push((None, post));
    }
    out
}

/// Runs every event through `program args` and returns each call's wall time in nanoseconds.
fn measure(
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
    events: &[(Option<String>, Value)],
    transcript: &Path,
    project: &Path,
) -> Vec<f64> {
    std::fs::write(transcript, b"").unwrap();
    let mut times = Vec::with_capacity(events.len());
    for (line, event) in events {
        if let Some(l) = line {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(transcript)
                .unwrap();
            writeln!(f, "{l}").unwrap();
        }
        let input = event.to_string();
        let start = Instant::now();
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // /bin/true may exit before reading: a broken pipe is expected there.
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        let out = child.wait_with_output().unwrap();
        times.push(start.elapsed().as_nanos() as f64);
        assert!(out.status.success(), "{program}: {out:?}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("deny"),
            "a healthy session was denied: {out:?}"
        );
    }
    times
}

fn quantile(times: &[f64], q: f64) -> f64 {
    let mut v = times.to_vec();
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/lib.rs"), "pub fn a() {}\n".repeat(200)).unwrap();
    let transcript = dir.path().join("transcript.jsonl");
    let events = session(&project, &transcript);
    let script = dir.path().join("hook.py");
    std::fs::write(&script, "import json, sys\njson.load(sys.stdin)\n").unwrap();
    let state = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    fn hook_args(s: &str) -> Vec<&str> {
        vec!["hook", "--agent", "claude", "--state-dir", s]
    }

    // The coding-agent profile allows 200 tool calls a session: this one makes 500.
    let cap = ("AGENTBREAKER_TOOL_CAP", "1000");
    let s1 = state("state-default");
    let ours = measure(BIN, &hook_args(&s1), &[cap], &events, &transcript, &project);
    let s2 = state("state-fsync");
    let fsync = measure(
        BIN,
        &hook_args(&s2),
        &[cap, ("AGENTBREAKER_HOOK_FSYNC", "1")],
        &events,
        &transcript,
        &project,
    );
    let floor = measure("/bin/true", &[], &[], &events, &transcript, &project);
    // The interpreter itself, not a version manager's shim in front of it.
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into());
    let py = measure(
        &python,
        &[script.to_str().unwrap()],
        &[],
        &events,
        &transcript,
        &project,
    );
    // The state file (`<key>.json`, read and written by every call) and the session's record for
    // `agentbreaker report` (`<key>.log`, appended to).
    let size_of = |suffix: &str| {
        std::fs::read_dir(&s1)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
            .map(|e| e.metadata().unwrap().len())
            .max()
            .unwrap_or(0)
    };
    let state_bytes = size_of(".json");
    let record_bytes = size_of(".log");

    let session = format!("{TOOL_CALLS}-tool-call session, {} calls", events.len());
    let python = "python3 hook that only parses stdin";
    let mut rows = Vec::new();
    for (label, q, max) in [("median", 0.5, 5e6), ("p99", 0.99, 20e6)] {
        let o = quantile(&ours, q);
        rows.push(
            json!({"surface": "hook", "operation": format!("hook call, {label} ({session})"),
                         "ours_ns": o, "peer": "/bin/true", "peer_ns": quantile(&floor, q),
                         "max": max,
                         "note": "process start, stdin, lock, load, transcript, save"}),
        );
        rows.push(
            json!({"surface": "hook", "operation": format!("hook call, {label} ({session})"),
                         "ours_ns": o, "peer": python, "peer_ns": quantile(&py, q),
                         "max": max}),
        );
        rows.push(json!({"surface": "hook",
                         "operation": format!("hook call with fsync, {label} ({session})"),
                         "ours_ns": quantile(&fsync, q), "peer": null, "peer_ns": null,
                         "note": "AGENTBREAKER_HOOK_FSYNC=1"}));
    }
    rows.push(
        json!({"surface": "hook", "operation": format!("state file after {session}"),
                     "ours_ns": state_bytes, "unit": "bytes", "peer": null, "peer_ns": null}),
    );
    rows.push(json!({"surface": "hook",
                     "operation": format!("session record (report) after {session}"),
                     "ours_ns": record_bytes, "unit": "bytes", "peer": null, "peer_ns": null,
                     "note": "appended, cut to its last half past 256 KB"}));

    let out: PathBuf = std::env::var_os("AGENTBREAKER_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/hook.jsonl")
        });
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let mut f = std::fs::File::create(&out).unwrap();
    for r in &rows {
        writeln!(f, "{r}").unwrap();
    }
    let ms = |ns: f64| format!("{:.2} ms", ns / 1e6);
    println!("{session}:");
    for (name, t) in [
        ("agentbreaker hook", &ours),
        ("agentbreaker hook, fsync", &fsync),
        ("/bin/true", &floor),
        (python, &py),
    ] {
        println!(
            "  {name:<40} median {:>9}  p99 {:>9}  max {:>9}",
            ms(quantile(t, 0.5)),
            ms(quantile(t, 0.99)),
            ms(quantile(t, 1.0))
        );
    }
    println!(
        "  state file: {state_bytes} bytes, record: {record_bytes} bytes; wrote {}",
        out.display()
    );
}

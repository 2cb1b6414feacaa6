//! End-to-end tests of `agentbreaker hook` and `agentbreaker status`: every hook call is a real
//! process of the built binary, fed one event on stdin, as Claude Code, Codex CLI and Gemini CLI
//! run it.
//!
//! Fixtures (tests/fixtures/hook/, written by generate.py there): one hook-event sequence per
//! agent and situation, with the call at which a warning, a deny and a stop are expected. The two
//! real Claude Code sessions of the eval set are converted here into hook events.
//!
//! Test knobs of the binary (never set by an agent): `AGENTBREAKER_HOOK_TEST_PANIC=<phase>`
//! panics at `parsed` or `locked`; `AGENTBREAKER_HOOK_TEST_PAUSE_MS=N` sleeps N ms while holding
//! the session's lock (a stuck or killed holder).

// Helpers outside #[test] functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agentbreaker");

/// The tests that time their calls against the 1 s bound take turns, so that the other tests of
/// this file (run in parallel on a 2-core machine) are their only competition.
static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timed() -> std::sync::MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(|p| p.into_inner())
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hook")
}

/// A sandbox: HOME, a project folder, a state folder and a transcript path.
struct Sandbox {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
    state: PathBuf,
    transcript: PathBuf,
    env: Vec<(String, String)>,
}

#[derive(Debug)]
struct Call {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Call {
    fn json(&self) -> Option<Value> {
        let t = self.stdout.trim();
        (!t.is_empty()).then(|| serde_json::from_str(t).expect("stdout is JSON"))
    }
    fn denied(&self) -> bool {
        self.json().is_some_and(|v| {
            v["hookSpecificOutput"]["permissionDecision"] == "deny" || v["decision"] == "deny"
        })
    }
    fn stopped(&self) -> bool {
        self.json().is_some_and(|v| v["continue"] == false)
    }
    fn warned(&self) -> bool {
        self.json()
            .is_some_and(|v| v["hookSpecificOutput"]["additionalContext"].is_string())
            && !self.denied()
            && !self.stopped()
    }
    fn blocked_stop(&self) -> bool {
        self.json().is_some_and(|v| v["decision"] == "block")
    }
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let home = root.join("home");
        let project = root.join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        // As an agent does, the transcript exists from the session's start.
        std::fs::write(root.join("transcript.jsonl"), b"").unwrap();
        Sandbox {
            state: root.join("state"),
            transcript: root.join("transcript.jsonl"),
            _dir: dir,
            root,
            home,
            project,
            env: Vec::new(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).current_dir(&self.project);
        for (k, _) in std::env::vars() {
            if k.starts_with("AGENTBREAKER_") || k.starts_with("BB_CIRCUIT_BREAKER_") {
                c.env_remove(k);
            }
        }
        c.env("HOME", &self.home);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn hook_args(&self, agent: Option<&str>) -> Vec<String> {
        let mut a = vec!["hook".to_string()];
        if let Some(agent) = agent {
            a.extend(["--agent".to_string(), agent.to_string()]);
        }
        a.extend([
            "--state-dir".to_string(),
            self.state.to_string_lossy().into_owned(),
        ]);
        a
    }

    fn spawn(&self, args: &[String], env: &[(&str, &str)]) -> std::process::Child {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut c = self.command(&refs);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn raw(&self, agent: Option<&str>, stdin: &[u8], env: &[(&str, &str)]) -> Call {
        let args = self.hook_args(agent);
        let start = Instant::now();
        let mut child = self.spawn(&args, env);
        {
            let mut input = child.stdin.take().unwrap();
            let _ = input.write_all(stdin);
        }
        let out = child.wait_with_output().unwrap();
        call_of(out, start.elapsed())
    }

    fn call(&self, agent: &str, event: &Value) -> Call {
        self.raw(Some(agent), self.fill(event).to_string().as_bytes(), &[])
    }

    /// `$PROJECT` and `$TRANSCRIPT` replaced by this sandbox's paths.
    fn fill(&self, v: &Value) -> Value {
        let text = v
            .to_string()
            .replace("$PROJECT", &self.project.to_string_lossy())
            .replace("$TRANSCRIPT", &self.transcript.to_string_lossy());
        serde_json::from_str(&text).unwrap()
    }

    fn append_transcript(&self, lines: &[Value]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.transcript)
            .unwrap();
        for l in lines {
            writeln!(f, "{}", self.fill(l)).unwrap();
        }
    }

    fn status(&self) -> Value {
        let out = self
            .command(&[
                "status",
                "--json",
                "--state-dir",
                &self.state.to_string_lossy(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn state_files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.state)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

fn call_of(out: Output, took: Duration) -> Call {
    Call {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took,
    }
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Where a fixture's replies first warned, denied and stopped.
#[derive(Debug, Default, PartialEq)]
struct Firsts {
    warn: Option<usize>,
    deny: Option<usize>,
    stop: Option<usize>,
}

fn run_fixture(name: &str) {
    let lines = read_jsonl(&fixtures().join(name));
    let meta = &lines[0]["fixture"];
    let agent = meta["agent"].as_str().unwrap();
    let mut sb = Sandbox::new();
    for (k, v) in meta["env"].as_object().unwrap() {
        sb.env.push((k.clone(), v.as_str().unwrap().to_string()));
    }
    let mut firsts = Firsts::default();
    let mut denied_call: Option<Value> = None;
    for (i, line) in lines[1..].iter().enumerate() {
        // A denied call never runs: the agent sends no Post event for it.
        let name = line["event"]["hook_event_name"].as_str().unwrap_or("");
        if let Some(d) = denied_call.take()
            && matches!(name, "PostToolUse" | "PostToolUseFailure" | "AfterTool")
            && d["tool_use_id"] == line["event"]["tool_use_id"]
        {
            continue;
        }
        if let Some(t) = line.get("transcript").and_then(Value::as_array) {
            sb.append_transcript(t);
        }
        if let Some(files) = line.get("files").and_then(Value::as_object) {
            for (path, content) in files {
                let p = sb.project.join(path);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, content.as_str().unwrap()).unwrap();
            }
        }
        let c = sb.call(agent, &line["event"]);
        assert_eq!(c.code, 0, "{name} call {i}: {c:?}");
        assert!(
            c.stderr.is_empty() || !c.stderr.contains("without a check"),
            "{name} call {i}: {c:?}"
        );
        assert!(
            c.took < Duration::from_secs(1),
            "{name} call {i} took {:?}",
            c.took
        );
        assert!(!c.blocked_stop(), "{name} call {i} blocked a Stop: {c:?}");
        if agent == "gemini" {
            assert!(
                c.json().is_some(),
                "{name} call {i}: Gemini always gets JSON"
            );
        }
        if c.warned() && firsts.warn.is_none() {
            firsts.warn = Some(i);
        }
        if c.denied() {
            denied_call = Some(line["event"].clone());
            if firsts.deny.is_none() {
                firsts.deny = Some(i);
            }
        }
        if c.stopped() && firsts.stop.is_none() {
            firsts.stop = Some(i);
        }
        if agent == "codex"
            && let Some(v) = c.json()
            && line["event"]["hook_event_name"] == "PreToolUse"
        {
            assert!(
                v.get("continue").is_none() && v.get("stopReason").is_none(),
                "{name} call {i}: Codex refuses continue/stopReason on PreToolUse: {v}"
            );
        }
    }
    let e = &meta["expect"];
    let want = Firsts {
        warn: e["firstWarn"].as_u64().map(|n| n as usize),
        deny: e["firstDeny"].as_u64().map(|n| n as usize),
        stop: e["firstStop"].as_u64().map(|n| n as usize),
    };
    assert_eq!(firsts, want, "{name}");
    if e["ended"] == true {
        assert!(
            sb.state_files().iter().all(|f| !f.ends_with(".json")),
            "{name}: SessionEnd removes the state"
        );
        return;
    }
    let status = sb.status();
    let session = &status["sessions"][0];
    assert_eq!(session["halt"]["reason"], e["reason"], "{name}: {session}");
    if let Some(task) = e["haltedTask"].as_str() {
        let halted: Vec<&str> = session["monitor"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["halted"] == true)
            .map(|t| t["taskId"].as_str().unwrap())
            .collect();
        assert_eq!(halted, vec![task], "{name}");
    }
}

macro_rules! fixture_tests {
    ($($test:ident => $file:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                run_fixture($file);
            }
        )*
    };
}

fixture_tests! {
    claude_same_failing_command => "claude-same-failing-command.jsonl",
    codex_same_failing_command => "codex-same-failing-command.jsonl",
    gemini_same_failing_command => "gemini-same-failing-command.jsonl",
    claude_path_hallucination => "claude-path-hallucination.jsonl",
    codex_path_hallucination => "codex-path-hallucination.jsonl",
    gemini_path_hallucination => "gemini-path-hallucination.jsonl",
    claude_reapplied_edits => "claude-reapplied-edits.jsonl",
    codex_reapplied_edits => "codex-reapplied-edits.jsonl",
    gemini_reapplied_edits => "gemini-reapplied-edits.jsonl",
    claude_spend_runaway => "claude-spend-runaway.jsonl",
    codex_spend_runaway => "codex-spend-runaway.jsonl",
    gemini_spend_runaway => "gemini-spend-runaway.jsonl",
    claude_healthy_polling => "claude-healthy-polling.jsonl",
    codex_healthy_polling => "codex-healthy-polling.jsonl",
    gemini_healthy_polling => "gemini-healthy-polling.jsonl",
    claude_subagent_loop => "claude-subagent-loop.jsonl",
}

// ---------------------------------------------------------------------------------------------
// The two real Claude Code sessions, converted into hook events.

/// Hook events of a Claude stream-json session: each `tool_use` block a `PreToolUse`, each
/// `tool_result` a `PostToolUse` (or `PostToolUseFailure` when `is_error`), subagent lines
/// (`parent_tool_use_id`) with that id as `agent_id`, the final answer a `Stop`. Each event
/// carries the stream lines that precede it, which the test appends to the transcript first.
fn convert_stream(lines: &[Value], session: &str) -> Vec<(Vec<Value>, Value)> {
    let base = |name: &str| {
        json!({"session_id": session, "transcript_path": "$TRANSCRIPT", "cwd": "$PROJECT",
               "hook_event_name": name, "permission_mode": "bypassPermissions"})
    };
    let mut out: Vec<(Vec<Value>, Value)> = Vec::new();
    let mut pending: Vec<Value> = Vec::new();
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut start = base("SessionStart");
    start["source"] = json!("startup");
    out.push((Vec::new(), start));
    for line in lines {
        if line.get("fixture").is_some() {
            continue;
        }
        let agent_id = line["parent_tool_use_id"].as_str();
        if line["type"] == "assistant" {
            pending.push(line.clone());
        }
        let blocks = line["message"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for b in blocks {
            let mut e = match b["type"].as_str() {
                Some("tool_use") => {
                    calls.insert(
                        b["id"].as_str().unwrap().to_string(),
                        (b["name"].as_str().unwrap().to_string(), b["input"].clone()),
                    );
                    let mut e = base("PreToolUse");
                    e["tool_name"] = b["name"].clone();
                    e["tool_input"] = b["input"].clone();
                    e["tool_use_id"] = b["id"].clone();
                    e
                }
                Some("tool_result") => {
                    let id = b["tool_use_id"].as_str().unwrap();
                    let (name, input) = calls.get(id).cloned().unwrap();
                    let text = b["content"].as_str().unwrap_or("").to_string();
                    let mut e = if b["is_error"] == true {
                        // Claude Code's error of a failed command: "Exit code N", then its
                        // output (claude-code#83394).
                        let mut e = base("PostToolUseFailure");
                        e["error"] = if name == "Bash" && !text.starts_with("Command timed out") {
                            json!(format!("Exit code 1\n{text}"))
                        } else {
                            json!(text)
                        };
                        e
                    } else {
                        let mut e = base("PostToolUse");
                        e["tool_response"] = if name == "Bash" {
                            json!({"stdout": text, "stderr": "", "interrupted": false})
                        } else {
                            json!(text)
                        };
                        e
                    };
                    e["tool_name"] = json!(name);
                    e["tool_input"] = input;
                    e["tool_use_id"] = json!(id);
                    e
                }
                _ => continue,
            };
            if let Some(a) = agent_id {
                e["agent_id"] = json!(a);
                e["agent_type"] = json!("general-purpose");
            }
            out.push((std::mem::take(&mut pending), e));
        }
        if line["type"] == "result" {
            let mut e = base("Stop");
            e["stop_hook_active"] = json!(false);
            e["last_assistant_message"] = line["result"].clone();
            out.push((std::mem::take(&mut pending), e));
        }
    }
    out
}

/// The spend of a Claude stream as the eval README prices it: each message id once, its output
/// the largest seen, at the default `*` rate (cents per million: 300 in, 1500 out, 375 cache
/// write, 30 cache read).
fn expected_spend_cents(lines: &[Value]) -> f64 {
    let mut by_id: HashMap<String, [f64; 4]> = HashMap::new();
    for l in lines {
        let u = &l["message"]["usage"];
        if l["type"] != "assistant" || !u.is_object() {
            continue;
        }
        let f = |k: &str| u[k].as_f64().unwrap_or(0.0);
        let t = [
            f("input_tokens"),
            f("output_tokens"),
            f("cache_creation_input_tokens"),
            f("cache_read_input_tokens"),
        ];
        let e = by_id
            .entry(l["message"]["id"].as_str().unwrap().to_string())
            .or_insert([0.0; 4]);
        for i in 0..4 {
            e[i] = e[i].max(t[i]);
        }
    }
    by_id
        .values()
        .map(|t| (t[0] * 300.0 + t[1] * 1500.0 + t[2] * 375.0 + t[3] * 30.0) / 1e6)
        .sum()
}

fn real_session(file: &str) {
    let lines = read_jsonl(&fixtures().join(file));
    let session = lines[1]["session_id"].as_str().unwrap().to_string();
    let events = convert_stream(&lines, &session);
    let tool_calls = events
        .iter()
        .filter(|(_, e)| e["hook_event_name"] == "PreToolUse")
        .count();
    assert!(tool_calls >= 40, "{file}: {tool_calls} tool calls");
    let sb = Sandbox::new();
    for (i, (transcript, event)) in events.iter().enumerate() {
        sb.append_transcript(transcript);
        let c = sb.call("claude", event);
        assert_eq!(c.code, 0, "{file} call {i}: {c:?}");
        assert!(
            !c.denied(),
            "{file} call {i} denied a healthy session: {c:?}"
        );
        assert!(
            !c.stopped(),
            "{file} call {i} stopped a healthy session: {c:?}"
        );
        assert!(!c.blocked_stop(), "{file} call {i}: {c:?}");
    }
    let status = sb.status();
    let s = &status["sessions"][0];
    assert_eq!(s["halted"], false, "{file}: {s}");
    let tasks = s["monitor"]["tasks"].as_array().unwrap();
    let main = tasks.iter().find(|t| t["taskId"] == "session").unwrap();
    let counted: u64 = tasks.iter().map(|t| t["toolCalls"].as_u64().unwrap()).sum();
    assert_eq!(
        counted as usize, tool_calls,
        "{file}: every tool call counted once"
    );
    let spend: f64 = tasks
        .iter()
        .map(|t| t["spendCents"].as_f64().unwrap())
        .sum();
    let want = expected_spend_cents(&lines);
    assert!(want > 50.0, "{file}: {want}");
    assert!(
        (spend - want).abs() < 0.01,
        "{file}: spend read from the transcript {spend} vs {want}"
    );
    assert!(main["steps"].as_u64().unwrap() >= 10);
    // SessionEnd removes the state.
    let mut end = json!({"session_id": session, "transcript_path": "$TRANSCRIPT",
                         "cwd": "$PROJECT", "hook_event_name": "SessionEnd", "reason": "other"});
    end = sb.fill(&end);
    let c = sb.call("claude", &end);
    assert_eq!(c.code, 0);
    assert!(sb.state_files().iter().all(|f| !f.ends_with(".json")));
}

#[test]
fn real_claude_session_1_is_never_denied_or_stopped() {
    real_session("claude-session-1.jsonl");
}

#[test]
fn real_claude_pricing_session_is_never_denied_or_stopped() {
    real_session("claude-session-pricing-run1.jsonl");
}

// ---------------------------------------------------------------------------------------------
// Lifecycle.

fn claude_event(name: &str, session: &str, extra: Value) -> Value {
    let mut e = json!({"session_id": session, "transcript_path": "$TRANSCRIPT", "cwd": "$PROJECT",
                       "hook_event_name": name});
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e
}

fn pre(session: &str, n: usize, command: &str) -> Value {
    claude_event(
        "PreToolUse",
        session,
        json!({"tool_name": "Bash", "tool_input": {"command": command},
               "tool_use_id": format!("t{n}")}),
    )
}

fn post_fail(session: &str, n: usize, command: &str) -> Value {
    claude_event(
        "PostToolUseFailure",
        session,
        json!({"tool_name": "Bash", "tool_input": {"command": command},
               "tool_use_id": format!("t{n}"), "error": "Exit code 1\nboom"}),
    )
}

fn halt_session(sb: &Sandbox, session: &str) {
    for n in 0..5 {
        sb.call("claude", &pre(session, n, "make"));
        sb.call("claude", &post_fail(session, n, "make"));
    }
    assert!(sb.call("claude", &pre(session, 9, "ls")).denied());
}

#[test]
fn stop_is_never_blocked_and_startup_starts_fresh() {
    let sb = Sandbox::new();
    halt_session(&sb, "s1");
    for active in [false, true] {
        let stop = claude_event(
            "Stop",
            "s1",
            json!({"stop_hook_active": active,
                                                      "last_assistant_message": "done"}),
        );
        let c = sb.call("claude", &stop);
        assert_eq!(c.code, 0);
        assert!(!c.blocked_stop(), "{c:?}");
        assert!(
            c.stopped(),
            "a halted session is told to stay stopped: {c:?}"
        );
    }
    let prompt = claude_event("UserPromptSubmit", "s1", json!({"prompt": "go on"}));
    let c = sb.call("claude", &prompt);
    assert!(c.json().unwrap()["hookSpecificOutput"]["additionalContext"].is_string());
    // resume keeps the halt, startup starts fresh.
    let c = sb.call(
        "claude",
        &claude_event("SessionStart", "s1", json!({"source": "resume"})),
    );
    assert_eq!(c.code, 0);
    assert!(sb.call("claude", &pre("s1", 20, "ls")).denied());
    sb.call(
        "claude",
        &claude_event("SessionStart", "s1", json!({"source": "startup"})),
    );
    assert!(!sb.call("claude", &pre("s1", 21, "ls")).denied());
    // SessionEnd removes the state; reset forgets a halted session.
    halt_session(&sb, "s2");
    let out = sb
        .command(&[
            "hook",
            "reset",
            "s2",
            "--state-dir",
            &sb.state.to_string_lossy(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!sb.call("claude", &pre("s2", 30, "ls")).denied());
    sb.call(
        "claude",
        &claude_event("SessionEnd", "s1", json!({"reason": "other"})),
    );
    sb.call(
        "claude",
        &claude_event("SessionEnd", "s2", json!({"reason": "other"})),
    );
    assert!(sb.state_files().is_empty(), "{:?}", sb.state_files());
}

#[test]
fn state_older_than_a_day_is_cleaned_up() {
    let sb = Sandbox::new();
    sb.call("claude", &pre("old", 1, "ls"));
    let old: Vec<String> = sb.state_files();
    assert_eq!(old.len(), 3, "{old:?}"); // the state, the lock, the record (`<key>.log`)
    for f in &old {
        let status = Command::new("touch")
            .args(["-d", "2 days ago"])
            .arg(sb.state.join(f))
            .status()
            .unwrap();
        assert!(status.success());
    }
    sb.call(
        "claude",
        &claude_event("SessionStart", "new", json!({"source": "startup"})),
    );
    let now = sb.state_files();
    assert!(old.iter().all(|f| !now.contains(f)), "{now:?}");
    assert_eq!(now.len(), 2);
}

#[test]
fn status_lists_live_sessions_with_their_counters() {
    let sb = Sandbox::new();
    sb.call("claude", &pre("alpha", 1, "ls"));
    sb.call("claude", &pre("alpha", 2, "cat x"));
    let gemini = json!({"session_id": "beta", "hook_event_name": "BeforeTool", "cwd": "$PROJECT",
                        "timestamp": "2026-01-01T00:00:00Z", "tool_name": "glob",
                        "tool_input": {"pattern": "*"}});
    let c = sb.raw(None, sb.fill(&gemini).to_string().as_bytes(), &[]);
    assert_eq!(c.stdout.trim(), "{}", "recognised as Gemini: {c:?}");
    let s = sb.status();
    let sessions = s["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    let alpha = sessions.iter().find(|x| x["sessionId"] == "alpha").unwrap();
    assert_eq!(alpha["agent"], "claude");
    assert_eq!(alpha["monitor"]["tasks"][0]["toolCalls"], 2);
    assert_eq!(alpha["monitor"]["tasks"][0]["toolCallsByName"]["Bash"], 2);
    let beta = sessions.iter().find(|x| x["sessionId"] == "beta").unwrap();
    assert_eq!(beta["agent"], "gemini");
    let out = sb
        .command(&["status", "--state-dir", &sb.state.to_string_lossy()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 live sessions") && text.contains("alpha"),
        "{text}"
    );
}

#[test]
fn status_of_a_state_folder_that_is_not_a_folder_is_an_error() {
    let sb = Sandbox::new();
    let file = sb.root.join("not-a-folder");
    std::fs::write(&file, "x").unwrap();
    let link = sb.root.join("link");
    std::fs::create_dir(sb.root.join("real")).unwrap();
    std::os::unix::fs::symlink(sb.root.join("real"), &link).unwrap();
    for (path, why) in [(&file, "is not a folder"), (&link, "is a symlink")] {
        let p = path.to_string_lossy();
        for args in [
            vec!["status", "--state-dir", &p],
            vec!["status", "--json", "--state-dir", &p],
            vec!["status", "--prometheus", "--state-dir", &p],
        ] {
            let out = sb.command(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(74), "{args:?}: {err}");
            assert!(
                err.contains(&format!("the state folder {p} {why}")),
                "{args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}");
        }
    }
    // A folder no hook call has created yet: no sessions, and it says so.
    let missing = sb.root.join("missing");
    let out = sb
        .command(&["status", "--state-dir", &missing.to_string_lossy()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("no live sessions in") && text.contains("does not exist yet"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Concurrency and killed processes.

#[test]
fn fifty_concurrent_hook_processes_lose_no_count() {
    let _turn = timed();
    let sb = Sandbox::new();
    let args = sb.hook_args(Some("claude"));
    // Each process gets its event as soon as it starts (a process waiting on its stdin while 49
    // others are spawned could outlive its own watchdog on a loaded machine), and all 50 run at
    // once.
    let events: Vec<String> = (0..50)
        .map(|n| sb.fill(&pre("busy", n, &format!("echo {n}"))).to_string())
        .collect();
    let mut waiting = Vec::new();
    for event in &events {
        let mut child = sb.spawn(&args, &[]);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(event.as_bytes()).unwrap();
        drop(stdin);
        waiting.push(child);
    }
    for child in waiting {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = sb.status();
    assert_eq!(s["sessions"][0]["monitor"]["tasks"][0]["toolCalls"], 50);
    assert_eq!(s["sessions"][0]["hookCalls"], 50);
    assert!(s["unreadable"].as_array().unwrap().is_empty());
    assert!(sb.state_files().iter().all(|f| !f.ends_with(".tmp")));
}

#[test]
fn a_stuck_lock_holder_costs_under_a_second_and_a_killed_one_leaves_usable_state() {
    let _turn = timed();
    let sb = Sandbox::new();
    for n in 0..3 {
        assert_eq!(
            sb.call("claude", &pre("k", n, &format!("step {n}"))).code,
            0
        );
    }
    // A holder stuck inside the lock (another process holding it): the next call allows, says
    // so, and takes under a second.
    let lock = sb
        .state_files()
        .into_iter()
        .find(|f| f.ends_with(".lock"))
        .unwrap();
    let mut stuck = Command::new("python3")
        .args([
            "-c",
            "import fcntl, sys, time\nf = open(sys.argv[1])\nfcntl.flock(f, fcntl.LOCK_EX)\n\
             print('locked', flush=True)\ntime.sleep(30)",
        ])
        .arg(sb.state.join(&lock))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(stuck.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");
    let c = sb.call("claude", &pre("k", 3, "meanwhile"));
    assert!(c.took < Duration::from_secs(1), "{c:?}");
    assert_eq!(c.code, 1, "a non-blocking hook error: {c:?}");
    assert!(c.stdout.is_empty(), "{c:?}");
    assert!(c.stderr.contains("locked by another process"), "{c:?}");
    assert_eq!(c.stderr.lines().count(), 1, "{c:?}");
    // The same for Gemini: exit 0 and JSON.
    let gemini = json!({"session_id": "k", "hook_event_name": "BeforeTool", "cwd": "$PROJECT",
                        "timestamp": "2026-01-01T00:00:00Z", "tool_name": "glob"});
    let g = sb.call("gemini", &gemini);
    assert_eq!((g.code, g.stdout.trim()), (0, "{}"), "{g:?}");
    assert!(g.took < Duration::from_secs(1), "{g:?}");
    stuck.kill().unwrap();
    stuck.wait().unwrap();
    // A hook process killed inside the lock (before it saved): the state is still usable.
    let args = sb.hook_args(Some("claude"));
    let mut killed = sb.spawn(&args, &[("AGENTBREAKER_HOOK_TEST_PAUSE_MS", "20000")]);
    killed
        .stdin
        .take()
        .unwrap()
        .write_all(sb.fill(&pre("k", 4, "killed")).to_string().as_bytes())
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let c = sb.call("claude", &pre("k", 5, "after"));
    assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
    let s = sb.status();
    assert_eq!(s["sessions"][0]["monitor"]["tasks"][0]["toolCalls"], 4);
    assert!(s["unreadable"].as_array().unwrap().is_empty());
}

/// The session's lock file, once a call created it.
fn lock_file(sb: &Sandbox, session: &str) -> PathBuf {
    let prefix = format!("{session}-");
    let name = sb
        .state_files()
        .into_iter()
        .find(|f| f.starts_with(&prefix) && f.ends_with(".lock"))
        .unwrap();
    sb.state.join(name)
}

/// Makes a file look two days old (older than the cleanup's day).
fn age_two_days(path: &Path) {
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

/// Waits until another process (a hook call inside the lock) holds the lock file.
fn wait_until_locked(path: &Path) {
    let start = Instant::now();
    loop {
        let f = std::fs::File::open(path).unwrap();
        if matches!(
            fs4::FileExt::try_lock(&f),
            Err(fs4::TryLockError::WouldBlock)
        ) {
            return;
        }
        drop(f); // releases it again if it was free
        assert!(
            start.elapsed() < Duration::from_millis(400),
            "the call never took the lock"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}

#[test]
fn the_lock_of_a_session_older_than_a_day_still_serializes_its_calls() {
    let _turn = timed();
    let sb = Sandbox::new();
    sb.call("claude", &pre("b", 0, "ls"));
    let lock = lock_file(&sb, "b");
    // A session whose first call was more than a day ago: its lock file is that old (before a
    // call refreshed it).
    age_two_days(&lock);
    let args = sb.hook_args(Some("claude"));
    let mut first = sb.spawn(&args, &[("AGENTBREAKER_HOOK_TEST_PAUSE_MS", "500")]);
    first
        .stdin
        .take()
        .unwrap()
        .write_all(sb.fill(&pre("b", 1, "first")).to_string().as_bytes())
        .unwrap();
    wait_until_locked(&lock);
    let refreshed = std::fs::metadata(&lock).unwrap().modified().unwrap();
    assert!(
        refreshed.elapsed().unwrap_or_default() < Duration::from_secs(3600),
        "a call refreshes its lock file's time"
    );
    // Aged again while held: the cleanup of a session starting now must still leave it.
    age_two_days(&lock);
    let held = inode(&lock);
    let c = sb.call(
        "claude",
        &claude_event("SessionStart", "a", json!({"source": "startup"})),
    );
    assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
    assert_eq!(inode(&lock), held, "the cleanup removed a held lock file");
    // The next call of the session waits for the first one.
    let second = sb.call("claude", &pre("b", 2, "second"));
    assert_eq!((second.code, second.stderr.as_str()), (0, ""), "{second:?}");
    let first = call_of(first.wait_with_output().unwrap(), Duration::ZERO);
    assert_eq!((first.code, first.stderr.as_str()), (0, ""), "{first:?}");
    let s = sb.status();
    let b = s["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["sessionId"] == "b")
        .unwrap()
        .clone();
    assert_eq!(b["hookCalls"], 3, "no call's update is lost: {b}");
    assert_eq!(b["monitor"]["tasks"][0]["toolCalls"], 3, "{b}");
}

fn tool_calls_total(path: &Path) -> f64 {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("agentbreaker_tool_calls_total "))
        .map_or(0.0, |n| n.trim().parse().unwrap())
}

#[test]
fn a_stale_session_in_use_is_not_retired_and_a_free_one_is_retired_once() {
    let sb = Sandbox::new();
    let metrics = sb.root.join("metrics.prom");
    let mut args = sb.hook_args(Some("claude"));
    args.extend([
        "--metrics-file".to_string(),
        metrics.to_string_lossy().into_owned(),
    ]);
    let call = |event: &Value| {
        let mut child = sb.spawn(&args, &[]);
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sb.fill(event).to_string().as_bytes())
            .unwrap();
        let c = call_of(child.wait_with_output().unwrap(), Duration::ZERO);
        assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
    };
    call(&pre("old", 0, "ls"));
    call(&pre("old", 1, "cat x"));
    assert_eq!(tool_calls_total(&metrics), 2.0);
    let files: Vec<PathBuf> = sb
        .state_files()
        .into_iter()
        .filter(|f| f.starts_with("old-"))
        .map(|f| sb.state.join(f))
        .collect();
    assert_eq!(files.len(), 4, "{files:?}"); // state, lock, counters, record
    // Stale, but a call of it holds its lock (here: this test).
    let held = std::fs::File::open(lock_file(&sb, "old")).unwrap();
    fs4::FileExt::lock(&held).unwrap();
    for f in &files {
        age_two_days(f);
    }
    call(&claude_event(
        "SessionStart",
        "new1",
        json!({"source": "startup"}),
    ));
    assert!(files.iter().all(|f| f.exists()), "{:?}", sb.state_files());
    assert!(
        !sb.state.join("retired.metrics.json").exists(),
        "a session in use is not retired"
    );
    assert_eq!(tool_calls_total(&metrics), 2.0);
    // Free: the next start retires it, once.
    drop(held);
    call(&claude_event(
        "SessionStart",
        "new2",
        json!({"source": "startup"}),
    ));
    call(&claude_event(
        "SessionStart",
        "new3",
        json!({"source": "startup"}),
    ));
    assert!(files.iter().all(|f| !f.exists()), "{:?}", sb.state_files());
    assert_eq!(tool_calls_total(&metrics), 2.0);
}

// ---------------------------------------------------------------------------------------------
// Bad input: each case a real process that allows, prints one line on stderr and leaves a state
// the next call can use.

fn assert_allowed_with_one_line(c: &Call, code: i32, what: &str) {
    assert_eq!(c.code, code, "{what}: {c:?}");
    assert!(c.code != 2, "{what}");
    assert!(!c.denied() && !c.stopped(), "{what}: {c:?}");
    assert_eq!(c.stderr.lines().count(), 1, "{what}: {c:?}");
    assert!(c.stderr.starts_with("agentbreaker: "), "{what}: {c:?}");
    assert!(c.took < Duration::from_secs(1), "{what}: {c:?}");
}

#[test]
fn bad_stdin_never_blocks() {
    let sb = Sandbox::new();
    for (what, input) in [
        ("empty stdin", &b""[..]),
        ("not JSON", &b"{\"hook_event_name\": "[..]),
        ("binary", &b"\x00\xff\xfe\x01"[..]),
        ("not an object", &b"[1, 2]"[..]),
        (
            "no session id",
            &b"{\"hook_event_name\": \"PreToolUse\"}"[..],
        ),
    ] {
        let c = sb.raw(Some("claude"), input, &[]);
        assert_allowed_with_one_line(&c, 1, what);
        assert!(c.stdout.is_empty(), "{what}");
        let c = sb.raw(Some("gemini"), input, &[]);
        assert_allowed_with_one_line(&c, 0, what);
        assert_eq!(c.stdout.trim(), "{}", "{what}: Gemini gets exit 0 and JSON");
        let c = sb.raw(None, input, &[]);
        assert!(matches!(c.code, 0 | 1) && !c.denied(), "{what}: {c:?}");
    }
    // A bad command line in a settings file does not block either.
    let out = sb
        .command(&["hook", "--agnet", "gemini"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let c = call_of(out, Duration::ZERO);
    assert_eq!((c.code, c.stdout.trim()), (0, "{}"), "{c:?}");
    assert_eq!(c.stderr.lines().count(), 1, "{c:?}");
    let out = sb
        .command(&["hook", "--agent", "claude", "--nope"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let c = call_of(out, Duration::ZERO);
    assert_eq!((c.code, c.stdout.as_str()), (1, ""), "{c:?}");
    // An argument that is not UTF-8: the same, no panic.
    for (agent, code, stdout) in [("gemini", 0, "{}\n"), ("claude", 1, "")] {
        let out = sb
            .command(&["hook", "--agent", agent])
            .arg(std::ffi::OsStr::from_bytes(b"--\xffx"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let c = call_of(out, Duration::ZERO);
        assert_eq!((c.code, c.stdout.as_str()), (code, stdout), "{c:?}");
        assert_eq!(c.stderr.lines().count(), 1, "{c:?}");
        assert!(c.stderr.starts_with("agentbreaker: "), "{c:?}");
    }
}

#[test]
fn an_unknown_event_is_allowed_and_counted_as_activity() {
    let sb = Sandbox::new();
    let e = claude_event("SomethingNew", "u", json!({"whatever": [1, 2, 3]}));
    let c = sb.call("claude", &e);
    assert_eq!((c.code, c.stdout.as_str()), (0, ""), "{c:?}");
    assert!(!sb.call("claude", &pre("u", 1, "ls")).denied());
}

#[test]
fn a_lone_surrogate_escape_in_an_event_is_read_and_counted() {
    // Node's JSON.stringify writes output cut inside an emoji as a lone `\ud83d`.
    let sb = Sandbox::new();
    for n in 0..5 {
        sb.call("claude", &pre("s", n, "make"));
        let mut e = post_fail("s", n, "make");
        e["error"] = json!("Exit code 2\nmake: *** [all] Error 1 CUT");
        let text = sb.fill(&e).to_string().replace("CUT", "\\ud83d");
        assert!(text.contains("Error 1 \\ud83d\""), "{text}");
        let c = sb.raw(Some("claude"), text.as_bytes(), &[]);
        assert!(c.code == 0 && !c.stderr.contains("not JSON"), "{c:?}");
    }
    let c = sb.call("claude", &pre("s", 9, "make"));
    assert!(c.denied(), "the repeated failure halts the session: {c:?}");
    // An escaped backslash before `ud83d` is text, and a pair is an emoji: read as they are.
    let mut e = pre("s2", 0, "X");
    e["tool_input"]["command"] = json!("echo Y");
    let text = sb
        .fill(&e)
        .to_string()
        .replace("Y", "\\\\ud83d \\ud83d\\ude00");
    let c = sb.raw(Some("claude"), text.as_bytes(), &[]);
    assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
}

fn state_file(sb: &Sandbox, session: &str) -> PathBuf {
    sb.call("claude", &pre(session, 0, "ls"));
    let f = sb
        .state_files()
        .into_iter()
        .find(|f| f.ends_with(".json"))
        .unwrap();
    sb.state.join(f)
}

#[test]
fn a_corrupt_state_is_moved_aside_and_the_session_starts_fresh() {
    let sb = Sandbox::new();
    let path = state_file(&sb, "c");
    std::fs::write(
        &path,
        b"{\"version\": 1, \"kind\": \"hook-session\", \"monitor\": ",
    )
    .unwrap();
    let c = sb.call("claude", &pre("c", 1, "ls"));
    assert_allowed_with_one_line(&c, 1, "a corrupt state: a non-blocking hook error");
    assert!(c.stdout.is_empty(), "{c:?}");
    assert!(c.stderr.contains("moved aside"), "{c:?}");
    let aside: Vec<String> = sb
        .state_files()
        .into_iter()
        .filter(|f| f.contains(".corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read(sb.state.join(&aside[0])).unwrap(),
        b"{\"version\": 1, \"kind\": \"hook-session\", \"monitor\": "
    );
    let s = sb.status();
    assert_eq!(s["sessions"][0]["monitor"]["tasks"][0]["toolCalls"], 1);
    // A snapshot the Monitor refuses (valid JSON) is moved aside too.
    let mut st: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    st["monitor"] = json!({"version": 9, "kind": "monitor"});
    std::fs::write(&path, st.to_string()).unwrap();
    let c = sb.call("claude", &pre("c", 2, "ls"));
    assert_allowed_with_one_line(&c, 1, "a refused snapshot");
    assert!(c.stderr.contains("moved aside"), "{c:?}");
    // Gemini: exit 0 and `{}`, the line on stderr.
    std::fs::write(&path, b"{").unwrap();
    let gemini = json!({"session_id": "c", "hook_event_name": "BeforeTool", "cwd": "$PROJECT",
                        "timestamp": "2026-01-01T00:00:00Z", "tool_name": "glob"});
    let g = sb.call("gemini", &gemini);
    assert_allowed_with_one_line(&g, 0, "a corrupt state, Gemini");
    assert_eq!(g.stdout.trim(), "{}", "{g:?}");
    assert!(g.stderr.contains("moved aside"), "{g:?}");
    // A halted session whose state is corrupt starts fresh: said with exit 1, never a deny.
    halt_session(&sb, "h");
    let halted = sb
        .state_files()
        .into_iter()
        .find(|f| f.starts_with("h-") && f.ends_with(".json"))
        .unwrap();
    std::fs::write(sb.state.join(halted), b"").unwrap();
    let c = sb.call("claude", &pre("h", 10, "ls"));
    assert_allowed_with_one_line(&c, 1, "a halted session's corrupt state");
    assert!(c.stderr.contains("starts fresh"), "{c:?}");
}

#[test]
fn an_unreadable_state_is_moved_aside() {
    let sb = Sandbox::new();
    let path = state_file(&sb, "u");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap(); // a folder where the file belongs: cannot be read
    let c = sb.call("claude", &pre("u", 1, "ls"));
    assert_allowed_with_one_line(&c, 1, "an unreadable state");
    assert!(path.is_file(), "a fresh state took its place");
    assert!(sb.state_files().iter().any(|f| f.contains(".corrupt-")));
}

#[test]
fn a_full_disk_allows_the_call_and_the_next_call_works() {
    let sb = Sandbox::new();
    state_file(&sb, "f");
    // Every write fails (a file size limit of 0, its signal ignored): as on a full disk.
    let event = sb.fill(&pre("f", 1, "ls")).to_string();
    let script = format!(
        "trap '' XFSZ; ulimit -f 0; printf '%s' '{}' | '{}' hook --agent claude --state-dir '{}'",
        event.replace('\'', "'\\''"),
        BIN,
        sb.state.display()
    );
    let start = Instant::now();
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("HOME", &sb.home)
        .current_dir(&sb.project)
        .output()
        .unwrap();
    let c = call_of(out, start.elapsed());
    assert_allowed_with_one_line(&c, 1, "full disk");
    assert!(
        c.stderr.contains("not saved") || c.stderr.contains("cannot save"),
        "{c:?}"
    );
    assert!(sb.state_files().iter().all(|f| !f.ends_with(".tmp")));
    let c = sb.call("claude", &pre("f", 2, "ls"));
    assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
}

#[test]
fn a_panic_allows_the_call_and_the_next_call_works() {
    let sb = Sandbox::new();
    state_file(&sb, "p");
    for phase in ["parsed", "locked"] {
        let c = sb.raw(
            Some("claude"),
            sb.fill(&pre("p", 1, "ls")).to_string().as_bytes(),
            &[("AGENTBREAKER_HOOK_TEST_PANIC", phase)],
        );
        assert_allowed_with_one_line(&c, 1, phase);
        assert!(c.stderr.contains("internal error"), "{c:?}");
    }
    let c = sb.call("claude", &pre("p", 2, "ls"));
    assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
}

#[test]
fn missing_huge_and_binary_transcripts_cost_bounded_time() {
    let _turn = timed();
    let sb = Sandbox::new();
    std::fs::remove_file(&sb.transcript).unwrap();
    // Missing: the call is checked as usual, one line says spend is not counted (a non-blocking
    // hook error, so that Claude Code shows it; Gemini gets exit 0 and `{}`).
    let c = sb.call("claude", &pre("t", 1, "ls"));
    assert_allowed_with_one_line(&c, 1, "a missing transcript");
    assert!(c.stderr.contains("no transcript"), "{c:?}");
    let gemini = json!({"session_id": "tg", "hook_event_name": "BeforeTool", "cwd": "$PROJECT",
                        "transcript_path": "$TRANSCRIPT", "tool_name": "glob",
                        "timestamp": "2026-01-01T00:00:00Z"});
    let g = sb.call("gemini", &gemini);
    assert_allowed_with_one_line(&g, 0, "a missing transcript, Gemini");
    assert_eq!(g.stdout.trim(), "{}", "{g:?}");
    // Huge (150 MB, sparse): counted from its end.
    let f = std::fs::File::create(&sb.transcript).unwrap();
    f.set_len(150 * 1024 * 1024).unwrap();
    drop(f);
    let c = sb.call("claude", &pre("t", 2, "ls"));
    assert_allowed_with_one_line(&c, 1, "a huge transcript");
    assert!(c.stderr.contains("100 MB"), "{c:?}");
    // Binary, in a new session: 20 MB without a newline, read at most 4 MB a call.
    let junk: Vec<u8> = (0..20 * 1024 * 1024u32)
        .map(|i| (i % 251) as u8 | 0x81)
        .collect();
    std::fs::write(&sb.transcript, junk).unwrap();
    for n in 0..3 {
        let c = sb.call("claude", &pre("t2", n, &format!("cmd {n}")));
        assert_eq!(c.code, 0, "{c:?}");
        assert!(c.took < Duration::from_secs(1), "{c:?}");
    }
    // A special file is never read (it would block).
    let fifo = sb.root.join("fifo.jsonl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let mut e = pre("t3", 1, "ls");
    e["transcript_path"] = json!(fifo);
    let c = sb.call("claude", &e);
    assert_allowed_with_one_line(&c, 1, "a FIFO transcript");
    assert!(c.stderr.contains("not a regular file"), "{c:?}");
}

#[test]
fn session_ids_never_become_paths() {
    let sb = Sandbox::new();
    let outside_before = std::fs::read_dir(&sb.root).unwrap().count();
    let long = "x".repeat(10 * 1024);
    for id in [
        "../../x",
        "/etc/passwd",
        "a\u{0}b/../../c",
        long.as_str(),
        "..",
        ".",
    ] {
        let c = sb.call("claude", &pre(id, 1, "ls"));
        assert_eq!(c.code, 0, "{id:?}: {c:?}");
    }
    let files = sb.state_files();
    // Per session: its state, its lock and its record for `agentbreaker report` (`<key>.log`).
    assert_eq!(files.len(), 18, "{files:?}");
    for f in &files {
        assert!(f.len() <= 70, "{f}");
        assert!(
            f.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{f}"
        );
    }
    let outside_after = std::fs::read_dir(&sb.root).unwrap().count();
    assert_eq!(
        outside_before + 1,
        outside_after,
        "only the state folder was added"
    );
    assert!(!sb.root.join("x").exists() && !sb.home.join("x").exists());
    // Permissions: the folder 0700, its files 0600.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sb.state), 0o700);
    for f in &files {
        assert_eq!(mode(&sb.state.join(f)), 0o600, "{f}");
    }
    let s = sb.status();
    assert!(
        s["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["sessionId"] == "/etc/passwd")
    );
}

#[test]
fn symlinks_in_the_state_folder_are_not_followed() {
    let sb = Sandbox::new();
    let path = state_file(&sb, "l");
    let lock = path.with_extension("lock");
    let target = sb.root.join("precious.txt");
    std::fs::write(&target, "do not touch").unwrap();
    for p in [&path, &lock] {
        std::fs::remove_file(p).unwrap();
        std::os::unix::fs::symlink(&target, p).unwrap();
    }
    let c = sb.call("claude", &pre("l", 1, "ls"));
    assert_allowed_with_one_line(&c, 1, "a symlinked state (moved aside)");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "do not touch");
    assert!(
        !std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A state folder that is itself a symlink is refused (allowed, one line).
    let real = sb.root.join("real-state");
    std::fs::create_dir(&real).unwrap();
    let linked = sb.root.join("linked-state");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    let out = sb
        .command(&[
            "hook",
            "--agent",
            "claude",
            "--state-dir",
            &linked.to_string_lossy(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(|mut ch| {
            ch.stdin
                .take()
                .unwrap()
                .write_all(sb.fill(&pre("l", 2, "ls")).to_string().as_bytes())
                .unwrap();
            ch.wait_with_output().unwrap()
        })
        .unwrap();
    let c = call_of(out, Duration::ZERO);
    assert_eq!(c.code, 1, "{c:?}");
    assert!(c.stderr.contains("symlink"), "{c:?}");
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
}

#[test]
fn a_bad_project_configuration_allows_and_says_so() {
    let sb = Sandbox::new();
    std::fs::write(sb.project.join("agentbreaker.toml"), "[budget]\nnope = 1\n").unwrap();
    let c = sb.call("claude", &pre("cfg", 1, "ls"));
    assert_allowed_with_one_line(&c, 1, "bad config");
    assert!(c.stderr.contains("configuration"), "{c:?}");
    // A good one is read from the event's cwd: two tool calls per task, the third is denied.
    std::fs::write(
        sb.project.join("agentbreaker.toml"),
        "[budget]\nmaxToolCallsPerTask = 2\n",
    )
    .unwrap();
    let mut denied = Vec::new();
    for n in 0..3 {
        denied.push(
            sb.call("claude", &pre("cfg2", n, &format!("c{n}")))
                .denied(),
        );
    }
    assert_eq!(denied, [false, false, true]);
}

// ---------------------------------------------------------------------------------------------
// install / uninstall.

fn install(sb: &Sandbox, args: &[&str]) -> Output {
    let mut all = vec!["hook"];
    all.extend_from_slice(args);
    sb.command(&all).output().unwrap()
}

const OTHERS: &str = r#"{
  "permissions": {
    "allow": [
      "Bash(git status)"
    ]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "$HOME/bin/guard.sh",
            "timeout": 30
          }
        ]
      }
    ],
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "say done"
          }
        ]
      }
    ]
  }
}
"#;

#[test]
fn install_and_uninstall_round_trip_for_each_agent() {
    for (agent, rel) in [
        ("claude", ".claude/settings.json"),
        ("codex", ".codex/hooks.json"),
        ("gemini", ".gemini/settings.json"),
    ] {
        let sb = Sandbox::new();
        let path = sb.home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, OTHERS).unwrap();
        // Dry run: prints the change, writes nothing.
        let out = install(&sb, &["install", agent, "--dry-run"]);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("would change") && text.contains("+ "),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), OTHERS);
        // Install: ours added after theirs, theirs untouched.
        let out = install(&sb, &["install", agent]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        if agent == "codex" {
            assert!(
                text.contains("/hooks"),
                "Codex users must trust new hooks: {text}"
            );
        }
        let after = std::fs::read_to_string(&path).unwrap();
        let doc: Value = serde_json::from_str(&after).unwrap();
        let pre_key = if agent == "gemini" {
            "BeforeTool"
        } else {
            "PreToolUse"
        };
        let cmd = doc["hooks"][pre_key].as_array().unwrap().last().unwrap()["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(cmd.ends_with(&format!("hook --agent {agent}")), "{cmd}");
        assert_eq!(
            doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "$HOME/bin/guard.sh"
        );
        assert_eq!(doc["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        assert_eq!(doc["permissions"]["allow"][0], "Bash(git status)");
        // The installed command works as the agent would run it.
        let event = match agent {
            "gemini" => json!({"session_id": "i", "hook_event_name": "BeforeTool",
                               "timestamp": "t", "tool_name": "glob", "cwd": "$PROJECT"}),
            _ => pre("i", 1, "ls"),
        };
        let out = Command::new("sh")
            .args(["-c", &format!("{cmd} --state-dir '{}'", sb.state.display())])
            .env("HOME", &sb.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map(|mut ch| {
                ch.stdin
                    .take()
                    .unwrap()
                    .write_all(sb.fill(&event).to_string().as_bytes())
                    .unwrap();
                ch.wait_with_output().unwrap()
            })
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        // Idempotent.
        let out = install(&sb, &["install", agent]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to change"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), after);
        // Uninstall removes exactly what install added.
        let out = install(&sb, &["uninstall", agent]);
        assert!(out.status.success());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), OTHERS, "{agent}");
        let out = install(&sb, &["uninstall", agent]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to change"));
    }
}

#[test]
fn install_into_missing_unreadable_and_commented_files() {
    let sb = Sandbox::new();
    // Missing file (and folder): created; uninstall leaves an empty object.
    let out = install(&sb, &["install", "claude", "--scope", "project"]);
    assert!(out.status.success(), "{out:?}");
    let path = sb.project.join(".claude/settings.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["hooks"].as_object().unwrap().len(), 8);
    let out = install(&sb, &["uninstall", "claude", "--scope", "project"]);
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
    // Unreadable (a folder where the file belongs): an error, nothing changed.
    let bad = sb.home.join(".gemini/settings.json");
    std::fs::create_dir_all(&bad).unwrap();
    let out = install(&sb, &["install", "gemini"]);
    assert_eq!(out.status.code(), Some(74), "{out:?}");
    assert!(bad.is_dir());
    // Comments (not JSON): refused, nothing changed.
    let commented = sb.home.join(".codex/hooks.json");
    std::fs::create_dir_all(commented.parent().unwrap()).unwrap();
    let text = "{\n  // mine\n  \"hooks\": {}\n}\n";
    std::fs::write(&commented, text).unwrap();
    let out = install(&sb, &["install", "codex"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("comments"));
    assert_eq!(std::fs::read_to_string(&commented).unwrap(), text);
    // A `hooks` entry that is not an object: refused.
    std::fs::write(&commented, "{\"hooks\": []}").unwrap();
    let out = install(&sb, &["install", "codex"]);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
}

// ---------------------------------------------------------------------------------------------
// The metrics file past a thousand sessions.

/// Sets a file's modification time.
fn set_mtime(path: &Path, t: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn the_metrics_file_never_goes_down_past_a_thousand_live_sessions() {
    let sb = Sandbox::new();
    let metrics = sb.root.join("metrics.prom");
    let mut args = sb.hook_args(Some("claude"));
    args.extend([
        "--metrics-file".to_string(),
        metrics.to_string_lossy().into_owned(),
    ]);
    let call = |event: &Value| {
        let mut child = sb.spawn(&args, &[]);
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sb.fill(event).to_string().as_bytes())
            .unwrap();
        let c = call_of(child.wait_with_output().unwrap(), Duration::ZERO);
        assert_eq!((c.code, c.stderr.as_str()), (0, ""), "{c:?}");
    };
    let prometheus_status = || {
        let out = sb
            .command(&[
                "status",
                "--prometheus",
                "--state-dir",
                &sb.state.to_string_lossy(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let path = sb.root.join("status.prom");
        std::fs::write(&path, text).unwrap();
        tool_calls_total(&path)
    };
    for n in 0..3 {
        call(&pre("old", n, &format!("step {n}")));
    }
    call(&pre("idle", 0, "ls"));
    assert_eq!(tool_calls_total(&metrics), 4.0);
    // "old" is live (an hour since its last call, not stale); then 1000 sessions, each with one
    // tool call, are updated after it: copies of "idle"'s state and counters.
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let files = sb.state_files();
    for f in files.iter().filter(|f| f.starts_with("old-")) {
        set_mtime(&sb.state.join(f), an_hour_ago);
    }
    let stem = |session: &str, suffix: &str| {
        files
            .iter()
            .find(|f| {
                f.starts_with(&format!("{session}-"))
                    && f.ends_with(suffix)
                    && !f.ends_with(&format!(".metrics{suffix}"))
            })
            .map(|f| sb.state.join(f))
            .unwrap()
    };
    let (idle_state, idle_counters) = (stem("idle", ".json"), stem("idle", ".metrics.json"));
    let old_state = stem("old", ".json");
    for i in 0..1000 {
        std::fs::copy(&idle_state, sb.state.join(format!("copy{i}.json"))).unwrap();
        std::fs::copy(
            &idle_counters,
            sb.state.join(format!("copy{i}.metrics.json")),
        )
        .unwrap();
    }
    let old_counters = stem("old", ".metrics.json");
    // Before: the file summed the 1000 most recently updated sessions, and "old" dropped out.
    // While a call of "old" holds its lock (here: this test), its counters are read as they are.
    let held = std::fs::File::open(lock_file(&sb, "old")).unwrap();
    fs4::FileExt::lock(&held).unwrap();
    call(&pre("new", 0, "ls"));
    assert_eq!(tool_calls_total(&metrics), 1005.0);
    assert!(std::fs::metadata(&old_counters).unwrap().len() > 0);
    drop(held);
    // Free: folded into the retired counters, once. Its state keeps its time (it goes stale on
    // the same day) and its calls go on counting.
    call(&pre("new", 1, "cat x"));
    assert_eq!(tool_calls_total(&metrics), 1006.0);
    assert_eq!(std::fs::metadata(&old_counters).unwrap().len(), 0);
    assert_eq!(prometheus_status(), 1006.0);
    let kept = std::fs::metadata(&old_state).unwrap().modified().unwrap();
    let drift = kept
        .duration_since(an_hour_ago)
        .unwrap_or_else(|e| e.duration());
    assert!(drift < Duration::from_secs(1), "{drift:?}");
    call(&pre("old", 3, "step 3"));
    assert_eq!(tool_calls_total(&metrics), 1007.0);
    assert_eq!(prometheus_status(), 1007.0);
    // Its end adds only what it did since.
    call(&claude_event(
        "SessionEnd",
        "old",
        json!({"reason": "exit"}),
    ));
    assert_eq!(tool_calls_total(&metrics), 1007.0);
    assert_eq!(prometheus_status(), 1007.0);
    // At most 1000 counters files are left to read.
    let non_empty = sb
        .state_files()
        .iter()
        .filter(|f| f.ends_with(".metrics.json") && !f.starts_with("retired."))
        .filter(|f| std::fs::metadata(sb.state.join(f)).unwrap().len() > 0)
        .count();
    assert!(non_empty <= 1000, "{non_empty}");
}

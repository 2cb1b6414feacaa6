//! `agentbreaker status`: the live sessions `agentbreaker hook` watches, with their counters (the
//! Monitor's `status()`), and `agentbreaker hook reset SESSION` to forget one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use agentbreaker::{ManualClock, Monitor, MonitorConfig};
use serde_json::{Value, json};

use super::state::{self, SessionState, StateDir};
use crate::report::EXIT_IO;

fn dir_path(state_dir: Option<&Path>) -> Result<PathBuf, String> {
    state_dir
        .map(Path::to_path_buf)
        .or_else(StateDir::default_path)
        .ok_or_else(|| "no state folder: set HOME or AGENTBREAKER_STATE_DIR".to_string())
}

/// Whether the state folder exists (`Ok(false)`: no hook call has created it yet, so there are no
/// sessions). A path that is not a folder, or is a symlink (`hook` never follows one), is an
/// error: reporting "no sessions" there would hide a wrong `--state-dir`.
fn folder_exists(path: &Path) -> Result<bool, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => StateDir::check_kind(path, &m).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!(
            "cannot read the state folder {}: {e}",
            path.display()
        )),
    }
}

/// The Monitor status of a saved session (its project's configuration when it can be read).
fn monitor_status(s: &SessionState, now: u64) -> Value {
    let config = super::monitor_config(&s.profile, None, s.cwd.as_deref())
        .or_else(|_| MonitorConfig::from_profile(&s.profile).map_err(|e| e.to_string()))
        .unwrap_or_default();
    let waiting = s.paused_since.map_or(0, |p| now.saturating_sub(p));
    let clock = ManualClock::shared(now.saturating_sub(s.paused_ms.saturating_add(waiting)));
    let Ok(monitor) = Monitor::with_clock(config, clock) else {
        return Value::Null;
    };
    match monitor.restore(&s.monitor) {
        Ok(()) => monitor.status(),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// The report of `agentbreaker status`: `(exit code, stdout)`.
pub fn status(state_dir: Option<&Path>, as_json: bool) -> (i32, String) {
    let path = match dir_path(state_dir) {
        Ok(p) => p,
        Err(e) => return (78, format!("agentbreaker: {e}\n")),
    };
    let exists = match folder_exists(&path) {
        Ok(e) => e,
        Err(e) => return (EXIT_IO, format!("agentbreaker: {e}\n")),
    };
    let now = state::now_ms();
    let dir = StateDir { path: path.clone() };
    let mut sessions = Vec::new();
    let mut unreadable = Vec::new();
    if exists {
        for (key, st) in dir.list() {
            match st {
                Ok(s) => {
                    let age = now.saturating_sub(s.updated_ms);
                    if age > state::STALE_AFTER.as_millis() as u64 {
                        continue;
                    }
                    let status = monitor_status(&s, now);
                    sessions.push(json!({
                        "sessionId": s.session_id,
                        "file": format!("{key}.json"),
                        "agent": s.agent,
                        "cwd": s.cwd,
                        "profile": s.profile,
                        "createdMs": s.created_ms,
                        "updatedMs": s.updated_ms,
                        "hookCalls": s.calls,
                        "waitingForUser": s.paused_since.is_some(),
                        "halted": s.session_halt.is_some(),
                        "halt": s.session_halt,
                        "monitor": status,
                    }));
                }
                Err(e) => unreadable.push(json!({"file": format!("{key}.json"), "error": e})),
            }
        }
    }
    sessions.sort_by_key(|s| std::cmp::Reverse(s["updatedMs"].as_u64().unwrap_or(0)));
    if as_json {
        let doc = json!({
            "stateDir": path.display().to_string(),
            "sessions": sessions,
            "unreadable": unreadable,
        });
        return (
            0,
            format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            ),
        );
    }
    let mut out = text(&path, &sessions, &unreadable, now);
    if !exists {
        out.push_str(
            "(the folder does not exist yet: the first `agentbreaker hook` call creates it)\n",
        );
    }
    (0, out)
}

/// `agentbreaker status --prometheus`: the live sessions' counters and the ended sessions'
/// (docs/observability.md), in the Prometheus text format: `(exit code, stdout)`.
pub fn prometheus(state_dir: Option<&Path>) -> (i32, String) {
    let path = match dir_path(state_dir) {
        Ok(p) => p,
        Err(e) => return (78, format!("agentbreaker: {e}\n")),
    };
    let exists = match folder_exists(&path) {
        Ok(e) => e,
        Err(e) => return (EXIT_IO, format!("agentbreaker: {e}\n")),
    };
    let now = state::now_ms();
    let dir = StateDir { path: path.clone() };
    let mut live = Vec::new();
    if exists {
        for (_, st) in dir.list() {
            if let Ok(s) = st
                && now.saturating_sub(s.updated_ms) <= state::STALE_AFTER.as_millis() as u64
            {
                live.push(s);
            }
        }
    }
    live.sort_by_key(|s| std::cmp::Reverse(s.updated_ms));
    let total = super::metrics::sum_of_sessions(&dir, live.iter());
    (0, total.to_prometheus())
}

/// A count as people write it (`5`, not `5.0`).
fn figure(v: &Value) -> String {
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f:.1}"),
        None => v.to_string(),
    }
}

fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        _ => format!("{:.1} h ago", s as f64 / 3600.0),
    }
}

fn text(path: &Path, sessions: &[Value], unreadable: &[Value], now: u64) -> String {
    let mut out = String::new();
    if sessions.is_empty() {
        let _ = writeln!(out, "no live sessions in {}", path.display());
    } else {
        let _ = writeln!(
            out,
            "{} live session{} in {}",
            sessions.len(),
            if sessions.len() == 1 { "" } else { "s" },
            path.display()
        );
    }
    for s in sessions {
        let id = s["sessionId"].as_str().unwrap_or("");
        let short = agentbreaker::text::truncate(id, 40);
        let _ = writeln!(
            out,
            "\n{} session {}{}  ({}, {} hook calls, updated {}{})",
            s["agent"].as_str().unwrap_or("?"),
            short,
            if short.len() < id.len() { "…" } else { "" },
            s["cwd"].as_str().unwrap_or("no cwd"),
            s["hookCalls"],
            ago(now.saturating_sub(s["updatedMs"].as_u64().unwrap_or(0))),
            if s["waitingForUser"] == true {
                ", waiting for the user"
            } else {
                ""
            },
        );
        if let Some(m) = s["halt"]["message"].as_str() {
            let _ = writeln!(out, "  HALTED: {m}; its tool calls are denied");
        }
        for t in s["monitor"]["tasks"].as_array().into_iter().flatten() {
            let mut tools: Vec<(String, u64)> = t["toolCallsByName"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default();
            tools.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let tools: Vec<String> = tools
                .iter()
                .take(6)
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(
                out,
                "  task {}: {} steps, {} tool calls ({}), {:.1}¢ spent{}",
                t["taskId"].as_str().unwrap_or("?"),
                t["steps"],
                t["toolCalls"],
                tools.join(", "),
                t["spendCents"].as_f64().unwrap_or(0.0),
                if t["halted"] == true { ", halted" } else { "" },
            );
            let rules: Vec<String> = t["rules"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, r)| r["count"].as_f64().unwrap_or(0.0) > 0.0)
                .map(|(k, r)| format!("{k} {}/{}", figure(&r["count"]), figure(&r["threshold"])))
                .collect();
            if !rules.is_empty() {
                let _ = writeln!(out, "    rules: {}", rules.join(", "));
            }
        }
    }
    for u in unreadable {
        let _ = writeln!(
            out,
            "\nunreadable: {} ({})",
            u["file"].as_str().unwrap_or("?"),
            u["error"].as_str().unwrap_or("?")
        );
    }
    out
}

/// `agentbreaker hook reset SESSION`: forgets a session's state (a halted session can go on).
pub fn reset(state_dir: Option<&Path>, session_id: &str) -> Result<String, String> {
    let path = dir_path(state_dir)?;
    let dir = StateDir::open(&path, false)?;
    let key = StateDir::key(session_id);
    let file = path.join(format!("{key}.json"));
    if !file.exists() {
        return Err(format!(
            "no state for session {session_id:?} in {}",
            path.display()
        ));
    }
    let lock = dir.lock(&key)?;
    if let super::state::Loaded::State(st) = dir.load(&key) {
        super::metrics::retire(&dir, &key, &st);
    }
    super::metrics::remove_sidecar(&dir, &key);
    super::trace_file::remove(&dir, &key);
    dir.remove(&key);
    drop(lock);
    Ok(format!(
        "forgot session {session_id:?}: its next hook call starts fresh"
    ))
}

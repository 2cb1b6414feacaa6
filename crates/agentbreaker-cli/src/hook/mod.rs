//! `agentbreaker hook`: the breaker inside Claude Code, Codex CLI and Gemini CLI, called by their
//! hooks as a new process per event (docs/hooks.md).
//!
//! One event comes on stdin. The session's Monitor (contract §11) is restored from the state
//! folder under the session's lock, the event becomes Monitor events (a Pre hook a `tool_use`, a
//! Post hook a `progress` for a successful edit and a `tool_result`, new transcript spend `usage`
//! events), the verdicts become the agent's reply, and the Monitor is saved again.
//!
//! Whatever goes wrong inside, the agent is never blocked by accident: bad input, an unreadable
//! state, a full disk, a panic or a lock held by a stuck process all end in an allowing exit code
//! with one line on stderr, and every call ends within [`DEADLINE`] (a watchdog thread answers
//! for a call that has not finished by then).

pub mod cli;
pub mod install;
pub mod metrics;
pub mod protocol;
pub mod state;
pub mod status;
pub mod trace_file;
pub mod transcript;

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentbreaker::metrics::{Registry, Update};
use agentbreaker::{ManualClock, Monitor, MonitorConfig, Verdict, VerdictAction};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::settings::{DEFAULT_FILE, Settings};
use crate::trace::Trace;
use protocol::{Agent, Decision, HookInput, Kind};
use state::{Loaded, SessionState, StateDir};
use transcript::Cursor;

/// Every hook call answers within this time, even when the lock is held by a stuck process.
pub const DEADLINE: Duration = Duration::from_millis(750);
/// The largest event read from stdin.
pub const MAX_INPUT_BYTES: u64 = 32 * 1024 * 1024;
/// The profile a hook uses unless `--profile` says otherwise.
pub const DEFAULT_PROFILE: &str = "coding-agent";
/// Transcripts followed per session (the main one and subagents').
const MAX_CURSORS: usize = 32;
/// Edited files hashed whole up to this size; larger ones by their ends and size.
const MAX_DIGEST_READ: u64 = 8 * 1024 * 1024;

/// `agentbreaker hook`'s options.
#[derive(Debug, Clone, Default)]
pub struct HookArgs {
    /// The agent (recognised from the event when not given).
    pub agent: Option<Agent>,
    /// The state folder (else `AGENTBREAKER_STATE_DIR`, else `~/.agentbreaker/sessions`).
    pub state_dir: Option<PathBuf>,
    /// The profile (default `coding-agent`).
    pub profile: Option<String>,
    /// A configuration file instead of the project's `agentbreaker.toml`.
    pub config: Option<PathBuf>,
    /// Where to write the live sessions' metrics (Prometheus text format) after each call.
    pub metrics_file: Option<PathBuf>,
    /// Add the task attribute to the metrics.
    pub metrics_task: bool,
}

/// Where a call is, for the watchdog's message.
const PHASE_START: u8 = 0;
const PHASE_LOCK: u8 = 1;
const PHASE_WORK: u8 = 2;
static PHASE: AtomicU8 = AtomicU8::new(PHASE_START);
/// The agent, once known (0 = not yet).
static AGENT: AtomicU8 = AtomicU8::new(0);
/// Set once the reply is written: whoever writes first (the call or the watchdog) is the only one.
static REPLIED: Mutex<bool> = Mutex::new(false);

fn agent_code(a: Agent) -> u8 {
    match a {
        Agent::Claude => 1,
        Agent::Codex => 2,
        Agent::Gemini => 3,
    }
}

fn known_agent() -> Option<Agent> {
    match AGENT.load(Ordering::SeqCst) {
        1 => Some(Agent::Claude),
        2 => Some(Agent::Codex),
        3 => Some(Agent::Gemini),
        _ => None,
    }
}

/// What a call prints and returns.
#[derive(Debug, Default)]
struct Reply {
    stdout: Option<Value>,
    /// One line for stderr.
    note: Option<String>,
    /// Something failed: when nothing else is printed, the exit code says so (non-blocking).
    failed: bool,
}

/// The exit code and stdout of an internal failure: nothing blocks. Claude Code and Codex treat
/// exit 1 as a non-blocking hook error (the tool runs, the user can see it); Gemini CLI reads
/// any non-JSON output with an exit code of 2 or more as a deny, so it always gets exit 0 and
/// `{}`; an unknown agent gets exit 0 and nothing.
fn failure_exit(agent: Option<Agent>) -> (i32, &'static str) {
    match agent {
        Some(Agent::Claude | Agent::Codex) => (1, ""),
        Some(Agent::Gemini) => (0, "{}\n"),
        None => (0, ""),
    }
}

/// Writes the reply once (the call or the watchdog, whichever is first); returns false when the
/// other already did.
fn write_once(stdout: &str, stderr: Option<&str>) -> bool {
    let mut done = REPLIED.lock().unwrap_or_else(|p| p.into_inner());
    if *done {
        return false;
    }
    *done = true;
    if !stdout.is_empty() {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(stdout.as_bytes());
        let _ = out.flush();
    }
    if let Some(line) = stderr {
        let line = line.replace(['\n', '\r'], " ");
        let _ = writeln!(
            std::io::stderr().lock(),
            "agentbreaker: {}",
            agentbreaker::text::truncate(&line, 2000)
        );
    }
    true
}

fn start_watchdog() {
    let spawned = std::thread::Builder::new()
        .name("agentbreaker-hook-watchdog".into())
        .spawn(|| {
            std::thread::sleep(DEADLINE);
            let why = match PHASE.load(Ordering::SeqCst) {
                PHASE_LOCK => {
                    "the session's state is locked by another process (stuck?); this call was \
                     allowed without a check"
                }
                _ => "the hook did not finish in time; this call was allowed without a check",
            };
            let (code, stdout) = failure_exit(known_agent());
            if write_once(stdout, Some(why)) {
                std::process::exit(code);
            }
        });
    drop(spawned);
}

/// Runs one hook call: reads stdin, answers on stdout, returns the exit code. Never panics and
/// never takes longer than [`DEADLINE`].
pub fn run(args: &HookArgs) -> i32 {
    if let Some(a) = args.agent {
        AGENT.store(agent_code(a), Ordering::SeqCst);
    }
    start_watchdog();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(|| {
        let mut input = Vec::new();
        let read = std::io::stdin()
            .lock()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut input);
        match read {
            Err(e) => Err(format!("cannot read the event from stdin: {e}")),
            Ok(_) if input.len() as u64 > MAX_INPUT_BYTES => Err(format!(
                "the event is larger than {MAX_INPUT_BYTES} bytes; not read"
            )),
            Ok(_) => handle(args, &input),
        }
    });
    let reply = match outcome {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Reply {
            note: Some(format!("{e}; this call was allowed without a check")),
            failed: true,
            ..Reply::default()
        },
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Reply {
                note: Some(format!(
                    "internal error ({what}); this call was allowed without a check"
                )),
                failed: true,
                ..Reply::default()
            }
        }
    };
    let agent = known_agent();
    let (code, stdout) = match &reply.stdout {
        Some(v) => (0, format!("{v}\n")),
        None if reply.failed => {
            let (code, out) = failure_exit(agent);
            (code, out.to_string())
        }
        // Gemini reads stderr as the reply when stdout is empty: an empty object keeps it quiet.
        None if agent == Some(Agent::Gemini) => (0, "{}\n".to_string()),
        None => (0, String::new()),
    };
    if write_once(&stdout, reply.note.as_deref()) {
        code
    } else {
        // The watchdog answered; it exits the process itself.
        std::thread::sleep(Duration::from_secs(1));
        failure_exit(agent).0
    }
}

/// A command line that clap refused, for a hook call: one line on stderr and an allowing exit
/// (a misspelt flag in a settings file must not block the agent). `None` when `args` is not a
/// hook event call.
pub fn command_line_error(args: &[String], error: &str) -> Option<i32> {
    let sub = args.get(1)?;
    if sub != "hook" {
        return None;
    }
    if let Some(next) = args.get(2)
        && ["install", "uninstall", "reset", "help", "--help", "-h"].contains(&next.as_str())
    {
        return None;
    }
    let first = error.lines().next().unwrap_or(error);
    let agent = args.iter().skip(2).find_map(|a| Agent::from_name(a));
    let (code, stdout) = failure_exit(agent);
    write_once(
        stdout,
        Some(&format!(
            "bad hook command line ({}); this call was allowed without a check",
            first.trim_start_matches("error: ")
        )),
    );
    Some(code)
}

/// Environment variables of the hook itself, kept out of the breaker settings.
fn breaker_env() -> impl Iterator<Item = (String, String)> {
    std::env::vars()
        .filter(|(k, _)| k != "AGENTBREAKER_STATE_DIR" && !k.starts_with("AGENTBREAKER_HOOK_"))
}

/// The Monitor configuration for a project: the profile, then its `agentbreaker.toml` (or
/// `--config`), then `AGENTBREAKER_*` variables.
pub fn monitor_config(
    profile: &str,
    config: Option<&Path>,
    cwd: Option<&str>,
) -> Result<MonitorConfig, String> {
    let base = Settings::from_profile(profile)?;
    let file: Option<PathBuf> = match config {
        Some(p) => Some(p.to_path_buf()),
        None => cwd
            .map(|c| Path::new(c).join(DEFAULT_FILE))
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file())),
    };
    let s = Settings::load_over_file(base, file.as_deref(), breaker_env())?;
    let mut m = MonitorConfig::from_profile(s.profile).map_err(|e| e.to_string())?;
    m.failure = s.failure;
    m.stagnation = s.stagnation;
    m.budget = s.budget;
    Ok(m)
}

/// Whether saves are fsync'd (`AGENTBREAKER_HOOK_FSYNC=1`). Off by default: a save is a new file
/// renamed over the old one, which no killed process, reader or full disk can tear; only a power
/// loss can leave an empty file, which the next call moves aside (the session starts fresh). An
/// fsync costs several milliseconds on every tool call, and parallel calls of a session wait for
/// each other's (docs/hooks.md, "Speed").
fn fsync_enabled() -> bool {
    std::env::var("AGENTBREAKER_HOOK_FSYNC").is_ok_and(|v| v == "1")
}

/// Test knobs (documented in tests/hook.rs): a panic inside the call, a pause while the lock is
/// held.
fn test_knobs(phase: &str) {
    if std::env::var("AGENTBREAKER_HOOK_TEST_PANIC").is_ok_and(|v| v == phase) {
        panic!("test panic at {phase}");
    }
    if phase == "locked"
        && let Some(ms) = std::env::var("AGENTBREAKER_HOOK_TEST_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms.min(60_000)));
    }
}

/// The JSON text with each lone UTF-16 surrogate escape (`\uD800`-`\uDBFF` not followed by a
/// `\uDC00`-`\uDFFF` escape, or a `\uDC00`-`\uDFFF` not preceded by one) replaced by `\uFFFD`;
/// `None` when there is none. Other escapes, `\\` included, are kept as they are.
fn replace_lone_surrogates(json: &[u8]) -> Option<Vec<u8>> {
    fn unit(json: &[u8], at: usize) -> Option<u16> {
        let hex = json.get(at..at + 6)?.strip_prefix(b"\\u")?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    }
    let is_high = |u: u16| (0xD800..0xDC00).contains(&u);
    let is_low = |u: u16| (0xDC00..0xE000).contains(&u);
    let mut out = Vec::with_capacity(json.len());
    let mut changed = false;
    let mut i = 0;
    while i < json.len() {
        if json[i] != b'\\' {
            out.push(json[i]);
            i += 1;
            continue;
        }
        match unit(json, i) {
            Some(h) if is_high(h) && unit(json, i + 6).is_some_and(is_low) => {
                out.extend_from_slice(&json[i..i + 12]);
                i += 12;
            }
            Some(u) if is_high(u) || is_low(u) => {
                out.extend_from_slice(b"\\uFFFD");
                changed = true;
                i += 6;
            }
            // Any other escape (`\\`, `\"`, `\u0041`, ...): its two first bytes as they are.
            _ => {
                out.extend_from_slice(&json[i..(i + 2).min(json.len())]);
                i += 2;
            }
        }
    }
    changed.then_some(out)
}

fn handle(args: &HookArgs, bytes: &[u8]) -> Result<Reply, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("no event on stdin".into());
    }
    let event: Value = serde_json::from_slice(bytes)
        .or_else(|e| match replace_lone_surrogates(bytes) {
            // Node's JSON.stringify writes a string cut inside a surrogate pair (an emoji) as
            // a lone `\ud83d`, which serde_json refuses: such an event is read with U+FFFD.
            Some(fixed) => serde_json::from_slice(&fixed).map_err(|_| e),
            None => Err(e),
        })
        .map_err(|e| format!("the event on stdin is not JSON ({e})"))?;
    let agent = args
        .agent
        .or_else(|| protocol::detect_agent(&event))
        .ok_or("cannot tell which agent sent this event (no hook_event_name)")?;
    AGENT.store(agent_code(agent), Ordering::SeqCst);
    let input = protocol::parse(&event, agent)?;
    drop(event);
    test_knobs("parsed");
    let profile = args.profile.as_deref().unwrap_or(DEFAULT_PROFILE);
    let config = monitor_config(profile, args.config.as_deref(), input.cwd.as_deref())
        .map_err(|e| format!("bad configuration: {e}"))?;
    let dir_path = args
        .state_dir
        .clone()
        .or_else(StateDir::default_path)
        .ok_or("no state folder: set HOME or AGENTBREAKER_STATE_DIR")?;
    let dir = StateDir::open(&dir_path, true)?;
    let key = StateDir::key(&input.session_id);

    PHASE.store(PHASE_LOCK, Ordering::SeqCst);
    let lock = dir.lock(&key)?;
    PHASE.store(PHASE_WORK, Ordering::SeqCst);
    test_knobs("locked");

    if input.kind == Kind::SessionEnd {
        // Its counters go on in the retired ones, so the totals never go down.
        if let Loaded::State(st) = dir.load(&key) {
            metrics::retire(&dir, &key, &st);
        }
        metrics::remove_sidecar(&dir, &key);
        trace_file::remove(&dir, &key);
        dir.remove(&key);
        drop(lock);
        let mut reply = Reply::default();
        if let Some(path) = &args.metrics_file
            && let Err(e) = metrics::write_file(&dir, path)
        {
            reply.note = Some(e);
            reply.failed = true;
        }
        return Ok(reply);
    }
    let now = state::now_ms();
    let mut notes: Vec<String> = Vec::new();
    let fresh_start = matches!(&input.kind, Kind::SessionStart { source } if source == "startup" || source == "clear");
    let loaded = if fresh_start {
        trace_file::remove(&dir, &key);
        Loaded::Fresh
    } else {
        dir.load(&key)
    };
    let mut st = match loaded {
        Loaded::State(s) => *s,
        Loaded::Fresh => {
            dir.cleanup();
            SessionState::new(
                agent.as_str(),
                &input.session_id,
                input.cwd.as_deref(),
                profile,
                now,
            )
        }
        Loaded::Aside(why) => {
            notes.push(format!("{why}; this session starts fresh"));
            SessionState::new(
                agent.as_str(),
                &input.session_id,
                input.cwd.as_deref(),
                profile,
                now,
            )
        }
    };
    // The Monitor's clock leaves out the time the agent waited for its user.
    if !matches!(input.kind, Kind::Stop { subagent: false })
        && let Some(since) = st.paused_since.take()
    {
        st.paused_ms = st.paused_ms.saturating_add(now.saturating_sub(since));
    }
    let clock = ManualClock::shared(now.saturating_sub(st.paused_ms));
    let monitor =
        Monitor::with_clock(config, clock).map_err(|e| format!("bad configuration: {e}"))?;
    if !st.monitor.is_null()
        && let Err(e) = monitor.restore(&st.monitor)
    {
        let why = dir.set_aside(&key, &format!("refused by the Monitor ({e})"));
        notes.push(format!("{why}; this session starts fresh"));
        st = SessionState::new(
            agent.as_str(),
            &input.session_id,
            input.cwd.as_deref(),
            profile,
            now,
        );
    }

    // What this call's events do to the metrics, added to the session's counters below.
    let call_metrics = Arc::new(Mutex::new(Registry::new()));
    let sink = Arc::clone(&call_metrics);
    monitor.set_metrics_recorder(
        Some(Arc::new(move |u: &[Update]| {
            sink.lock().unwrap_or_else(|p| p.into_inner()).record_all(u);
        })),
        agentbreaker::metrics::Options {
            task: args.metrics_task,
        },
    );

    // This call's entries of the session's record (`agentbreaker report`), appended below.
    let mut trace = trace_file::call_trace();
    let decision = decide(&input, &mut st, &monitor, &mut trace, &mut notes);
    {
        let call = call_metrics.lock().unwrap_or_else(|p| p.into_inner());
        metrics::add_to_session(&mut st, &call);
    }

    st.calls = st.calls.saturating_add(1);
    st.updated_ms = now;
    if input.kind == (Kind::Stop { subagent: false }) {
        st.paused_since = Some(now);
    }
    st.monitor = monitor.snapshot();
    let saved = dir.save(&key, &st, fsync_enabled());
    if let Err(e) = trace_file::append(&dir, &key, &trace) {
        notes.push(format!("cannot add to this session's record: {e}"));
    }
    if args.metrics_file.is_some()
        && saved.is_ok()
        && let Err(e) = metrics::write_sidecar(&dir, &key, &st)
    {
        notes.push(format!("cannot save this session's metrics: {e}"));
    }
    drop(lock);

    if let Err(e) = saved {
        notes.push(e);
    }
    if let Some(path) = &args.metrics_file
        && let Err(e) = metrics::write_file(&dir, path)
    {
        notes.push(e);
    }
    // Whatever went wrong (a state moved aside, a transcript not read, a save that failed) is
    // a non-blocking hook error when there is no reply to give: Claude Code shows stderr only
    // then (docs/hooks.md, "Nothing blocks by accident").
    Ok(Reply {
        stdout: protocol::render(&input, &decision),
        failed: !notes.is_empty(),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

/// The task a tool event counts for: the subagent's own, else the session's.
fn task_of(input: &HookInput) -> Option<&str> {
    input.agent_id.as_deref()
}

fn with_task(mut event: Value, task: Option<&str>) -> Value {
    if let Some(t) = task {
        event["taskId"] = json!(agentbreaker::text::truncate(t, 256));
    }
    event
}

/// Reads new spend from the transcripts this event names (the session's, and a subagent's own).
fn spend_events(input: &HookInput, st: &mut SessionState, notes: &mut Vec<String>) -> Vec<Value> {
    let mut wanted: Vec<(String, Option<String>)> = Vec::new();
    if let Some(p) = &input.transcript_path {
        wanted.push((p.clone(), None));
    }
    if let Some(id) = &input.agent_id {
        let own = input.agent_transcript_path.clone().or_else(|| {
            // Claude Code keeps a subagent's transcript beside the session's:
            // <dir>/<session>/subagents/agent-<id>.jsonl.
            let main = Path::new(input.transcript_path.as_deref()?);
            let sanitized: String = id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            (sanitized == *id && input.agent == Agent::Claude).then(|| {
                main.with_extension("")
                    .join("subagents")
                    .join(format!("agent-{sanitized}.jsonl"))
                    .to_string_lossy()
                    .into_owned()
            })
        });
        if let Some(p) = own {
            wanted.push((p, Some(id.clone())));
        }
    }
    let mut events = Vec::new();
    for (path, task) in wanted {
        let i = match st
            .transcripts
            .iter()
            .position(|c| c.path == path && c.task == task)
        {
            Some(i) => i,
            None => {
                if st.transcripts.len() >= MAX_CURSORS {
                    st.transcripts.remove(0);
                }
                st.transcripts.push(Cursor {
                    path: path.clone(),
                    task: task.clone(),
                    ..Cursor::default()
                });
                st.transcripts.len() - 1
            }
        };
        let (spend, note) =
            transcript::read_new(input.agent, &mut st.transcripts[i], input.model.as_deref());
        // A subagent's derived transcript path that does not exist is not worth a note.
        if let Some(n) = note
            && (task.is_none() || input.agent_transcript_path.is_some())
        {
            notes.push(n);
        }
        events.extend(spend.iter().map(transcript::Spend::event));
    }
    events
}

/// The digest of the files an edit wrote: their paths and contents (read only, at most 8 MB
/// each whole; a larger file by its size and its first and last megabyte). `None` when none can
/// be read.
fn files_digest(cwd: Option<&str>, files: &[String]) -> Option<String> {
    let mut h = Sha256::new();
    let mut any = false;
    for f in files {
        let p = match cwd {
            Some(c) if !Path::new(f).is_absolute() => Path::new(c).join(f),
            _ => PathBuf::from(f),
        };
        h.update(f.as_bytes());
        h.update([0u8]);
        match read_for_digest(&p) {
            Some(bytes) => {
                any = true;
                h.update(&bytes);
            }
            None => h.update(b"\x01(missing)"),
        }
        h.update([0u8]);
    }
    any.then(|| {
        h.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    })
}

fn read_for_digest(path: &Path) -> Option<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let len = meta.len();
    let mut out = Vec::new();
    if len <= MAX_DIGEST_READ {
        (&mut f).take(MAX_DIGEST_READ).read_to_end(&mut out).ok()?;
    } else {
        const END: u64 = 1024 * 1024;
        out.extend_from_slice(&len.to_le_bytes());
        (&mut f).take(END).read_to_end(&mut out).ok()?;
        f.seek(SeekFrom::Start(len - END)).ok()?;
        (&mut f).take(END).read_to_end(&mut out).ok()?;
    }
    Some(out)
}

/// The Monitor events of one hook event (after its spend).
fn monitor_events(input: &HookInput) -> Vec<Value> {
    let task = task_of(input);
    let name = input.tool_name.as_deref().unwrap_or("unknown-tool");
    let mut events = Vec::new();
    match &input.kind {
        Kind::PreTool => {
            let mut e = json!({"type": "tool_use", "name": name, "input": input.tool_input});
            if let Some(id) = &input.tool_use_id {
                e["id"] = json!(id);
            }
            events.push(with_task(e, task));
        }
        Kind::PostTool { .. } => {
            let (ok, text) = protocol::outcome(input);
            let files = protocol::edited_files(input);
            if ok && !files.is_empty() {
                let mut p = json!({"type": "progress", "files": files});
                if let Some(d) = files_digest(input.cwd.as_deref(), &files) {
                    p["digest"] = json!(d);
                }
                events.push(with_task(p, task));
            }
            let mut e = json!({"type": "tool_result", "ok": ok, "text": text, "name": name});
            if let Some(id) = &input.tool_use_id {
                e["id"] = json!(id);
            }
            events.push(with_task(e, task));
        }
        Kind::Stop { subagent: false } => match &input.last_message {
            // The model's last answer: a model call ended (it also closes a step whose calls
            // never got a result, such as calls another hook denied).
            Some(text) => events.push(json!({"type": "assistant", "text": text})),
            None => events.push(json!({"type": "alive"})),
        },
        Kind::Stop { subagent: true } => {
            if let Some(t) = task {
                events.push(with_task(
                    json!({"type": "heartbeat", "phase": "done"}),
                    Some(t),
                ));
            }
        }
        Kind::Prompt | Kind::SessionStart { .. } | Kind::Other => {
            events.push(json!({"type": "alive"}));
        }
        Kind::SessionEnd => {}
    }
    events
}

fn halted_tasks(monitor: &Monitor) -> Vec<String> {
    monitor
        .status()
        .get("tasks")
        .and_then(Value::as_array)
        .map(|tasks| {
            tasks
                .iter()
                .filter(|t| t.get("halted") == Some(&Value::Bool(true)))
                .filter_map(|t| t.get("taskId").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn halt_decision(v: &Verdict, stop: bool, earlier: bool) -> Decision {
    Decision::Halt {
        message: v
            .message
            .clone()
            .unwrap_or_else(|| "a limit tripped".into()),
        nudge: v
            .nudge
            .clone()
            .unwrap_or_else(|| "Stop and report to the user.".into()),
        stop,
        earlier,
    }
}

/// Feeds the event to the Monitor and decides the reply.
fn decide(
    input: &HookInput,
    st: &mut SessionState,
    monitor: &Monitor,
    trace: &mut Trace,
    notes: &mut Vec<String>,
) -> Decision {
    // A halted session: nothing more is counted, every tool call is denied, a Stop is told to
    // stay stopped, a new prompt is told why.
    if let Some(h) = &st.session_halt {
        return match input.kind {
            Kind::PreTool
            | Kind::PostTool { .. }
            | Kind::Stop { subagent: false }
            | Kind::Prompt => halt_decision(h, true, true),
            _ => Decision::Allow,
        };
    }
    let mut events = spend_events(input, st, notes);
    events.extend(monitor_events(input));
    let halted_before = halted_tasks(monitor);
    let mut halt: Option<Verdict> = None;
    let mut warnings: Vec<Verdict> = Vec::new();
    for e in &events {
        match monitor.observe(e) {
            Ok(v) => {
                trace.event(metrics::now_ms(), e, &v);
                match v.action {
                    VerdictAction::Halt if halt.is_none() => halt = Some(v),
                    VerdictAction::Warn => warnings.push(v),
                    _ => {}
                }
            }
            Err(err) => notes.push(format!("an event was not counted ({err})")),
        }
    }
    if let Some(h) = halt {
        let task = h.task_id.clone().unwrap_or_default();
        let earlier = halted_before.contains(&task);
        // A subagent's own halt denies its calls; the session goes on.
        let stop = input.agent_id.as_deref() != Some(task.as_str());
        if stop {
            st.session_halt = Some(h.clone());
        }
        return halt_decision(&h, stop, earlier);
    }
    let mut message: Vec<String> = Vec::new();
    let mut nudge: Vec<String> = Vec::new();
    for w in &warnings {
        if let Some(m) = &w.message
            && !message.contains(m)
        {
            message.push(m.clone());
        }
        if let Some(n) = &w.nudge
            && !nudge.contains(n)
        {
            nudge.push(n.clone());
        }
    }
    // Only tool events carry context for the model, and Gemini's BeforeTool does not: a nudge
    // that came on another event waits for the next one that can carry it.
    let can_carry = match input.kind {
        Kind::PostTool { .. } => true,
        Kind::PreTool => input.agent != Agent::Gemini,
        _ => false,
    };
    if can_carry {
        if let Some(p) = st.pending_nudge.take()
            && !nudge.contains(&p)
        {
            nudge.insert(0, p);
        }
    } else if !nudge.is_empty() {
        let mut pending: Vec<String> = st.pending_nudge.take().into_iter().collect();
        pending.extend(
            nudge
                .iter()
                .filter(|n| !pending.contains(n))
                .cloned()
                .collect::<Vec<_>>(),
        );
        st.pending_nudge = Some(agentbreaker::text::truncate(&pending.join(" "), 4096).to_string());
    }
    if message.is_empty() && nudge.is_empty() {
        return Decision::Allow;
    }
    Decision::Warn {
        message: message.join("; "),
        nudge: nudge.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::replace_lone_surrogates;

    fn fixed(json: &str) -> Option<String> {
        replace_lone_surrogates(json.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters() {
        // A high surrogate cut from its pair (output cut inside an emoji), at the end or not.
        assert_eq!(
            fixed(r#"{"e":"boom \ud83d"}"#).as_deref(),
            Some(r#"{"e":"boom \uFFFD"}"#)
        );
        assert_eq!(
            fixed(r#"{"e":"\uD83Dx\ude00"}"#).as_deref(),
            Some(r#"{"e":"\uFFFDx\uFFFD"}"#)
        );
        // Two highs, then a low: the first is lone, the second is a pair.
        assert_eq!(
            fixed(r#"["\ud83d\ud83d\ude00"]"#).as_deref(),
            Some(r#"["\uFFFD\ud83d\ude00"]"#)
        );
        let v: serde_json::Value =
            serde_json::from_str(&fixed(r#"{"e":"a\ud83d"}"#).unwrap()).unwrap();
        assert_eq!(v["e"], "a\u{FFFD}");
    }

    #[test]
    fn other_escapes_are_kept() {
        // Pairs, escaped backslashes before `ud83d` (not an escape), other escapes, bad ones.
        for json in [
            r#"{"e":"\ud83d\ude00"}"#,
            r#"{"e":"\\ud83d"}"#,
            r#"{"e":"\\\\ud83d \" \u0041 \n"}"#,
            r#"{"e":"\u12"}"#,
            "\\",
            "\\u",
            "",
        ] {
            assert_eq!(fixed(json), None, "{json}");
        }
        // An escaped backslash, then a real lone escape.
        assert_eq!(fixed(r#"["\\\ud83d"]"#).as_deref(), Some(r#"["\\\uFFFD"]"#));
    }
}

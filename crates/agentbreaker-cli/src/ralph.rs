//! `agentbreaker loop -- CMD`: the seed 002 loop engine around a command that does one iteration
//! per run (a Ralph loop). Each run is watched step by step by a Monitor, as `run` watches an
//! agent (task `iteration-N`): its halt (a budget, a repeated step, a cycle, ...) stops the
//! iteration and ends the loop. After each run: files changed (git or file times), tests passing
//! (from `--test-cmd`), the agent's final text and its errors go to the `Loop` coordinator, which
//! judges iterations and says continue or exit. The stagnation breaker persists in
//! `.agentbreaker/state.json`; `.agentbreaker/loop.lock` is locked while a loop runs, so a second
//! loop on the same state folder refuses to start instead of overwriting the first one's state.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use agentbreaker::{
    Action, ExitReason, Loop, LoopConfig, Observation, Outcome as LoopOutcome, State, SystemClock,
    Verdict, analyze, persist,
};
use serde_json::{Value, json};

use crate::metrics_file::MetricsExport;
use crate::report::{
    EXIT_BUDGET, EXIT_BUSY, EXIT_CONFIG, EXIT_IO, EXIT_LOOP, EXIT_NOT_FOUND, card, slug,
};
use crate::settings::Settings;
use crate::stream::Format;
use crate::supervise::{Options, Supervisor};
use crate::watch::Watch;
use crate::worktree::{Excluded, WorkTree};

/// What `loop` needs beyond the settings.
#[derive(Debug, Clone)]
pub struct LoopRun {
    /// The agent command, run once per iteration.
    pub command: Vec<String>,
    /// Run after each iteration; its output is searched for `N passed` / `N failed`.
    pub test_cmd: Option<String>,
    /// Forget the saved breaker state first.
    pub reset: bool,
    /// Where the state lives (`.agentbreaker`).
    pub state_dir: PathBuf,
    /// How to read the agent's stdout.
    pub format: Format,
    /// No live status line.
    pub quiet: bool,
    /// Where the metrics go (`--metrics-file`): every iteration's Monitor and the loop's breaker.
    pub metrics: Option<Arc<MetricsExport>>,
}

fn say(text: &str) {
    eprintln!("agentbreaker: {text}");
}

/// The state file: `{version: 1, kind: "loop", iteration, stagnation: <a StagnationBreaker snapshot, contract §3>, exit}`,
/// plus `halt` (the Monitor's verdict) when the Monitor stopped the last iteration.
fn state_doc(iteration: u32, agent_loop: &Loop, exit: Option<ExitReason>) -> Value {
    json!({
        "version": 1,
        "kind": "loop",
        "iteration": iteration,
        "stagnation": agent_loop.stagnation().snapshot(),
        "exit": exit,
    })
}

fn halted_doc(iteration: u32, agent_loop: &Loop, halt: &Verdict) -> Value {
    let exit = halt
        .reason
        .filter(|r| r.is_budget())
        .map(|_| ExitReason::BudgetExceeded);
    let mut doc = state_doc(iteration, agent_loop, exit);
    doc["halt"] = halt.to_json();
    doc
}

fn save(path: &Path, doc: &Value) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let bytes = serde_json::to_vec_pretty(doc).map_err(|e| e.to_string())?;
    persist::write_atomic(path, &bytes).map_err(|e| e.to_string())
}

/// The lock file in the state folder, held (`flock`) for the loop's life.
pub const LOCK_FILE: &str = "loop.lock";

/// Locks the state folder (created when missing) for this loop: `Err((exit code, message))` when
/// another loop holds it (75) or the lock cannot be taken (74). The file keeps the holder's pid;
/// the lock goes with the process (the descriptor is not inherited by the agent).
fn lock_state_dir(dir: &Path) -> Result<std::fs::File, (i32, String)> {
    use std::io::{Read, Seek, Write};
    std::fs::create_dir_all(dir)
        .map_err(|e| (EXIT_IO, format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| {
            (
                EXIT_IO,
                format!("cannot open the lock {}: {e}", path.display()),
            )
        })?;
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => {}
        Err(fs4::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let pid = holder
                .trim()
                .parse::<u32>()
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            return Err((
                EXIT_BUSY,
                format!(
                    "another `agentbreaker loop`{pid} is running with the state folder {}, so \
                     this loop will not start. Wait for it to end, or give this loop its own \
                     --state-dir.",
                    dir.display()
                ),
            ));
        }
        Err(fs4::TryLockError::Error(e)) => {
            return Err((EXIT_IO, format!("cannot lock {}: {e}", path.display())));
        }
    }
    // The pid is for the message above only: a failure to write it changes nothing.
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()));
    Ok(file)
}

/// Loads the saved state into `agent_loop`; `Err(exit code)` when the loop must not start.
fn restore(path: &Path, agent_loop: &Loop) -> Result<u32, i32> {
    let bytes = match persist::read_optional(path) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(0),
        Err(e) => {
            say(&format!("cannot read {}: {e}", path.display()));
            return Err(EXIT_IO);
        }
    };
    let corrupt = |why: String| {
        say(&format!(
            "{} is not a valid state file ({why}); run with --reset to start over",
            path.display()
        ));
        EXIT_CONFIG
    };
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if doc.get("version") != Some(&json!(1)) || doc.get("kind") != Some(&json!("loop")) {
        return Err(corrupt("unknown version or kind".into()));
    }
    let snapshot = doc.get("stagnation").cloned().unwrap_or(Value::Null);
    let iteration = doc.get("iteration").and_then(Value::as_u64).unwrap_or(0);
    if snapshot.get("state") == Some(&json!("OPEN")) {
        let reason = snapshot
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("confirmed stagnation");
        say(&format!(
            "the loop's circuit breaker is OPEN (since iteration {iteration}: {reason}), so the \
             loop will not start. Fix what kept the agent stuck, then run again with --reset \
             (or delete {}).",
            path.display()
        ));
        return Err(EXIT_LOOP);
    }
    // A HALF_OPEN snapshot comes back CLOSED (seed 004: half-open is transient).
    agent_loop
        .stagnation()
        .restore_json(&snapshot)
        .map_err(|e| corrupt(e.to_string()))?;
    Ok(u32::try_from(iteration).unwrap_or(u32::MAX))
}

/// Tests passing according to `cmd`'s output, and a one-line summary.
fn run_tests(cmd: &str) -> (u64, String) {
    match Command::new("sh").arg("-c").arg(cmd).output() {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push('\n');
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let a = analyze(&text);
            let passing = a.tests_passing.unwrap_or(0);
            let summary = match (a.tests_passing, a.tests_failing) {
                (None, None) => format!("tests: no summary found (exit {})", code_of(out.status)),
                (p, f) => format!(
                    "tests: {} passed, {} failed",
                    p.unwrap_or(0),
                    f.unwrap_or(0)
                ),
            };
            (passing, summary)
        }
        Err(e) => (0, format!("tests: could not run {cmd:?}: {e}")),
    }
}

fn code_of(status: std::process::ExitStatus) -> String {
    status
        .code()
        .map_or_else(|| "by a signal".to_string(), |c| c.to_string())
}

/// The exit code of a finished loop.
pub fn exit_code(reason: ExitReason) -> i32 {
    match reason {
        r if r.is_success() => 0,
        ExitReason::CircuitOpen => EXIT_LOOP,
        _ => EXIT_BUDGET,
    }
}

/// The end of a loop whose final state could not be written: says what is lost and exits 74
/// (the loop's own code `code` would promise what the state file no longer keeps).
fn unsaved(state_path: &Path, error: &str, code: i32, lost: &str) -> i32 {
    say(&format!(
        "could not save the loop's state to {}: {error}; {lost}. Exit code {EXIT_IO} instead of \
         {code}.",
        state_path.display()
    ));
    EXIT_IO
}

/// Runs the loop; returns the process exit code. The metrics file, if any, is written at the end
/// whatever the outcome.
pub fn run_loop(args: &LoopRun, settings: &Settings) -> i32 {
    let code = run_loop_inner(args, settings);
    if let Some(m) = &args.metrics {
        m.flush();
    }
    code
}

fn run_loop_inner(args: &LoopRun, settings: &Settings) -> i32 {
    let state_path = args.state_dir.join("state.json");
    // Held until this function returns: no other loop reads or writes the state meanwhile.
    let _lock = match lock_state_dir(&args.state_dir) {
        Ok(f) => f,
        Err((code, message)) => {
            say(&message);
            return code;
        }
    };
    if args.reset {
        match std::fs::remove_file(&state_path) {
            Ok(()) => say(&format!("removed {}", state_path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                say(&format!("cannot remove {}: {e}", state_path.display()));
                return EXIT_IO;
            }
        }
    }
    let config = LoopConfig {
        max_iterations: settings.max_iterations,
        strategy: settings.strategy.clone(),
        stagnation: settings.loop_stagnation.clone(),
        budget: None,
    };
    let agent_loop = match Loop::with_clock(config, SystemClock::shared()) {
        Ok(l) => l,
        Err(e) => {
            say(&e.to_string());
            return EXIT_CONFIG;
        }
    };
    if let Some(m) = &args.metrics {
        // The loop's own breaker: its state changes (breaker="loop").
        let sink = Arc::clone(m);
        agent_loop.add_listener(Arc::new(move |e: &agentbreaker::Event| {
            sink.record(&agentbreaker::metrics::event_updates(
                e,
                "loop",
                sink.options(),
            ));
            Ok(())
        }));
        m.tick();
    }
    let previous = match restore(&state_path, &agent_loop) {
        Ok(n) => n,
        Err(code) => return code,
    };
    if previous > 0 {
        say(&format!(
            "resuming after {previous} earlier iterations (breaker {})",
            agent_loop.stagnation().state()
        ));
    }
    let mut supervisor = match Supervisor::new() {
        Ok(s) => s,
        Err(e) => {
            say(&format!("cannot install signal handlers: {e}"));
            return EXIT_IO;
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    // The loop's own files change whatever the agent does: they are not its progress.
    let excluded = Excluded::new(
        std::iter::once(args.state_dir.clone())
            .chain(args.metrics.as_ref().map(|m| m.path().to_path_buf())),
        &cwd,
    );
    let grace = std::time::Duration::from_secs(settings.grace_secs);
    let mut iteration = previous;
    loop {
        if let Some(sig) = supervisor.pending_signal() {
            say("interrupted");
            return 128 + sig;
        }
        iteration = iteration.saturating_add(1);
        let before = WorkTree::snapshot(&cwd, &excluded);
        let mut watch = match Watch::new(settings.monitor_config(), SystemClock::shared()) {
            Ok(w) => w.with_metrics(args.metrics.clone()),
            Err(e) => {
                say(&e);
                return EXIT_CONFIG;
            }
        };
        let opts = Options {
            format: args.format,
            grace,
            status_line: !args.quiet,
            task: Some(format!("iteration-{iteration}")),
        };
        let outcome = match supervisor.run(&args.command, &mut watch, &opts) {
            Ok(o) => o,
            Err(e) => {
                say(&format!("cannot start {:?}: {e}", args.command[0]));
                return EXIT_NOT_FOUND;
            }
        };
        if let Some(m) = &args.metrics {
            // Tasks the iteration left open (its own was closed by its done heartbeat).
            m.end_open_tasks(&watch.monitor);
        }
        if let Some(sig) = outcome.interrupted {
            // The signal's code stays: the caller asked for the stop.
            match save(&state_path, &state_doc(iteration, &agent_loop, None)) {
                Ok(()) => say(&format!(
                    "interrupted during iteration {iteration}; state saved"
                )),
                Err(e) => say(&format!(
                    "interrupted during iteration {iteration}; the state could not be saved to \
                     {}: {e}",
                    state_path.display()
                )),
            }
            return 128 + sig;
        }
        if watch.invalid > 0 {
            say(&format!(
                "iteration {iteration}: {} events refused by the Monitor (INVALID_EVENT), e.g. {}",
                watch.invalid,
                watch.invalid_samples.first().map_or("", String::as_str)
            ));
        }
        if let Some(halt) = &watch.halt {
            // The Monitor stopped the iteration: a budget, or the agent looping inside it.
            eprintln!("{}", card(halt));
            let saved = save(&state_path, &halted_doc(iteration, &agent_loop, halt));
            let code = crate::report::exit_code(halt);
            say(&format!(
                "loop finished after {iteration} iterations: the Monitor halted iteration \
                 {iteration} ({}) (failure)",
                slug(halt)
            ));
            if let Err(e) = saved {
                return unsaved(&state_path, &e, code, "the halt is not recorded");
            }
            return code;
        }
        let files_changed = before.changed_files().max(watch.files_changed);
        let (tests_passing, test_summary) = match &args.test_cmd {
            Some(cmd) => {
                let (p, s) = run_tests(cmd);
                (p, Some(s))
            }
            None => (0, None),
        };
        let output = outcome
            .final_text
            .clone()
            .unwrap_or_else(|| String::from_utf8_lossy(&outcome.captured).into_owned());
        let error = match outcome.agent {
            Some(exit) if exit.shell_code() != 0 => Some(match watch.errors.last() {
                Some(last) => format!("agent exited with {}: {last}", exit.shell_code()),
                None => format!("agent exited with {}", exit.shell_code()),
            }),
            _ => watch.errors.last().cloned(),
        };
        let decision = match agent_loop.observe(&Observation {
            output,
            files_changed,
            tests_passing,
            error,
            events: Vec::new(),
        }) {
            Ok(d) => d,
            Err(e) => {
                say(&e.to_string());
                return EXIT_CONFIG;
            }
        };
        say(&format!(
            "iteration {iteration}: {files_changed} files changed{}, completion confidence {}, \
             breaker {} -> {}",
            test_summary.map(|s| format!(", {s}")).unwrap_or_default(),
            decision.analysis.confidence,
            decision.breaker.state,
            match decision.action {
                Action::Continue => "continue".to_string(),
                Action::Exit => "exit".to_string(),
            }
        ));
        if decision.breaker.state != State::Closed
            && let Some(reason) = &decision.breaker.reason
        {
            say(&format!("breaker {}: {reason}", decision.breaker.state));
        }
        if let (Action::Exit, Some(reason)) = (decision.action, decision.reason) {
            let success = decision.outcome == Some(LoopOutcome::Success);
            // A finished episode leaves nothing behind; a failed one keeps its breaker state.
            let saved = if success {
                std::fs::remove_file(&state_path).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e.to_string())
                    }
                })
            } else {
                save(
                    &state_path,
                    &state_doc(iteration, &agent_loop, Some(reason)),
                )
            };
            say(&format!(
                "loop finished after {iteration} iterations: {reason} ({})",
                if success { "success" } else { "failure" }
            ));
            if let Err(e) = saved {
                let lost = if success {
                    "the next `agentbreaker loop` resumes from the old state"
                } else if reason == ExitReason::CircuitOpen {
                    "the OPEN breaker is not kept: the next `agentbreaker loop` would start"
                } else {
                    "the next `agentbreaker loop` resumes from the last state saved"
                };
                return unsaved(&state_path, &e, exit_code(reason), lost);
            }
            if reason == ExitReason::CircuitOpen {
                say(
                    "the breaker stays OPEN: the next `agentbreaker loop` refuses to start until --reset",
                );
            }
            return exit_code(reason);
        }
        if let Err(e) = save(&state_path, &state_doc(iteration, &agent_loop, None)) {
            // The breaker goes on judging in this process; the end says whether its state was
            // kept.
            say(&format!("could not save {}: {e}", state_path.display()));
        }
    }
}

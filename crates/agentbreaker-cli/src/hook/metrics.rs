//! The metrics of `agentbreaker hook` (docs/observability.md). A hook runs as a new process per
//! event, so each call records what its events did (the Monitor's recorder into a registry of
//! its own) and adds that to the session's counters, which live in the session's state
//! (`metrics`). With `--metrics-file PATH` the call also writes the session's counters beside its
//! state (`<key>.metrics.json`, small) and then PATH: the sum of the counters of every session not
//! ended yet and of the sessions that ended (`retired.metrics.json`, so the totals never go down
//! when a session ends), in the Prometheus text format. `agentbreaker status --prometheus` prints
//! the live sessions' counters (from their states) and the retired ones.
//!
//! Bounded: a registry keeps at most `agentbreaker::metrics::MAX_SERIES` task series; PATH sums
//! at most [`MAX_SESSIONS`] counters files (the most recently updated). The counters of a session
//! past them are folded into the retired ones, once: under its lock, taken without waiting (as the
//! cleanup of a stale session does), its counters are added to the retired ones, then zeroed in
//! its state and its counters file is left empty (0 bytes: nothing to sum, still there for its
//! end); its next call counts from zero again. A session in use (its lock held) is summed as it
//! is. So the totals never go down, and a call reads at most [`MAX_SESSIONS`] files plus the ones
//! it folds: each call makes at most one file (its own) non-empty again, so that is about one.
//! PATH is summed and written under the retired counters' lock: the files of two calls never go
//! back in time.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use agentbreaker::metrics::{self, Registry, TaskOutcome};
use serde_json::Value;

use super::state::{self, Loaded, SessionState, StateDir};
use crate::metrics_file::write_text_atomic;

/// Where the counters of ended sessions are added up.
pub const RETIRED_FILE: &str = "retired.metrics.json";
/// The lock taken to change [`RETIRED_FILE`] (`retired.lock`; no session key looks like it).
const RETIRED_LOCK: &str = "retired";
/// The suffix of a session's counters beside its state.
pub const SIDECAR_SUFFIX: &str = ".metrics.json";
/// The most counters files one metrics file reads; the sessions past them are folded into the
/// retired counters.
pub const MAX_SESSIONS: usize = 1000;
/// The largest counters file read.
const MAX_READ: u64 = 4 * 1024 * 1024;

/// A session's counters (empty when it has none or they cannot be read).
pub fn session_registry(st: &SessionState) -> Registry {
    if st.metrics.is_null() {
        return Registry::new();
    }
    Registry::from_json(&st.metrics).unwrap_or_default()
}

/// Adds a call's counters to the session's.
pub fn add_to_session(st: &mut SessionState, call: &Registry) {
    if call.is_empty() {
        return;
    }
    let mut total = session_registry(st);
    total.merge(call);
    st.metrics = total.to_json();
}

fn read_registry(path: &Path) -> Option<Registry> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    f.take(MAX_READ).read_to_end(&mut bytes).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    Registry::from_json(&v).ok()
}

fn sidecar(dir: &StateDir, key: &str) -> PathBuf {
    dir.path.join(format!("{key}{SIDECAR_SUFFIX}"))
}

/// Writes a session's counters beside its state (hold the session's lock).
pub fn write_sidecar(dir: &StateDir, key: &str, st: &SessionState) -> std::io::Result<()> {
    let text = serde_json::to_string(&session_registry(st).to_json()).unwrap_or_default();
    write_text_atomic(&sidecar(dir, key), &text)
}

/// Removes a session's counters file.
pub fn remove_sidecar(dir: &StateDir, key: &str) {
    let _ = std::fs::remove_file(sidecar(dir, key));
}

/// The counters of the sessions that ended.
pub fn retired(dir: &StateDir) -> Registry {
    read_registry(&dir.path.join(RETIRED_FILE)).unwrap_or_default()
}

/// A session ends (`SessionEnd`, `hook reset`, or it went stale): when it wrote a metrics file
/// (it has a counters file beside its state), its open tasks' steps are recorded
/// (`outcome="ended"`) and its counters are added to the retired ones. A session that never
/// wrote one leaves nothing behind.
pub fn retire(dir: &StateDir, key: &str, st: &SessionState) {
    if std::fs::symlink_metadata(sidecar(dir, key)).is_err() {
        return;
    }
    let mut mine = session_registry(st);
    for steps in open_task_steps(st) {
        mine.record(&metrics::task_end(steps, TaskOutcome::Ended));
    }
    if mine.is_empty() {
        return;
    }
    let Ok(lock) = dir.lock(RETIRED_LOCK) else {
        return;
    };
    let mut total = retired(dir);
    total.merge(&mine);
    if write_retired(dir, &total).is_ok() {
        // Under the retired counters' lock: a metrics file never counts the session twice.
        remove_sidecar(dir, key);
    }
    drop(lock);
}

fn write_retired(dir: &StateDir, total: &Registry) -> std::io::Result<()> {
    let text = serde_json::to_string(&total.to_json()).unwrap_or_default();
    write_text_atomic(&dir.path.join(RETIRED_FILE), &text)
}

/// Folds the counters of a session past [`MAX_SESSIONS`] into the retired ones (`total`, written
/// to [`RETIRED_FILE`]; hold its lock). Under the session's lock, taken without waiting: false
/// when a call holds it (the session is in use, its file is summed as it is). The retired
/// counters are written first: a process killed in between counts the session twice rather than
/// never. The state keeps its modification time (the cleanup's clock).
fn fold(dir: &StateDir, key: &str, total: &mut Registry) -> bool {
    let Ok(Some(lock)) = dir.try_lock(key) else {
        return false;
    };
    let path = sidecar(dir, key);
    // Folded or ended meanwhile: nothing left to fold.
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() > 0) {
        return true;
    }
    match dir.load(key) {
        Loaded::State(mut st) => {
            let mut folded = total.clone();
            folded.merge(&session_registry(&st));
            if write_retired(dir, &folded).is_err() {
                return false;
            }
            *total = folded;
            let state_path = dir.path.join(format!("{key}.json"));
            let modified = std::fs::symlink_metadata(&state_path).and_then(|m| m.modified());
            st.metrics = Value::Null;
            if dir.save(key, &st, false).is_ok()
                && let Ok(modified) = modified
            {
                use std::os::unix::fs::OpenOptionsExt;
                let _ = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(&state_path)
                    .and_then(|f| f.set_modified(modified));
            }
            let _ = write_text_atomic(&path, "");
        }
        // A counters file without a (usable) state: its counters are the last ones known.
        Loaded::Fresh | Loaded::Aside(_) => {
            let mut folded = total.clone();
            if let Some(r) = read_registry(&path) {
                folded.merge(&r);
            }
            if write_retired(dir, &folded).is_err() {
                return false;
            }
            *total = folded;
            remove_sidecar(dir, key);
            // No state: its lock file goes too (removed while held, as the cleanup does).
            if std::fs::symlink_metadata(dir.path.join(format!("{key}.json"))).is_err() {
                dir.remove(key);
            }
        }
    }
    drop(lock);
    true
}

/// The step counts of the session's open tasks that are not halted (from its Monitor snapshot).
fn open_task_steps(st: &SessionState) -> Vec<u64> {
    if st.session_halt.is_some() {
        return Vec::new();
    }
    st.monitor
        .get("tasks")
        .and_then(Value::as_array)
        .map(|tasks| {
            tasks
                .iter()
                .filter(|t| t.get("halt").is_none_or(Value::is_null))
                .map(|t| {
                    // A task's completed steps, plus the open one.
                    let done = t.get("steps").and_then(Value::as_u64).unwrap_or(0);
                    let open = t.get("current").is_some_and(|c| !c.is_null());
                    done + u64::from(open)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The sum of the retired counters and every session's counters file: the most recently updated
/// [`MAX_SESSIONS`] are read, the others folded into the retired counters (the module's head).
/// Takes the retired counters' lock; without it (it cannot be taken) nothing is folded and every
/// file is read.
pub fn sum_of_sidecars(dir: &StateDir) -> Registry {
    let lock = dir.lock(RETIRED_LOCK).ok();
    let total = sum_locked(dir, lock.is_some());
    drop(lock);
    total
}

fn sum_locked(dir: &StateDir, may_fold: bool) -> Registry {
    let mut retired_total = retired(dir);
    let Ok(entries) = std::fs::read_dir(&dir.path) else {
        return retired_total;
    };
    let mut files: Vec<(SystemTime, String)> = entries
        .flatten()
        .take(100_000)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if name.starts_with('.') || name == RETIRED_FILE {
                return None;
            }
            let key = name.strip_suffix(SIDECAR_SUFFIX)?;
            // Every counters file is counted, stale or not: it is not in the retired counters
            // until its session is cleaned up, which removes it. An empty one was folded.
            let meta = e.metadata().ok()?;
            if meta.len() == 0 {
                return None;
            }
            Some((meta.modified().ok()?, key.to_string()))
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut read = Vec::with_capacity(files.len().min(MAX_SESSIONS));
    for (i, (_, key)) in files.into_iter().enumerate() {
        if i < MAX_SESSIONS || !may_fold || !fold(dir, &key, &mut retired_total) {
            read.push(key);
        }
    }
    let mut total = retired_total;
    for key in read {
        if let Some(r) = read_registry(&sidecar(dir, &key)) {
            total.merge(&r);
        }
    }
    total
}

/// The sum of the retired counters and the given sessions' counters (every one: `status` has
/// read their states already).
pub fn sum_of_sessions<'a>(
    dir: &StateDir,
    sessions: impl IntoIterator<Item = &'a SessionState>,
) -> Registry {
    let mut total = retired(dir);
    for st in sessions {
        total.merge(&session_registry(st));
    }
    total
}

/// Writes the metrics file of a hook call: summed and written under the retired counters' lock,
/// so that a file never follows a newer one.
pub fn write_file(dir: &StateDir, path: &Path) -> Result<(), String> {
    let lock = dir.lock(RETIRED_LOCK).ok();
    let text = sum_locked(dir, lock.is_some()).to_prometheus();
    let written = write_text_atomic(path, &text)
        .map_err(|e| format!("cannot write the metrics file {}: {e}", path.display()));
    drop(lock);
    written
}

/// `state::now_ms`, for the trace.
pub fn now_ms() -> u64 {
    state::now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::metrics::{HALTS, TOOL_CALLS, tool_call};
    use std::time::Duration;

    fn session(dir: &StateDir, key: &str, calls: usize, sidecar: bool) {
        let mut st = SessionState::new("claude", key, None, "coding-agent", 1);
        let mut r = Registry::new();
        for _ in 0..calls {
            r.record(&tool_call(None, agentbreaker::metrics::Options::default()));
        }
        add_to_session(&mut st, &r);
        dir.save(key, &st, false).unwrap();
        if sidecar {
            write_sidecar(dir, key, &st).unwrap();
        }
    }

    fn age(path: &Path) {
        let old = SystemTime::now() - state::STALE_AFTER - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    #[test]
    fn stale_sessions_that_exported_are_retired_the_others_leave_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(&tmp.path().join("s"), true).unwrap();
        session(&dir, "exported", 3, true);
        session(&dir, "quiet", 5, false);
        session(&dir, "live", 2, true);
        for name in ["exported.json", "exported.metrics.json", "quiet.json"] {
            age(&dir.path.join(name));
        }
        // The stale session's counters are counted before the cleanup and after it (retired).
        assert_eq!(sum_of_sidecars(&dir).total(&TOOL_CALLS), 5.0);
        dir.cleanup();
        let mut names: Vec<String> = std::fs::read_dir(&dir.path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "live.json",
                "live.metrics.json",
                "retired.lock",
                "retired.metrics.json"
            ]
        );
        let retired = retired(&dir);
        assert_eq!(retired.total(&TOOL_CALLS), 3.0);
        assert_eq!(retired.total(&HALTS), 0.0);
        // The file sums the retired counters and the live sessions'.
        assert_eq!(sum_of_sidecars(&dir).total(&TOOL_CALLS), 5.0);
        let path = tmp.path().join("m.prom");
        write_file(&dir, &path).unwrap();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("\nagentbreaker_tool_calls_total 5\n")
        );
    }
}

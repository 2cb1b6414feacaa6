//! `--metrics-file PATH`: the core's metrics (`agentbreaker::metrics`, docs/observability.md)
//! written in the Prometheus text format for node_exporter's textfile collector. The file is
//! replaced atomically (a temporary file beside it, renamed over it: a reader never sees half a
//! file, and the temporary name does not end in `.prom`, so the collector never reads it), at
//! most once a second while something changed, and at exit.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentbreaker::Monitor;
use agentbreaker::metrics::{self, Options, Recorder, Registry, TaskOutcome, Update};
use serde_json::Value;

/// The shortest time between two writes while the run goes on.
pub const WRITE_INTERVAL: Duration = Duration::from_secs(1);

const TEMP_SUFFIX: &str = ".tmp";

/// `.<file name>.`: how the temporary files of `path` begin (`.<name>.<pid>.<nanos>.tmp`).
fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "metrics".into());
    format!(".{name}.")
}

/// Whether `candidate` is one of the temporary files [`write_text_atomic`] makes for `path`.
pub fn is_temp_of(candidate: &Path, path: &Path) -> bool {
    let Some(name) = candidate.file_name() else {
        return false;
    };
    let name = name.to_string_lossy();
    candidate.parent() == path.parent()
        && name.starts_with(&temp_prefix(path))
        && name.ends_with(TEMP_SUFFIX)
}

/// Replaces `path` with `text` atomically: a new file beside it (mode 0644 less the umask, so
/// the collector's user can read it), renamed over it. No fsync: a metrics file that a power
/// loss takes back one second is harmless, and the hook writes it on every call.
pub fn write_text_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(
        "{}{}.{nanos}{TEMP_SUFFIX}",
        temp_prefix(path),
        std::process::id()
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[derive(Debug, Default)]
struct State {
    registry: Registry,
    dirty: bool,
    last_write: Option<Instant>,
    /// The last write error, reported once.
    failed: bool,
}

/// A registry fed by Monitors (their recorders) and breakers (their listener events), written to
/// one file. Shared: `loop` keeps one across its iterations' Monitors.
#[derive(Debug)]
pub struct MetricsExport {
    path: PathBuf,
    options: Options,
    state: Mutex<State>,
}

impl MetricsExport {
    /// An export to `path`; `task` adds the task attribute.
    pub fn new(path: PathBuf, task: bool) -> Arc<Self> {
        Arc::new(MetricsExport {
            path,
            options: Options { task },
            state: Mutex::new(State {
                dirty: true,
                ..State::default()
            }),
        })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The attribute options.
    pub fn options(&self) -> Options {
        self.options
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds updates.
    pub fn record(&self, updates: &[Update]) {
        if updates.is_empty() {
            return;
        }
        let mut s = self.lock();
        s.registry.record_all(updates);
        s.dirty = true;
    }

    /// A recorder for a Monitor that adds into this export.
    pub fn recorder(self: &Arc<Self>) -> Recorder {
        let me = Arc::clone(self);
        Arc::new(move |updates: &[Update]| me.record(updates))
    }

    /// Starts recording `monitor`'s metrics here.
    pub fn attach(self: &Arc<Self>, monitor: &Monitor) {
        monitor.set_metrics_recorder(Some(self.recorder()), self.options);
    }

    /// Records the steps of `monitor`'s tasks that are still open and not halted (`outcome =
    /// "ended"`): the run is over.
    pub fn end_open_tasks(&self, monitor: &Monitor) {
        let updates: Vec<Update> = ended_tasks(&monitor.status())
            .into_iter()
            .map(|steps| metrics::task_end(steps, TaskOutcome::Ended))
            .collect();
        self.record(&updates);
    }

    /// A copy of the registry.
    pub fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// Writes the file when something changed and the last write is a second old or more.
    pub fn tick(&self) {
        let due = {
            let s = self.lock();
            s.dirty && s.last_write.is_none_or(|t| t.elapsed() >= WRITE_INTERVAL)
        };
        if due {
            self.write();
        }
    }

    /// Writes the file now (at exit).
    pub fn flush(&self) {
        self.write();
    }

    fn write(&self) {
        let text = {
            let mut s = self.lock();
            s.dirty = false;
            s.last_write = Some(Instant::now());
            s.registry.to_prometheus()
        };
        let result = write_text_atomic(&self.path, &text);
        let mut s = self.lock();
        match result {
            Ok(()) => s.failed = false,
            Err(e) => {
                if !s.failed {
                    eprintln!(
                        "agentbreaker: cannot write the metrics file {}: {e}",
                        self.path.display()
                    );
                }
                s.failed = true;
            }
        }
    }
}

/// The step counts of the open, not halted tasks of a Monitor status.
pub fn ended_tasks(status: &Value) -> Vec<u64> {
    status
        .get("tasks")
        .and_then(Value::as_array)
        .map(|tasks| {
            tasks
                .iter()
                .filter(|t| t.get("halted") != Some(&Value::Bool(true)))
                .map(|t| t.get("steps").and_then(Value::as_u64).unwrap_or(0))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::{ManualClock, MonitorConfig};
    use serde_json::json;

    #[test]
    fn writes_atomically_at_most_once_a_second_and_on_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentbreaker.prom");
        let export = MetricsExport::new(path.clone(), false);
        let monitor =
            Monitor::with_clock(MonitorConfig::default(), ManualClock::shared(0)).unwrap();
        export.attach(&monitor);
        export.tick();
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("\nagentbreaker_tool_calls_total 0\n")
        );
        monitor
            .observe(&json!({"type": "tool_use", "name": "Bash"}))
            .unwrap();
        export.tick(); // within the second: not written
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("\nagentbreaker_tool_calls_total 0\n")
        );
        export.end_open_tasks(&monitor);
        export.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\nagentbreaker_tool_calls_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("agentbreaker_task_steps_count{outcome=\"ended\"} 1\n"),
            "{text}"
        );
        // Only the file itself is left in the folder.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // A folder that does not exist: reported, not fatal.
        let bad = MetricsExport::new(dir.path().join("no/such/dir/x.prom"), false);
        bad.flush();
    }
}

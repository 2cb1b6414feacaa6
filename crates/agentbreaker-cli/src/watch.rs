//! One agent watched by a Monitor, the same way for a live agent (`run`, each iteration of
//! `loop`) and a recording (`replay`): the parsers' events go to the Monitor, its verdicts are
//! kept, and what the core refuses is counted, not dropped.

use std::sync::Arc;

use agentbreaker::{Monitor, MonitorConfig, SharedClock, Verdict};
use serde_json::{Value, json};

use crate::metrics_file::MetricsExport;
use crate::trace::Trace;

/// How many refused events are kept as examples (all are counted).
const MAX_INVALID_SAMPLES: usize = 8;
/// How many warnings are kept (all are counted).
const MAX_WARNINGS: usize = 1000;
/// How many error texts are kept for `loop` (the last ones).
const MAX_ERRORS: usize = 32;

/// A Monitor and what it said.
#[derive(Debug)]
pub struct Watch {
    /// The Monitor.
    pub monitor: Monitor,
    /// Events the Monitor accepted.
    pub events: u64,
    /// Events the Monitor refused (`INVALID_EVENT`).
    pub invalid: u64,
    /// The first refusals: the event's type and why.
    pub invalid_samples: Vec<String>,
    /// The warnings, in order (the first [`MAX_WARNINGS`]).
    pub warnings: Vec<Verdict>,
    /// How many warnings there were.
    pub warnings_total: u64,
    /// The halt, once there is one (the watch stops there).
    pub halt: Option<Verdict>,
    /// The last error texts (failed tool results and agent errors), for `loop`.
    pub errors: Vec<String>,
    /// Files changed according to the stream's `progress` events.
    pub files_changed: u64,
    /// What happened, step by step, for `agentbreaker report` (bounded).
    pub trace: Trace,
    /// Where the Monitor's metrics go (`--metrics-file`).
    pub metrics: Option<Arc<MetricsExport>>,
    clock: SharedClock,
}

impl Watch {
    /// A watch with a new Monitor of `config` on `clock`.
    pub fn new(config: MonitorConfig, clock: SharedClock) -> Result<Self, String> {
        Ok(Watch {
            monitor: Monitor::with_clock(config, clock.clone()).map_err(|e| e.to_string())?,
            trace: Trace::default(),
            metrics: None,
            clock,
            events: 0,
            invalid: 0,
            invalid_samples: Vec::new(),
            warnings: Vec::new(),
            warnings_total: 0,
            halt: None,
            errors: Vec::new(),
            files_changed: 0,
        })
    }

    /// Sends the Monitor's metrics to `export` (`--metrics-file`).
    pub fn with_metrics(mut self, export: Option<Arc<MetricsExport>>) -> Self {
        if let Some(e) = &export {
            e.attach(&self.monitor);
        }
        self.metrics = export;
        self
    }

    /// Writes the metrics file when it is due (once a second at most).
    pub fn metrics_tick(&self) {
        if let Some(m) = &self.metrics {
            m.tick();
        }
    }

    /// The run is over: the open tasks' steps are recorded (`outcome="ended"`) and the metrics
    /// file written.
    pub fn finish_metrics(&self) {
        if let Some(m) = &self.metrics {
            m.end_open_tasks(&self.monitor);
            m.flush();
        }
    }

    /// Observes `events` in order; returns the warnings and the halt they earned. After a halt
    /// nothing more is observed.
    pub fn observe(&mut self, events: &[Value]) -> Vec<Verdict> {
        let mut said = Vec::new();
        for event in events {
            if self.halt.is_some() {
                break;
            }
            self.note(event);
            match self.monitor.observe(event) {
                Ok(v) => {
                    self.events += 1;
                    self.trace.event(self.clock.now_ms(), event, &v);
                    if self.record(&v) {
                        said.push(v);
                    }
                }
                Err(e) => {
                    self.invalid += 1;
                    if self.invalid_samples.len() < MAX_INVALID_SAMPLES {
                        let kind = event
                            .get("type")
                            .map_or_else(|| "?".to_string(), Value::to_string);
                        self.invalid_samples.push(format!("{kind}: {e}"));
                    }
                }
            }
        }
        said
    }

    /// Ticks the Monitor (duration and idle limits at the clock's now); returns its warnings and
    /// halt.
    pub fn tick(&mut self) -> Vec<Verdict> {
        if self.halt.is_some() {
            return Vec::new();
        }
        let verdicts = self.monitor.tick();
        self.record_all(verdicts)
    }

    /// Keeps verdicts given elsewhere (the ticks of [`crate::timeline::walk`]); returns the ones
    /// kept, up to the first halt.
    pub fn record_all(&mut self, verdicts: Vec<Verdict>) -> Vec<Verdict> {
        let mut said = Vec::new();
        for v in verdicts {
            if self.halt.is_some() {
                break;
            }
            self.trace.verdict(self.clock.now_ms(), &v);
            if self.record(&v) {
                said.push(v);
            }
        }
        said
    }

    /// [`Watch::record_all`] for verdicts that each come with their own time (ms, on the watch's
    /// clock): the ticks of [`crate::timeline::walk_timed`]. Returns the ones kept, with their
    /// time, up to the first halt.
    pub fn record_timed(&mut self, verdicts: Vec<(u64, Verdict)>) -> Vec<(u64, Verdict)> {
        let mut said = Vec::new();
        for (at, v) in verdicts {
            if self.halt.is_some() {
                break;
            }
            self.trace.verdict(at, &v);
            if self.record(&v) {
                said.push((at, v));
            }
        }
        said
    }

    /// Keeps a warning or the halt; false for a continue.
    fn record(&mut self, v: &Verdict) -> bool {
        if v.is_halt() {
            self.halt = Some(v.clone());
            true
        } else if v.is_warn() {
            self.warnings_total += 1;
            if self.warnings.len() < MAX_WARNINGS {
                self.warnings.push(v.clone());
            }
            true
        } else {
            false
        }
    }

    /// What `loop` wants from the events themselves: errors and files changed.
    fn note(&mut self, event: &Value) {
        let text = || {
            event
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match event.get("type").and_then(Value::as_str) {
            Some("tool_result") if event.get("ok") == Some(&Value::Bool(false)) => {
                self.push_error(text());
            }
            Some("error") if event.get("transient") != Some(&Value::Bool(true)) => {
                self.push_error(text());
            }
            Some("progress") => {
                self.files_changed += match event.get("files") {
                    Some(Value::Array(paths)) => paths.len() as u64,
                    Some(v) => v.as_u64().unwrap_or(0),
                    None => 0,
                };
            }
            _ => {}
        }
    }

    fn push_error(&mut self, text: String) {
        if self.errors.len() >= MAX_ERRORS {
            self.errors.remove(0);
        }
        self.errors
            .push(agentbreaker::text::cap_error(&text).to_string());
    }

    /// The Monitor's live status.
    pub fn status(&self) -> Value {
        self.monitor.status()
    }

    /// What was refused, as the report shows it.
    pub fn invalid_json(&self) -> Value {
        json!({"count": self.invalid, "examples": self.invalid_samples})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::ManualClock;

    fn watch() -> Watch {
        Watch::new(MonitorConfig::default(), ManualClock::shared(0)).unwrap()
    }

    #[test]
    fn refused_events_are_counted_with_examples() {
        let mut w = watch();
        let said = w.observe(&[
            json!({"type": "tool_use"}),
            json!({"type": "tool_use", "name": "fetch"}),
            json!({"type": "heartbeat", "phase": "starting"}),
        ]);
        assert!(said.is_empty());
        assert_eq!((w.events, w.invalid), (1, 2));
        assert!(
            w.invalid_samples[0].starts_with("\"tool_use\": "),
            "{:?}",
            w.invalid_samples
        );
        assert_eq!(w.invalid_json()["count"], 2);
    }

    #[test]
    fn warnings_then_the_halt_and_nothing_after_it() {
        let mut w = watch();
        let step = |i: usize| {
            vec![
                json!({"type": "assistant", "text": "Let me run the tests."}),
                json!({"type": "tool_use", "name": "Bash", "id": format!("t{i}"),
                       "input": {"command": "pytest -q"}}),
                json!({"type": "tool_result", "id": format!("t{i}"), "ok": false,
                       "text": "1 failed"}),
            ]
        };
        let mut said = Vec::new();
        for i in 0..8 {
            said.extend(w.observe(&step(i)));
        }
        let halt = w.halt.clone().unwrap();
        assert_eq!(halt.reason.unwrap().slug(), "repeated_step");
        assert!(said.last().unwrap().is_halt());
        assert!(!w.warnings.is_empty());
        assert_eq!(w.warnings_total, w.warnings.len() as u64);
        let events = w.events;
        assert!(w.observe(&step(9)).is_empty());
        assert_eq!(w.events, events, "nothing is observed after the halt");
        assert_eq!(w.errors.len(), 5);
        assert_eq!(w.errors[0], "1 failed");
    }

    #[test]
    fn progress_counts_files() {
        let mut w = watch();
        w.observe(&[
            json!({"type": "progress", "files": ["a", "b"]}),
            json!({"type": "progress", "files": 3}),
            json!({"type": "error", "text": "retrying", "transient": true}),
            json!({"type": "error", "text": "bad request"}),
        ]);
        assert_eq!(w.files_changed, 5);
        assert_eq!(w.errors, ["bad request"]);
    }
}

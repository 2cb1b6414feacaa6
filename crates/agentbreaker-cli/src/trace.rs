//! The bounded record of a session that `agentbreaker report` draws: each event the Monitor
//! accepted, with the task and step its verdict placed it in (model calls, tool calls and their
//! results, errors, progress), and each warning and the halt. `run --report` writes it under
//! `trace`, `replay` and `report` build it from a recording, `hook` appends each call's entries to
//! a file beside the session's state (`hook::trace_file`).

use std::collections::VecDeque;

use agentbreaker::{Verdict, VerdictAction};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most entries `run` and `replay` keep (the oldest are dropped first, and counted).
pub const MAX_ENTRIES: usize = 5000;
/// The longest message kept in an entry.
const MAX_MESSAGE: usize = 300;
/// The longest tool name kept.
const MAX_NAME: usize = 80;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A model call ended (`assistant`).
    Model,
    /// A tool call (`tool_use`).
    Tool,
    /// A tool call's outcome (`tool_result`).
    Result,
    /// An agent-level error.
    Error,
    /// Work was done (`progress`).
    Progress,
    /// A warning verdict.
    Warn,
    /// The halt verdict.
    Halt,
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Milliseconds since the trace began.
    pub t: u64,
    /// The task the Monitor counted it for.
    pub task: String,
    /// The task's step.
    pub step: u64,
    /// What it is.
    pub kind: Kind,
    /// The tool's name (tool, result) or the rule's slug (warn, halt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The result's outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// The verdict's message (warn, halt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    /// Clock time of the first entry (ms).
    pub start_ms: Option<u64>,
    /// The entries, oldest first.
    pub entries: VecDeque<Entry>,
    /// Entries dropped to keep the bound.
    pub dropped: u64,
    /// The bound.
    #[serde(skip, default = "default_max")]
    max: usize,
}

fn default_max() -> usize {
    MAX_ENTRIES
}

impl Default for Trace {
    fn default() -> Self {
        Trace::with_max(MAX_ENTRIES)
    }
}

fn cut(s: &str, max: usize) -> String {
    agentbreaker::text::truncate(s, max).to_string()
}

impl Trace {
    /// An empty trace keeping at most `max` entries.
    pub fn with_max(max: usize) -> Self {
        Trace {
            start_ms: None,
            entries: VecDeque::new(),
            dropped: 0,
            max: max.max(1),
        }
    }

    /// Changes the bound (a trace read back from JSON has the default one).
    pub fn set_max(&mut self, max: usize) {
        self.max = max.max(1);
        self.trim();
    }

    fn trim(&mut self) {
        while self.entries.len() > self.max {
            // The halt stays: it is what the picture is for.
            let i = match self.entries.front() {
                Some(e) if e.kind == Kind::Halt => 1,
                _ => 0,
            };
            if self.entries.remove(i).is_some() {
                self.dropped += 1;
            }
        }
    }

    fn push(&mut self, at_ms: u64, entry: impl FnOnce(u64) -> Entry) {
        let start = *self.start_ms.get_or_insert(at_ms);
        self.entries.push_back(entry(at_ms.saturating_sub(start)));
        self.trim();
    }

    /// Records an event the Monitor accepted, where its verdict placed it, and the verdict when
    /// it is a warning or a halt.
    pub fn event(&mut self, at_ms: u64, event: &Value, verdict: &Verdict) {
        let kind = match event.get("type").and_then(Value::as_str) {
            Some("assistant") => Kind::Model,
            Some("tool_use") => Kind::Tool,
            Some("tool_result") => Kind::Result,
            Some("error") if event.get("transient") != Some(&Value::Bool(true)) => Kind::Error,
            Some("progress") => Kind::Progress,
            _ => {
                self.verdict(at_ms, verdict);
                return;
            }
        };
        let task = verdict.task_id.clone().unwrap_or_default();
        // A halted task answers with its old halt: the event did not count.
        if verdict.is_halt() && self.halted(&task) {
            return;
        }
        let text = |k: &str, max: usize| event.get(k).and_then(Value::as_str).map(|s| cut(s, max));
        self.push(at_ms, |t| Entry {
            t,
            task: cut(&task, MAX_NAME),
            step: verdict.step,
            kind,
            name: text("name", MAX_NAME),
            ok: event.get("ok").and_then(Value::as_bool),
            message: if kind == Kind::Error {
                text("text", MAX_MESSAGE)
            } else {
                None
            },
        });
        self.verdict(at_ms, verdict);
    }

    /// Records a warning or a halt (a continue is not recorded; a second halt neither).
    pub fn verdict(&mut self, at_ms: u64, verdict: &Verdict) {
        let kind = match verdict.action {
            VerdictAction::Continue => return,
            VerdictAction::Warn => Kind::Warn,
            VerdictAction::Halt => Kind::Halt,
        };
        if kind == Kind::Halt && self.halted(verdict.task_id.as_deref().unwrap_or("")) {
            return;
        }
        self.push(at_ms, |t| Entry {
            t,
            task: cut(verdict.task_id.as_deref().unwrap_or(""), MAX_NAME),
            step: verdict.step,
            kind,
            name: verdict.reason.map(|r| r.slug().to_string()),
            ok: None,
            message: verdict.message.as_deref().map(|m| cut(m, MAX_MESSAGE)),
        });
    }

    fn halted(&self, task: &str) -> bool {
        let task = agentbreaker::text::truncate(task, MAX_NAME);
        self.entries
            .iter()
            .any(|e| e.kind == Kind::Halt && e.task == task)
    }

    /// The (first) halt entry, if any.
    pub fn halt(&self) -> Option<&Entry> {
        self.entries.iter().find(|e| e.kind == Kind::Halt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentbreaker::{ManualClock, Monitor, MonitorConfig};
    use serde_json::json;

    #[test]
    fn records_steps_calls_warnings_and_one_halt_within_its_bound() {
        let m = Monitor::with_clock(
            MonitorConfig::from_json(&json!({"stagnation": {"repeatThreshold": 4},
                                             "warnBefore": 1}))
            .unwrap(),
            ManualClock::shared(0),
        )
        .unwrap();
        let mut trace = Trace::with_max(18);
        for i in 0..6u64 {
            for e in [
                json!({"type": "assistant", "text": "again"}),
                json!({"type": "tool_use", "name": "Bash", "id": format!("t{i}"),
                       "input": {"command": "ls"}}),
                json!({"type": "tool_result", "id": format!("t{i}"), "ok": false, "text": "x"}),
            ] {
                let v = m.observe(&e).unwrap();
                trace.event(1000 + i * 1000, &e, &v);
            }
        }
        let halt = trace.halt().unwrap();
        assert_eq!(halt.name.as_deref(), Some("repeated_step"));
        assert_eq!(halt.step, 4);
        assert_eq!(
            trace
                .entries
                .iter()
                .filter(|e| e.kind == Kind::Halt)
                .count(),
            1
        );
        assert!(trace.entries.iter().any(|e| e.kind == Kind::Warn));
        assert_eq!(trace.entries.front().unwrap().t, 0);
        // Bounded: the oldest entries went first, the halt stayed.
        let mut small = trace.clone();
        small.set_max(3);
        assert_eq!(small.entries.len(), 3);
        assert!(small.halt().is_some());
        let back: Trace = serde_json::from_value(serde_json::to_value(&trace).unwrap()).unwrap();
        assert_eq!(back.entries, trace.entries);
    }
}

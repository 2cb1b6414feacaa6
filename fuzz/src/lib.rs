//! What the fuzz targets share: turning bytes into text and JSON lines, and the checks every
//! BudgetBreaker run must pass whatever events it was given.

use std::borrow::Cow;
use std::collections::HashSet;

use agentbreaker::budget::{MAX_OPEN_TASKS, MAX_TASK_ID_BYTES};
use agentbreaker::{BudgetBreaker, ERROR_CODES, Error, Halt};
use serde_json::Value;

/// The input as text: valid UTF-8 as is, anything else with replacement characters (the
/// bindings only ever hand the core valid strings).
pub fn text(data: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// The lines of the input that are JSON values.
pub fn json_lines(data: &[u8]) -> impl Iterator<Item = Value> + '_ {
    data.split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
}

/// An error must carry one of the documented codes and a message.
pub fn check_error(e: &Error, expected: &str) {
    assert!(ERROR_CODES.contains(&e.code()), "undocumented code {e:?}");
    assert_eq!(e.code(), expected, "{e:?}");
    assert!(!e.message().is_empty(), "an error without a message: {e:?}");
}

/// Watches one BudgetBreaker over a run: every halt well formed and reported once per task
/// lifetime, and the live snapshot consistent after every step.
#[derive(Debug, Default)]
pub struct BudgetWatch {
    /// Tasks that reported a halt and are still open.
    halted: HashSet<String>,
}

impl BudgetWatch {
    /// A halt returned by `ingest` or `tick`.
    pub fn halt(&mut self, halt: &Halt) {
        assert!(
            self.halted.insert(halt.task_id.clone()),
            "task {:?} halted twice: {halt:?}",
            halt.task_id
        );
        assert!(halt.task_id.len() <= MAX_TASK_ID_BYTES.max("session".len()));
        let json = halt.to_json();
        for key in ["kind", "slug", "taskId", "message"] {
            assert!(json.get(key).is_some(), "halt JSON without {key}: {json}");
        }
        assert_eq!(json["slug"], halt.reason.slug());
        assert_eq!(json["kind"], halt.reason.kind());
        assert!(!halt.reason.message().is_empty());
        serde_json::to_string(halt).expect("a halt serializes");
    }

    /// The breaker was reset: every task is gone.
    pub fn reset(&mut self) {
        self.halted.clear();
    }

    /// Checks the live snapshot, and forgets halts of tasks that were closed.
    pub fn snapshot(&mut self, breaker: &BudgetBreaker) {
        let snap = breaker.snapshot();
        let config = breaker.config();
        assert!(
            snap.tasks.len() <= MAX_OPEN_TASKS,
            "{} tasks",
            snap.tasks.len()
        );
        let open: HashSet<&str> = snap.tasks.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(open.len(), snap.tasks.len(), "a task listed twice");
        let stacked: HashSet<&str> = snap.stack.iter().map(String::as_str).collect();
        assert_eq!(stacked.len(), snap.stack.len(), "a task stacked twice");
        assert!(
            stacked.is_subset(&open),
            "stacked tasks that are not open: {snap:?}"
        );
        for t in &snap.tasks {
            assert!(t.duration_secs >= 0.0 && t.idle_secs >= 0.0, "{t:?}");
            assert!(!t.spend_cents.is_nan() && t.spend_cents >= 0.0, "{t:?}");
            if !t.halted {
                assert!(t.tool_calls <= config.max_tool_calls_per_task, "{t:?}");
                assert!(
                    t.spend_cents <= config.max_token_spend_cents_per_task as f64,
                    "{t:?}"
                );
            }
            assert_eq!(
                t.halted,
                self.halted.contains(&t.task_id),
                "halted flag and reported halts disagree: {t:?}"
            );
        }
        self.halted.retain(|id| open.contains(id.as_str()));
        serde_json::to_string(&snap).expect("a snapshot serializes");
    }
}

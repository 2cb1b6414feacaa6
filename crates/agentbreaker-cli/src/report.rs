//! Why a run was stopped, in words (the halt card) and as JSON (the report), and the exit codes.

use agentbreaker::{BudgetSnapshot, Halt, HaltReason, StagnationDecision};
use serde_json::{Value, json};

/// Exit code: the supervisor stopped the agent for a budget (tool calls, spend, duration, idle).
pub const EXIT_BUDGET: i32 = 2;
/// Exit code: the supervisor stopped a loop (near-identical outputs, stagnation).
pub const EXIT_LOOP: i32 = 3;
/// Exit code: bad command line (clap's own 2 would read as a budget halt).
pub const EXIT_USAGE: i32 = 64;
/// Exit code: an invalid configuration file or value.
pub const EXIT_CONFIG: i32 = 78;
/// Exit code: the agent command could not be started.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code: a file could not be read or written.
pub const EXIT_IO: i32 = 74;

/// What stopped the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// A BudgetBreaker halt.
    Budget(Halt),
    /// The StagnationBreaker opened (the same error again and again).
    Stagnation(StagnationDecision),
}

impl Stop {
    /// The exit code of a run stopped this way.
    pub fn exit_code(&self) -> i32 {
        match self {
            Stop::Budget(h) if matches!(h.reason, HaltReason::OutputLoop { .. }) => EXIT_LOOP,
            Stop::Budget(_) => EXIT_BUDGET,
            Stop::Stagnation(_) => EXIT_LOOP,
        }
    }

    /// The machine-readable slug.
    pub fn slug(&self) -> &'static str {
        match self {
            Stop::Budget(h) => h.reason.slug(),
            Stop::Stagnation(_) => "stagnation",
        }
    }

    /// The stop as JSON: a halt's own shape, or `{kind: "Stagnation", slug, message, state}`.
    pub fn to_json(&self) -> Value {
        match self {
            Stop::Budget(h) => h.to_json(),
            Stop::Stagnation(d) => json!({
                "kind": "Stagnation",
                "slug": "stagnation",
                "taskId": null,
                "message": d.reason,
                "state": d.state,
            }),
        }
    }

    /// The halt card: what happened, in plain words, with the counters and what to do.
    pub fn card(&self) -> String {
        let body = match self {
            Stop::Budget(h) => {
                let task = &h.task_id;
                match &h.reason {
                    HaltReason::ToolCallLimit { actual, limit } => format!(
                        "Stopped after {actual} tool calls in task {task} (limit {limit}). The \
                         agent kept calling tools without finishing; narrow the task, or raise \
                         the limit with --max-tool-calls or AGENTBREAKER_TOOL_CAP."
                    ),
                    HaltReason::TokenSpendLimit {
                        actual_cents,
                        limit_cents,
                    } => format!(
                        "Stopped after spending {} in task {task} (limit {}). Raise the limit \
                         with --max-spend-cents or AGENTBREAKER_COST_CAP_CENTS.",
                        dollars(*actual_cents),
                        dollars(*limit_cents as f64)
                    ),
                    HaltReason::DurationLimit {
                        actual_secs,
                        limit_secs,
                    } => format!(
                        "Stopped after running {} in task {task} (limit {}). Raise the limit \
                         with --duration-secs or AGENTBREAKER_DURATION_SECS.",
                        clock(*actual_secs),
                        clock(*limit_secs as f64)
                    ),
                    HaltReason::IdleTimeout {
                        idle_secs,
                        limit_secs,
                    } => format!(
                        "Stopped after {} without any output from the agent in task {task} \
                         (limit {}). Raise the limit with --idle-secs or AGENTBREAKER_IDLE_SECS.",
                        clock(*idle_secs),
                        clock(*limit_secs as f64)
                    ),
                    HaltReason::OutputLoop {
                        window_size,
                        similarity_jaccard,
                        threshold,
                    } => format!(
                        "Stopped because the agent's last {window_size} answers in task {task} \
                         were near-identical (Jaccard similarity {similarity_jaccard:.2}, limit \
                         {threshold}). It is repeating itself instead of making progress."
                    ),
                }
            }
            Stop::Stagnation(d) => format!(
                "Stopped because the agent is stuck: {}. It keeps hitting the same error \
                 without changing anything.",
                d.reason.as_deref().unwrap_or("no progress")
            ),
        };
        format!(
            "agentbreaker: {body}\nagentbreaker: reason {} (exit code {})",
            self.slug(),
            self.exit_code()
        )
    }
}

/// `$12.34` from cents.
pub fn dollars(cents: f64) -> String {
    format!("${:.2}", cents / 100.0)
}

/// `45s`, `12m05s`, `1h02m03s` from seconds.
pub fn clock(secs: f64) -> String {
    let total = secs.max(0.0).round() as u64;
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{h}h{m:02}m{s:02}s")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

/// How the agent process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentExit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl AgentExit {
    /// The shell's convention: the code, or 128 + the signal.
    pub fn shell_code(self) -> i32 {
        match self {
            AgentExit::Code(c) => c,
            AgentExit::Signal(s) => 128 + s,
        }
    }

    /// As JSON.
    pub fn to_json(self) -> Value {
        match self {
            AgentExit::Code(c) => json!({"exitCode": c, "signal": null}),
            AgentExit::Signal(s) => json!({"exitCode": null, "signal": s}),
        }
    }
}

/// The `--report` document.
pub fn report_json(
    stop: Option<&Stop>,
    exit_code: i32,
    agent: Option<AgentExit>,
    interrupted: bool,
    counters: &BudgetSnapshot,
    lines: u64,
    malformed: u64,
) -> Value {
    json!({
        "stopped": stop.is_some(),
        "halt": stop.map(Stop::to_json),
        "exitCode": exit_code,
        "interrupted": interrupted,
        "agent": agent.map(AgentExit::to_json),
        "counters": counters,
        "lines": lines,
        "malformedLines": malformed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_say_what_happened_with_the_counters() {
        let stop = Stop::Budget(Halt {
            task_id: "session".into(),
            reason: HaltReason::ToolCallLimit {
                actual: 51,
                limit: 50,
            },
        });
        let card = stop.card();
        assert!(
            card.starts_with(
                "agentbreaker: Stopped after 51 tool calls in task session (limit 50)."
            ),
            "{card}"
        );
        assert!(
            card.ends_with("reason tool_call_limit (exit code 2)"),
            "{card}"
        );
        let idle = Stop::Budget(Halt {
            task_id: "session".into(),
            reason: HaltReason::IdleTimeout {
                idle_secs: 301.0,
                limit_secs: 300,
            },
        });
        assert!(
            idle.card().contains("after 5m01s without any output"),
            "{}",
            idle.card()
        );
        assert_eq!(idle.exit_code(), EXIT_BUDGET);
    }

    #[test]
    fn units() {
        assert_eq!(dollars(5001.3), "$50.01");
        assert_eq!(clock(45.2), "45s");
        assert_eq!(clock(1801.0), "30m01s");
        assert_eq!(clock(3723.0), "1h02m03s");
        assert_eq!(AgentExit::Signal(9).shell_code(), 137);
    }
}

//! Why a run was stopped, in words (the halt card, the warning notice) and as JSON (the report),
//! and the exit codes. Everything here reads the Monitor's verdict: the rule by its slug, the
//! message and the nudge the core wrote.

use agentbreaker::{Rule, Verdict};
use serde_json::{Value, json};

use crate::watch::Watch;

/// Exit code: the supervisor stopped the agent for a budget (tool calls, spend, duration, idle).
pub const EXIT_BUDGET: i32 = 2;
/// Exit code: the supervisor stopped a loop (repeated steps, cycles, failures, near-identical
/// outputs, no progress).
pub const EXIT_LOOP: i32 = 3;
/// Exit code: bad command line (clap's own 2 would read as a budget halt).
pub const EXIT_USAGE: i32 = 64;
/// Exit code: an invalid configuration file or value.
pub const EXIT_CONFIG: i32 = 78;
/// Exit code: the agent command could not be started.
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code: a file could not be read or written.
pub const EXIT_IO: i32 = 74;
/// Exit code: `loop`: another loop holds the state folder (EX_TEMPFAIL: try again later).
pub const EXIT_BUSY: i32 = 75;

/// The exit code of a run the Monitor halted: 2 for a budget rule, 3 for the others.
pub fn exit_code(halt: &Verdict) -> i32 {
    match halt.reason {
        Some(rule) if rule.is_budget() => EXIT_BUDGET,
        _ => EXIT_LOOP,
    }
}

/// The verdict's rule slug (`"-"` for a verdict without one).
pub fn slug(v: &Verdict) -> &'static str {
    v.reason.map_or("-", Rule::slug)
}

/// Where to change the threshold of a rule.
fn tuning(rule: Rule) -> &'static str {
    match rule {
        Rule::ToolCallLimit => {
            "--max-tool-calls N, AGENTBREAKER_TOOL_CAP or [budget] maxToolCallsPerTask"
        }
        Rule::ToolLimit => "--tool-limit NAME=N or [monitor] toolLimits",
        Rule::TokenSpendLimit => {
            "--max-spend-cents N, AGENTBREAKER_COST_CAP_CENTS or [budget] \
             maxTokenSpendCentsPerTask"
        }
        Rule::DurationLimit => {
            "--duration-secs N, AGENTBREAKER_DURATION_SECS or [budget] maxTaskDurationSecs"
        }
        Rule::IdleTimeout => "--idle-secs N, AGENTBREAKER_IDLE_SECS or [budget] maxIdleSecs",
        Rule::OutputLoop => "[budget] loopWindow, or --jaccard X (similarityJaccardThreshold)",
        Rule::RepeatedStep => "[stagnation] repeatThreshold (0 turns it off)",
        Rule::Cycle => "[stagnation] cycleRepeats and maxCycleLength (0 turns it off)",
        Rule::FailStreak => {
            "[stagnation] failStreakThreshold and failStreakDistinct (0 turns it off)"
        }
        Rule::FailWindow => "[stagnation] failWindow and failWindowPercent (0 turns it off)",
        Rule::SameError => "[stagnation] sameErrorThreshold",
        Rule::ConsecutiveFailures => "[failure] failureThreshold",
        Rule::NoProgress => "[stagnation] noProgressThreshold",
        Rule::OutputDecline => "[stagnation] outputDeclineThreshold and noProgressThreshold",
    }
}

fn place(v: &Verdict) -> String {
    format!(
        "task {}, step {}",
        v.task_id.as_deref().unwrap_or("-"),
        v.step
    )
}

/// The one-line notice of a warning (stderr; the agent's stdout is left alone).
pub fn notice(v: &Verdict) -> String {
    format!(
        "agentbreaker: warning [{}] {}: {} | nudge: {}",
        slug(v),
        place(v),
        v.message.as_deref().unwrap_or(""),
        v.nudge.as_deref().unwrap_or("")
    )
}

/// The halt card: the rule that fired (its slug and message), what the model would be told, where
/// to change the threshold, and the exit code.
pub fn card(v: &Verdict) -> String {
    let mut out = format!(
        "agentbreaker: stopped by rule {}: {} ({})",
        slug(v),
        v.message.as_deref().unwrap_or(""),
        place(v)
    );
    if let Some(nudge) = &v.nudge {
        out.push_str(&format!("\nagentbreaker: nudge for the agent: {nudge}"));
    }
    if let Some(rule) = v.reason {
        out.push_str(&format!("\nagentbreaker: to tune it: {}", tuning(rule)));
    }
    out.push_str(&format!(
        "\nagentbreaker: reason {} (exit code {})",
        slug(v),
        exit_code(v)
    ));
    out
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
    watch: &Watch,
    exit_code: i32,
    agent: Option<AgentExit>,
    interrupted: bool,
    lines: u64,
    malformed: u64,
) -> Value {
    json!({
        "stopped": watch.halt.is_some(),
        "halt": watch.halt.as_ref().map(Verdict::to_json),
        "warnings": watch.warnings.iter().map(Verdict::to_json).collect::<Vec<_>>(),
        "warningsTotal": watch.warnings_total,
        "exitCode": exit_code,
        "interrupted": interrupted,
        "agent": agent.map(AgentExit::to_json),
        "status": watch.status(),
        "lines": lines,
        "malformedLines": malformed,
        "events": watch.events,
        "invalidEvents": watch.invalid_json(),
        "trace": watch.trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halt_of(events: &[Value], config: Value) -> Verdict {
        let monitor = agentbreaker::Monitor::with_clock(
            agentbreaker::MonitorConfig::from_json(&config).unwrap(),
            agentbreaker::ManualClock::shared(0),
        )
        .unwrap();
        events
            .iter()
            .map(|e| monitor.observe(e).unwrap())
            .find(Verdict::is_halt)
            .unwrap()
    }

    #[test]
    fn cards_name_the_rule_that_fired() {
        let calls: Vec<Value> = (0..6)
            .map(|i| json!({"type": "tool_use", "name": "fetch", "input": {"url": i}}))
            .collect();
        let halt = halt_of(&calls, json!({"budget": {"maxToolCallsPerTask": 5}}));
        let card = card(&halt);
        assert!(
            card.starts_with(
                "agentbreaker: stopped by rule tool_call_limit: tool calls: 6 of 5 (task session, \
                 step 1)"
            ),
            "{card}"
        );
        assert!(
            card.contains("nudge for the agent: You have used all 5 tool calls"),
            "{card}"
        );
        assert!(card.contains("--max-tool-calls"), "{card}");
        assert!(
            card.ends_with("reason tool_call_limit (exit code 2)"),
            "{card}"
        );
        assert_eq!(exit_code(&halt), EXIT_BUDGET);

        // A cycle is named as a cycle, with exit code 3.
        let mut events = Vec::new();
        for i in 0..12 {
            let cmd = if i % 2 == 0 { "make" } else { "cat Makefile" };
            events.push(json!({"type": "assistant", "text": ""}));
            events.push(
                json!({"type": "tool_use", "name": "Bash", "id": format!("t{i}"),
                               "input": {"command": cmd}}),
            );
            events.push(
                json!({"type": "tool_result", "id": format!("t{i}"), "ok": i % 2 == 1,
                               "text": format!("out {cmd}")}),
            );
        }
        let halt = halt_of(&events, json!({}));
        assert_eq!(slug(&halt), "cycle");
        let card = super::card(&halt);
        assert!(
            card.starts_with("agentbreaker: stopped by rule cycle: a cycle of 2 steps"),
            "{card}"
        );
        assert!(card.ends_with("reason cycle (exit code 3)"), "{card}");
        assert_eq!(exit_code(&halt), EXIT_LOOP);
        let warn = Verdict {
            action: agentbreaker::VerdictAction::Warn,
            ..halt.clone()
        };
        let line = notice(&warn);
        assert!(
            line.starts_with(
                "agentbreaker: warning [cycle] task session, step 6: a cycle of 2 steps"
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
        assert!(
            line.contains(" | nudge: You are going in circles"),
            "{line}"
        );
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

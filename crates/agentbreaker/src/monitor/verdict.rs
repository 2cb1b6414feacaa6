//! What a Monitor answers: a verdict for every event, naming the rule that fired by its slug,
//! with a sentence for people (`message`) and one for the model (`nudge`).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::budget::HaltReason;
use crate::text::{format_decimal, truncate};

/// What to do after an event, ordered by severity (`Continue < Warn < Halt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictAction {
    /// Nothing to say.
    Continue,
    /// A rule is near its threshold: tell the model (the `nudge`), let it go on.
    Warn,
    /// A rule tripped: stop the task.
    Halt,
}

impl VerdictAction {
    /// `"continue"`, `"warn"` or `"halt"`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictAction::Continue => "continue",
            VerdictAction::Warn => "warn",
            VerdictAction::Halt => "halt",
        }
    }
}

/// The rules of a Monitor, by their stable slugs (contract section 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// More tool calls in the task than `maxToolCallsPerTask`.
    ToolCallLimit,
    /// More calls of one tool than its `toolLimits` entry.
    ToolLimit,
    /// More spend than `maxTokenSpendCentsPerTask`.
    TokenSpendLimit,
    /// The task ran longer than `maxTaskDurationSecs`.
    DurationLimit,
    /// The task was silent longer than `maxIdleSecs`.
    IdleTimeout,
    /// The same step (action and result) `repeatThreshold` times in a row.
    RepeatedStep,
    /// A cycle of steps repeated `cycleRepeats` times.
    Cycle,
    /// `failStreakThreshold` failed steps in a row with few distinct errors.
    FailStreak,
    /// Most of the last `failWindow` steps failed without progress.
    FailWindow,
    /// One error `sameErrorThreshold` times since the last progress.
    SameError,
    /// `failureThreshold` failed steps in a row (or `identicalErrorThreshold` identical ones).
    ConsecutiveFailures,
    /// `noProgressThreshold` steps in a row without progress.
    NoProgress,
    /// Steps without progress whose output also shrank below the baseline.
    OutputDecline,
    /// `loopWindow` near-identical answers in a row from a task that only talks.
    OutputLoop,
}

impl Rule {
    /// Every rule, in the order a Monitor checks them.
    pub const ALL: [Rule; 14] = [
        Rule::ToolCallLimit,
        Rule::ToolLimit,
        Rule::TokenSpendLimit,
        Rule::DurationLimit,
        Rule::IdleTimeout,
        Rule::RepeatedStep,
        Rule::Cycle,
        Rule::FailStreak,
        Rule::FailWindow,
        Rule::SameError,
        Rule::ConsecutiveFailures,
        Rule::NoProgress,
        Rule::OutputDecline,
        Rule::OutputLoop,
    ];

    /// The stable slug (`"repeated_step"`, ...).
    pub fn slug(self) -> &'static str {
        match self {
            Rule::ToolCallLimit => "tool_call_limit",
            Rule::ToolLimit => "tool_limit",
            Rule::TokenSpendLimit => "token_spend_limit",
            Rule::DurationLimit => "duration_limit",
            Rule::IdleTimeout => "idle_timeout",
            Rule::RepeatedStep => "repeated_step",
            Rule::Cycle => "cycle",
            Rule::FailStreak => "fail_streak",
            Rule::FailWindow => "fail_window",
            Rule::SameError => "same_error",
            Rule::ConsecutiveFailures => "consecutive_failures",
            Rule::NoProgress => "no_progress",
            Rule::OutputDecline => "output_decline",
            Rule::OutputLoop => "output_loop",
        }
    }

    /// The rule of a slug.
    pub fn from_slug(slug: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.slug() == slug)
    }

    /// Whether the rule is a budget (warned once at `budgetWarnPercent`) rather than a count
    /// (warned `warnBefore` counts before its threshold, once per episode).
    pub fn is_budget(self) -> bool {
        matches!(
            self,
            Rule::ToolCallLimit
                | Rule::ToolLimit
                | Rule::TokenSpendLimit
                | Rule::DurationLimit
                | Rule::IdleTimeout
        )
    }

    pub(crate) fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.slug())
    }
}

/// A Monitor's answer to one event (contract section 11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verdict {
    /// Continue, warn or halt.
    pub action: VerdictAction,
    /// The rule's slug; `None` on continue.
    pub reason: Option<Rule>,
    /// What tripped, with the counts, for people.
    pub message: Option<String>,
    /// What to do differently, for the model (warn and halt only).
    pub nudge: Option<String>,
    /// The task the event counted for (`None` for an event no task owns).
    pub task_id: Option<String>,
    /// The task's step the verdict is about (0 before its first step).
    pub step: u64,
    /// The rule's figures (counts, limits, the repeated action).
    pub detail: Option<Value>,
}

impl Verdict {
    /// Continue, for `task_id` at `step`.
    pub fn proceed(task_id: Option<String>, step: u64) -> Self {
        Verdict {
            action: VerdictAction::Continue,
            reason: None,
            message: None,
            nudge: None,
            task_id,
            step,
            detail: None,
        }
    }

    /// True for a halt.
    pub fn is_halt(&self) -> bool {
        self.action == VerdictAction::Halt
    }

    /// True for a warning.
    pub fn is_warn(&self) -> bool {
        self.action == VerdictAction::Warn
    }

    /// The verdict as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// What a rule found: its figures, from which the verdict's texts are written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Finding {
    Budget(HaltReason),
    ToolLimit {
        tool: String,
        actual: u64,
        limit: u64,
    },
    Repeated {
        count: u32,
        threshold: u32,
        action: String,
        failed: bool,
    },
    Cycle {
        length: u32,
        repeats: u32,
        threshold: u32,
        actions: Vec<String>,
    },
    FailStreak {
        count: u32,
        threshold: u32,
        distinct: u32,
        error: String,
    },
    FailWindow {
        failed: u32,
        window: u32,
        needed: u32,
    },
    SameError {
        count: u64,
        threshold: u32,
        error: String,
    },
    ConsecutiveFailures {
        count: u64,
        threshold: u32,
        error: String,
    },
    NoProgress {
        count: u64,
        threshold: u32,
        /// With `noProgressDistinctActions`: the distinct actions of those steps.
        distinct_actions: Option<u32>,
    },
    OutputDecline {
        count: u64,
        threshold: u32,
        percent: u64,
    },
    OutputLoop {
        count: u32,
        window: u32,
        similarity: f64,
        threshold: f64,
    },
}

/// The first non-empty line of `text` as inline code, at most 120 bytes; `(no text)` when there
/// is none (a failed call whose result said nothing).
fn code(text: &str) -> String {
    let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return "(no text)".to_string();
    };
    let short = truncate(line, 120);
    let dots = if short.len() < line.len() { "…" } else { "" };
    format!("`{}{dots}`", short.replace('`', "'"))
}

fn times(n: impl Into<u64>) -> String {
    match n.into() {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

fn dollars(cents: f64) -> String {
    format!("${}", format_decimal(cents / 100.0, 2))
}

impl Finding {
    pub(crate) fn rule(&self) -> Rule {
        match self {
            Finding::Budget(h) => match h {
                HaltReason::ToolCallLimit { .. } => Rule::ToolCallLimit,
                HaltReason::TokenSpendLimit { .. } => Rule::TokenSpendLimit,
                HaltReason::DurationLimit { .. } => Rule::DurationLimit,
                HaltReason::IdleTimeout { .. } => Rule::IdleTimeout,
                HaltReason::OutputLoop { .. } => Rule::OutputLoop,
            },
            Finding::ToolLimit { .. } => Rule::ToolLimit,
            Finding::Repeated { .. } => Rule::RepeatedStep,
            Finding::Cycle { .. } => Rule::Cycle,
            Finding::FailStreak { .. } => Rule::FailStreak,
            Finding::FailWindow { .. } => Rule::FailWindow,
            Finding::SameError { .. } => Rule::SameError,
            Finding::ConsecutiveFailures { .. } => Rule::ConsecutiveFailures,
            Finding::NoProgress { .. } => Rule::NoProgress,
            Finding::OutputDecline { .. } => Rule::OutputDecline,
            Finding::OutputLoop { .. } => Rule::OutputLoop,
        }
    }

    /// The verdict for this finding.
    pub(crate) fn verdict(&self, action: VerdictAction, task_id: &str, step: u64) -> Verdict {
        let halt = action == VerdictAction::Halt;
        Verdict {
            action,
            reason: Some(self.rule()),
            message: Some(self.message(halt)),
            nudge: Some(self.nudge(halt)),
            task_id: Some(task_id.to_string()),
            step,
            detail: Some(self.detail()),
        }
    }

    fn message(&self, halt: bool) -> String {
        let stage = if halt { "" } else { " (warning)" };
        match self {
            Finding::Budget(h) if halt => h.message(),
            Finding::Budget(h) => match h {
                HaltReason::ToolCallLimit { actual, limit } => {
                    format!("tool calls: {actual} of {limit} (warning)")
                }
                HaltReason::TokenSpendLimit {
                    actual_cents,
                    limit_cents,
                } => format!(
                    "token spend: {}¢ of {limit_cents}¢ (warning)",
                    format_decimal(*actual_cents, 1)
                ),
                HaltReason::DurationLimit {
                    actual_secs,
                    limit_secs,
                } => format!(
                    "duration: {}s of {limit_secs}s (warning)",
                    format_decimal(*actual_secs, 0)
                ),
                HaltReason::IdleTimeout {
                    idle_secs,
                    limit_secs,
                } => format!(
                    "idle: {}s of {limit_secs}s (warning)",
                    format_decimal(*idle_secs, 0)
                ),
                HaltReason::OutputLoop { .. } => h.message(),
            },
            Finding::ToolLimit {
                tool,
                actual,
                limit,
            } => format!("{} calls: {actual} of {limit}{stage}", code(tool)),
            Finding::Repeated {
                count,
                threshold,
                action,
                ..
            } => format!(
                "the same step {} in a row ({count} of {threshold}): {}{stage}",
                times(*count),
                code(action)
            ),
            Finding::Cycle {
                length,
                repeats,
                threshold,
                ..
            } => format!(
                "a cycle of {length} steps repeated {} ({repeats} of {threshold}){stage}",
                times(*repeats)
            ),
            Finding::FailStreak {
                count,
                threshold,
                distinct,
                error,
            } => format!(
                "{count} failed steps in a row ({count} of {threshold}) with {distinct} distinct \
                 error{}: {}{stage}",
                if *distinct == 1 { "" } else { "s" },
                code(error)
            ),
            Finding::FailWindow {
                failed,
                window,
                needed,
            } => format!(
                "{failed} of the last {window} steps failed without progress ({needed} stop \
                 it){stage}"
            ),
            Finding::SameError {
                count,
                threshold,
                error,
            } => format!(
                "the same error {} since the last progress ({count} of {threshold}): {}{stage}",
                times(*count),
                code(error)
            ),
            Finding::ConsecutiveFailures {
                count,
                threshold,
                error,
            } => format!(
                "{count} failed steps in a row ({count} of {threshold}), the last: {}{stage}",
                code(error)
            ),
            Finding::NoProgress {
                count,
                threshold,
                distinct_actions: None,
            } => format!("no progress in {count} steps in a row ({count} of {threshold}){stage}"),
            Finding::NoProgress {
                count,
                threshold,
                distinct_actions: Some(d),
            } => format!(
                "no progress in {count} steps in a row ({count} of {threshold}), doing {d} \
                 different thing{} over and over{stage}",
                if *d == 1 { "" } else { "s" }
            ),
            Finding::OutputDecline {
                count,
                threshold,
                percent,
            } => format!(
                "no progress in {count} steps ({count} of {threshold}) and the output declined to \
                 {percent}% of the baseline{stage}"
            ),
            Finding::OutputLoop {
                count,
                window,
                similarity,
                ..
            } => format!(
                "{count} near-identical answers in a row ({count} of {window}, jaccard {}){stage}",
                format_decimal(*similarity, 2)
            ),
        }
    }

    fn nudge(&self, halt: bool) -> String {
        match self {
            Finding::Budget(h) => match h {
                HaltReason::ToolCallLimit { actual, limit } if halt => format!(
                    "You have used all {limit} tool calls allowed for this task ({actual} made). \
                     Stop and report what you have done and what is left."
                ),
                HaltReason::ToolCallLimit { actual, limit } => format!(
                    "You have made {actual} of the {limit} tool calls allowed for this task. Plan \
                     the remaining calls carefully and wrap up soon."
                ),
                HaltReason::TokenSpendLimit {
                    actual_cents,
                    limit_cents,
                } if halt => format!(
                    "This task has spent {} of its {} budget. Stop and report what you have done \
                     and what is left.",
                    dollars(*actual_cents),
                    dollars(*limit_cents as f64)
                ),
                HaltReason::TokenSpendLimit {
                    actual_cents,
                    limit_cents,
                } => format!(
                    "This task has spent {} of its {} budget. Focus on what matters most and \
                     wrap up soon.",
                    dollars(*actual_cents),
                    dollars(*limit_cents as f64)
                ),
                HaltReason::DurationLimit { limit_secs, .. } if halt => format!(
                    "This task has run past its time limit of {}. Stop and report what you have \
                     done and what is left.",
                    minutes(*limit_secs)
                ),
                HaltReason::DurationLimit {
                    actual_secs,
                    limit_secs,
                } => format!(
                    "This task has run {} of its {} time limit. Wrap up soon.",
                    minutes(*actual_secs as u64),
                    minutes(*limit_secs)
                ),
                HaltReason::IdleTimeout { limit_secs, .. } => format!(
                    "Nothing has happened in this task for a long time (the limit is {}). If you \
                     are waiting on something, check it or give up on it.",
                    minutes(*limit_secs)
                ),
                HaltReason::OutputLoop { window_size, .. } => format!(
                    "Your last {window_size} answers were nearly identical. Saying it again will \
                     not help: do something different, or finish and report."
                ),
            },
            Finding::ToolLimit {
                tool,
                actual,
                limit,
            } if halt => format!(
                "You have used all {limit} calls of {} allowed for this task ({actual} made). \
                 Continue without it or finish and report.",
                code(tool)
            ),
            Finding::ToolLimit {
                tool,
                actual,
                limit,
            } => format!(
                "You have used {} {actual} of the {limit} times allowed for this task. Use the \
                 remaining calls only where they are needed.",
                code(tool)
            ),
            Finding::Repeated {
                count,
                action,
                failed,
                ..
            } => format!(
                "You have run {} {} with the same {}. Repeating it will not change the outcome: \
                 try a different approach.",
                code(action),
                times(*count),
                if *failed { "failure" } else { "result" }
            ),
            Finding::Cycle {
                length,
                repeats,
                actions,
                ..
            } => {
                let shown: Vec<String> = actions.iter().take(3).map(|a| code(a)).collect();
                let more = if actions.len() > 3 { ", …" } else { "" };
                format!(
                    "You are going in circles: the same {length} steps ({}{more}) have repeated \
                     {}. Step back, work out why they do not get you further, and try something \
                     else.",
                    shown.join(", "),
                    times(*repeats)
                )
            }
            Finding::FailStreak {
                count,
                distinct,
                error,
                ..
            } if *distinct <= 1 => format!(
                "Your last {count} steps all failed, with the same error: {}. Stop retrying it: \
                 find its cause or try a different approach.",
                code(error)
            ),
            Finding::FailStreak {
                count,
                distinct,
                error,
                ..
            } => format!(
                "Your last {count} steps all failed, with only {distinct} different errors (the \
                 last: {}). Stop retrying: find their cause or try a different approach.",
                code(error)
            ),
            Finding::FailWindow { failed, window, .. } => format!(
                "{failed} of your last {window} steps failed and nothing has improved. Stop and \
                 rethink the approach before trying again."
            ),
            Finding::SameError { count, error, .. } => format!(
                "The error {} has come back {} since anything last improved. Stop retrying: \
                 find its cause or try a different approach.",
                code(error),
                times(*count)
            ),
            Finding::ConsecutiveFailures { count, error, .. } => format!(
                "Your last {count} steps failed in a row (the last with {}). Stop and find out \
                 why before trying again.",
                code(error)
            ),
            Finding::NoProgress {
                count,
                distinct_actions: Some(d),
                ..
            } => format!(
                "Your last {count} steps repeated the same {d} action{} without changing a file \
                 or passing a new test. Repeating them will not help: decide what concrete \
                 change would move the task forward, or finish and report.",
                if *d == 1 { "" } else { "s" }
            ),
            Finding::NoProgress { count, .. } => format!(
                "Your last {count} steps changed no file and passed no new test. Decide what \
                 concrete change would move the task forward, or finish and report."
            ),
            Finding::OutputDecline { count, percent, .. } => format!(
                "Your last {count} steps made no progress and your answers have shrunk to \
                 {percent}% of their usual length. Say what is blocking you, or finish and report."
            ),
            Finding::OutputLoop { count, .. } => format!(
                "Your last {count} answers were nearly identical. Saying it again will not help: \
                 do something different, or finish and report."
            ),
        }
    }

    fn detail(&self) -> Value {
        match self {
            Finding::Budget(h) => {
                let mut v = crate::budget::Halt {
                    task_id: String::new(),
                    reason: h.clone(),
                }
                .to_json();
                if let Value::Object(m) = &mut v {
                    m.remove("kind");
                    m.remove("slug");
                    m.remove("message");
                    m.remove("taskId");
                }
                v
            }
            Finding::ToolLimit {
                tool,
                actual,
                limit,
            } => json!({"tool": tool, "actual": actual, "limit": limit}),
            Finding::Repeated {
                count,
                threshold,
                action,
                failed,
            } => json!({"count": count, "threshold": threshold, "action": action,
                        "failed": failed}),
            Finding::Cycle {
                length,
                repeats,
                threshold,
                actions,
            } => json!({"count": repeats, "threshold": threshold, "length": length,
                        "actions": actions}),
            Finding::FailStreak {
                count,
                threshold,
                distinct,
                error,
            } => json!({"count": count, "threshold": threshold, "distinctErrors": distinct,
                        "error": error}),
            Finding::FailWindow {
                failed,
                window,
                needed,
            } => json!({"count": failed, "threshold": needed, "window": window}),
            Finding::SameError {
                count,
                threshold,
                error,
            } => json!({"count": count, "threshold": threshold, "error": error}),
            Finding::ConsecutiveFailures {
                count,
                threshold,
                error,
            } => json!({"count": count, "threshold": threshold, "error": error}),
            Finding::NoProgress {
                count,
                threshold,
                distinct_actions,
            } => json!({"count": count, "threshold": threshold,
                        "distinctActions": distinct_actions}),
            Finding::OutputDecline {
                count,
                threshold,
                percent,
            } => json!({"count": count, "threshold": threshold, "percentOfBaseline": percent}),
            Finding::OutputLoop {
                count,
                window,
                similarity,
                threshold,
            } => json!({"count": count, "threshold": window, "similarityJaccard": similarity,
                        "jaccardThreshold": threshold}),
        }
    }
}

fn minutes(secs: u64) -> String {
    if secs < 120 {
        format!("{secs} seconds")
    } else if secs < 7200 {
        format!("{} minutes", secs / 60)
    } else {
        format!("{} hours", format_decimal(secs as f64 / 3600.0, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_round_trip_and_are_the_contract_names() {
        let slugs: Vec<&str> = Rule::ALL.iter().map(|r| r.slug()).collect();
        assert_eq!(
            slugs,
            [
                "tool_call_limit",
                "tool_limit",
                "token_spend_limit",
                "duration_limit",
                "idle_timeout",
                "repeated_step",
                "cycle",
                "fail_streak",
                "fail_window",
                "same_error",
                "consecutive_failures",
                "no_progress",
                "output_decline",
                "output_loop"
            ]
        );
        for r in Rule::ALL {
            assert_eq!(Rule::from_slug(r.slug()), Some(r));
            assert_eq!(serde_json::to_value(r).unwrap(), r.slug());
        }
        assert_eq!(Rule::from_slug("nope"), None);
    }

    #[test]
    fn a_repeated_failing_command_gets_a_nudge_that_names_it() {
        let f = Finding::Repeated {
            count: 3,
            threshold: 5,
            action: "pytest -q".into(),
            failed: true,
        };
        let v = f.verdict(VerdictAction::Warn, "session", 7);
        assert_eq!(
            v.nudge.as_deref(),
            Some(
                "You have run `pytest -q` 3 times with the same failure. Repeating it will not \
                 change the outcome: try a different approach."
            )
        );
        assert_eq!(
            v.message.as_deref(),
            Some("the same step 3 times in a row (3 of 5): `pytest -q` (warning)")
        );
        let json = v.to_json();
        assert_eq!(json["action"], "warn");
        assert_eq!(json["reason"], "repeated_step");
        assert_eq!(json["taskId"], "session");
        assert_eq!(json["detail"]["count"], 3);
    }
}

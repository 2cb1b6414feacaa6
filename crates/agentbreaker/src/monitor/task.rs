//! One task as a Monitor watches it: its budgets, the step it is in, the step detectors and the
//! seeds' rules, and where the warning ladder stands for each rule.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::hash::Hasher;

use rustc_hash::FxHasher;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::budget::{HaltReason, Usage, jaccard, token_set};
use crate::fingerprint::{NormalizedHasher, fingerprint, key_line, normalized_hash};
use crate::steps::{StepCounts, StepHistory, hex_u64, hex_u64_vec};
use crate::text::{cap_error, truncate};

use super::config::MonitorConfig;
use super::verdict::{Finding, Rule, Verdict, VerdictAction};

/// The most calls one step holds (further calls replace the oldest unanswered one).
pub const MAX_STEP_CALLS: usize = 64;
/// The most tools a task counts one by one (beyond them, calls are counted in the total only;
/// the tools named in `toolLimits` are always counted).
pub const MAX_TRACKED_TOOLS: usize = 64;
/// The most content digests a task remembers (the oldest are forgotten first).
pub const MAX_DIGESTS: usize = 256;
/// The most distinct errors a task counts for the same-error rule (the oldest are forgotten).
pub const MAX_TASK_ERRORS: usize = 64;
/// The bytes of a step's text kept for the output-loop rule and for messages.
const MAX_TEXT_BYTES: usize = 8192;
/// The bytes of an action description or error line kept for messages.
const MAX_LINE_BYTES: usize = 160;
/// The bytes of a tool name or call id kept (the longest name `toolLimits` may give).
pub(crate) const MAX_ID_BYTES: usize = 256;
/// Results longer than this are compared by their first and last half of it.
const MAX_RESULT_BYTES: usize = 8192;

/// One tool call of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Call {
    id: Option<String>,
    name: String,
    /// The normalized hash of the call's name and input.
    #[serde(with = "hex_u64")]
    action: u64,
    /// The exact hash of the call's name and input (what counts as a different action).
    #[serde(with = "hex_u64")]
    exact: u64,
    /// What the call did, for people (`pytest -q`).
    describe: String,
    result: Option<CallResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CallResult {
    ok: bool,
    #[serde(with = "hex_u64")]
    hash: u64,
    /// For a failure: the hash of its fingerprint under the config's `errorMatch`.
    #[serde(with = "hex_u64")]
    error: u64,
    /// For a failure: its key line, for messages.
    error_line: String,
}

/// The step a task is in.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub(crate) struct OpenStep {
    number: u64,
    text: String,
    text_chars: u64,
    calls: Vec<Call>,
    /// Agent-level errors in the step.
    errors: Vec<ErrorLine>,
    progress: bool,
    /// The content digest of the step's edit, if a progress event gave one: the step's result
    /// as the detectors compare it (an edit's result is the content it produced, whatever the
    /// tool printed).
    #[serde(with = "hex_u64_opt")]
    digest: Option<u64>,
}

/// An optional 64-bit hash as 16 hex digits or null.
mod hex_u64_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(h) => s.serialize_str(&format!("{h:016x}")),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Option::<std::borrow::Cow<'de, str>>::deserialize(d)? {
            None => Ok(None),
            Some(t) if t.len() == 16 => u64::from_str_radix(&t, 16)
                .map(Some)
                .map_err(serde::de::Error::custom),
            Some(_) => Err(serde::de::Error::custom("a hash is 16 hex digits")),
        }
    }
}

/// An error by its fingerprint's hash, with its key line for messages and a count.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ErrorLine {
    #[serde(with = "hex_u64")]
    key: u64,
    count: u64,
    line: String,
}

/// Counts and flags for the warning ladder.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub(crate) struct Ladder {
    /// Rules (bits of [`Rule::bit`]) warned in their current episode.
    warned: u32,
    /// Tools whose limit was warned.
    warned_tools: Vec<String>,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) started_at: u64,
    pub(crate) last_event_at: u64,
    pub(crate) tool_calls: u64,
    pub(crate) per_tool: BTreeMap<String, u64>,
    pub(crate) spend_cents: f64,
    /// Completed steps.
    pub(crate) steps: u64,
    current: Option<OpenStep>,
    history: StepHistory,
    /// Error counts since the last progress, oldest first.
    errors: VecDeque<ErrorLine>,
    no_progress: u64,
    /// The exact actions of the steps since the last progress, newest last (at most
    /// `noProgressThreshold`, and only when `noProgressDistinctActions` is set).
    #[serde(with = "hex_u64_vec")]
    stale: Vec<u64>,
    declined: u64,
    baseline: Vec<u64>,
    best_tests: u64,
    consecutive_failures: u64,
    #[serde(with = "hex_u64")]
    identical_error: u64,
    identical_count: u64,
    last_error: String,
    #[serde(with = "hex_u64_vec")]
    digests: Vec<u64>,
    /// The token set of the last answer of a step without calls (empty: none).
    #[serde(with = "hex_u64_vec")]
    last_output: Vec<u64>,
    has_last_output: bool,
    similarities: VecDeque<f64>,
    /// Descriptions of the last steps, newest last (for cycle nudges).
    recent: VecDeque<String>,
    ladder: Ladder,
    pub(crate) halt: Option<Verdict>,
    /// Results that matched no call.
    pub(crate) unpaired_results: u64,
    /// With a store: where the task stands with the shared counters (never in a snapshot: a
    /// restored task reads the shared totals again with its next event).
    #[serde(skip)]
    pub(crate) sync: TaskSync,
}

/// A task's side of a store-backed Monitor (docs/distributed.md, "A Monitor's budgets").
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TaskSync {
    /// The shared totals were read since the task was opened (or restored) here.
    pub(crate) synced: bool,
    /// Tool calls counted here while the store was unreachable, added to the shared totals by
    /// the task's first event after it answers again.
    pub(crate) calls: u64,
    /// Spend counted here while the store was unreachable, likewise.
    pub(crate) spend_cents: f64,
    /// Calls per tool counted here while the store was unreachable: (name, calls, limited).
    pub(crate) tools: Vec<(String, u64, bool)>,
}

#[cfg(feature = "redis")]
impl TaskSync {
    /// Counts were made here that the store has not seen.
    pub(crate) fn pending(&self) -> bool {
        self.calls > 0 || self.spend_cents != 0.0 || !self.tools.is_empty()
    }

    /// Keeps an event's counts for the store (it is unreachable).
    pub(crate) fn keep(&mut self, tool: Option<(&str, bool)>, spend_cents: f64) {
        if let Some((name, limited)) = tool {
            self.calls = self.calls.saturating_add(1);
            let room = self.tools.len() < MAX_TRACKED_TOOLS + super::config::MAX_TOOL_LIMITS;
            match self.tools.iter_mut().find(|t| t.0 == name) {
                Some(t) => t.1 = t.1.saturating_add(1),
                None if room => self.tools.push((name.to_string(), 1, limited)),
                None => {}
            }
        }
        self.spend_cents += spend_cents;
    }
}

/// A task's budget counters as the store returned them, after the event's increments.
#[cfg(feature = "redis")]
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Totals {
    /// When the first process opened the task (its clock's ms).
    pub(crate) started_at: u64,
    pub(crate) tool_calls: u64,
    pub(crate) spend_cents: f64,
    /// The tools sent, with their totals (0: the store does not itemize it).
    pub(crate) tools: Vec<(String, u64)>,
}

/// What a step looked like when it completed.
struct Completed {
    number: u64,
    describe: String,
}

/// What an event did to a task: the verdicts its rules gave (halts first).
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) halt: Option<Verdict>,
    pub(crate) warnings: Vec<Verdict>,
}

impl Outcome {
    /// Adds a verdict: the halt kept is the first in the rules' order, warnings are kept in it.
    fn add(&mut self, v: Verdict) {
        let order = |v: &Verdict| v.reason.map_or(usize::MAX, |r| r as usize);
        if v.is_halt() {
            if self.halt.as_ref().is_none_or(|h| order(&v) < order(h)) {
                self.halt = Some(v);
            }
        } else {
            let at = self.warnings.partition_point(|w| order(w) <= order(&v));
            self.warnings.insert(at, v);
        }
    }
}

fn fx(parts: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    for p in parts {
        h.write_u64(*p);
    }
    h.finish()
}

/// What a call did, in a few words: its command, path, query or URL when its input has one,
/// else its input as compact JSON.
pub(crate) fn describe_call(name: &str, input: &Value) -> String {
    const KEYS: [&str; 9] = [
        "command",
        "cmd",
        "file_path",
        "path",
        "pattern",
        "query",
        "url",
        "filePath",
        "prompt",
    ];
    let text: Cow<'_, str> = match input {
        Value::Object(m) => match KEYS.iter().find_map(|k| m.get(*k).and_then(Value::as_str)) {
            Some(s) => Cow::Borrowed(s),
            None if m.is_empty() => Cow::Borrowed(""),
            None => Cow::Owned(truncate(&input.to_string(), 400).to_string()),
        },
        Value::Null => Cow::Borrowed(""),
        Value::String(s) => Cow::Borrowed(s.as_str()),
        other => Cow::Owned(truncate(&other.to_string(), 400).to_string()),
    };
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = if line.is_empty() {
        name.to_string()
    } else if matches!(
        name,
        "Bash" | "bash" | "shell" | "run_shell_command" | "exec_command"
    ) {
        line.to_string()
    } else {
        format!("{name} {line}")
    };
    truncate(&line, MAX_LINE_BYTES).to_string()
}

/// The normalized hash of a JSON value: strings and numbers by their text, keys in order. A
/// number is normalized as a number standing alone in text is (contract §11.4): a count of 1 to
/// 8 digits is kept (`{"page": 2}` and `{"page": 3}` are different calls), a long id, a fraction
/// or a negative number is not.
fn hash_value(h: &mut NormalizedHasher, v: &Value, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Null => h.write_str("null"),
        Value::Bool(b) => h.write_str(if *b { "true" } else { "false" }),
        // Between brackets: after the key's `:` it would be joined to it, and not a count.
        Value::Number(n) => {
            let _ = write!(h, "({n})");
        }
        Value::String(s) => {
            h.write_str("\"");
            h.write_str(capped_text(s).0);
            h.write_str(capped_text(s).1);
            h.write_str("\"");
        }
        Value::Array(a) => {
            h.write_str("[");
            for x in a.iter().take(1024) {
                hash_value(h, x, depth + 1);
                h.write_str(",");
            }
            h.write_str("]");
        }
        Value::Object(m) => {
            h.write_str("{");
            for (k, x) in m.iter().take(1024) {
                h.write_str(truncate(k, MAX_ID_BYTES));
                h.write_str(":");
                hash_value(h, x, depth + 1);
                h.write_str(",");
            }
            h.write_str("}");
        }
    }
}

/// The exact hash of a JSON value (keys in order, numbers by their text).
fn exact_value(h: &mut FxHasher, v: &Value, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
        Value::Number(n) => {
            h.write_u8(3);
            h.write(n.to_string().as_bytes());
        }
        Value::String(s) => {
            h.write_u8(4);
            let (head, tail) = capped_text(s);
            h.write(head.as_bytes());
            h.write(tail.as_bytes());
            h.write_usize(s.len());
        }
        Value::Array(a) => {
            h.write_u8(5);
            for x in a.iter().take(1024) {
                exact_value(h, x, depth + 1);
            }
            h.write_u8(6);
        }
        Value::Object(m) => {
            h.write_u8(7);
            for (k, x) in m.iter().take(1024) {
                h.write(truncate(k, MAX_ID_BYTES).as_bytes());
                h.write_u8(0);
                exact_value(h, x, depth + 1);
            }
            h.write_u8(8);
        }
    }
}

/// A long text as its first and last halves of [`MAX_RESULT_BYTES`] (what differs between two
/// outputs of the same command is usually at one end).
fn capped_text(text: &str) -> (&str, &str) {
    if text.len() <= MAX_RESULT_BYTES {
        return (text, "");
    }
    let half = MAX_RESULT_BYTES / 2;
    let head = truncate(text, half);
    let mut start = text.len() - half;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    (head, &text[start..])
}

fn text_hash(text: &str) -> u64 {
    let (head, tail) = capped_text(text);
    let mut h = NormalizedHasher::new();
    h.write_str(head);
    h.write_str(tail);
    h.finish()
}

impl Task {
    pub(crate) fn new(id: &str, now: u64) -> Self {
        Task {
            id: id.to_string(),
            started_at: now,
            last_event_at: now,
            tool_calls: 0,
            per_tool: BTreeMap::new(),
            spend_cents: 0.0,
            steps: 0,
            current: None,
            history: StepHistory::default(),
            errors: VecDeque::new(),
            no_progress: 0,
            stale: Vec::new(),
            declined: 0,
            baseline: Vec::new(),
            best_tests: 0,
            consecutive_failures: 0,
            identical_error: 0,
            identical_count: 0,
            last_error: String::new(),
            digests: Vec::new(),
            last_output: Vec::new(),
            has_last_output: false,
            similarities: VecDeque::new(),
            recent: VecDeque::new(),
            ladder: Ladder::default(),
            halt: None,
            unpaired_results: 0,
            sync: TaskSync::default(),
        }
    }

    #[cfg(feature = "redis")]
    /// Takes the store's totals: the counts are the fleet's, the start the earlier of the
    /// fleet's and this process's (a task's time never grows back).
    pub(crate) fn adopt(&mut self, totals: &Totals, c: &MonitorConfig) {
        self.started_at = self.started_at.min(totals.started_at);
        self.tool_calls = totals.tool_calls;
        self.spend_cents = totals.spend_cents;
        for (name, count) in &totals.tools {
            if *count > 0
                && (self.per_tool.contains_key(name)
                    || self.per_tool.len() < MAX_TRACKED_TOOLS
                    || c.tool_limits.contains_key(name))
            {
                self.per_tool.insert(name.clone(), *count);
            }
        }
    }

    /// The step an event belongs to now (the open one, else the last completed).
    pub(crate) fn step_number(&self) -> u64 {
        self.current.as_ref().map_or(self.steps, |s| s.number)
    }

    fn open_step(&mut self) -> &mut OpenStep {
        let number = self.steps + 1;
        self.current.get_or_insert_with(|| OpenStep {
            number,
            ..OpenStep::default()
        })
    }

    /// A model call ended: the open step (if any) completes, and a new one begins.
    pub(crate) fn assistant(&mut self, text: &str, c: &MonitorConfig, now: u64, out: &mut Outcome) {
        self.complete(c, now, out);
        let number = self.steps + 1;
        let kept = truncate(text, MAX_TEXT_BYTES);
        self.current = Some(OpenStep {
            number,
            text: kept.to_string(),
            text_chars: text.chars().count() as u64,
            ..OpenStep::default()
        });
        self.check_duration(c, now, out);
    }

    /// A tool call: counted against the budgets, then added to the open step (a complete step
    /// was closed when its last result came, so a call after it begins a new one). `counted`:
    /// the store's totals, adopted just before, already hold this call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tool_use(
        &mut self,
        name: &str,
        input: &Value,
        id: Option<&str>,
        counted: bool,
        c: &MonitorConfig,
        now: u64,
        out: &mut Outcome,
    ) {
        let name = truncate(name, MAX_ID_BYTES);
        let limit = c.tool_limits.get(name).copied();
        let tool_count = if counted {
            self.per_tool.get(name).copied().unwrap_or(0)
        } else {
            self.tool_calls = self.tool_calls.saturating_add(1);
            if self.per_tool.contains_key(name)
                || self.per_tool.len() < MAX_TRACKED_TOOLS
                || limit.is_some()
            {
                let n = self.per_tool.entry(name.to_string()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            } else {
                0
            }
        };
        let mut action = NormalizedHasher::for_names();
        action.write_str(name);
        action.write_str(":");
        hash_value(&mut action, input, 0);
        let mut exact = FxHasher::default();
        exact.write(name.as_bytes());
        exact.write_u8(0);
        exact_value(&mut exact, input, 0);
        let call = Call {
            id: id.map(|i| truncate(i, MAX_ID_BYTES).to_string()),
            name: name.to_string(),
            action: action.finish(),
            exact: exact.finish(),
            describe: describe_call(name, input),
            result: None,
        };
        let step = self.open_step();
        if step.calls.len() >= MAX_STEP_CALLS {
            let oldest = step
                .calls
                .iter()
                .position(|c| c.result.is_none())
                .unwrap_or(0);
            step.calls.remove(oldest);
        }
        step.calls.push(call);

        let (actual, limit_all) = (self.tool_calls, c.budget.max_tool_calls_per_task);
        self.budget_rule(
            c,
            actual as f64,
            limit_all as f64,
            Rule::ToolCallLimit,
            || {
                Finding::Budget(HaltReason::ToolCallLimit {
                    actual,
                    limit: limit_all,
                })
            },
            out,
        );
        if let Some(limit) = limit {
            let finding = Finding::ToolLimit {
                tool: name.to_string(),
                actual: tool_count,
                limit,
            };
            if tool_count > limit {
                out.add(finding.verdict(VerdictAction::Halt, &self.id, self.step_number()));
            } else if c.budget_warn_percent > 0
                // In u128: a limit near u64::MAX must not overflow (it panicked in debug builds).
                && u128::from(tool_count) * 100
                    >= u128::from(c.budget_warn_percent) * u128::from(limit)
                && !self.ladder.warned_tools.iter().any(|t| t == name)
            {
                self.ladder.warned_tools.push(name.to_string());
                out.add(finding.verdict(VerdictAction::Warn, &self.id, self.step_number()));
            }
        }
        self.check_duration(c, now, out);
    }

    /// A tool call's outcome, paired by id, else with the oldest unanswered call of that name,
    /// else with the oldest unanswered call; the step completes when every call has one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tool_result(
        &mut self,
        ok: bool,
        text: &str,
        id: Option<&str>,
        name: Option<&str>,
        c: &MonitorConfig,
        now: u64,
        out: &mut Outcome,
    ) {
        let Some(step) = self.current.as_mut() else {
            self.unpaired_results = self.unpaired_results.saturating_add(1);
            self.check_duration(c, now, out);
            return;
        };
        let index = {
            let calls = &step.calls;
            let by_id = id.and_then(|id| {
                let id = truncate(id, MAX_ID_BYTES);
                calls
                    .iter()
                    .position(|call| call.result.is_none() && call.id.as_deref() == Some(id))
            });
            by_id
                .or_else(|| {
                    name.and_then(|n| {
                        let n = truncate(n, MAX_ID_BYTES);
                        calls
                            .iter()
                            .position(|call| call.result.is_none() && call.name == n)
                    })
                })
                .or_else(|| calls.iter().position(|call| call.result.is_none()))
        };
        let Some(index) = index else {
            self.unpaired_results = self.unpaired_results.saturating_add(1);
            self.check_duration(c, now, out);
            return;
        };
        let (error, error_line) = if ok {
            (0, String::new())
        } else {
            let capped = cap_error(text);
            (
                normalized_hash(&fingerprint(capped, c.stagnation.error_match)),
                truncate(key_line(capped), MAX_LINE_BYTES).to_string(),
            )
        };
        step.calls[index].result = Some(CallResult {
            ok,
            hash: text_hash(text),
            error,
            error_line,
        });
        if step.calls.iter().all(|call| call.result.is_some()) {
            self.complete(c, now, out);
        }
        self.check_duration(c, now, out);
    }

    /// The spend as budgets compare it ([`crate::budget::nano_cents`], contract §11.6).
    pub(crate) fn spent(&self) -> f64 {
        crate::budget::nano_cents(self.spend_cents)
    }

    /// Spend (`cost`: the event's cost, else its tokens at the model's price; see
    /// [`usage_cost`]). `counted`: the store's totals, adopted just before, already hold it.
    pub(crate) fn usage(
        &mut self,
        cost: f64,
        counted: bool,
        c: &MonitorConfig,
        now: u64,
        out: &mut Outcome,
    ) {
        if !counted {
            self.spend_cents += cost;
        }
        let limit = c.budget.max_token_spend_cents_per_task;
        let spend = self.spent();
        self.budget_rule(
            c,
            spend,
            limit as f64,
            Rule::TokenSpendLimit,
            || {
                Finding::Budget(HaltReason::TokenSpendLimit {
                    actual_cents: spend,
                    limit_cents: limit,
                })
            },
            out,
        );
        self.check_duration(c, now, out);
    }

    /// An agent-level error: part of the open step (or of a new one).
    pub(crate) fn error(
        &mut self,
        text: &str,
        transient: bool,
        c: &MonitorConfig,
        now: u64,
        out: &mut Outcome,
    ) {
        if !transient {
            let capped = cap_error(text);
            let fp = normalized_hash(&fingerprint(capped, c.stagnation.error_match));
            let line = truncate(key_line(capped), MAX_LINE_BYTES).to_string();
            let step = self.open_step();
            if step.errors.len() < MAX_STEP_CALLS {
                step.errors.push(ErrorLine {
                    key: fp,
                    count: 1,
                    line,
                });
            }
        }
        self.check_duration(c, now, out);
    }

    /// Work was done. With a digest already seen, it was not: re-applying an edit is a loop.
    pub(crate) fn progress(
        &mut self,
        files: u64,
        tests_passing: Option<u64>,
        digest: Option<&str>,
        c: &MonitorConfig,
        now: u64,
        out: &mut Outcome,
    ) {
        let digest_key = digest.map(exact_hash);
        if let (Some(key), Some(step)) = (digest_key, self.current.as_mut()) {
            step.digest = Some(key);
        }
        let new_digest = digest_key.map(|key| {
            if self.digests.contains(&key) {
                false
            } else {
                if self.digests.len() >= MAX_DIGESTS {
                    self.digests.remove(0);
                }
                self.digests.push(key);
                true
            }
        });
        let tests_up = tests_passing.is_some_and(|t| t > self.best_tests);
        if let Some(t) = tests_passing {
            self.best_tests = self.best_tests.max(t);
        }
        let made = match new_digest {
            // The same content again is not progress, whatever else the event says.
            Some(is_new) => is_new,
            None => files > 0 || tests_up,
        };
        if made {
            match self.current.as_mut() {
                Some(step) => step.progress = true,
                // Between steps: the counters start again now.
                None => self.reset_progress_counters(),
            }
        }
        self.check_duration(c, now, out);
    }

    fn reset_progress_counters(&mut self) {
        self.no_progress = 0;
        self.stale.clear();
        self.declined = 0;
        self.errors.clear();
        self.history.progress();
        self.ladder.warned &= !(Rule::NoProgress.bit()
            | Rule::OutputDecline.bit()
            | Rule::SameError.bit()
            | Rule::FailWindow.bit());
    }

    /// Completes the open step (if any): the step detectors and the seeds' rules judge it.
    pub(crate) fn complete(&mut self, c: &MonitorConfig, _now: u64, out: &mut Outcome) {
        let Some(step) = self.current.take() else {
            return;
        };
        self.steps = step.number;
        let s = &c.stagnation;

        // The step as the detectors see it.
        let mut action = Vec::with_capacity(step.calls.len() + 1);
        let mut result = Vec::with_capacity(step.calls.len() + step.errors.len());
        let mut answered = 0;
        let mut any_ok = false;
        let mut first_error: Option<(u64, String)> = None;
        let mut error_keys: Vec<(u64, String)> = Vec::new();
        for call in &step.calls {
            action.push(call.action);
            match &call.result {
                Some(r) => {
                    answered += 1;
                    any_ok |= r.ok;
                    result.push(r.hash);
                    if !r.ok {
                        error_keys.push((r.error, r.error_line.clone()));
                    }
                }
                None => result.push(0),
            }
        }
        if step.calls.is_empty() {
            let mut h = NormalizedHasher::new();
            h.write_str("say:");
            h.write_str(&step.text);
            action.push(h.finish());
        }
        if let Some(d) = step.digest {
            // An edit's result is the content it produced: the same edit again is the same
            // step, however the tool's output changed (a line count, a timestamp).
            result.clear();
            result.push(d);
        }
        for e in &step.errors {
            result.push(e.key);
            error_keys.push((e.key, e.line.clone()));
        }
        if let Some(first) = error_keys.first() {
            first_error = Some(first.clone());
        }
        let failed = (answered > 0 && !any_ok) || !step.errors.is_empty();
        let signature = fx(&[fx(&action), fx(&result)]);
        let exact_action = if step.calls.is_empty() {
            let mut h = FxHasher::default();
            h.write(b"say:");
            h.write(step.text.as_bytes());
            h.finish()
        } else {
            fx(&step.calls.iter().map(|c| c.exact).collect::<Vec<_>>())
        };
        let describe = match step.calls.as_slice() {
            [] => {
                let line = step.text.lines().map(str::trim).find(|l| !l.is_empty());
                truncate(line.unwrap_or("(no text)"), MAX_LINE_BYTES).to_string()
            }
            [one] => one.describe.clone(),
            [first, rest @ ..] => truncate(
                &format!(
                    "{} and {} more call{}",
                    first.describe,
                    rest.len(),
                    plural(rest.len())
                ),
                MAX_LINE_BYTES,
            )
            .to_string(),
        };
        let done = Completed {
            number: step.number,
            describe,
        };

        // Progress and output (the seeds' stagnation rules).
        if step.progress {
            self.reset_progress_counters();
        } else {
            self.no_progress = self.no_progress.saturating_add(1);
            if s.no_progress_distinct_actions > 0 {
                if self.stale.len() >= s.no_progress_threshold as usize {
                    self.stale.remove(0);
                }
                self.stale.push(exact_action);
            }
        }
        let samples = self.baseline.len() as u128;
        let sum: u128 = self.baseline.iter().map(|&v| u128::from(v)).sum();
        let output = u128::from(step.text_chars);
        let declined = sum > 0
            && output * 100 * samples < u128::from(s.output_decline_threshold) * sum
            && !step.progress;
        let percent = (output * 100 * samples)
            .checked_div(sum)
            .map_or(100, |p| p as u64);
        if self.baseline.len() < 3 {
            self.baseline.push(step.text_chars);
        }
        self.declined = if declined { self.declined + 1 } else { 0 };
        for (fp, line) in &error_keys {
            self.count_error(*fp, line);
        }

        // The step detectors.
        let rules = s.step_rules();
        let counts = if rules.any() {
            self.history.push(
                &rules,
                signature,
                failed,
                first_error.as_ref().map_or(0, |e| e.0),
            )
        } else {
            StepCounts {
                since_progress: 0,
                ..StepCounts::default()
            }
        };

        // Consecutive failures (the FailureBreaker's rule).
        if failed {
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            let e = first_error.as_ref().map_or(0, |e| e.0);
            if e == self.identical_error && self.identical_count > 0 {
                self.identical_count += 1;
            } else {
                self.identical_error = e;
                self.identical_count = 1;
            }
            if let Some((_, line)) = &first_error {
                self.last_error = line.clone();
            }
        } else if any_ok {
            self.consecutive_failures = 0;
            self.identical_count = 0;
        }

        // The output loop: a task that only talks (a step with calls is judged by its calls).
        let output_count = if step.calls.is_empty() {
            let set: Vec<u64> = token_set(&step.text, c.budget.max_tokens_per_output as usize);
            if self.has_last_output {
                if self.similarities.len() + 1 >= c.budget.loop_window as usize {
                    self.similarities.pop_front();
                }
                self.similarities
                    .push_back(jaccard(&self.last_output, &set));
            }
            self.last_output = set;
            self.has_last_output = true;
            let t = c.budget.similarity_jaccard_threshold;
            let run = self
                .similarities
                .iter()
                .rev()
                .take_while(|&&j| j >= t)
                .count();
            if run > 0 { run as u32 + 1 } else { 0 }
        } else {
            self.last_output.clear();
            self.has_last_output = false;
            self.similarities.clear();
            0
        };

        if self.recent.len() >= s.max_cycle_length as usize {
            self.recent.pop_front();
        }
        self.recent.push_back(done.describe.clone());

        self.judge(c, &counts, output_count, percent, failed, &done, out);
    }

    /// Steps in a row without progress; with `distinct` > 0, only the newest of them that used
    /// at most `distinct` different actions.
    fn no_progress_count(&self, distinct: u32) -> u64 {
        if distinct == 0 {
            return self.no_progress;
        }
        let mut seen: Vec<u64> = Vec::with_capacity(distinct as usize + 1);
        let mut count = 0;
        for a in self.stale.iter().rev() {
            if !seen.contains(a) {
                if seen.len() >= distinct as usize {
                    break;
                }
                seen.push(*a);
            }
            count += 1;
        }
        count
    }

    fn distinct_recent(&self, n: usize) -> u32 {
        let mut seen: Vec<u64> = Vec::new();
        for a in self.stale.iter().rev().take(n) {
            if !seen.contains(a) {
                seen.push(*a);
            }
        }
        seen.len() as u32
    }

    fn count_error(&mut self, key: u64, line: &str) {
        if let Some(entry) = self.errors.iter_mut().find(|e| e.key == key) {
            entry.count = entry.count.saturating_add(1);
            entry.line = line.to_string();
            return;
        }
        if self.errors.len() >= MAX_TASK_ERRORS {
            self.errors.pop_front();
        }
        self.errors.push_back(ErrorLine {
            key,
            count: 1,
            line: line.to_string(),
        });
    }

    /// The verdicts of a completed step, by the ladder.
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &mut self,
        c: &MonitorConfig,
        counts: &StepCounts,
        output_count: u32,
        percent: u64,
        failed: bool,
        done: &Completed,
        out: &mut Outcome,
    ) {
        let s = &c.stagnation;
        let f = &c.failure;
        let rules = s.step_rules();
        let same_count = self.errors.iter().map(|e| e.count).max().unwrap_or(0);
        let needed = StepCounts::fail_window_needed(&rules);
        let window_full = counts.since_progress >= u64::from(rules.fail_window);
        let identical_on = f.identical_error_threshold > 0;
        let consecutive = if identical_on
            && self.identical_count * u64::from(f.failure_threshold)
                >= self.consecutive_failures * u64::from(f.identical_error_threshold)
        {
            (self.identical_count, f.identical_error_threshold)
        } else {
            (self.consecutive_failures, f.failure_threshold)
        };
        let no_progress = self.no_progress_count(s.no_progress_distinct_actions);
        let decline = self.declined >= no_progress && no_progress > 0;
        let progress_rule = if decline {
            Rule::OutputDecline
        } else {
            Rule::NoProgress
        };
        // (rule, count, threshold, halts now); the figures are written only for a verdict.
        let checks: [(Rule, u64, u32, bool); 8] = [
            (
                Rule::RepeatedStep,
                u64::from(counts.repeat),
                rules.repeat,
                rules.repeat > 0 && counts.repeat >= rules.repeat,
            ),
            (
                Rule::Cycle,
                u64::from(counts.cycle_repeats),
                rules.cycle_repeats,
                rules.cycle_repeats > 0 && counts.cycle_repeats >= rules.cycle_repeats,
            ),
            (
                Rule::FailStreak,
                u64::from(counts.fail_streak),
                rules.fail_streak,
                rules.fail_streak > 0 && counts.fail_streak >= rules.fail_streak,
            ),
            (
                Rule::FailWindow,
                u64::from(counts.fail_window_failed),
                if rules.fail_window > 0 { needed } else { 0 },
                rules.fail_window > 0 && window_full && counts.fail_window_failed >= needed,
            ),
            (
                Rule::SameError,
                same_count,
                s.same_error_threshold,
                same_count >= u64::from(s.same_error_threshold),
            ),
            (
                Rule::ConsecutiveFailures,
                consecutive.0,
                consecutive.1,
                self.consecutive_failures >= u64::from(f.failure_threshold)
                    || (identical_on
                        && self.identical_count >= u64::from(f.identical_error_threshold)),
            ),
            (
                progress_rule,
                no_progress,
                s.no_progress_threshold,
                no_progress >= u64::from(s.no_progress_threshold),
            ),
            (
                Rule::OutputLoop,
                u64::from(output_count),
                c.budget.loop_window,
                output_count >= c.budget.loop_window,
            ),
        ];
        for (rule, count, threshold, halts) in checks {
            // The no-progress ladder is one episode whatever its reason's name.
            let bit = if matches!(rule, Rule::OutputDecline) {
                Rule::NoProgress.bit()
            } else {
                rule.bit()
            };
            if count == 0 {
                self.ladder.warned &= !bit;
            }
            if threshold == 0 {
                continue;
            }
            let action = if halts {
                VerdictAction::Halt
            } else if c.warn_before > 0
                && threshold > c.warn_before
                && count >= u64::from(threshold - c.warn_before)
                && self.ladder.warned & bit == 0
            {
                self.ladder.warned |= bit;
                VerdictAction::Warn
            } else {
                continue;
            };
            let finding = match rule {
                Rule::RepeatedStep => Finding::Repeated {
                    count: counts.repeat,
                    threshold: rules.repeat,
                    action: done.describe.clone(),
                    failed,
                },
                Rule::Cycle => Finding::Cycle {
                    length: counts.cycle_length,
                    repeats: counts.cycle_repeats,
                    threshold: rules.cycle_repeats,
                    actions: self
                        .recent
                        .iter()
                        .rev()
                        .take(counts.cycle_length as usize)
                        .rev()
                        .cloned()
                        .collect(),
                },
                Rule::FailStreak => Finding::FailStreak {
                    count: counts.fail_streak,
                    threshold: rules.fail_streak,
                    distinct: counts.fail_streak_distinct,
                    error: self.last_error.clone(),
                },
                Rule::FailWindow => Finding::FailWindow {
                    failed: counts.fail_window_failed,
                    window: rules.fail_window,
                    needed,
                },
                Rule::SameError => Finding::SameError {
                    count: same_count,
                    threshold: s.same_error_threshold,
                    error: self
                        .errors
                        .iter()
                        .max_by_key(|e| e.count)
                        .map_or_else(String::new, |e| e.line.clone()),
                },
                Rule::ConsecutiveFailures => Finding::ConsecutiveFailures {
                    count: consecutive.0,
                    threshold: consecutive.1,
                    error: self.last_error.clone(),
                },
                Rule::OutputDecline => Finding::OutputDecline {
                    count: no_progress,
                    threshold: s.no_progress_threshold,
                    percent,
                },
                Rule::NoProgress => Finding::NoProgress {
                    count: no_progress,
                    threshold: s.no_progress_threshold,
                    distinct_actions: (s.no_progress_distinct_actions > 0)
                        .then(|| self.distinct_recent(no_progress as usize)),
                },
                _ => Finding::OutputLoop {
                    count: output_count,
                    window: c.budget.loop_window,
                    similarity: self.similarities.iter().copied().fold(1.0, f64::min),
                    threshold: c.budget.similarity_jaccard_threshold,
                },
            };
            out.add(finding.verdict(action, &self.id, done.number));
        }
    }

    /// A budget rule: halt past the limit, warn once at `budgetWarnPercent` of it.
    fn budget_rule(
        &mut self,
        c: &MonitorConfig,
        actual: f64,
        limit: f64,
        rule: Rule,
        finding: impl FnOnce() -> Finding,
        out: &mut Outcome,
    ) {
        if actual > limit {
            out.add(finding().verdict(VerdictAction::Halt, &self.id, self.step_number()));
        } else if c.budget_warn_percent > 0
            && actual * 100.0 >= f64::from(c.budget_warn_percent) * limit
            && self.ladder.warned & rule.bit() == 0
        {
            self.ladder.warned |= rule.bit();
            out.add(finding().verdict(VerdictAction::Warn, &self.id, self.step_number()));
        }
    }

    /// The duration limit (checked on every event and tick).
    pub(crate) fn check_duration(&mut self, c: &MonitorConfig, now: u64, out: &mut Outcome) {
        let ran = now.saturating_sub(self.started_at);
        let limit = c.budget.max_task_duration_secs;
        self.budget_rule(
            c,
            ran as f64 / 1000.0,
            limit as f64,
            Rule::DurationLimit,
            || {
                Finding::Budget(HaltReason::DurationLimit {
                    actual_secs: ran as f64 / 1000.0,
                    limit_secs: limit,
                })
            },
            out,
        );
    }

    /// The idle limit, from `idle_since` (checked on ticks).
    pub(crate) fn check_idle(
        &mut self,
        c: &MonitorConfig,
        idle_since: u64,
        now: u64,
        out: &mut Outcome,
    ) {
        let idle = now.saturating_sub(idle_since);
        let limit = c.budget.max_idle_secs;
        self.budget_rule(
            c,
            idle as f64 / 1000.0,
            limit as f64,
            Rule::IdleTimeout,
            || {
                Finding::Budget(HaltReason::IdleTimeout {
                    idle_secs: idle as f64 / 1000.0,
                    limit_secs: limit,
                })
            },
            out,
        );
        // A task that speaks again may be warned again.
        if (idle as f64) * 100.0 < f64::from(c.budget_warn_percent) * (limit as f64) * 1000.0 {
            self.ladder.warned &= !Rule::IdleTimeout.bit();
        }
    }

    /// Where every rule stands, for `status()`.
    pub(crate) fn rule_counts(&self, c: &MonitorConfig) -> BTreeMap<&'static str, (f64, f64)> {
        let s = &c.stagnation;
        let rules = s.step_rules();
        let counts = self.history.counts(&rules);
        let mut m = BTreeMap::new();
        let mut put = |r: Rule, count: f64, threshold: f64| {
            if threshold > 0.0 {
                m.insert(r.slug(), (count, threshold));
            }
        };
        put(
            Rule::ToolCallLimit,
            self.tool_calls as f64,
            c.budget.max_tool_calls_per_task as f64,
        );
        put(
            Rule::TokenSpendLimit,
            self.spent(),
            c.budget.max_token_spend_cents_per_task as f64,
        );
        put(
            Rule::RepeatedStep,
            f64::from(counts.repeat),
            f64::from(rules.repeat),
        );
        put(
            Rule::Cycle,
            f64::from(counts.cycle_repeats),
            f64::from(rules.cycle_repeats),
        );
        put(
            Rule::FailStreak,
            f64::from(counts.fail_streak),
            f64::from(rules.fail_streak),
        );
        if rules.fail_window > 0 {
            put(
                Rule::FailWindow,
                f64::from(counts.fail_window_failed),
                f64::from(StepCounts::fail_window_needed(&rules)),
            );
        }
        put(
            Rule::SameError,
            self.errors.iter().map(|e| e.count).max().unwrap_or(0) as f64,
            f64::from(s.same_error_threshold),
        );
        put(
            Rule::ConsecutiveFailures,
            self.consecutive_failures as f64,
            f64::from(c.failure.failure_threshold),
        );
        put(
            Rule::NoProgress,
            self.no_progress_count(s.no_progress_distinct_actions) as f64,
            f64::from(s.no_progress_threshold),
        );
        let t = c.budget.similarity_jaccard_threshold;
        let run = self
            .similarities
            .iter()
            .rev()
            .take_while(|&&j| j >= t)
            .count();
        put(
            Rule::OutputLoop,
            if run > 0 { (run + 1) as f64 } else { 0.0 },
            f64::from(c.budget.loop_window),
        );
        m
    }

    /// Checks a restored task against what a live one under `c` can hold: its bounds (the
    /// output loop's up to `loopWindow`), a valid id, no negative spend, and its open step the
    /// one after its completed ones (whose count stays far from wrapping).
    pub(crate) fn within_bounds(&self, c: &MonitorConfig) -> bool {
        let step_ok = self.current.as_ref().is_none_or(|s| {
            s.number == self.steps + 1
                && s.calls.len() <= MAX_STEP_CALLS
                && s.errors.len() <= MAX_STEP_CALLS
                && s.text.len() <= MAX_TEXT_BYTES
                && s.calls.iter().all(|c| {
                    c.name.len() <= MAX_ID_BYTES
                        && c.id.as_ref().is_none_or(|i| i.len() <= MAX_ID_BYTES)
                        && c.describe.len() <= MAX_LINE_BYTES
                        && c.result
                            .as_ref()
                            .is_none_or(|r| r.error_line.len() <= MAX_LINE_BYTES)
                })
        });
        step_ok
            && crate::budget::AgentEvent::check_task_id(&self.id).is_ok()
            && self.steps < 1 << 53
            && self.per_tool.len() <= MAX_TRACKED_TOOLS + super::config::MAX_TOOL_LIMITS
            && self.per_tool.keys().all(|k| k.len() <= MAX_ID_BYTES)
            && self.errors.len() <= MAX_TASK_ERRORS
            && self.errors.iter().all(|e| e.line.len() <= MAX_LINE_BYTES)
            && self.digests.len() <= MAX_DIGESTS
            && self.stale.len() <= crate::steps::MAX_STEP_THRESHOLD as usize
            && self.baseline.len() <= 3
            && self.last_output.len() <= 4096
            && self.similarities.len() < (c.budget.loop_window as usize).max(1025)
            && self.recent.len() <= 32
            && self.recent.iter().all(|r| r.len() <= MAX_LINE_BYTES)
            && self.last_error.len() <= MAX_LINE_BYTES
            && self.ladder.warned_tools.len() <= super::config::MAX_TOOL_LIMITS
            && self.history.len() <= 20_000
            && self.spend_cents.is_finite()
            && self.spend_cents >= 0.0
    }

    /// Fits a restored task's histories to the config's rules.
    pub(crate) fn fit(&mut self, c: &MonitorConfig) {
        self.history.fit(&c.stagnation.step_rules());
        let keep = if c.stagnation.no_progress_distinct_actions > 0 {
            c.stagnation.no_progress_threshold as usize
        } else {
            0
        };
        if self.stale.len() > keep {
            self.stale.drain(..self.stale.len() - keep);
        }
        while self.similarities.len() + 1 > c.budget.loop_window as usize {
            self.similarities.pop_front();
        }
        while self.recent.len() > c.stagnation.max_cycle_length as usize {
            self.recent.pop_front();
        }
    }
}

/// The cost of a `usage` event in cents: the given cost, else the tokens at the model's price.
pub(crate) fn usage_cost(
    model: Option<&str>,
    usage: &Usage,
    cost_cents: Option<f64>,
    c: &MonitorConfig,
) -> f64 {
    cost_cents.unwrap_or_else(|| usage.cost_cents(&c.budget.price_for(model)))
}

/// The hash of a digest as given (no normalization: a digest is exact).
fn exact_hash(d: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(truncate(d, 1024).as_bytes());
    h.finish()
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_described_by_their_key_argument() {
        assert_eq!(
            describe_call("Bash", &json!({"command": "pytest -q\nmore"})),
            "pytest -q"
        );
        assert_eq!(
            describe_call("Read", &json!({"file_path": "/src/a.py", "limit": 5})),
            "Read /src/a.py"
        );
        assert_eq!(describe_call("think", &Value::Null), "think");
        assert_eq!(describe_call("calc", &json!({"a": 1})), "calc {\"a\":1}");
        assert!(describe_call("x", &json!({"q": "y".repeat(1000)})).len() <= MAX_LINE_BYTES);
    }

    #[test]
    fn long_texts_are_compared_by_both_ends() {
        let a = format!("{}{}", "x".repeat(20_000), "FAILED");
        let b = format!("{}{}", "x".repeat(20_000), "PASSED");
        assert_ne!(text_hash(&a), text_hash(&b));
        let c = format!("{}-{}", "é".repeat(10_000), "y");
        let _ = text_hash(&c);
    }
}

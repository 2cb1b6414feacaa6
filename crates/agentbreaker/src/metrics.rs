//! The metrics vocabulary (issue 22, `docs/observability.md`), defined once for every surface: the
//! metric names in the OpenTelemetry semantic-convention style, their units, descriptions and
//! attribute keys, the Prometheus names derived from them, pure functions from what a breaker or a
//! Monitor says (an [`Event`], a [`Verdict`]) to metric [`Update`]s, and a bounded [`Registry`]
//! that adds updates up and writes them in the Prometheus text format.
//!
//! Nothing here exports anything: the CLI writes a registry to a file for node_exporter's textfile
//! collector, the Python binding hands updates to OpenTelemetry instruments. A [`Monitor`] reports
//! its updates to one [`Recorder`] ([`Monitor::set_metrics_recorder`]); without one it does no
//! metrics work at all.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use agentbreaker::metrics::{self, Registry};
//! use agentbreaker::{ManualClock, Monitor, MonitorConfig};
//! use serde_json::json;
//!
//! let monitor = Monitor::with_clock(MonitorConfig::default(), ManualClock::shared(0)).unwrap();
//! let registry = Arc::new(Mutex::new(Registry::default()));
//! let sink = Arc::clone(&registry);
//! monitor.set_metrics_recorder(
//!     Some(Arc::new(move |updates: &[metrics::Update]| sink.lock().unwrap().record_all(updates))),
//!     metrics::Options::default(),
//! );
//! monitor.observe(&json!({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}})).unwrap();
//! let text = registry.lock().unwrap().to_prometheus();
//! assert!(text.contains("\nagentbreaker_tool_calls_total 1\n"));
//! ```
//!
//! [`Monitor`]: crate::Monitor
//! [`Monitor::set_metrics_recorder`]: crate::Monitor::set_metrics_recorder

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::events::Event;
use crate::monitor::{Rule, Verdict, VerdictAction};
use crate::state::State;

/// How a metric is aggregated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Instrument {
    /// A monotonic sum (OpenTelemetry `Counter`, Prometheus `counter` with `_total`).
    Counter,
    /// A distribution in fixed buckets (OpenTelemetry `Histogram`, Prometheus `histogram`).
    Histogram,
}

/// One metric of the vocabulary.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Metric {
    /// The OpenTelemetry name (`agentbreaker.halts`).
    pub name: &'static str,
    /// The Prometheus name: dots become underscores, counters end in `_total`.
    pub prometheus: &'static str,
    /// Counter or histogram.
    pub instrument: Instrument,
    /// The UCUM unit or annotation (`{halt}`, `{cent}`).
    pub unit: &'static str,
    /// What it counts, for people (OpenTelemetry description, Prometheus HELP).
    pub description: &'static str,
    /// The attribute keys it may carry (`task` only when [`Options::task`] is on).
    pub attributes: &'static [&'static str],
}

/// Attribute keys.
pub mod attr {
    /// The rule that fired, by its slug (`repeated_step`, ...), or `warning` for a breaker's own
    /// warning event.
    pub const REASON: &str = "reason";
    /// The task id: only with [`super::Options::task`] (task ids are unbounded).
    pub const TASK: &str = "task";
    /// The breaker whose state changed (`failure`, `stagnation`, `loop`).
    pub const BREAKER: &str = "breaker";
    /// The state before (`CLOSED`, `HALF_OPEN`, `OPEN`).
    pub const FROM: &str = "from";
    /// The state after.
    pub const TO: &str = "to";
    /// How a task ended: `halted`, `done`, `error` or `ended` (see [`super::TaskOutcome`]).
    pub const OUTCOME: &str = "outcome";
}

/// `agentbreaker.halts`: every halt, once (a halted task's later events repeat its verdict but
/// count no further).
pub const HALTS: Metric = Metric {
    name: "agentbreaker.halts",
    prometheus: "agentbreaker_halts_total",
    instrument: Instrument::Counter,
    unit: "{halt}",
    description: "Halts: a rule tripped and the task was stopped (reason = the rule's slug)",
    attributes: &[attr::REASON, attr::TASK],
};

/// `agentbreaker.warnings`: every warning (a rule nearing its threshold; the nudge went out).
pub const WARNINGS: Metric = Metric {
    name: "agentbreaker.warnings",
    prometheus: "agentbreaker_warnings_total",
    instrument: Instrument::Counter,
    unit: "{warning}",
    description: "Warnings: a rule neared its threshold and the model was nudged (reason = the \
                  rule's slug)",
    attributes: &[attr::REASON, attr::TASK],
};

/// `agentbreaker.state_changes`: a circuit moved from one state to another.
pub const STATE_CHANGES: Metric = Metric {
    name: "agentbreaker.state_changes",
    prometheus: "agentbreaker_state_changes_total",
    instrument: Instrument::Counter,
    unit: "{change}",
    description: "Circuit state changes of a breaker (CLOSED, HALF_OPEN, OPEN)",
    attributes: &[attr::BREAKER, attr::FROM, attr::TO],
};

/// `agentbreaker.tool_calls`: tool calls the Monitor counted.
pub const TOOL_CALLS: Metric = Metric {
    name: "agentbreaker.tool_calls",
    prometheus: "agentbreaker_tool_calls_total",
    instrument: Instrument::Counter,
    unit: "{call}",
    description: "Tool calls the agent made, as counted against the budgets",
    attributes: &[attr::TASK],
};

/// `agentbreaker.spend`: spend in cents (the event's `costCents`, else the price table's).
pub const SPEND: Metric = Metric {
    name: "agentbreaker.spend",
    prometheus: "agentbreaker_spend_total",
    instrument: Instrument::Counter,
    unit: "{cent}",
    description: "Model spend in cents, as counted against the budgets",
    attributes: &[attr::TASK],
};

/// `agentbreaker.task.steps`: how many steps a task took, observed when it ends.
pub const TASK_STEPS: Metric = Metric {
    name: "agentbreaker.task.steps",
    prometheus: "agentbreaker_task_steps",
    instrument: Instrument::Histogram,
    unit: "{step}",
    description: "Steps per task, observed when the task ends (outcome = halted, done, error or \
                  ended)",
    attributes: &[attr::OUTCOME],
};

/// The whole vocabulary, in the order files list it.
pub const ALL: [&Metric; 6] = [
    &HALTS,
    &WARNINGS,
    &STATE_CHANGES,
    &TOOL_CALLS,
    &SPEND,
    &TASK_STEPS,
];

/// The upper bounds of the steps histogram's buckets (a last `+Inf` bucket holds the rest).
pub const STEP_BUCKETS: [f64; 10] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// The reason of a breaker's own `warning` event (the FailureBreaker's approaching-threshold
/// warning, a skipped fix-plan step, a failed save): it has no rule slug.
pub const BREAKER_WARNING_REASON: &str = "warning";

/// The task attribute of series that did not fit in a [`Registry`] (see [`MAX_SERIES`]).
pub const OTHER_TASK: &str = "_other";

/// The most series a [`Registry`] keeps with a `task` attribute; past it new tasks are counted
/// under `task="_other"`. The series without a task are bounded by the vocabulary itself (14
/// rules, 3 states, 4 outcomes).
pub const MAX_SERIES: usize = 1000;

/// The metric of an OpenTelemetry name.
pub fn metric(name: &str) -> Option<&'static Metric> {
    ALL.into_iter().find(|m| m.name == name)
}

/// How a task ended, for the steps histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskOutcome {
    /// A rule halted it (observed on the halt, with the verdict's step).
    Halted,
    /// Its `done` heartbeat.
    Done,
    /// Its `error` heartbeat.
    Error,
    /// Still open when the run or the session ended (the CLI records these at exit).
    Ended,
}

impl TaskOutcome {
    /// `halted`, `done`, `error`, `ended`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskOutcome::Halted => "halted",
            TaskOutcome::Done => "done",
            TaskOutcome::Error => "error",
            TaskOutcome::Ended => "ended",
        }
    }
}

/// What the caller wants in the attributes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Add the `task` attribute to halts, warnings, tool calls and spend. Off by default: task ids
    /// are unbounded, and every task would be a new time series.
    pub task: bool,
}

/// An attribute value: a slug or state name, or a task id.
pub type AttrValue = Cow<'static, str>;

/// One change to one metric: add `value` to a counter, or observe it in a histogram.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The metric.
    pub metric: &'static Metric,
    /// The amount added or the value observed.
    pub value: f64,
    /// Its attributes, in the metric's key order.
    pub attributes: Vec<(&'static str, AttrValue)>,
}

/// Where a [`Monitor`](crate::Monitor) sends its updates: called after each event that changed a
/// metric, outside the Monitor's lock, with that event's updates.
pub type Recorder = Arc<dyn Fn(&[Update]) + Send + Sync>;

fn task_attr(task: Option<&str>, options: Options) -> Option<(&'static str, AttrValue)> {
    match task {
        Some(t) if options.task => Some((attr::TASK, Cow::Owned(t.to_string()))),
        _ => None,
    }
}

fn with_task(
    mut attributes: Vec<(&'static str, AttrValue)>,
    task: Option<&str>,
    options: Options,
) -> Vec<(&'static str, AttrValue)> {
    attributes.extend(task_attr(task, options));
    attributes
}

/// The updates of a Monitor verdict: a warning counts in `agentbreaker.warnings`; a halt in
/// `agentbreaker.halts` and, with the verdict's step, in `agentbreaker.task.steps`
/// (`outcome="halted"`); a continue changes nothing. Call it once per verdict **given** (a halted
/// task repeats its halt on every later event; the Monitor's listeners and recorder get it once).
pub fn verdict_updates(verdict: &Verdict, options: Options) -> Vec<Update> {
    let reason: AttrValue = Cow::Borrowed(verdict.reason.map_or("", Rule::slug));
    let task = verdict.task_id.as_deref();
    match verdict.action {
        VerdictAction::Continue => Vec::new(),
        VerdictAction::Warn => vec![Update {
            metric: &WARNINGS,
            value: 1.0,
            attributes: with_task(vec![(attr::REASON, reason)], task, options),
        }],
        VerdictAction::Halt => vec![
            Update {
                metric: &HALTS,
                value: 1.0,
                attributes: with_task(vec![(attr::REASON, reason)], task, options),
            },
            task_end(verdict.step, TaskOutcome::Halted),
        ],
    }
}

/// The updates of a listener event of any breaker or Monitor (`breaker` names it in
/// `agentbreaker.state_changes`: `failure`, `stagnation`, `budget`, `loop`, `monitor`):
/// - `stateChange` → `agentbreaker.state_changes{breaker, from, to}`;
/// - `warning` → `agentbreaker.warnings{reason="warning"}`;
/// - `halt` (a BudgetBreaker's) → `agentbreaker.halts{reason=<its slug>}`;
/// - `verdict` (a Monitor's) → [`verdict_updates`].
pub fn event_updates(event: &Event, breaker: &str, options: Options) -> Vec<Update> {
    match event {
        Event::StateChange { from, to, .. } => vec![state_change(breaker, *from, *to)],
        Event::Warning { .. } => vec![Update {
            metric: &WARNINGS,
            value: 1.0,
            attributes: vec![(attr::REASON, Cow::Borrowed(BREAKER_WARNING_REASON))],
        }],
        Event::Halt { halt, .. } => vec![Update {
            metric: &HALTS,
            value: 1.0,
            attributes: with_task(
                vec![(attr::REASON, Cow::Borrowed(halt.reason.slug()))],
                Some(&halt.task_id),
                options,
            ),
        }],
        Event::Verdict { verdict, .. } => verdict_updates(verdict, options),
    }
}

fn state_change(breaker: &str, from: State, to: State) -> Update {
    Update {
        metric: &STATE_CHANGES,
        value: 1.0,
        attributes: vec![
            (attr::BREAKER, Cow::Owned(breaker.to_string())),
            (attr::FROM, Cow::Borrowed(from.as_str())),
            (attr::TO, Cow::Borrowed(to.as_str())),
        ],
    }
}

/// [`event_updates`] of a listener event as bindings receive it (its JSON form:
/// `{"type": "stateChange", "from", "to", ...}`, `{"type": "verdict", "action", "reason",
/// "taskId", "step", ...}`, ...). What it cannot read changes nothing.
pub fn json_event_updates(event: &Value, breaker: &str, options: Options) -> Vec<Update> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    match event.get("type").and_then(Value::as_str) {
        Some("stateChange") => {
            let state = |k: &str| event.get(k).and_then(Value::as_str)?.parse::<State>().ok();
            match (state("from"), state("to")) {
                (Some(from), Some(to)) => vec![state_change(breaker, from, to)],
                _ => Vec::new(),
            }
        }
        Some("warning") => vec![Update {
            metric: &WARNINGS,
            value: 1.0,
            attributes: vec![(attr::REASON, Cow::Borrowed(BREAKER_WARNING_REASON))],
        }],
        Some("halt") => {
            let halt = event.get("halt").unwrap_or(&Value::Null);
            let Some(rule) = halt
                .get("slug")
                .and_then(Value::as_str)
                .and_then(Rule::from_slug)
            else {
                return Vec::new();
            };
            vec![Update {
                metric: &HALTS,
                value: 1.0,
                attributes: with_task(
                    vec![(attr::REASON, Cow::Borrowed(rule.slug()))],
                    text(halt, "taskId").as_deref(),
                    options,
                ),
            }]
        }
        Some("verdict") => {
            let action = match event.get("action").and_then(Value::as_str) {
                Some("warn") => VerdictAction::Warn,
                Some("halt") => VerdictAction::Halt,
                _ => return Vec::new(),
            };
            let verdict = Verdict {
                action,
                reason: event
                    .get("reason")
                    .and_then(Value::as_str)
                    .and_then(Rule::from_slug),
                message: None,
                nudge: None,
                task_id: text(event, "taskId"),
                step: event.get("step").and_then(Value::as_u64).unwrap_or(0),
                detail: None,
            };
            verdict_updates(&verdict, options)
        }
        _ => Vec::new(),
    }
}

/// One tool call counted for `task`.
pub fn tool_call(task: Option<&str>, options: Options) -> Update {
    Update {
        metric: &TOOL_CALLS,
        value: 1.0,
        attributes: with_task(Vec::new(), task, options),
    }
}

/// `cents` of spend counted for `task`.
pub fn spend(cents: f64, task: Option<&str>, options: Options) -> Update {
    Update {
        metric: &SPEND,
        value: cents,
        attributes: with_task(Vec::new(), task, options),
    }
}

/// A task that ended after `steps` steps.
pub fn task_end(steps: u64, outcome: TaskOutcome) -> Update {
    Update {
        metric: &TASK_STEPS,
        value: steps as f64,
        attributes: vec![(attr::OUTCOME, Cow::Borrowed(outcome.as_str()))],
    }
}

/// One series' value.
#[derive(Debug, Clone, PartialEq)]
enum Series {
    Counter(f64),
    Histogram {
        /// Per bucket of [`STEP_BUCKETS`], then `+Inf` (not cumulative).
        buckets: [u64; STEP_BUCKETS.len() + 1],
        sum: f64,
        count: u64,
    },
}

type SeriesKey = (usize, Vec<(&'static str, String)>);

/// Cumulative values of the vocabulary's metrics, by metric and attributes, bounded: at most
/// [`MAX_SERIES`] series carry a `task` attribute (later tasks count under `task="_other"`).
/// Written in the Prometheus text format by [`Registry::to_prometheus`]; kept as JSON by
/// [`Registry::to_json`] (the hook keeps one per session).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry {
    series: BTreeMap<SeriesKey, Series>,
    task_series: usize,
    /// Updates whose task was counted as `_other` because the registry was full.
    folded: u64,
}

fn index_of(metric: &Metric) -> usize {
    ALL.iter()
        .position(|m| m.name == metric.name)
        .unwrap_or(usize::MAX)
}

/// The position of `key` in the metric's attribute list (its keys are kept in that order).
fn key_of(metric: &Metric, key: &str) -> Option<&'static str> {
    metric.attributes.iter().copied().find(|k| *k == key)
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// How many series it holds.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Adds one update. Attributes the metric does not have are dropped; a negative, NaN or
    /// infinite value changes nothing.
    pub fn record(&mut self, update: &Update) {
        let i = index_of(update.metric);
        if i == usize::MAX || !update.value.is_finite() || update.value < 0.0 {
            return;
        }
        let mut attributes: Vec<(&'static str, String)> = update
            .attributes
            .iter()
            .filter_map(|(k, v)| key_of(update.metric, k).map(|k| (k, v.to_string())))
            .collect();
        attributes.sort_by_key(|(k, _)| update.metric.attributes.iter().position(|a| a == k));
        let delta = match update.metric.instrument {
            Instrument::Counter => Series::Counter(update.value),
            Instrument::Histogram => {
                let mut buckets = [0u64; STEP_BUCKETS.len() + 1];
                let b = STEP_BUCKETS
                    .iter()
                    .position(|bound| update.value <= *bound)
                    .unwrap_or(STEP_BUCKETS.len());
                buckets[b] = 1;
                Series::Histogram {
                    buckets,
                    sum: update.value,
                    count: 1,
                }
            }
        };
        self.add(i, attributes, &delta);
    }

    /// Adds every update.
    pub fn record_all(&mut self, updates: &[Update]) {
        for u in updates {
            self.record(u);
        }
    }

    fn add(&mut self, i: usize, mut attributes: Vec<(&'static str, String)>, delta: &Series) {
        let has_task = attributes.iter().any(|(k, _)| *k == attr::TASK);
        if has_task && self.task_series >= MAX_SERIES {
            let key = (i, attributes.clone());
            if !self.series.contains_key(&key) {
                for (k, v) in &mut attributes {
                    if *k == attr::TASK {
                        *v = OTHER_TASK.to_string();
                    }
                }
                self.folded += 1;
            }
        }
        let entry = match self.series.entry((i, attributes)) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                if has_task {
                    self.task_series += 1;
                }
                e.insert(match delta {
                    Series::Counter(_) => Series::Counter(0.0),
                    Series::Histogram { .. } => Series::Histogram {
                        buckets: [0; STEP_BUCKETS.len() + 1],
                        sum: 0.0,
                        count: 0,
                    },
                })
            }
        };
        match (entry, delta) {
            (Series::Counter(v), Series::Counter(d)) => *v += d,
            (
                Series::Histogram {
                    buckets,
                    sum,
                    count,
                },
                Series::Histogram {
                    buckets: db,
                    sum: ds,
                    count: dc,
                },
            ) => {
                for (x, y) in buckets.iter_mut().zip(db) {
                    *x = x.saturating_add(*y);
                }
                *sum += ds;
                *count = count.saturating_add(*dc);
            }
            _ => {}
        }
    }

    /// Adds another registry's values to this one's.
    pub fn merge(&mut self, other: &Registry) {
        for ((i, attributes), series) in &other.series {
            self.add(*i, attributes.clone(), series);
        }
        self.folded = self.folded.saturating_add(other.folded);
    }

    /// A counter's value for exactly these attributes (0 when never recorded).
    pub fn counter(&self, metric: &Metric, attributes: &[(&str, &str)]) -> f64 {
        match self.series.get(&Self::key(metric, attributes)) {
            Some(Series::Counter(v)) => *v,
            _ => 0.0,
        }
    }

    /// A counter's total over all its attributes.
    pub fn total(&self, metric: &Metric) -> f64 {
        let i = index_of(metric);
        self.series
            .iter()
            .filter(|((m, _), _)| *m == i)
            .map(|(_, s)| match s {
                Series::Counter(v) => *v,
                Series::Histogram { count, .. } => *count as f64,
            })
            .sum()
    }

    /// A histogram's observation count and sum for exactly these attributes.
    pub fn histogram(&self, metric: &Metric, attributes: &[(&str, &str)]) -> (u64, f64) {
        match self.series.get(&Self::key(metric, attributes)) {
            Some(Series::Histogram { count, sum, .. }) => (*count, *sum),
            _ => (0, 0.0),
        }
    }

    fn key(metric: &Metric, attributes: &[(&str, &str)]) -> SeriesKey {
        let mut attrs: Vec<(&'static str, String)> = attributes
            .iter()
            .filter_map(|(k, v)| key_of(metric, k).map(|k| (k, v.to_string())))
            .collect();
        attrs.sort_by_key(|(k, _)| metric.attributes.iter().position(|a| a == k));
        (index_of(metric), attrs)
    }

    /// The registry in the Prometheus text exposition format (version 0.0.4, what node_exporter's
    /// textfile collector reads): `# HELP` and `# TYPE` for every metric of the vocabulary, then
    /// its series; a counter without attributes that was never recorded is written as 0.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::with_capacity(2048);
        for (i, m) in ALL.iter().enumerate() {
            let _ = writeln!(
                out,
                "# HELP {} {}",
                m.prometheus,
                escape_help(m.description)
            );
            let kind = match m.instrument {
                Instrument::Counter => "counter",
                Instrument::Histogram => "histogram",
            };
            let _ = writeln!(out, "# TYPE {} {kind}", m.prometheus);
            let mut any = false;
            for ((_, attributes), series) in self.series.range((i, Vec::new())..(i + 1, Vec::new()))
            {
                any = true;
                match series {
                    Series::Counter(v) => {
                        let _ = writeln!(
                            out,
                            "{}{} {}",
                            m.prometheus,
                            labels(attributes, None),
                            number(*v)
                        );
                    }
                    Series::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        let mut cumulative = 0u64;
                        for (b, n) in buckets.iter().enumerate() {
                            cumulative = cumulative.saturating_add(*n);
                            let le = STEP_BUCKETS
                                .get(b)
                                .map_or_else(|| "+Inf".to_string(), |v| number(*v));
                            let _ = writeln!(
                                out,
                                "{}_bucket{} {cumulative}",
                                m.prometheus,
                                labels(attributes, Some(&le))
                            );
                        }
                        let _ = writeln!(
                            out,
                            "{}_sum{} {}",
                            m.prometheus,
                            labels(attributes, None),
                            number(*sum)
                        );
                        let _ = writeln!(
                            out,
                            "{}_count{} {count}",
                            m.prometheus,
                            labels(attributes, None)
                        );
                    }
                }
            }
            if !any && m.instrument == Instrument::Counter && m.attributes == [attr::TASK] {
                let _ = writeln!(out, "{} 0", m.prometheus);
            }
        }
        out
    }

    /// The registry as JSON: `{"version": 1, "series": [{"metric", "attributes", "value"} or
    /// {"metric", "attributes", "buckets", "sum", "count"}], "folded"}`.
    pub fn to_json(&self) -> Value {
        let series: Vec<Value> = self
            .series
            .iter()
            .map(|((i, attributes), s)| {
                let attrs: Map<String, Value> = attributes
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), Value::String(v.clone())))
                    .collect();
                let mut o = Map::new();
                o.insert("metric".into(), Value::String(ALL[*i].name.to_string()));
                o.insert("attributes".into(), Value::Object(attrs));
                match s {
                    Series::Counter(v) => {
                        o.insert("value".into(), serde_json::json!(v));
                    }
                    Series::Histogram {
                        buckets,
                        sum,
                        count,
                    } => {
                        o.insert("buckets".into(), serde_json::json!(buckets.to_vec()));
                        o.insert("sum".into(), serde_json::json!(sum));
                        o.insert("count".into(), serde_json::json!(count));
                    }
                }
                Value::Object(o)
            })
            .collect();
        serde_json::json!({"version": 1, "series": series, "folded": self.folded})
    }

    /// A registry from [`Registry::to_json`]'s form. Series of unknown metrics, unknown attribute
    /// keys or bad values are an error (the caller starts afresh).
    pub fn from_json(value: &Value) -> Result<Registry, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Doc {
            version: u32,
            series: Vec<SeriesDoc>,
            #[serde(default)]
            folded: u64,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct SeriesDoc {
            metric: String,
            attributes: BTreeMap<String, String>,
            value: Option<f64>,
            buckets: Option<Vec<u64>>,
            sum: Option<f64>,
            count: Option<u64>,
        }
        let doc = Doc::deserialize(value).map_err(|e| format!("not a metrics registry: {e}"))?;
        if doc.version != 1 {
            return Err(format!("metrics registry version {}", doc.version));
        }
        let mut r = Registry {
            folded: doc.folded,
            ..Registry::default()
        };
        for s in doc.series {
            let m = metric(&s.metric).ok_or_else(|| format!("unknown metric {:?}", s.metric))?;
            let i = index_of(m);
            let mut attributes = Vec::new();
            for (k, v) in s.attributes {
                let key =
                    key_of(m, &k).ok_or_else(|| format!("{} has no attribute {k:?}", m.name))?;
                attributes.push((key, v));
            }
            attributes.sort_by_key(|(k, _)| m.attributes.iter().position(|a| a == k));
            let series = match (m.instrument, s.value, s.buckets, s.sum, s.count) {
                (Instrument::Counter, Some(v), None, None, None) if v.is_finite() && v >= 0.0 => {
                    Series::Counter(v)
                }
                (Instrument::Histogram, None, Some(b), Some(sum), Some(count))
                    if b.len() == STEP_BUCKETS.len() + 1 && sum.is_finite() && sum >= 0.0 =>
                {
                    let mut buckets = [0u64; STEP_BUCKETS.len() + 1];
                    buckets.copy_from_slice(&b);
                    Series::Histogram {
                        buckets,
                        sum,
                        count,
                    }
                }
                _ => return Err(format!("a bad series of {}", m.name)),
            };
            if attributes.iter().any(|(k, _)| *k == attr::TASK) {
                r.task_series += 1;
            }
            r.series.insert((i, attributes), series);
        }
        if r.task_series > MAX_SERIES + ALL.len() * 16 {
            return Err("more series than a registry keeps".into());
        }
        Ok(r)
    }
}

/// A number as the text format writes it: whole numbers without a fraction.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn labels(attributes: &[(&'static str, String)], le: Option<&str>) -> String {
    if attributes.is_empty() && le.is_none() {
        return String::new();
    }
    let mut parts: Vec<String> = attributes
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    format!("{{{}}}", parts.join(","))
}

/// The vocabulary as JSON, for bindings that build their instruments from it:
/// `[{"name", "prometheusName", "instrument", "unit", "description", "attributes",
/// "buckets"?}]`.
pub fn vocabulary_json() -> Value {
    Value::Array(
        ALL.iter()
            .map(|m| {
                let mut o = serde_json::json!({
                    "name": m.name,
                    "prometheusName": m.prometheus,
                    "instrument": m.instrument,
                    "unit": m.unit,
                    "description": m.description,
                    "attributes": m.attributes,
                });
                if m.instrument == Instrument::Histogram {
                    o["buckets"] = serde_json::json!(STEP_BUCKETS);
                }
                o
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Halt, HaltReason};

    fn verdict(action: VerdictAction, rule: Rule, step: u64) -> Verdict {
        Verdict {
            action,
            reason: Some(rule),
            message: Some("m".into()),
            nudge: None,
            task_id: Some("t1".into()),
            step,
            detail: None,
        }
    }

    #[test]
    fn prometheus_names_derive_from_the_otel_names() {
        for m in ALL {
            let base = m.name.replace('.', "_");
            let expected = match m.instrument {
                Instrument::Counter => format!("{base}_total"),
                Instrument::Histogram => base,
            };
            assert_eq!(m.prometheus, expected);
            assert!(m.name.starts_with("agentbreaker."));
            assert!(m.unit.starts_with('{') || m.unit == "1");
        }
    }

    #[test]
    fn verdicts_and_events_become_updates() {
        let o = Options::default();
        assert!(verdict_updates(&Verdict::proceed(Some("t".into()), 3), o).is_empty());
        let w = verdict_updates(&verdict(VerdictAction::Warn, Rule::Cycle, 4), o);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].metric, &WARNINGS);
        assert_eq!(
            w[0].attributes,
            vec![(attr::REASON, Cow::Borrowed("cycle"))]
        );
        let h = verdict_updates(
            &verdict(VerdictAction::Halt, Rule::RepeatedStep, 7),
            Options { task: true },
        );
        assert_eq!(h[0].metric, &HALTS);
        assert_eq!(
            h[0].attributes,
            vec![
                (attr::REASON, Cow::Borrowed("repeated_step")),
                (attr::TASK, Cow::Owned("t1".to_string()))
            ]
        );
        assert_eq!(h[1].metric, &TASK_STEPS);
        assert_eq!(h[1].value, 7.0);
        let sc = event_updates(
            &Event::StateChange {
                from: State::Closed,
                to: State::Open,
                reason: "x".into(),
                at_ms: 0,
            },
            "failure",
            o,
        );
        assert_eq!(
            sc[0].attributes,
            vec![
                (attr::BREAKER, Cow::Borrowed("failure")),
                (attr::FROM, Cow::Borrowed("CLOSED")),
                (attr::TO, Cow::Borrowed("OPEN"))
            ]
        );
        let bh = event_updates(
            &Event::Halt {
                halt: Halt {
                    task_id: "t9".into(),
                    reason: HaltReason::ToolCallLimit {
                        actual: 51,
                        limit: 50,
                    },
                },
                at_ms: 0,
            },
            "budget",
            o,
        );
        assert_eq!(
            bh[0].attributes,
            vec![(attr::REASON, Cow::Borrowed("tool_call_limit"))]
        );
        // The JSON forms give the same updates.
        for (e, breaker) in [
            (
                Event::StateChange {
                    from: State::HalfOpen,
                    to: State::Closed,
                    reason: "probe".into(),
                    at_ms: 3,
                },
                "stagnation",
            ),
            (
                Event::Halt {
                    halt: Halt {
                        task_id: "t9".into(),
                        reason: HaltReason::IdleTimeout {
                            idle_secs: 70.0,
                            limit_secs: 60,
                        },
                    },
                    at_ms: 0,
                },
                "budget",
            ),
            (
                Event::Verdict {
                    verdict: verdict(VerdictAction::Halt, Rule::Cycle, 9),
                    at_ms: 1,
                },
                "monitor",
            ),
            (
                Event::Warning {
                    message: "w".into(),
                    at_ms: 0,
                },
                "failure",
            ),
        ] {
            for task in [false, true] {
                let o = Options { task };
                assert_eq!(
                    json_event_updates(&e.to_json(), breaker, o),
                    event_updates(&e, breaker, o),
                    "{e:?}"
                );
            }
        }
        assert!(json_event_updates(&serde_json::json!({"type": "nope"}), "x", o).is_empty());
        let bw = event_updates(
            &Event::Warning {
                message: "m".into(),
                at_ms: 0,
            },
            "failure",
            o,
        );
        assert_eq!(bw[0].metric, &WARNINGS);
    }

    #[test]
    fn the_registry_adds_up_and_writes_the_text_format() {
        let mut r = Registry::new();
        r.record_all(&verdict_updates(
            &verdict(VerdictAction::Warn, Rule::RepeatedStep, 3),
            Options::default(),
        ));
        r.record_all(&verdict_updates(
            &verdict(VerdictAction::Halt, Rule::RepeatedStep, 5),
            Options::default(),
        ));
        r.record(&tool_call(Some("t"), Options::default()));
        r.record(&spend(12.5, None, Options::default()));
        r.record(&task_end(1500, TaskOutcome::Done));
        assert_eq!(r.counter(&HALTS, &[("reason", "repeated_step")]), 1.0);
        assert_eq!(r.histogram(&TASK_STEPS, &[("outcome", "halted")]), (1, 5.0));
        let text = r.to_prometheus();
        for line in [
            "# TYPE agentbreaker_halts_total counter",
            "agentbreaker_halts_total{reason=\"repeated_step\"} 1",
            "agentbreaker_warnings_total{reason=\"repeated_step\"} 1",
            "agentbreaker_tool_calls_total 1",
            "agentbreaker_spend_total 12.5",
            "# TYPE agentbreaker_task_steps histogram",
            "agentbreaker_task_steps_bucket{outcome=\"halted\",le=\"2\"} 0",
            "agentbreaker_task_steps_bucket{outcome=\"halted\",le=\"5\"} 1",
            "agentbreaker_task_steps_bucket{outcome=\"halted\",le=\"+Inf\"} 1",
            "agentbreaker_task_steps_sum{outcome=\"halted\"} 5",
            "agentbreaker_task_steps_count{outcome=\"halted\"} 1",
            "agentbreaker_task_steps_bucket{outcome=\"done\",le=\"1000\"} 0",
            "agentbreaker_task_steps_bucket{outcome=\"done\",le=\"+Inf\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        // Nothing recorded: the counters without attributes read 0, the others have no series.
        let empty = Registry::new().to_prometheus();
        assert!(empty.contains("\nagentbreaker_tool_calls_total 0\n"));
        assert!(!empty.contains("agentbreaker_halts_total{"));
        // JSON round trip, and merge doubles.
        let back = Registry::from_json(&r.to_json()).unwrap();
        assert_eq!(back, r);
        let mut twice = r.clone();
        twice.merge(&back);
        assert_eq!(twice.counter(&HALTS, &[("reason", "repeated_step")]), 2.0);
        assert_eq!(
            twice.histogram(&TASK_STEPS, &[("outcome", "done")]),
            (2, 3000.0)
        );
        assert!(
            Registry::from_json(&serde_json::json!({"version": 1, "series": [
            {"metric": "agentbreaker.nope", "attributes": {}, "value": 1}]}))
            .is_err()
        );
    }

    #[test]
    fn labels_are_escaped_and_task_series_are_bounded() {
        let mut r = Registry::new();
        let o = Options { task: true };
        r.record(&tool_call(Some("a\"b\\c\nd"), o));
        assert!(
            r.to_prometheus()
                .contains("agentbreaker_tool_calls_total{task=\"a\\\"b\\\\c\\nd\"} 1")
        );
        let mut r = Registry::new();
        for i in 0..(MAX_SERIES + 500) {
            r.record(&tool_call(Some(&format!("task-{i}")), o));
        }
        assert!(r.len() <= MAX_SERIES + 1);
        assert_eq!(r.counter(&TOOL_CALLS, &[("task", OTHER_TASK)]), 500.0);
        assert_eq!(r.total(&TOOL_CALLS), (MAX_SERIES + 500) as f64);
        // An existing task keeps its own series after the registry is full.
        r.record(&tool_call(Some("task-0"), o));
        assert_eq!(r.counter(&TOOL_CALLS, &[("task", "task-0")]), 2.0);
    }

    /// A Monitor with a recorder that adds into a registry.
    fn recorded(
        config: Value,
        options: Options,
    ) -> (crate::Monitor, Arc<std::sync::Mutex<Registry>>) {
        let monitor = crate::Monitor::with_clock(
            crate::MonitorConfig::from_json(&config).unwrap(),
            crate::ManualClock::shared(0),
        )
        .unwrap();
        let registry = Arc::new(std::sync::Mutex::new(Registry::new()));
        let sink = Arc::clone(&registry);
        monitor.set_metrics_recorder(
            Some(Arc::new(move |u: &[Update]| {
                sink.lock().unwrap().record_all(u)
            })),
            options,
        );
        (monitor, registry)
    }

    fn step(i: usize, command: &str) -> [Value; 3] {
        [
            serde_json::json!({"type": "assistant", "text": "Let me look."}),
            serde_json::json!({"type": "tool_use", "name": "Bash", "id": format!("t{i}"),
                               "input": {"command": command}}),
            serde_json::json!({"type": "tool_result", "id": format!("t{i}"), "ok": true,
                               "text": "the same output"}),
        ]
    }

    /// The scripted stuck session of issue 22: one warning, one halt, the right reason, and the
    /// halted task's later events record nothing more.
    #[test]
    fn a_stuck_session_records_one_warning_and_one_halt() {
        let (m, r) = recorded(
            serde_json::json!({"stagnation": {"repeatThreshold": 4}, "warnBefore": 1}),
            Options::default(),
        );
        let mut verdicts = Vec::new();
        for i in 0..6 {
            for e in step(i, "ls") {
                verdicts.push(m.observe(&e).unwrap());
            }
        }
        m.observe(&serde_json::json!({"type": "usage", "costCents": 2.5}))
            .unwrap();
        let r = r.lock().unwrap();
        assert_eq!(verdicts.iter().filter(|v| v.is_warn()).count(), 1);
        assert!(
            verdicts.iter().filter(|v| v.is_halt()).count() > 1,
            "the halt repeats"
        );
        assert_eq!(r.counter(&WARNINGS, &[("reason", "repeated_step")]), 1.0);
        assert_eq!(r.total(&WARNINGS), 1.0);
        assert_eq!(r.counter(&HALTS, &[("reason", "repeated_step")]), 1.0);
        assert_eq!(r.total(&HALTS), 1.0);
        // Four tool calls counted; the ones after the halt are not the task's any more.
        assert_eq!(r.total(&TOOL_CALLS), 4.0);
        assert_eq!(r.total(&SPEND), 0.0);
        assert_eq!(r.histogram(&TASK_STEPS, &[("outcome", "halted")]), (1, 4.0));
    }

    #[test]
    fn a_healthy_session_records_no_warning_and_no_halt() {
        let (m, r) = recorded(serde_json::json!({}), Options { task: true });
        m.observe(&serde_json::json!({"type": "heartbeat", "taskId": "fix", "phase": "starting"}))
            .unwrap();
        for (i, file) in ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
            .iter()
            .enumerate()
        {
            for e in step(i, &format!("cat {file}.py")) {
                m.observe(&e).unwrap();
            }
            m.observe(&serde_json::json!({"type": "progress", "files": 1}))
                .unwrap();
        }
        m.observe(&serde_json::json!({"type": "usage", "costCents": 2.5}))
            .unwrap();
        m.observe(
            &serde_json::json!({"type": "usage", "model": "claude-sonnet-4",
            "usage": {"input_tokens": 1000, "output_tokens": 100}}),
        )
        .unwrap();
        m.observe(&serde_json::json!({"type": "heartbeat", "taskId": "fix", "phase": "done"}))
            .unwrap();
        let r = r.lock().unwrap();
        assert_eq!(r.total(&WARNINGS), 0.0, "{}", r.to_prometheus());
        assert_eq!(r.total(&HALTS), 0.0);
        assert_eq!(r.counter(&TOOL_CALLS, &[("task", "fix")]), 6.0);
        assert!(r.counter(&SPEND, &[("task", "fix")]) > 2.5);
        assert_eq!(r.histogram(&TASK_STEPS, &[("outcome", "done")]), (1, 6.0));
        let text = r.to_prometheus();
        assert!(
            text.contains("agentbreaker_tool_calls_total{task=\"fix\"} 6\n"),
            "{text}"
        );
    }

    #[test]
    fn without_a_recorder_nothing_is_recorded_and_it_can_be_removed() {
        let (m, r) = recorded(serde_json::json!({}), Options::default());
        m.observe(&serde_json::json!({"type": "tool_use", "name": "x"}))
            .unwrap();
        m.set_metrics_recorder(None, Options::default());
        m.observe(&serde_json::json!({"type": "tool_use", "name": "x"}))
            .unwrap();
        assert_eq!(r.lock().unwrap().total(&TOOL_CALLS), 1.0);
        // A panicking recorder is contained.
        m.set_metrics_recorder(
            Some(Arc::new(|_: &[Update]| panic!("recorder"))),
            Options::default(),
        );
        assert!(
            m.observe(&serde_json::json!({"type": "tool_use", "name": "x"}))
                .is_ok()
        );
    }

    #[test]
    fn tick_halts_are_recorded() {
        let clock = crate::ManualClock::shared(0);
        let m = crate::Monitor::with_clock(
            crate::MonitorConfig::from_json(&serde_json::json!({"budget": {"maxIdleSecs": 10}}))
                .unwrap(),
            clock.clone(),
        )
        .unwrap();
        let registry = Arc::new(std::sync::Mutex::new(Registry::new()));
        let sink = Arc::clone(&registry);
        m.set_metrics_recorder(
            Some(Arc::new(move |u: &[Update]| {
                sink.lock().unwrap().record_all(u)
            })),
            Options::default(),
        );
        m.observe(&serde_json::json!({"type": "alive"})).unwrap();
        for _ in 0..12 {
            clock.advance(1000);
            m.tick();
        }
        let r = registry.lock().unwrap();
        assert_eq!(r.counter(&WARNINGS, &[("reason", "idle_timeout")]), 1.0);
        assert_eq!(r.counter(&HALTS, &[("reason", "idle_timeout")]), 1.0);
    }

    #[test]
    fn bad_values_change_nothing() {
        let mut r = Registry::new();
        r.record(&spend(f64::NAN, None, Options::default()));
        r.record(&spend(-1.0, None, Options::default()));
        assert!(r.is_empty());
    }
}

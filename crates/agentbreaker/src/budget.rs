//! The BudgetBreaker (contract §4, seed 003): per-task halt conditions over an agent's event stream.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::hash::Hasher;

use rustc_hash::{FxHashMap, FxHasher};

use crate::text::is_ascii_space;
use std::sync::{Mutex, MutexGuard};

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::clock::{SharedClock, SystemClock, elapsed};
use crate::error::{Error, Result};
use crate::events::{Event, Listeners, Sink};
use crate::interop::{Fields, config_from_value, type_name};
use crate::text::format_decimal;

/// The implicit task that events land on when no task is open.
pub const SESSION_TASK: &str = "session";
/// The most tasks open at once.
pub const MAX_OPEN_TASKS: usize = 10_000;
/// The longest task id, in bytes.
pub const MAX_TASK_ID_BYTES: usize = 256;

/// Prices of one model in cents per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Price {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Cache-creation input tokens.
    pub cache_write: f64,
    /// Cache-read input tokens.
    pub cache_read: f64,
}

impl Price {
    /// The seed's Sonnet-4 list rate, the default `"*"` entry.
    pub const SONNET_4: Price = Price {
        input: 300.0,
        output: 1500.0,
        cache_write: 375.0,
        cache_read: 30.0,
    };
}

/// The highest price a price table accepts, in cents per million tokens ($10 000 per token):
/// far above any real price, and low enough that no spend can overflow to infinity (the most
/// tokens one usage event can carry, 4 x 2^64, cost about 7e26 cents at this price).
pub const MAX_PRICE: f64 = 1e12;

/// Configuration of a [`BudgetBreaker`]; defaults are the seed's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Tool calls per task; more halts. Default 50.
    pub max_tool_calls_per_task: u64,
    /// Spend per task in cents; more halts. Default 5000 ($50).
    pub max_token_spend_cents_per_task: u64,
    /// Wall-clock seconds from task start; more halts. Default 1800.
    pub max_task_duration_secs: u64,
    /// Seconds without events; more halts. Default 300.
    pub max_idle_secs: u64,
    /// Jaccard similarity at which consecutive outputs count as near-identical. Default 0.95.
    pub similarity_jaccard_threshold: f64,
    /// Outputs compared for an output loop (>= 2). Default 3.
    pub loop_window: u32,
    /// Tokens of each output compared. Default 512.
    pub max_tokens_per_output: u32,
    /// Prices by model name; `"*"` is for every other model.
    #[serde(deserialize_with = "deserialize_prices")]
    pub prices: BTreeMap<String, Price>,
}

fn default_prices() -> BTreeMap<String, Price> {
    BTreeMap::from([("*".to_string(), Price::SONNET_4)])
}

/// Given entries add to or override the defaults; `"*"` keeps the Sonnet-4 rate unless given.
fn deserialize_prices<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<BTreeMap<String, Price>, D::Error> {
    let given = BTreeMap::<String, Price>::deserialize(d)?;
    let mut prices = default_prices();
    prices.extend(given);
    Ok(prices)
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            max_tool_calls_per_task: 50,
            max_token_spend_cents_per_task: 5000,
            max_task_duration_secs: 1800,
            max_idle_secs: 300,
            similarity_jaccard_threshold: 0.95,
            loop_window: 3,
            max_tokens_per_output: 512,
            prices: default_prices(),
        }
    }
}

impl BudgetConfig {
    /// Reads a config object with the contract's camelCase keys (`null` = defaults).
    pub fn from_json(value: &Value) -> Result<Self> {
        let config: BudgetConfig = config_from_value(value, "BudgetBreaker")?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every range rule.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("maxToolCallsPerTask", self.max_tool_calls_per_task),
            (
                "maxTokenSpendCentsPerTask",
                self.max_token_spend_cents_per_task,
            ),
            ("maxTaskDurationSecs", self.max_task_duration_secs),
            ("maxIdleSecs", self.max_idle_secs),
            ("maxTokensPerOutput", u64::from(self.max_tokens_per_output)),
        ] {
            if v < 1 {
                return Err(Error::config(format_args!(
                    "{name} must be a whole number >= 1"
                )));
            }
        }
        let j = self.similarity_jaccard_threshold;
        if !(j.is_finite() && j > 0.0 && j <= 1.0) {
            return Err(Error::config(
                "similarityJaccardThreshold must be greater than 0 and at most 1",
            ));
        }
        if self.loop_window < 2 {
            return Err(Error::config("loopWindow must be >= 2"));
        }
        for (model, p) in &self.prices {
            for v in [p.input, p.output, p.cache_write, p.cache_read] {
                if !(v.is_finite() && (0.0..=MAX_PRICE).contains(&v)) {
                    return Err(Error::config(format_args!(
                        "prices[{model:?}] must be numbers from 0 to {MAX_PRICE:e} \
                         (cents per million tokens)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The prices for `model` (its own entry, else `"*"`).
    pub fn price_for(&self, model: Option<&str>) -> Price {
        model
            .and_then(|m| self.prices.get(m))
            .or_else(|| self.prices.get("*"))
            .copied()
            .unwrap_or(Price::SONNET_4)
    }
}

/// Token counts of a usage event (Anthropic's field names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// `input_tokens`.
    pub input_tokens: u64,
    /// `output_tokens`.
    pub output_tokens: u64,
    /// `cache_creation_input_tokens`.
    pub cache_creation_input_tokens: u64,
    /// `cache_read_input_tokens`.
    pub cache_read_input_tokens: u64,
}

/// Cents to the nano-cent, as budgets compare a spend: a sum of fractions is not exact in binary
/// (0.2 + 0.4 + 0.3 + 0.1 makes 1.0000000000000002), and exactly the budget is allowed.
pub(crate) fn nano_cents(cents: f64) -> f64 {
    (cents * 1e9).round() / 1e9
}

impl Usage {
    /// The names of the four counts in an event's `usage` object, in the order they are read.
    pub const KEYS: [&'static str; 4] = [
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ];

    /// The count named `key` (one of [`Usage::KEYS`]; `None` for any other name).
    pub fn count_mut(&mut self, key: &str) -> Option<&mut u64> {
        match key {
            "input_tokens" => Some(&mut self.input_tokens),
            "output_tokens" => Some(&mut self.output_tokens),
            "cache_creation_input_tokens" => Some(&mut self.cache_creation_input_tokens),
            "cache_read_input_tokens" => Some(&mut self.cache_read_input_tokens),
            _ => None,
        }
    }

    /// The four counts of a `usage` object (absent ones 0). Providers add keys of their own
    /// (service_tier, cache_creation, ...): only the four counts are read, and only their types
    /// matter.
    pub(crate) fn read(f: &Fields<'_>) -> Result<Self> {
        let mut usage = Usage::default();
        for key in Usage::KEYS {
            if let Some(count) = usage.count_mut(key) {
                *count = f.u64_or(key, 0)?;
            }
        }
        Ok(usage)
    }

    /// Cost in cents at `price`.
    pub fn cost_cents(&self, price: &Price) -> f64 {
        (self.input_tokens as f64 * price.input
            + self.output_tokens as f64 * price.output
            + self.cache_creation_input_tokens as f64 * price.cache_write
            + self.cache_read_input_tokens as f64 * price.cache_read)
            / 1_000_000.0
    }
}

/// A heartbeat phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The task started: push it on the stack.
    Starting,
    /// The task finished: drop it.
    Done,
    /// The task failed: drop it.
    Error,
}

/// What an event says.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// `{"type": "heartbeat", "taskId", "phase"}`.
    Heartbeat(Phase),
    /// `{"type": "assistant", "text"}`.
    Assistant(String),
    /// `{"type": "tool_use", "name", "input"}`.
    ToolUse(String),
    /// `{"type": "usage", "model", "usage": {...}}`.
    Usage {
        /// The model, which picks the price entry.
        model: Option<String>,
        /// The token counts.
        usage: Usage,
    },
    /// Any other `type`: ignored and counted.
    Unknown(String),
}

/// What [`BudgetBreaker`] reads of a validated event, borrowed from it (the tool's name and an
/// unknown type's name are not read).
#[derive(Debug, Clone, Copy)]
struct View<'a> {
    task_id: Option<&'a str>,
    kind: KindView<'a>,
}

#[derive(Debug, Clone, Copy)]
enum KindView<'a> {
    Heartbeat(Phase),
    Assistant(&'a str),
    ToolUse,
    Usage {
        model: Option<&'a str>,
        usage: &'a Usage,
    },
    Unknown,
}

/// One validated event of the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentEvent {
    /// The task the event names, if any.
    pub task_id: Option<String>,
    /// What it says.
    pub kind: EventKind,
}

impl AgentEvent {
    /// Checks a `taskId` as every event's is checked (contract §4): 1 to [`MAX_TASK_ID_BYTES`] bytes,
    /// else `INVALID_EVENT`.
    pub fn check_task_id(id: &str) -> Result<()> {
        if id.is_empty() {
            return Err(Error::event("taskId must not be empty"));
        }
        if id.len() > MAX_TASK_ID_BYTES {
            return Err(Error::event(format_args!(
                "taskId is longer than {MAX_TASK_ID_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// What the breaker reads of the event, borrowed.
    fn view(&self) -> View<'_> {
        View {
            task_id: self.task_id.as_deref(),
            kind: match &self.kind {
                EventKind::Heartbeat(phase) => KindView::Heartbeat(*phase),
                EventKind::Assistant(text) => KindView::Assistant(text),
                EventKind::ToolUse(_) => KindView::ToolUse,
                EventKind::Usage { model, usage } => KindView::Usage {
                    model: model.as_deref(),
                    usage,
                },
                EventKind::Unknown(_) => KindView::Unknown,
            },
        }
    }

    /// Validates a JSON event (contract §4); anything malformed is `INVALID_EVENT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(Error::event(format_args!(
                "an event must be an object, not {}",
                type_name(value)
            )));
        };
        let kind_name = match map.get("type") {
            Some(Value::String(s)) => s.as_str(),
            Some(v) => {
                return Err(Error::event(format_args!(
                    "event type must be a string, not {}",
                    type_name(v)
                )));
            }
            None => return Err(Error::event("an event needs a \"type\"")),
        };
        let task_id = match map.get("taskId") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                Self::check_task_id(s)?;
                Some(s.clone())
            }
            Some(v) => {
                return Err(Error::event(format_args!(
                    "taskId must be a string, not {}",
                    type_name(v)
                )));
            }
        };
        let field = |key: &str| map.get(key).filter(|v| !v.is_null());
        let kind = match kind_name {
            "heartbeat" => {
                if task_id.is_none() {
                    return Err(Error::event("a heartbeat needs a taskId"));
                }
                let phase = match field("phase") {
                    Some(Value::String(p)) if p == "starting" => Phase::Starting,
                    Some(Value::String(p)) if p == "done" => Phase::Done,
                    Some(Value::String(p)) if p == "error" => Phase::Error,
                    _ => {
                        return Err(Error::event(
                            "a heartbeat's phase must be \"starting\", \"done\" or \"error\"",
                        ));
                    }
                };
                EventKind::Heartbeat(phase)
            }
            "assistant" => match field("text") {
                Some(Value::String(t)) => EventKind::Assistant(t.clone()),
                Some(v) => {
                    return Err(Error::event(format_args!(
                        "assistant text must be a string, not {}",
                        type_name(v)
                    )));
                }
                None => return Err(Error::event("an assistant event needs a \"text\"")),
            },
            "tool_use" => match field("name") {
                Some(Value::String(n)) => EventKind::ToolUse(n.clone()),
                Some(v) => {
                    return Err(Error::event(format_args!(
                        "tool_use name must be a string, not {}",
                        type_name(v)
                    )));
                }
                None => return Err(Error::event("a tool_use event needs a \"name\"")),
            },
            "usage" => {
                let model = match field("model") {
                    None => None,
                    Some(Value::String(m)) => Some(m.clone()),
                    Some(v) => {
                        return Err(Error::event(format_args!(
                            "usage model must be a string, not {}",
                            type_name(v)
                        )));
                    }
                };
                let Some(usage) = field("usage") else {
                    return Err(Error::event("a usage event needs a \"usage\" object"));
                };
                let f = Fields::open(usage, "usage", Error::InvalidEvent)?;
                EventKind::Usage {
                    model,
                    usage: Usage::read(&f)?,
                }
            }
            other => EventKind::Unknown(other.to_string()),
        };
        Ok(AgentEvent { task_id, kind })
    }
}

/// Why a task was halted, with the counters (contract §4's table).
#[derive(Debug, Clone, PartialEq)]
pub enum HaltReason {
    /// More tool calls than the cap.
    ToolCallLimit {
        /// Tool calls made.
        actual: u64,
        /// The cap.
        limit: u64,
    },
    /// More spend than the cap.
    TokenSpendLimit {
        /// Spend in cents.
        actual_cents: f64,
        /// The cap.
        limit_cents: u64,
    },
    /// Longer than the duration limit.
    DurationLimit {
        /// Seconds since the task started.
        actual_secs: f64,
        /// The limit.
        limit_secs: u64,
    },
    /// Silent for longer than the idle limit.
    IdleTimeout {
        /// Seconds since the last event.
        idle_secs: f64,
        /// The limit.
        limit_secs: u64,
    },
    /// The last outputs were near-identical.
    OutputLoop {
        /// Outputs compared.
        window_size: u32,
        /// The smallest Jaccard similarity of consecutive pairs.
        similarity_jaccard: f64,
        /// The threshold.
        threshold: f64,
    },
}

impl HaltReason {
    /// `ToolCallLimit`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            HaltReason::ToolCallLimit { .. } => "ToolCallLimit",
            HaltReason::TokenSpendLimit { .. } => "TokenSpendLimit",
            HaltReason::DurationLimit { .. } => "DurationLimit",
            HaltReason::IdleTimeout { .. } => "IdleTimeout",
            HaltReason::OutputLoop { .. } => "OutputLoop",
        }
    }

    /// The machine-readable slug (`tool_call_limit`, ...).
    pub fn slug(&self) -> &'static str {
        match self {
            HaltReason::ToolCallLimit { .. } => "tool_call_limit",
            HaltReason::TokenSpendLimit { .. } => "token_spend_limit",
            HaltReason::DurationLimit { .. } => "duration_limit",
            HaltReason::IdleTimeout { .. } => "idle_timeout",
            HaltReason::OutputLoop { .. } => "output_loop",
        }
    }

    /// The counters in words (`tool calls: 51 of 50`).
    pub fn message(&self) -> String {
        match self {
            HaltReason::ToolCallLimit { actual, limit } => {
                format!("tool calls: {actual} of {limit}")
            }
            HaltReason::TokenSpendLimit {
                actual_cents,
                limit_cents,
            } => format!(
                "token spend: {}¢ of {limit_cents}¢",
                format_decimal(*actual_cents, 4)
            ),
            HaltReason::DurationLimit {
                actual_secs,
                limit_secs,
            } => format!(
                "duration: {}s of {limit_secs}s",
                format_decimal(*actual_secs, 3)
            ),
            HaltReason::IdleTimeout {
                idle_secs,
                limit_secs,
            } => format!("idle: {}s of {limit_secs}s", format_decimal(*idle_secs, 3)),
            HaltReason::OutputLoop {
                window_size,
                similarity_jaccard,
                ..
            } => format!("{window_size} near-identical outputs (jaccard {similarity_jaccard:.2})"),
        }
    }
}

/// A halt: which task, and why. Serializes as `{kind, slug, taskId, message, ...counters}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Halt {
    /// The halted task.
    pub task_id: String,
    /// Why.
    pub reason: HaltReason,
}

impl Halt {
    /// The halt as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Halt {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("kind", self.reason.kind())?;
        m.serialize_entry("slug", self.reason.slug())?;
        m.serialize_entry("taskId", &self.task_id)?;
        m.serialize_entry("message", &self.reason.message())?;
        match &self.reason {
            HaltReason::ToolCallLimit { actual, limit } => {
                m.serialize_entry("actual", actual)?;
                m.serialize_entry("limit", limit)?;
            }
            HaltReason::TokenSpendLimit {
                actual_cents,
                limit_cents,
            } => {
                m.serialize_entry("actualCents", actual_cents)?;
                m.serialize_entry("limitCents", limit_cents)?;
            }
            HaltReason::DurationLimit {
                actual_secs,
                limit_secs,
            } => {
                m.serialize_entry("actualSecs", actual_secs)?;
                m.serialize_entry("limitSecs", limit_secs)?;
            }
            HaltReason::IdleTimeout {
                idle_secs,
                limit_secs,
            } => {
                m.serialize_entry("idleSecs", idle_secs)?;
                m.serialize_entry("limitSecs", limit_secs)?;
            }
            HaltReason::OutputLoop {
                window_size,
                similarity_jaccard,
                threshold,
            } => {
                m.serialize_entry("windowSize", window_size)?;
                m.serialize_entry("similarityJaccard", similarity_jaccard)?;
                m.serialize_entry("threshold", threshold)?;
            }
        }
        m.end()
    }
}

/// One task in the live snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSnapshot {
    /// The task id.
    pub task_id: String,
    /// Tool calls so far.
    pub tool_calls: u64,
    /// Spend so far, in cents.
    pub spend_cents: f64,
    /// Seconds since it started.
    pub duration_secs: f64,
    /// Seconds since its last event.
    pub idle_secs: f64,
    /// Whether it has been halted.
    pub halted: bool,
}

/// The live breaker snapshot of seed 003.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetSnapshot {
    /// Open tasks in the order they were opened.
    pub tasks: Vec<TaskSnapshot>,
    /// The active-task stack, bottom first.
    pub stack: Vec<String>,
    /// Events of unknown type seen.
    pub ignored_events: u64,
}

#[derive(Debug)]
struct Task {
    id: String,
    started_at: u64,
    last_event_at: u64,
    tool_calls: u64,
    spend_cents: f64,
    /// The token-hash set of the last assistant output.
    last_output: Option<Vec<u64>>,
    /// Jaccard similarity of each consecutive pair among the last `loopWindow` outputs, oldest
    /// first (so a new output costs one comparison, not `loopWindow - 1`).
    similarities: VecDeque<f64>,
    halted: bool,
}

impl Task {
    fn new(id: String, now: u64) -> Self {
        Task {
            id,
            started_at: now,
            last_event_at: now,
            tool_calls: 0,
            spend_cents: 0.0,
            last_output: None,
            similarities: VecDeque::new(),
            halted: false,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Open tasks by opening sequence number.
    tasks: BTreeMap<u64, Task>,
    by_id: FxHashMap<String, u64>,
    next_seq: u64,
    stack: Vec<String>,
    ignored_events: u64,
    last_event_at: Option<u64>,
}

impl Inner {
    /// The task `id`, opened now unless it is open (`seq`, its sequence number then).
    fn open(&mut self, seq: Option<u64>, id: &str, now: u64) -> &mut Task {
        let seq = match seq {
            Some(seq) => seq,
            None => {
                let seq = self.next_seq;
                self.next_seq = self.next_seq.saturating_add(1);
                self.by_id.insert(id.to_string(), seq);
                self.tasks.insert(seq, Task::new(id.to_string(), now));
                seq
            }
        };
        self.tasks
            .entry(seq)
            .or_insert_with(|| Task::new(id.to_string(), now))
    }

    fn close(&mut self, id: &str) {
        if let Some(seq) = self.by_id.remove(id) {
            self.tasks.remove(&seq);
        }
        self.stack.retain(|t| t != id);
    }

    /// The idle reference time of a task: the session idles from the last event of any kind.
    fn idle_since(&self, task: &Task) -> u64 {
        if task.id == SESSION_TASK {
            self.last_event_at.unwrap_or(task.last_event_at)
        } else {
            task.last_event_at
        }
    }
}

/// The task an event opens or counts for (its taskId, else the top of the stack, else the
/// session); `None` for unknown events and closing heartbeats.
fn target<'a>(inner: &'a Inner, event: View<'a>) -> Option<&'a str> {
    match event.kind {
        KindView::Unknown | KindView::Heartbeat(Phase::Done | Phase::Error) => None,
        _ => Some(match event.task_id {
            Some(id) => id,
            None => inner.stack.last().map_or(SESSION_TASK, String::as_str),
        }),
    }
}

/// Watches an agent's event stream and halts tasks that exceed their budgets (contract §4).
pub struct BudgetBreaker {
    config: BudgetConfig,
    clock: SharedClock,
    inner: Mutex<Inner>,
    pub(crate) listeners: Listeners,
}

impl fmt::Debug for BudgetBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetBreaker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl BudgetBreaker {
    /// A breaker on the system clock.
    pub fn new(config: BudgetConfig) -> Result<Self> {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A breaker reading time from `clock`.
    pub fn with_clock(config: BudgetConfig, clock: SharedClock) -> Result<Self> {
        config.validate()?;
        Ok(BudgetBreaker {
            config,
            clock,
            inner: Mutex::new(Inner::default()),
            listeners: Listeners::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates and ingests one JSON event; returns the halt it caused, if any.
    pub fn ingest(&self, event: &Value) -> Result<Option<Halt>> {
        let event = AgentEvent::from_json(event)?;
        self.ingest_event(&event)
    }

    /// Ingests one validated event; returns the halt it caused, if any. Fails only when the event
    /// would open more than [`MAX_OPEN_TASKS`] tasks (`INVALID_EVENT`).
    pub fn ingest_event(&self, event: &AgentEvent) -> Result<Option<Halt>> {
        self.ingest_view(event.view())
    }

    /// [`ingest_event`](Self::ingest_event) of `{"type": "tool_use", "taskId": task_id, ...}`
    /// without building the event (the tool's name and input are not read); the `taskId` is
    /// checked as [`AgentEvent::from_json`] checks it.
    pub fn ingest_tool_use(&self, task_id: Option<&str>) -> Result<Option<Halt>> {
        self.ingest_parts(task_id, KindView::ToolUse)
    }

    /// [`ingest_event`](Self::ingest_event) of `{"type": "assistant", "text": text, "taskId":
    /// task_id}` without building the event; the `taskId` is checked as
    /// [`AgentEvent::from_json`] checks it.
    pub fn ingest_assistant(&self, text: &str, task_id: Option<&str>) -> Result<Option<Halt>> {
        self.ingest_parts(task_id, KindView::Assistant(text))
    }

    /// An event by parts: its taskId checked, then ingested.
    fn ingest_parts(&self, task_id: Option<&str>, kind: KindView<'_>) -> Result<Option<Halt>> {
        if let Some(id) = task_id {
            AgentEvent::check_task_id(id)?;
        }
        self.ingest_view(View { task_id, kind })
    }

    fn ingest_view(&self, event: View<'_>) -> Result<Option<Halt>> {
        let now = self.clock.now_ms();
        let halt = self.ingest_at(event, now, &mut Sink::Queue(&self.listeners));
        self.listeners.deliver();
        halt
    }

    /// Ingests several validated events, all or nothing with respect to the task cap.
    pub(crate) fn ingest_all(
        &self,
        events: &[AgentEvent],
        halts: &mut Vec<Halt>,
        sink: &mut Sink<'_>,
    ) -> Result<()> {
        let now = self.clock.now_ms();
        {
            let inner = self.lock();
            let new_ids: std::collections::HashSet<&str> = events
                .iter()
                .filter_map(|e| target(&inner, e.view()))
                .filter(|id| !inner.by_id.contains_key(*id))
                .collect();
            if inner.tasks.len() + new_ids.len() > MAX_OPEN_TASKS {
                return Err(too_many_tasks());
            }
        }
        for e in events {
            if let Some(h) = self.ingest_at(e.view(), now, sink)? {
                halts.push(h);
            }
        }
        Ok(())
    }

    /// Ingests under the lock; a halt's event goes to `sink` before the lock is released.
    fn ingest_at(&self, event: View<'_>, now: u64, sink: &mut Sink<'_>) -> Result<Option<Halt>> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        if let KindView::Unknown = event.kind {
            inner.ignored_events = inner.ignored_events.saturating_add(1);
            return Ok(None);
        }
        // Borrowed from the event or the session's name; owned only for a task from the stack.
        let target: Option<Cow<'_, str>> = match (event.task_id, target(inner, event)) {
            (_, None) => None,
            (Some(id), Some(_)) => Some(Cow::Borrowed(id)),
            (None, Some(SESSION_TASK)) => Some(Cow::Borrowed(SESSION_TASK)),
            (None, Some(id)) => Some(Cow::Owned(id.to_string())),
        };
        let seq = target
            .as_ref()
            .and_then(|id| inner.by_id.get(id.as_ref()).copied());
        if target.is_some() && seq.is_none() && inner.tasks.len() >= MAX_OPEN_TASKS {
            return Err(too_many_tasks());
        }
        inner.last_event_at = Some(now);
        let id = match (event.kind, target) {
            (KindView::Heartbeat(_), None) => {
                // done / error: drop the task wherever it is, halted or not.
                if let Some(id) = event.task_id {
                    inner.close(id);
                }
                return Ok(None);
            }
            (_, Some(id)) => id,
            (_, None) => return Ok(None),
        };
        let task = inner.open(seq, &id, now);
        task.last_event_at = now;
        if let KindView::Heartbeat(Phase::Starting) = event.kind {
            if !inner.stack.iter().any(|t| *t == id) {
                inner.stack.push(id.into_owned());
            }
            return Ok(None);
        }
        if task.halted {
            return Ok(None);
        }
        let c = &self.config;
        let reason = match event.kind {
            KindView::ToolUse => {
                task.tool_calls = task.tool_calls.saturating_add(1);
                (task.tool_calls > c.max_tool_calls_per_task).then_some(HaltReason::ToolCallLimit {
                    actual: task.tool_calls,
                    limit: c.max_tool_calls_per_task,
                })
            }
            KindView::Usage { model, usage } => {
                task.spend_cents += usage.cost_cents(&c.price_for(model));
                let spent = nano_cents(task.spend_cents);
                (spent > c.max_token_spend_cents_per_task as f64).then_some(
                    HaltReason::TokenSpendLimit {
                        actual_cents: spent,
                        limit_cents: c.max_token_spend_cents_per_task,
                    },
                )
            }
            KindView::Assistant(text) => {
                let set = token_set(text, c.max_tokens_per_output as usize);
                if let Some(last) = &task.last_output {
                    // A window of `loopWindow` outputs has `loopWindow - 1` pairs.
                    if task.similarities.len() + 1 >= c.loop_window as usize {
                        task.similarities.pop_front();
                    }
                    task.similarities.push_back(jaccard(last, &set));
                }
                task.last_output = Some(set);
                output_loop(&task.similarities, c)
            }
            _ => None,
        };
        let reason = reason.or_else(|| duration_halt(task, now, c));
        let halt = reason.map(|reason| {
            task.halted = true;
            Halt {
                task_id: id.into_owned(),
                reason,
            }
        });
        if let Some(h) = &halt {
            sink.push(Event::Halt {
                halt: h.clone(),
                at_ms: now,
            });
        }
        Ok(halt)
    }

    /// Checks duration and idle time of every open task (call it about once a second).
    pub fn tick(&self) -> Vec<Halt> {
        let now = self.clock.now_ms();
        let halts = self.tick_at(now);
        self.listeners.deliver();
        halts
    }

    fn tick_at(&self, now: u64) -> Vec<Halt> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let c = &self.config;
        let mut halts = Vec::new();
        let idle_refs: Vec<u64> = inner.tasks.values().map(|t| inner.idle_since(t)).collect();
        for (task, idle_since) in inner.tasks.values_mut().zip(idle_refs) {
            if task.halted {
                continue;
            }
            let idle_ms = elapsed(idle_since, now);
            let reason = duration_halt(task, now, c).or_else(|| {
                (idle_ms > c.max_idle_secs.saturating_mul(1000)).then_some(
                    HaltReason::IdleTimeout {
                        idle_secs: idle_ms as f64 / 1000.0,
                        limit_secs: c.max_idle_secs,
                    },
                )
            });
            if let Some(reason) = reason {
                task.halted = true;
                halts.push(Halt {
                    task_id: task.id.clone(),
                    reason,
                });
            }
        }
        // Queued under the lock, so concurrent ticks and ingests deliver in order.
        self.listeners.enqueue(halts.iter().map(|h| Event::Halt {
            halt: h.clone(),
            at_ms: now,
        }));
        halts
    }

    /// The live snapshot: open tasks, the stack, ignored events.
    pub fn snapshot(&self) -> BudgetSnapshot {
        let now = self.clock.now_ms();
        let inner = self.lock();
        BudgetSnapshot {
            tasks: inner
                .tasks
                .values()
                .map(|t| TaskSnapshot {
                    task_id: t.id.clone(),
                    tool_calls: t.tool_calls,
                    spend_cents: t.spend_cents,
                    duration_secs: elapsed(t.started_at, now) as f64 / 1000.0,
                    idle_secs: elapsed(inner.idle_since(t), now) as f64 / 1000.0,
                    halted: t.halted,
                })
                .collect(),
            stack: inner.stack.clone(),
            ignored_events: inner.ignored_events,
        }
    }

    /// Forgets every task, the stack and the counters.
    pub fn reset(&self) {
        *self.lock() = Inner::default();
    }

    crate::events::listener_methods!("`halt`");
}

fn too_many_tasks() -> Error {
    Error::event(format_args!(
        "more than {MAX_OPEN_TASKS} tasks would be open; close tasks with a done heartbeat"
    ))
}

fn duration_halt(task: &Task, now: u64, c: &BudgetConfig) -> Option<HaltReason> {
    let ran = elapsed(task.started_at, now);
    (ran > c.max_task_duration_secs.saturating_mul(1000)).then_some(HaltReason::DurationLimit {
        actual_secs: ran as f64 / 1000.0,
        limit_secs: c.max_task_duration_secs,
    })
}

/// The whitespace tokens of `text` (the first `max` of them) as a sorted set of 64-bit hashes.
pub(crate) fn token_set(text: &str, max: usize) -> Vec<u64> {
    let hash = |token: &[u8]| {
        let mut h = FxHasher::default();
        h.write(token);
        h.finish()
    };
    let mut set: Vec<u64> = Vec::with_capacity(max.min(text.len() / 2 + 1));
    if text.is_ascii() {
        // The common case, byte by byte: the same tokens as `Tokens`.
        let mut rest = text.as_bytes();
        while set.len() < max {
            let Some(start) = rest.iter().position(|&b| !is_ascii_space(b)) else {
                break;
            };
            rest = &rest[start..];
            let end = rest
                .iter()
                .position(|&b| is_ascii_space(b))
                .unwrap_or(rest.len());
            set.push(hash(&rest[..end]));
            rest = &rest[end..];
        }
    } else {
        set.extend(Tokens::new(text).take(max).map(|t| hash(t.as_bytes())));
    }
    set.sort_unstable();
    set.dedup();
    set
}

/// `str::split_whitespace` (Unicode `White_Space`), with a fast path for ASCII bytes: the
/// tokenizer is most of the cost of an assistant event.
struct Tokens<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Tokens { text, at: 0 }
    }

    /// The character at `at` (a char boundary) when it is not ASCII: whether it is whitespace,
    /// and its length.
    fn wide(&self, at: usize) -> (bool, usize) {
        self.text[at..]
            .chars()
            .next()
            .map_or((false, 1), |c| (c.is_whitespace(), c.len_utf8()))
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let bytes = self.text.as_bytes();
        let mut i = self.at;
        // Skip whitespace.
        loop {
            let Some(&b) = bytes.get(i) else {
                self.at = i;
                return None;
            };
            if b < 0x80 {
                if !is_ascii_space(b) {
                    break;
                }
                i += 1;
            } else {
                match self.wide(i) {
                    (true, n) => i += n,
                    (false, _) => break,
                }
            }
        }
        let start = i;
        while let Some(&b) = bytes.get(i) {
            if b < 0x80 {
                if is_ascii_space(b) {
                    break;
                }
                i += 1;
            } else {
                match self.wide(i) {
                    (true, _) => break,
                    (false, n) => i += n,
                }
            }
        }
        self.at = i;
        Some(&self.text[start..i])
    }
}

/// Jaccard similarity of two sorted sets; two empty sets compare as 1.0.
pub(crate) fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    common as f64 / (a.len() + b.len() - common) as f64
}

/// A loop when the last `loopWindow` outputs (their `loopWindow - 1` consecutive pairs) are all
/// at least `similarityJaccardThreshold` alike; the reported similarity is the smallest.
fn output_loop(similarities: &VecDeque<f64>, c: &BudgetConfig) -> Option<HaltReason> {
    if similarities.len() + 1 < c.loop_window as usize {
        return None;
    }
    let smallest = similarities.iter().copied().fold(f64::INFINITY, f64::min);
    (smallest >= c.similarity_jaccard_threshold).then_some(HaltReason::OutputLoop {
        window_size: c.loop_window,
        similarity_jaccard: smallest,
        threshold: c.similarity_jaccard_threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use serde_json::json;
    use std::sync::Arc;

    fn breaker(config: BudgetConfig) -> (BudgetBreaker, Arc<ManualClock>) {
        let clock = ManualClock::shared(0);
        let b = BudgetBreaker::with_clock(config, clock.clone()).unwrap();
        (b, clock)
    }

    fn config(value: Value) -> BudgetConfig {
        BudgetConfig::from_json(&value).unwrap()
    }

    fn tool(task: Option<&str>) -> Value {
        match task {
            Some(t) => json!({"type": "tool_use", "name": "Bash", "input": {}, "taskId": t}),
            None => json!({"type": "tool_use", "name": "Bash", "input": {}}),
        }
    }

    fn heartbeat(task: &str, phase: &str) -> Value {
        json!({"type": "heartbeat", "taskId": task, "phase": phase})
    }

    fn say(task: &str, text: &str) -> Value {
        json!({"type": "assistant", "text": text, "taskId": task})
    }

    fn task<'a>(snap: &'a BudgetSnapshot, id: &str) -> &'a TaskSnapshot {
        snap.tasks
            .iter()
            .find(|t| t.task_id == id)
            .unwrap_or_else(|| panic!("no task {id} in {snap:?}"))
    }

    fn ids(snap: &BudgetSnapshot) -> Vec<&str> {
        snap.tasks.iter().map(|t| t.task_id.as_str()).collect()
    }

    fn words(range: std::ops::RangeInclusive<u32>) -> String {
        range.map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Checks a halt's JSON: exactly these keys, strings equal, numbers within 1e-9.
    fn assert_halt_json(halt: &Halt, expected: Value) {
        let got = halt.to_json();
        let (Value::Object(got), Value::Object(want)) = (&got, &expected) else {
            panic!("not objects: {got} / {expected}");
        };
        let mut got_keys: Vec<&String> = got.keys().collect();
        let mut want_keys: Vec<&String> = want.keys().collect();
        got_keys.sort();
        want_keys.sort();
        assert_eq!(got_keys, want_keys);
        for (k, w) in want {
            let g = &got[k];
            match (g.as_f64(), w.as_f64()) {
                (Some(g), Some(w)) => assert!(close(g, w), "{k}: {g} != {w}"),
                _ => assert_eq!(g, w, "{k}"),
            }
        }
    }

    #[test]
    fn token_sets_and_jaccard() {
        assert_eq!(jaccard(&token_set("", 512), &token_set("", 512)), 1.0);
        assert_eq!(jaccard(&token_set("   \n\t", 512), &[]), 1.0);
        assert_eq!(jaccard(&token_set("a", 512), &[]), 0.0);
        assert_eq!(jaccard(&token_set("a b", 512), &token_set("c d", 512)), 0.0);
        assert_eq!(jaccard(&token_set("a b", 512), &token_set("b a", 512)), 1.0);
        // Whitespace of any kind separates; duplicates collapse into one set member.
        assert_eq!(token_set("a\tb\nc  a", 512).len(), 3);
        assert_eq!(token_set("a\tb\nc", 512), token_set("c b a", 512));
        // {a, b, c} vs {b, c, d}: 2 / 4.
        assert_eq!(
            jaccard(&token_set("a b c", 512), &token_set("b c d", 512)),
            0.5
        );
        // 19 shared of 20 distinct: exactly 0.95.
        let j = jaccard(
            &token_set(&words(1..=20), 512),
            &token_set(&words(1..=19), 512),
        );
        assert_eq!(j, 0.95);
        assert_eq!(j, 19.0 / 20.0);
        // 1 of 3.
        assert_eq!(
            jaccard(&token_set("x y", 512), &token_set("y z", 512)),
            1.0 / 3.0
        );
    }

    #[test]
    fn prices_are_bounded_so_spend_stays_finite() {
        let price = |v: f64| json!({"prices": {"*": {"input": v, "output": 1, "cacheWrite": 1, "cacheRead": 1}}});
        for bad in [1e300, MAX_PRICE * 1.01, -1.0] {
            let e = BudgetConfig::from_json(&price(bad)).unwrap_err();
            assert_eq!(e.code(), "INVALID_CONFIG", "{bad}");
        }
        let (b, _) = breaker(config(price(MAX_PRICE)));
        let usage = json!({"type": "usage", "model": "m", "usage": {"input_tokens": u64::MAX,
            "output_tokens": u64::MAX, "cache_creation_input_tokens": u64::MAX,
            "cache_read_input_tokens": u64::MAX}});
        let halt = b.ingest(&usage).unwrap().unwrap();
        let HaltReason::TokenSpendLimit { actual_cents, .. } = halt.reason else {
            panic!("{halt:?}");
        };
        assert!(actual_cents.is_finite() && actual_cents > 1e25);
    }

    #[test]
    fn tokens_split_like_split_whitespace() {
        let samples = [
            "",
            " ",
            "a",
            "  a  b\t\tc\n",
            "x\u{0b}y\u{0c}z\r\nw",
            "non\u{a0}breaking\u{3000}ideographic\u{2028}line\u{85}next",
            "\u{1c}\u{1f} are not whitespace",
            "héllo wörld 日本語 テスト\u{200a}hair",
            "trailing\u{205f}",
        ];
        for text in samples {
            let ours: Vec<&str> = Tokens::new(text).collect();
            let std: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }

    /// `token_set` as the contract words it: the first `max` whitespace tokens, hashed, as a set.
    fn reference_token_set(text: &str, max: usize) -> Vec<u64> {
        let mut set: Vec<u64> = text
            .split_whitespace()
            .take(max)
            .map(|t| {
                let mut h = FxHasher::default();
                h.write(t.as_bytes());
                h.finish()
            })
            .collect();
        set.sort_unstable();
        set.dedup();
        set
    }

    proptest::proptest! {
        #[test]
        fn token_set_matches_the_reference_on_ascii_and_unicode_text(
            text in "([ a-c\t\n\u{0b}\u{0c}\r\u{1c}]{0,30}|[ a-c\t\n\u{85}\u{a0}\u{3000}é]{0,30})",
            max in 0usize..12,
        ) {
            proptest::prop_assert_eq!(token_set(&text, max), reference_token_set(&text, max));
        }

        #[test]
        fn tokens_split_like_split_whitespace_on_any_text(
            text in "[ a-zé\t\n\u{0b}\u{0c}\r\u{85}\u{a0}\u{1680}\u{2000}-\u{200b}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}\u{1c}-\u{1f}日]{0,40}"
        ) {
            let ours: Vec<&str> = Tokens::new(&text).collect();
            let std: Vec<&str> = text.split_whitespace().collect();
            proptest::prop_assert_eq!(ours, std);
        }
    }

    #[test]
    fn token_sets_are_capped_at_max_tokens() {
        assert_eq!(token_set("a b c x", 3), token_set("a b c", 512));
        assert_eq!(
            jaccard(&token_set("a b c x", 3), &token_set("a b c y", 3)),
            1.0
        );
        let long = words(1..=600);
        assert_eq!(token_set(&long, 512).len(), 512);
        assert_eq!(token_set(&long, 512), token_set(&words(1..=512), 512));
    }

    #[test]
    fn cost_formula_in_cents() {
        let u = Usage {
            input_tokens: 1000,
            output_tokens: 2000,
            cache_creation_input_tokens: 3000,
            cache_read_input_tokens: 4000,
        };
        // (1000*300 + 2000*1500 + 3000*375 + 4000*30) / 1e6 = 4 545 000 / 1e6
        assert!(close(u.cost_cents(&Price::SONNET_4), 4.545));
        let million = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        assert!(close(million.cost_cents(&Price::SONNET_4), 300.0));
        let p = Price {
            input: 80.0,
            output: 400.0,
            cache_write: 100.0,
            cache_read: 8.0,
        };
        assert!(close(u.cost_cents(&p), 0.08 + 0.8 + 0.3 + 0.032));
        assert_eq!(Usage::default().cost_cents(&Price::SONNET_4), 0.0);
    }

    #[test]
    fn spend_is_summed_per_model_price() {
        let (b, _) = breaker(config(json!({
            "prices": {"claude-haiku": {"input": 80, "output": 400, "cacheWrite": 100, "cacheRead": 8}}
        })));
        let usage = json!({"input_tokens": 1000, "output_tokens": 2000,
            "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 4000});
        b.ingest(&json!({"type": "usage", "model": "claude-haiku", "usage": usage}))
            .unwrap();
        assert!(close(b.snapshot().tasks[0].spend_cents, 1.212));
        // An unknown model and a missing model both use "*" (Sonnet 4).
        b.ingest(&json!({"type": "usage", "model": "gpt-x", "usage": usage}))
            .unwrap();
        assert!(close(b.snapshot().tasks[0].spend_cents, 1.212 + 4.545));
        b.ingest(&json!({"type": "usage", "usage": {"output_tokens": 1000}}))
            .unwrap();
        assert!(close(
            b.snapshot().tasks[0].spend_cents,
            1.212 + 4.545 + 1.5
        ));
        // Missing or null counts are 0.
        b.ingest(&json!({"type": "usage", "usage": {"input_tokens": null}}))
            .unwrap();
        assert!(close(
            b.snapshot().tasks[0].spend_cents,
            1.212 + 4.545 + 1.5
        ));
    }

    #[test]
    fn price_merging_keeps_sonnet_for_star_unless_given() {
        let c = config(
            json!({"prices": {"m": {"input": 1, "output": 2, "cacheWrite": 3, "cacheRead": 4}}}),
        );
        assert_eq!(c.prices.len(), 2);
        assert_eq!(c.prices["*"], Price::SONNET_4);
        assert_eq!(
            c.price_for(Some("m")),
            Price {
                input: 1.0,
                output: 2.0,
                cache_write: 3.0,
                cache_read: 4.0
            }
        );
        assert_eq!(c.price_for(Some("other")), Price::SONNET_4);
        assert_eq!(c.price_for(None), Price::SONNET_4);
        let star = Price {
            input: 10.0,
            output: 20.0,
            cache_write: 30.0,
            cache_read: 40.0,
        };
        let c = config(
            json!({"prices": {"*": {"input": 10, "output": 20, "cacheWrite": 30, "cacheRead": 40}}}),
        );
        assert_eq!(c.prices.len(), 1);
        assert_eq!(c.price_for(Some("anything")), star);
        assert_eq!(c.price_for(None), star);
        assert_eq!(BudgetConfig::default().prices["*"], Price::SONNET_4);
        assert_eq!(
            Price::SONNET_4,
            Price {
                input: 300.0,
                output: 1500.0,
                cache_write: 375.0,
                cache_read: 30.0
            }
        );
    }

    #[test]
    fn config_defaults_and_ranges() {
        let d = BudgetConfig::default();
        assert_eq!(d.max_tool_calls_per_task, 50);
        assert_eq!(d.max_token_spend_cents_per_task, 5000);
        assert_eq!(d.max_task_duration_secs, 1800);
        assert_eq!(d.max_idle_secs, 300);
        assert_eq!(d.similarity_jaccard_threshold, 0.95);
        assert_eq!(d.loop_window, 3);
        assert_eq!(d.max_tokens_per_output, 512);
        assert_eq!(BudgetConfig::from_json(&Value::Null).unwrap(), d);
        for ok in [
            json!({"similarityJaccardThreshold": 1.0}),
            json!({"similarityJaccardThreshold": 0.01}),
            json!({"loopWindow": 2}),
            json!({"maxToolCallsPerTask": 1, "maxIdleSecs": 1, "maxTokensPerOutput": 1}),
            json!({"prices": {"free": {"input": 0, "output": 0, "cacheWrite": 0, "cacheRead": 0}}}),
        ] {
            assert!(BudgetConfig::from_json(&ok).is_ok(), "{ok}");
        }
        for bad in [
            json!({"maxToolCallsPerTask": 0}),
            json!({"maxTokenSpendCentsPerTask": 0}),
            json!({"maxTaskDurationSecs": 0}),
            json!({"maxIdleSecs": 0}),
            json!({"maxTokensPerOutput": 0}),
            json!({"maxToolCallsPerTask": 50.5}),
            json!({"similarityJaccardThreshold": 0}),
            json!({"similarityJaccardThreshold": 1.01}),
            json!({"loopWindow": 1}),
            json!({"prices": {"m": {"input": -1}}}),
            json!({"maxToolCalls": 5}),
        ] {
            assert_eq!(
                BudgetConfig::from_json(&bad).unwrap_err().code(),
                "INVALID_CONFIG",
                "{bad}"
            );
        }
        let nan = BudgetConfig {
            similarity_jaccard_threshold: f64::NAN,
            ..BudgetConfig::default()
        };
        assert_eq!(
            BudgetBreaker::with_clock(nan, ManualClock::shared(0))
                .unwrap_err()
                .code(),
            "INVALID_CONFIG"
        );
    }

    #[test]
    fn tool_call_limit_is_strictly_more_than() {
        let (b, _) = breaker(config(json!({"maxToolCallsPerTask": 2})));
        assert_eq!(b.ingest(&tool(Some("t1"))).unwrap(), None);
        assert_eq!(b.ingest(&tool(Some("t1"))).unwrap(), None);
        let halt = b.ingest(&tool(Some("t1"))).unwrap().unwrap();
        assert_eq!(
            halt.to_json(),
            json!({"kind": "ToolCallLimit", "slug": "tool_call_limit", "taskId": "t1",
                "message": "tool calls: 3 of 2", "actual": 3, "limit": 2})
        );
        // Reported once; later events for the halted task are ignored.
        assert_eq!(b.ingest(&tool(Some("t1"))).unwrap(), None);
        assert_eq!(task(&b.snapshot(), "t1").tool_calls, 3);
        assert!(task(&b.snapshot(), "t1").halted);
    }

    #[test]
    fn token_spend_halt_shape() {
        // 0.1 cents per input token.
        let (b, _) = breaker(config(json!({
            "maxTokenSpendCentsPerTask": 10,
            "prices": {"*": {"input": 100000, "output": 0, "cacheWrite": 0, "cacheRead": 0}}
        })));
        let usage = |n: u64| json!({"type": "usage", "taskId": "t", "usage": {"input_tokens": n}});
        assert_eq!(b.ingest(&usage(100)).unwrap(), None); // exactly 10 cents: not more
        let halt = b.ingest(&usage(2)).unwrap().unwrap();
        assert_halt_json(
            &halt,
            json!({"kind": "TokenSpendLimit", "slug": "token_spend_limit", "taskId": "t",
                "message": "token spend: 10.2¢ of 10¢", "actualCents": 10.2, "limitCents": 10}),
        );
    }

    #[test]
    fn duration_halt_shape_and_boundary() {
        let (b, clock) = breaker(config(json!({"maxTaskDurationSecs": 10})));
        b.ingest(&heartbeat("job", "starting")).unwrap();
        clock.set(10_000);
        assert_eq!(b.ingest(&tool(None)).unwrap(), None);
        assert!(b.tick().is_empty());
        clock.set(10_001);
        let halt = b.ingest(&tool(None)).unwrap().unwrap();
        assert_halt_json(
            &halt,
            json!({"kind": "DurationLimit", "slug": "duration_limit", "taskId": "job",
                "message": "duration: 10.001s of 10s", "actualSecs": 10.001, "limitSecs": 10}),
        );
        assert!(b.tick().is_empty(), "a halted task reports once");
    }

    #[test]
    fn idle_halt_shape_and_boundary() {
        let (b, clock) = breaker(config(json!({"maxIdleSecs": 5})));
        b.ingest(&heartbeat("job", "starting")).unwrap();
        clock.set(3000);
        b.ingest(&say("job", "still here")).unwrap();
        clock.set(8000);
        assert!(b.tick().is_empty());
        clock.set(8001);
        let halts = b.tick();
        assert_eq!(halts.len(), 1);
        assert_halt_json(
            &halts[0],
            json!({"kind": "IdleTimeout", "slug": "idle_timeout", "taskId": "job",
                "message": "idle: 5.001s of 5s", "idleSecs": 5.001, "limitSecs": 5}),
        );
        assert!(b.tick().is_empty());
    }

    #[test]
    fn output_loop_halt_shape() {
        let (b, _) = breaker(BudgetConfig::default());
        assert_eq!(b.ingest(&say("t", "I will try again")).unwrap(), None);
        assert_eq!(b.ingest(&say("t", "I will try again")).unwrap(), None);
        let halt = b.ingest(&say("t", "again I will try")).unwrap().unwrap();
        assert_eq!(
            halt.to_json(),
            json!({"kind": "OutputLoop", "slug": "output_loop", "taskId": "t",
                "message": "3 near-identical outputs (jaccard 1.00)", "windowSize": 3,
                "similarityJaccard": 1.0, "threshold": 0.95})
        );
    }

    #[test]
    fn output_loop_needs_every_pair_and_reports_the_smallest() {
        let (b, _) = breaker(BudgetConfig::default());
        let a = words(1..=20);
        let a19 = words(1..=19);
        let other = words(100..=120);
        // Window [a, a, other]: one pair is 0 -> no loop.
        b.ingest(&say("t", &a)).unwrap();
        b.ingest(&say("t", &a)).unwrap();
        assert_eq!(b.ingest(&say("t", &other)).unwrap(), None);
        // [a, other, a] -> no; [other, a, a] -> no; [a, a, a19]: pairs 1.0 and 0.95 -> loop.
        assert_eq!(b.ingest(&say("t", &a)).unwrap(), None);
        assert_eq!(b.ingest(&say("t", &a)).unwrap(), None);
        let halt = b.ingest(&say("t", &a19)).unwrap().unwrap();
        let HaltReason::OutputLoop {
            similarity_jaccard,
            window_size,
            threshold,
        } = halt.reason
        else {
            panic!("expected an output loop, got {halt:?}");
        };
        assert_eq!(similarity_jaccard, 0.95);
        assert_eq!((window_size, threshold), (3, 0.95));
        assert_eq!(
            halt.reason.message(),
            "3 near-identical outputs (jaccard 0.95)"
        );
        // 18 of 20 shared (0.9) stays below the threshold.
        let (c, _) = breaker(BudgetConfig::default());
        c.ingest(&say("t", &words(1..=20))).unwrap();
        c.ingest(&say("t", &words(1..=20))).unwrap();
        assert_eq!(c.ingest(&say("t", &words(1..=18))).unwrap(), None);
        // Empty outputs are a loop signal too.
        let (e, _) = breaker(config(json!({"loopWindow": 2})));
        e.ingest(&say("t", "")).unwrap();
        let halt = e.ingest(&say("t", "  ")).unwrap().unwrap();
        assert_eq!(
            halt.reason.message(),
            "2 near-identical outputs (jaccard 1.00)"
        );
    }

    #[test]
    fn message_number_formatting() {
        let m = |r: HaltReason| r.message();
        assert_eq!(
            m(HaltReason::TokenSpendLimit {
                actual_cents: 5001.2,
                limit_cents: 5000
            }),
            "token spend: 5001.2¢ of 5000¢"
        );
        assert_eq!(
            m(HaltReason::TokenSpendLimit {
                actual_cents: 5000.12344,
                limit_cents: 5000
            }),
            "token spend: 5000.1234¢ of 5000¢"
        );
        assert_eq!(
            m(HaltReason::TokenSpendLimit {
                actual_cents: 6000.0,
                limit_cents: 5000
            }),
            "token spend: 6000¢ of 5000¢"
        );
        assert_eq!(
            m(HaltReason::DurationLimit {
                actual_secs: 1801.0,
                limit_secs: 1800
            }),
            "duration: 1801s of 1800s"
        );
        assert_eq!(
            m(HaltReason::DurationLimit {
                actual_secs: 1800.5,
                limit_secs: 1800
            }),
            "duration: 1800.5s of 1800s"
        );
        assert_eq!(
            m(HaltReason::DurationLimit {
                actual_secs: 1800.001,
                limit_secs: 1800
            }),
            "duration: 1800.001s of 1800s"
        );
        assert_eq!(
            m(HaltReason::IdleTimeout {
                idle_secs: 301.0,
                limit_secs: 300
            }),
            "idle: 301s of 300s"
        );
        assert_eq!(
            m(HaltReason::IdleTimeout {
                idle_secs: 300.25,
                limit_secs: 300
            }),
            "idle: 300.25s of 300s"
        );
        assert_eq!(
            m(HaltReason::ToolCallLimit {
                actual: 51,
                limit: 50
            }),
            "tool calls: 51 of 50"
        );
        assert_eq!(
            m(HaltReason::OutputLoop {
                window_size: 3,
                similarity_jaccard: 0.966,
                threshold: 0.95
            }),
            "3 near-identical outputs (jaccard 0.97)"
        );
    }

    #[test]
    fn seed_example_durations_through_tick() {
        let (b, clock) = breaker(BudgetConfig::default());
        b.ingest(&heartbeat("long", "starting")).unwrap();
        for t in (60_000..=1_800_000).step_by(60_000) {
            clock.set(t);
            b.ingest(&tool(None)).unwrap();
            b.ingest(&json!({"type": "usage", "usage": {}})).unwrap();
            assert!(b.tick().is_empty(), "at {t}");
        }
        clock.set(1_800_500);
        let halts = b.tick();
        assert_eq!(halts.len(), 1);
        assert_eq!(halts[0].reason.message(), "duration: 1800.5s of 1800s");
        assert_eq!(halts[0].task_id, "long");
    }

    #[test]
    fn stack_attribution() {
        let (b, _) = breaker(BudgetConfig::default());
        b.ingest(&heartbeat("outer", "starting")).unwrap();
        b.ingest(&tool(None)).unwrap();
        b.ingest(&heartbeat("inner", "starting")).unwrap();
        b.ingest(&tool(None)).unwrap();
        b.ingest(&tool(None)).unwrap();
        let s = b.snapshot();
        assert_eq!(s.stack, ["outer", "inner"]);
        assert_eq!(task(&s, "outer").tool_calls, 1);
        assert_eq!(task(&s, "inner").tool_calls, 2);
        // An explicit taskId counts for that task and opens it without pushing it.
        b.ingest(&tool(Some("side"))).unwrap();
        let s = b.snapshot();
        assert_eq!(s.stack, ["outer", "inner"]);
        assert_eq!(task(&s, "side").tool_calls, 1);
        assert_eq!(ids(&s), ["outer", "inner", "side"]);
        // done removes the task wherever it is on the stack, and drops its counters.
        b.ingest(&heartbeat("outer", "done")).unwrap();
        let s = b.snapshot();
        assert_eq!(s.stack, ["inner"]);
        assert_eq!(ids(&s), ["inner", "side"]);
        b.ingest(&heartbeat("inner", "error")).unwrap();
        assert!(b.snapshot().stack.is_empty());
        // Empty stack: the implicit session task.
        b.ingest(&tool(None)).unwrap();
        let s = b.snapshot();
        assert_eq!(ids(&s), ["side", SESSION_TASK]);
        assert_eq!(task(&s, SESSION_TASK).tool_calls, 1);
        assert!(s.stack.is_empty());
        // Restarting a closed task starts from zero.
        b.ingest(&heartbeat("outer", "starting")).unwrap();
        assert_eq!(task(&b.snapshot(), "outer").tool_calls, 0);
        // done for a task that is not open does nothing.
        b.ingest(&heartbeat("ghost", "done")).unwrap();
        assert_eq!(ids(&b.snapshot()), ["side", SESSION_TASK, "outer"]);
    }

    #[test]
    fn parallel_siblings_keep_separate_counters() {
        let (b, _) = breaker(config(json!({"maxToolCallsPerTask": 2})));
        b.ingest(&heartbeat("a", "starting")).unwrap();
        b.ingest(&heartbeat("b", "starting")).unwrap();
        for _ in 0..2 {
            assert_eq!(b.ingest(&tool(Some("a"))).unwrap(), None);
            assert_eq!(b.ingest(&tool(Some("b"))).unwrap(), None);
        }
        let halt = b.ingest(&tool(Some("a"))).unwrap().unwrap();
        assert_eq!(halt.task_id, "a");
        assert_eq!(task(&b.snapshot(), "b").tool_calls, 2);
        assert!(!task(&b.snapshot(), "b").halted);
    }

    #[test]
    fn session_idles_only_when_the_whole_stream_is_silent() {
        let (b, clock) = breaker(config(json!({"maxIdleSecs": 5})));
        b.ingest(&tool(None)).unwrap(); // opens session at 0
        clock.set(4000);
        b.ingest(&tool(Some("t1"))).unwrap(); // another task's event keeps the session awake
        clock.set(9000);
        assert!(b.tick().is_empty());
        let s = b.snapshot();
        assert!(close(task(&s, SESSION_TASK).idle_secs, 5.0));
        assert!(close(task(&s, SESSION_TASK).duration_secs, 9.0));
        clock.set(9001);
        let halts = b.tick();
        let got: Vec<(&str, &str)> = halts
            .iter()
            .map(|h| (h.task_id.as_str(), h.reason.slug()))
            .collect();
        assert_eq!(
            got,
            [(SESSION_TASK, "idle_timeout"), ("t1", "idle_timeout")]
        );
        // The session stays halted until reset().
        b.ingest(&tool(None)).unwrap();
        assert!(task(&b.snapshot(), SESSION_TASK).halted);
        assert_eq!(task(&b.snapshot(), SESSION_TASK).tool_calls, 1);
        b.reset();
        assert!(b.snapshot().tasks.is_empty());
        b.ingest(&tool(None)).unwrap();
        assert!(!task(&b.snapshot(), SESSION_TASK).halted);
    }

    #[test]
    fn ingest_checks_tool_calls_before_duration() {
        let (b, clock) = breaker(config(
            json!({"maxToolCallsPerTask": 1, "maxTaskDurationSecs": 1}),
        ));
        b.ingest(&tool(Some("t"))).unwrap();
        clock.set(5000);
        let halt = b.ingest(&tool(Some("t"))).unwrap().unwrap();
        assert_eq!(halt.reason.slug(), "tool_call_limit");
        let (c, clock) = breaker(config(json!({"loopWindow": 2, "maxTaskDurationSecs": 1})));
        c.ingest(&say("t", "same")).unwrap();
        clock.set(5000);
        let halt = c.ingest(&say("t", "same")).unwrap().unwrap();
        assert_eq!(halt.reason.slug(), "output_loop");
        // An event that trips nothing of its own still checks duration.
        let (d, clock) = breaker(config(json!({"maxTaskDurationSecs": 1})));
        d.ingest(&say("t", "a")).unwrap();
        clock.set(1001);
        let halt = d.ingest(&say("t", "b")).unwrap().unwrap();
        assert_eq!(halt.reason.slug(), "duration_limit");
    }

    #[test]
    fn tick_reports_in_opening_order_once_and_prefers_duration() {
        let (b, clock) = breaker(config(
            json!({"maxIdleSecs": 10, "maxTaskDurationSecs": 20}),
        ));
        b.ingest(&heartbeat("c", "starting")).unwrap();
        clock.set(1000);
        b.ingest(&heartbeat("a", "starting")).unwrap();
        clock.set(2000);
        b.ingest(&heartbeat("b", "starting")).unwrap();
        clock.set(11_999);
        let halts = b.tick();
        assert_eq!(halts.len(), 2);
        assert_eq!(
            (halts[0].task_id.as_str(), halts[1].task_id.as_str()),
            ("c", "a")
        );
        assert_eq!(halts[0].reason.message(), "idle: 11.999s of 10s");
        assert_eq!(halts[1].reason.message(), "idle: 10.999s of 10s");
        clock.set(30_000);
        let halts = b.tick();
        assert_eq!(halts.len(), 1);
        // "b" is both idle and over its duration: duration is reported.
        assert_eq!(halts[0].task_id, "b");
        assert_eq!(halts[0].reason.message(), "duration: 28s of 20s");
        assert!(b.tick().is_empty());
    }

    #[test]
    fn malformed_and_unknown_events_change_nothing() {
        let (b, clock) = breaker(config(json!({"maxIdleSecs": 5})));
        b.ingest(&tool(Some("t"))).unwrap();
        let before = b.snapshot();
        for bad in [
            json!("tool_use"),
            json!({"name": "x"}),
            json!({"type": 3}),
            json!({"type": "tool_use"}),
            json!({"type": "assistant", "text": 1, "taskId": "t"}),
            json!({"type": "usage", "taskId": "t", "usage": {"input_tokens": -1}}),
            json!({"type": "usage", "taskId": "t", "usage": {"input_tokens": 1.5}}),
            json!({"type": "heartbeat", "phase": "starting"}),
            json!({"type": "heartbeat", "taskId": "t", "phase": "paused"}),
            json!({"type": "tool_use", "name": "x", "taskId": ""}),
            json!({"type": "tool_use", "name": "x", "taskId": "x".repeat(257)}),
        ] {
            assert_eq!(b.ingest(&bad).unwrap_err().code(), "INVALID_EVENT", "{bad}");
        }
        assert_eq!(b.snapshot(), before);
        clock.set(4000);
        assert_eq!(
            b.ingest(&json!({"type": "thinking", "taskId": "t"}))
                .unwrap(),
            None
        );
        assert_eq!(b.ingest(&json!({"type": "system"})).unwrap(), None);
        let s = b.snapshot();
        assert_eq!(s.ignored_events, 2);
        assert_eq!(ids(&s), ["t"]);
        // Unknown events do not refresh the idle timer.
        assert!(close(task(&s, "t").idle_secs, 4.0));
        clock.set(5001);
        assert_eq!(b.tick().len(), 1);
    }

    #[test]
    fn halts_are_pushed_to_listeners() {
        let (b, clock) = breaker(config(json!({"maxToolCallsPerTask": 1, "maxIdleSecs": 1})));
        let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
        let s = Arc::clone(&seen);
        b.add_listener(Arc::new(move |e| {
            s.lock().unwrap().push(e.clone());
            Ok(())
        }));
        b.add_listener(Arc::new(|_| Err("broken".into())));
        clock.set(7);
        b.ingest(&tool(Some("t"))).unwrap();
        let halt = b.ingest(&tool(Some("t"))).unwrap().unwrap();
        b.ingest(&tool(Some("u"))).unwrap();
        clock.set(2000);
        let ticked = b.tick();
        let events = seen.lock().unwrap().clone();
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[0].to_json(),
            json!({"type": "halt", "halt": halt.to_json(), "atMs": 7})
        );
        assert_eq!(
            events[1],
            Event::Halt {
                halt: ticked[0].clone(),
                at_ms: 2000
            }
        );
        assert_eq!(b.listener_errors(), 2);
    }

    #[test]
    fn live_snapshot_shape() {
        let (b, clock) = breaker(BudgetConfig::default());
        clock.set(1000);
        b.ingest(&heartbeat("t1", "starting")).unwrap();
        clock.set(3500);
        b.ingest(&tool(None)).unwrap();
        clock.set(4000);
        b.ingest(&json!({"type": "other"})).unwrap();
        assert_eq!(
            serde_json::to_value(b.snapshot()).unwrap(),
            json!({"tasks": [{"taskId": "t1", "toolCalls": 1, "spendCents": 0.0,
                "durationSecs": 3.0, "idleSecs": 0.5, "halted": false}],
                "stack": ["t1"], "ignoredEvents": 1})
        );
    }

    #[test]
    fn events_by_parts_are_ingested_as_the_same_events() {
        let c = config(json!({"maxToolCallsPerTask": 3, "loopWindow": 3,
            "maxTaskDurationSecs": 100}));
        let (by_parts, parts_clock) = breaker(c.clone());
        let (by_events, events_clock) = breaker(c);
        by_parts.ingest(&heartbeat("job", "starting")).unwrap();
        by_events.ingest(&heartbeat("job", "starting")).unwrap();
        let texts = [
            "fix the parser",
            "fix the parser",
            "fix the parser",
            "run the tests",
        ];
        let mut halts = 0;
        for i in 0..12_u64 {
            parts_clock.set(i * 1000);
            events_clock.set(i * 1000);
            let task = if i % 4 == 0 { Some("side") } else { None };
            let text = texts[(i / 2 % 4) as usize];
            let (a, b) = if i % 2 == 0 {
                (
                    by_parts.ingest_tool_use(task),
                    by_events.ingest(&tool(task)),
                )
            } else {
                let mut event = json!({"type": "assistant", "text": text});
                if let Some(t) = task {
                    event["taskId"] = json!(t);
                }
                (
                    by_parts.ingest_assistant(text, task),
                    by_events.ingest(&event),
                )
            };
            let (a, b) = (a.unwrap(), b.unwrap());
            halts += usize::from(a.is_some());
            assert_eq!(a, b, "event {i}");
            assert_eq!(by_parts.snapshot(), by_events.snapshot(), "after event {i}");
        }
        assert_eq!(halts, 1, "the three same outputs halt the job");
    }

    #[test]
    fn events_by_parts_check_the_task_id_as_events_do() {
        let (b, _) = breaker(BudgetConfig::default());
        let long = "t".repeat(MAX_TASK_ID_BYTES + 1);
        for bad in ["", long.as_str()] {
            let from_json = b.ingest(&tool(Some(bad))).unwrap_err();
            for err in [
                b.ingest_tool_use(Some(bad)).unwrap_err(),
                b.ingest_assistant("hello", Some(bad)).unwrap_err(),
            ] {
                assert_eq!(err.code(), "INVALID_EVENT");
                assert_eq!(err.to_string(), from_json.to_string());
            }
        }
        let longest = "t".repeat(MAX_TASK_ID_BYTES);
        assert_eq!(b.ingest_tool_use(Some(&longest)).unwrap(), None);
        assert!(b.snapshot().tasks.iter().all(|t| t.task_id == longest));
    }
}

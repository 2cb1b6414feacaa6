//! The StagnationBreaker (SPEC 3, seeds 000/001): no progress, repeated errors, declining output.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::events::{Event, Listener, ListenerId, Listeners};
use crate::fingerprint::{ErrorCounts, ErrorMatch, fingerprint};
use crate::json::{Fields, config_from_value};
use crate::state::State;
use crate::text::cap_error;

/// How many output lengths `outputTrend` keeps.
pub const OUTPUT_TREND_LEN: usize = 10;
/// How many early iterations form the output baseline.
pub const BASELINE_ITERATIONS: usize = 3;

/// Configuration of a [`StagnationBreaker`]; defaults are the seed's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StagnationConfig {
    /// Consecutive iterations without progress that move CLOSED to HALF_OPEN (>= 1). Default 3.
    pub no_progress_threshold: u32,
    /// Occurrences of one error fingerprint that open the circuit (>= 1). Default 5.
    pub same_error_threshold: u32,
    /// Percent of the baseline output below which output has declined (1..=100). Default 70.
    pub output_decline_threshold: u32,
    /// How errors are compared. Default normalized.
    pub error_match: ErrorMatch,
}

impl Default for StagnationConfig {
    fn default() -> Self {
        StagnationConfig {
            no_progress_threshold: 3,
            same_error_threshold: 5,
            output_decline_threshold: 70,
            error_match: ErrorMatch::Normalized,
        }
    }
}

impl StagnationConfig {
    /// Reads a config object with the SPEC's camelCase keys (`null` = defaults).
    pub fn from_json(value: &Value) -> Result<Self> {
        let config: StagnationConfig = config_from_value(value, "StagnationBreaker")?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every range rule.
    pub fn validate(&self) -> Result<()> {
        if self.no_progress_threshold < 1 {
            return Err(Error::config("noProgressThreshold must be >= 1"));
        }
        if self.same_error_threshold < 1 {
            return Err(Error::config("sameErrorThreshold must be >= 1"));
        }
        if !(1..=100).contains(&self.output_decline_threshold) {
            return Err(Error::config(
                "outputDeclineThreshold must be between 1 and 100",
            ));
        }
        Ok(())
    }
}

/// One iteration's measurements (SPEC 3). Missing JSON keys are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationMetrics {
    /// Files changed in the iteration.
    pub files_changed: u64,
    /// Tests passing after the iteration.
    pub tests_passing: u64,
    /// Length of the iteration's output.
    pub output_length: u64,
}

impl IterationMetrics {
    /// Reads `{filesChanged, testsPassing, outputLength}`; anything but whole numbers >= 0 is
    /// `INVALID_ARGUMENT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let f = Fields::new(
            value,
            "iteration metrics",
            Error::InvalidArgument,
            &["filesChanged", "testsPassing", "outputLength"],
        )?;
        Ok(IterationMetrics {
            files_changed: f.u64_or("filesChanged", 0)?,
            tests_passing: f.u64_or("testsPassing", 0)?,
            output_length: f.u64_or("outputLength", 0)?,
        })
    }
}

/// [`StagnationBreaker::check`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StagnationDecision {
    /// False only in OPEN.
    pub allow_continue: bool,
    /// The state.
    pub state: State,
    /// `None` in CLOSED; the trigger otherwise.
    pub reason: Option<String>,
}

/// [`StagnationBreaker::status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StagnationStatus {
    /// The state.
    pub state: State,
    /// Iterations since the last progress.
    pub consecutive_no_progress: u64,
    /// Non-transient error counts by fingerprint since the last progress.
    pub error_counts: BTreeMap<String, u64>,
    /// The last 10 output lengths, oldest first.
    pub output_trend: Vec<u64>,
    /// Clock time of the last iteration that made progress.
    pub last_progress: Option<u64>,
}

/// The persistent form of a [`StagnationBreaker`] (`kind: "stagnation"`, `version: 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StagnationSnapshot {
    /// Always 1.
    pub version: u32,
    /// Always `"stagnation"`.
    pub kind: String,
    /// The state.
    pub state: State,
    /// Iterations since the last progress.
    pub consecutive_no_progress: u64,
    /// Error counts by fingerprint.
    pub error_counts: BTreeMap<String, u64>,
    /// The last output lengths.
    pub output_trend: Vec<u64>,
    /// Clock time of the last progress.
    pub last_progress: Option<u64>,
    /// The output lengths of the first (up to three) iterations.
    pub baseline_outputs: Vec<u64>,
    /// The best `testsPassing` seen.
    pub best_tests_passing: u64,
    /// The reason of the current state.
    pub reason: Option<String>,
}

impl StagnationSnapshot {
    /// Parses a snapshot; anything malformed is `INVALID_SNAPSHOT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let snap: StagnationSnapshot = serde_json::from_value(value.clone())
            .map_err(|e| Error::snapshot(format!("not a StagnationBreaker snapshot: {e}")))?;
        if snap.version != 1 {
            return Err(Error::snapshot(format!(
                "unknown snapshot version {} (this library reads version 1)",
                snap.version
            )));
        }
        if snap.kind != "stagnation" {
            return Err(Error::snapshot(format!(
                "snapshot kind is {:?}, expected \"stagnation\"",
                snap.kind
            )));
        }
        if snap.baseline_outputs.len() > BASELINE_ITERATIONS {
            return Err(Error::snapshot("baselineOutputs holds at most 3 values"));
        }
        Ok(snap)
    }

    /// The snapshot as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Default)]
struct Inner {
    state: State,
    consecutive_no_progress: u64,
    error_counts: ErrorCounts,
    output_trend: VecDeque<u64>,
    last_progress: Option<u64>,
    baseline_outputs: Vec<u64>,
    best_tests_passing: u64,
    reason: Option<String>,
}

/// Detects a loop that stopped making progress (SPEC 3). Every method takes `&self`.
pub struct StagnationBreaker {
    config: StagnationConfig,
    clock: SharedClock,
    inner: Mutex<Inner>,
    listeners: Listeners,
}

impl fmt::Debug for StagnationBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagnationBreaker")
            .field("config", &self.config)
            .field("state", &self.lock().state)
            .finish_non_exhaustive()
    }
}

impl StagnationBreaker {
    /// A breaker on the system clock.
    pub fn new(config: StagnationConfig) -> Result<Self> {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A breaker reading time from `clock`.
    pub fn with_clock(config: StagnationConfig, clock: SharedClock) -> Result<Self> {
        config.validate()?;
        Ok(StagnationBreaker {
            config,
            clock,
            inner: Mutex::new(Inner::default()),
            listeners: Listeners::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StagnationConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn transition(inner: &mut Inner, to: State, reason: String, now: u64, events: &mut Vec<Event>) {
        events.push(Event::StateChange {
            from: inner.state,
            to,
            reason: reason.clone(),
            at_ms: now,
        });
        inner.state = to;
        inner.reason = (to != State::Closed).then_some(reason);
    }

    /// Records one iteration.
    pub fn record_progress(&self, metrics: IterationMetrics) {
        let mut events = Vec::new();
        self.record_progress_into(metrics, &mut events);
        self.listeners.emit(&events);
    }

    pub(crate) fn record_progress_into(&self, m: IterationMetrics, events: &mut Vec<Event>) {
        let now = self.clock.now_ms();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let progress = m.files_changed > 0 || m.tests_passing > inner.best_tests_passing;
        // Baseline: the mean of the first three iterations seen before this one.
        let samples = inner.baseline_outputs.len() as u128;
        let sum: u128 = inner.baseline_outputs.iter().map(|&v| u128::from(v)).sum();
        let threshold = u128::from(self.config.output_decline_threshold);
        let output = u128::from(m.output_length);
        let declined = sum > 0 && output * 100 * samples < threshold * sum;

        inner.best_tests_passing = inner.best_tests_passing.max(m.tests_passing);
        if inner.baseline_outputs.len() < BASELINE_ITERATIONS {
            inner.baseline_outputs.push(m.output_length);
        }
        if inner.output_trend.len() >= OUTPUT_TREND_LEN {
            inner.output_trend.pop_front();
        }
        inner.output_trend.push_back(m.output_length);
        if progress {
            inner.consecutive_no_progress = 0;
            inner.error_counts.clear();
            inner.last_progress = Some(now);
        } else {
            inner.consecutive_no_progress = inner.consecutive_no_progress.saturating_add(1);
        }

        match inner.state {
            State::Open => {}
            State::HalfOpen => {
                if progress && !declined {
                    Self::transition(inner, State::Closed, "Progress resumed".into(), now, events);
                } else {
                    let reason = if progress {
                        let percent = output * 100 * samples / sum;
                        format!("Output declined to {percent}% of baseline")
                    } else {
                        no_progress_reason(inner.consecutive_no_progress)
                    };
                    Self::transition(inner, State::Open, reason, now, events);
                }
            }
            State::Closed => {
                if inner.consecutive_no_progress >= u64::from(self.config.no_progress_threshold) {
                    let reason = no_progress_reason(inner.consecutive_no_progress);
                    Self::transition(inner, State::HalfOpen, reason, now, events);
                }
            }
        }
    }

    /// Records an error. Transient errors (rate limits, 5xx, timeouts the caller marks) never
    /// count.
    pub fn record_error(&self, error: &str, transient: bool) {
        let mut events = Vec::new();
        self.record_error_into(error, transient, &mut events);
        self.listeners.emit(&events);
    }

    pub(crate) fn record_error_into(&self, error: &str, transient: bool, events: &mut Vec<Event>) {
        if transient {
            return;
        }
        let error = cap_error(error);
        let key = fingerprint(error, self.config.error_match);
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let count = inner.error_counts.increment(key);
        if count >= u64::from(self.config.same_error_threshold) && inner.state != State::Open {
            let reason = format!(
                "Same error repeated {} times: \"{}\"",
                self.config.same_error_threshold,
                error.trim()
            );
            Self::transition(&mut inner, State::Open, reason, now, events);
        }
    }

    /// Whether the loop may continue.
    pub fn check(&self) -> StagnationDecision {
        let inner = self.lock();
        StagnationDecision {
            allow_continue: inner.state != State::Open,
            state: inner.state,
            reason: inner.reason.clone(),
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.lock().state
    }

    /// The status object of SPEC 3.
    pub fn status(&self) -> StagnationStatus {
        let inner = self.lock();
        StagnationStatus {
            state: inner.state,
            consecutive_no_progress: inner.consecutive_no_progress,
            error_counts: inner.error_counts.to_map(),
            output_trend: inner.output_trend.iter().copied().collect(),
            last_progress: inner.last_progress,
        }
    }

    /// Back to CLOSED with every counter cleared.
    pub fn reset(&self) {
        let mut events = Vec::new();
        self.reset_into(&mut events);
        self.listeners.emit(&events);
    }

    pub(crate) fn reset_into(&self, events: &mut Vec<Event>) {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        if inner.state != State::Closed {
            Self::transition(&mut inner, State::Closed, "reset".into(), now, events);
        }
        *inner = Inner::default();
    }

    /// The persistent form of the current state.
    pub fn snapshot(&self) -> StagnationSnapshot {
        let inner = self.lock();
        StagnationSnapshot {
            version: 1,
            kind: "stagnation".into(),
            state: inner.state,
            consecutive_no_progress: inner.consecutive_no_progress,
            error_counts: inner.error_counts.to_map(),
            output_trend: inner.output_trend.iter().copied().collect(),
            last_progress: inner.last_progress,
            baseline_outputs: inner.baseline_outputs.clone(),
            best_tests_passing: inner.best_tests_passing,
            reason: inner.reason.clone(),
        }
    }

    /// Replaces the state with a snapshot's: OPEN stays OPEN; HALF_OPEN comes back CLOSED with no
    /// iterations without progress. On error nothing changes.
    pub fn restore(&self, snapshot: &StagnationSnapshot) -> Result<()> {
        let s = StagnationSnapshot::from_json(&snapshot.to_json())?;
        let mut inner = self.lock();
        let skip = s.output_trend.len().saturating_sub(OUTPUT_TREND_LEN);
        *inner = Inner {
            state: if s.state == State::Open {
                State::Open
            } else {
                State::Closed
            },
            consecutive_no_progress: if s.state == State::HalfOpen {
                0
            } else {
                s.consecutive_no_progress
            },
            error_counts: ErrorCounts::from_map(&s.error_counts),
            output_trend: s.output_trend.into_iter().skip(skip).collect(),
            last_progress: s.last_progress,
            baseline_outputs: s.baseline_outputs,
            best_tests_passing: s.best_tests_passing,
            reason: if s.state == State::Open {
                s.reason.map(|r| cap_error(&r).to_string())
            } else {
                None
            },
        };
        Ok(())
    }

    /// [`StagnationBreaker::restore`] from JSON.
    pub fn restore_json(&self, snapshot: &Value) -> Result<()> {
        self.restore(&StagnationSnapshot::from_json(snapshot)?)
    }

    /// Adds a listener for `stateChange` events.
    pub fn add_listener(&self, listener: Listener) -> ListenerId {
        self.listeners.add(listener)
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.listeners.remove(id)
    }

    /// How many listener calls failed.
    pub fn listener_errors(&self) -> u64 {
        self.listeners.error_count()
    }
}

fn no_progress_reason(n: u64) -> String {
    format!("No progress in {n} consecutive iterations")
}

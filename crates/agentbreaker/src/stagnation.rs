//! The StagnationBreaker (contract §3, seeds 000/001): no progress, repeated errors, declining output.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::events::{Event, Listeners, Sink};
use crate::fingerprint::{ErrorCounts, ErrorMatch, fingerprint};
use crate::interop::{Fields, config_from_value};
use crate::persist;
use crate::state::State;
use crate::steps::{
    AgentStep, MAX_CYCLE_LENGTH, MAX_STEP_THRESHOLD, StepHistory, StepRules, hash_of,
};
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
    /// Step detector: the same step (action and result) this many times in a row opens the
    /// circuit; 0 = off (default).
    pub repeat_threshold: u32,
    /// Step detector: a cycle of 2..=`max_cycle_length` steps repeated this many times in a row
    /// opens the circuit; 0 = off (default).
    pub cycle_repeats: u32,
    /// The longest cycle looked for (2..=20). Default 5.
    pub max_cycle_length: u32,
    /// Step detector: this many failed steps in a row with at most `fail_streak_distinct`
    /// distinct errors opens the circuit; 0 = off (default).
    pub fail_streak_threshold: u32,
    /// Distinct error fingerprints a fail streak may have (>= 1). Default 2.
    pub fail_streak_distinct: u32,
    /// Step detector: this many steps without progress, at least `fail_window_percent` percent of
    /// them failed, opens the circuit; 0 = off (default).
    pub fail_window: u32,
    /// Percent of failed steps in the fail window (1..=100). Default 90.
    pub fail_window_percent: u32,
    /// Monitor only (steps have actions; iterations do not): when > 0, the no-progress rule
    /// counts only the steps without progress that used at most this many distinct actions, so
    /// that it stops an agent doing the same few things over and over, not one exploring.
    /// 0 = off (default: every step without progress counts).
    pub no_progress_distinct_actions: u32,
}

impl Default for StagnationConfig {
    fn default() -> Self {
        StagnationConfig {
            no_progress_threshold: 3,
            same_error_threshold: 5,
            output_decline_threshold: 70,
            error_match: ErrorMatch::Normalized,
            repeat_threshold: 0,
            cycle_repeats: 0,
            max_cycle_length: 5,
            fail_streak_threshold: 0,
            fail_streak_distinct: 2,
            fail_window: 0,
            fail_window_percent: 90,
            no_progress_distinct_actions: 0,
        }
    }
}

impl StagnationConfig {
    /// Reads a config object with the contract's camelCase keys (`null` = defaults).
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
        for (name, v) in [
            ("repeatThreshold", self.repeat_threshold),
            ("cycleRepeats", self.cycle_repeats),
            ("failStreakThreshold", self.fail_streak_threshold),
            ("failWindow", self.fail_window),
        ] {
            if v == 1 || v > MAX_STEP_THRESHOLD {
                return Err(Error::config(format_args!(
                    "{name} must be 0 (off) or between 2 and {MAX_STEP_THRESHOLD}"
                )));
            }
        }
        if !(2..=MAX_CYCLE_LENGTH).contains(&self.max_cycle_length) {
            return Err(Error::config(format_args!(
                "maxCycleLength must be between 2 and {MAX_CYCLE_LENGTH}"
            )));
        }
        if self.fail_streak_distinct < 1 {
            return Err(Error::config("failStreakDistinct must be >= 1"));
        }
        if !(1..=100).contains(&self.fail_window_percent) {
            return Err(Error::config("failWindowPercent must be between 1 and 100"));
        }
        if self.no_progress_distinct_actions > 0
            && (self.no_progress_distinct_actions > MAX_STEP_THRESHOLD
                || self.no_progress_threshold > MAX_STEP_THRESHOLD)
        {
            return Err(Error::config(format_args!(
                "with noProgressDistinctActions (at most {MAX_STEP_THRESHOLD}), \
                 noProgressThreshold must be at most {MAX_STEP_THRESHOLD}"
            )));
        }
        Ok(())
    }

    pub(crate) fn step_rules(&self) -> StepRules {
        StepRules {
            repeat: self.repeat_threshold,
            cycle_repeats: self.cycle_repeats,
            max_cycle: self.max_cycle_length,
            fail_streak: self.fail_streak_threshold,
            fail_distinct: self.fail_streak_distinct,
            fail_window: self.fail_window,
            fail_window_percent: self.fail_window_percent,
        }
    }
}

/// One iteration's measurements (contract §3). Missing JSON keys are 0.
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
    /// `None` in CLOSED; the trigger otherwise, in words for people.
    pub reason: Option<String>,
    /// `None` in CLOSED; the rule that moved the state otherwise, by its stable slug (the
    /// Monitor's names: `no_progress`, `output_decline`, `same_error`, `repeated_step`, `cycle`,
    /// `fail_streak`, `fail_window`) — for code, where `reason` is for people.
    pub slug: Option<&'static str>,
}

/// The slugs a StagnationBreaker's state can carry.
pub const STAGNATION_SLUGS: [&str; 7] = [
    "no_progress",
    "output_decline",
    "same_error",
    "repeated_step",
    "cycle",
    "fail_streak",
    "fail_window",
];

fn known_slug(slug: &str) -> Option<&'static str> {
    STAGNATION_SLUGS.into_iter().find(|s| *s == slug)
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
    /// The slug of the rule behind the current state (absent in older snapshots).
    #[serde(default)]
    pub slug: Option<String>,
}

impl StagnationSnapshot {
    /// Parses a snapshot; anything malformed is `INVALID_SNAPSHOT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let snap = StagnationSnapshot::deserialize(value)
            .map_err(|e| Error::snapshot(format_args!("not a StagnationBreaker snapshot: {e}")))?;
        persist::check_snapshot_header(snap.version, &snap.kind, "stagnation")?;
        if snap.baseline_outputs.len() > BASELINE_ITERATIONS {
            return Err(Error::snapshot("baselineOutputs holds at most 3 values"));
        }
        if let Some(slug) = &snap.slug
            && known_slug(slug).is_none()
        {
            return Err(Error::snapshot(format_args!(
                "slug must be one of {}",
                STAGNATION_SLUGS.join(", ")
            )));
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
    slug: Option<&'static str>,
    steps: StepHistory,
}

/// Detects a loop that stopped making progress (contract §3). Every method takes `&self`.
pub struct StagnationBreaker {
    config: StagnationConfig,
    clock: SharedClock,
    inner: Mutex<Inner>,
    pub(crate) listeners: Listeners,
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

    fn transition(
        inner: &mut Inner,
        to: State,
        (reason, slug): (String, Option<&'static str>),
        now: u64,
        events: &mut Sink<'_>,
    ) {
        let slug = if to == State::Closed { None } else { slug };
        events.push(Event::StateChange {
            from: inner.state,
            to,
            reason: reason.clone(),
            slug,
            at_ms: now,
        });
        inner.state = to;
        inner.reason = (to != State::Closed).then_some(reason);
        inner.slug = slug;
    }

    /// Records one iteration.
    pub fn record_progress(&self, metrics: IterationMetrics) {
        self.record_progress_into(metrics, &mut Sink::Queue(&self.listeners));
        self.listeners.deliver();
    }

    pub(crate) fn record_progress_into(&self, m: IterationMetrics, events: &mut Sink<'_>) {
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
            inner.steps.progress();
        } else {
            inner.consecutive_no_progress = inner.consecutive_no_progress.saturating_add(1);
        }

        match inner.state {
            State::Open => {}
            State::HalfOpen => {
                if progress && !declined {
                    let why = ("Progress resumed".to_string(), None);
                    Self::transition(inner, State::Closed, why, now, events);
                } else {
                    let why = if progress {
                        let percent = output * 100 * samples / sum;
                        (
                            format!("Output declined to {percent}% of baseline"),
                            Some("output_decline"),
                        )
                    } else {
                        (
                            no_progress_reason(inner.consecutive_no_progress),
                            Some("no_progress"),
                        )
                    };
                    Self::transition(inner, State::Open, why, now, events);
                }
            }
            State::Closed => {
                if inner.consecutive_no_progress >= u64::from(self.config.no_progress_threshold) {
                    let why = (
                        no_progress_reason(inner.consecutive_no_progress),
                        Some("no_progress"),
                    );
                    Self::transition(inner, State::HalfOpen, why, now, events);
                }
            }
        }
    }

    /// Records an error. Transient errors (rate limits, 5xx, timeouts the caller marks) never
    /// count.
    pub fn record_error(&self, error: &str, transient: bool) {
        self.record_error_into(error, transient, &mut Sink::Queue(&self.listeners));
        self.listeners.deliver();
    }

    pub(crate) fn record_error_into(&self, error: &str, transient: bool, events: &mut Sink<'_>) {
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
            Self::transition(
                &mut inner,
                State::Open,
                (reason, Some("same_error")),
                now,
                events,
            );
        }
    }

    /// Records one agent step for the step detectors (repeats, cycles, fail streaks, the fail
    /// window); a no-op while they are all off.
    pub fn record_step(&self, step: &AgentStep) {
        self.record_step_into(step, &mut Sink::Queue(&self.listeners));
        self.listeners.deliver();
    }

    pub(crate) fn record_step_into(&self, step: &AgentStep, events: &mut Sink<'_>) {
        let rules = self.config.step_rules();
        if !rules.any() {
            return;
        }
        let action = fingerprint(&step.action, ErrorMatch::Normalized);
        let result = fingerprint(&step.result, ErrorMatch::Normalized);
        let signature = hash_of(&[&action, &result]);
        let error = step
            .failed
            .then(|| hash_of(&[&fingerprint(&step.result, self.config.error_match)]));
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let fired = inner.steps.record(&rules, signature, error, step);
        if let Some((rule, reason)) = fired
            && inner.state != State::Open
        {
            Self::transition(
                &mut inner,
                State::Open,
                (reason, Some(rule.slug())),
                now,
                events,
            );
        }
    }

    /// Whether the loop may continue.
    pub fn check(&self) -> StagnationDecision {
        let inner = self.lock();
        StagnationDecision {
            allow_continue: inner.state != State::Open,
            state: inner.state,
            reason: inner.reason.clone(),
            slug: inner.slug,
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.lock().state
    }

    /// The status object of contract §3.
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
        self.reset_into(&mut Sink::Queue(&self.listeners));
        self.listeners.deliver();
    }

    pub(crate) fn reset_into(&self, events: &mut Sink<'_>) {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        if inner.state != State::Closed {
            Self::transition(
                &mut inner,
                State::Closed,
                ("reset".into(), None),
                now,
                events,
            );
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
            slug: inner.slug.map(str::to_string),
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
            slug: if s.state == State::Open {
                s.slug.as_deref().and_then(known_slug)
            } else {
                None
            },
            // The step detectors' recent history is not part of a snapshot: they watch afresh.
            steps: StepHistory::default(),
        };
        Ok(())
    }

    /// [`StagnationBreaker::restore`] from JSON.
    pub fn restore_json(&self, snapshot: &Value) -> Result<()> {
        self.restore(&StagnationSnapshot::from_json(snapshot)?)
    }

    crate::events::listener_methods!("`stateChange`");
}

fn no_progress_reason(n: u64) -> String {
    format!("No progress in {n} consecutive iterations")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    type Seen = Arc<Mutex<Vec<Event>>>;

    fn breaker(config: StagnationConfig) -> (StagnationBreaker, Arc<ManualClock>) {
        let clock = ManualClock::shared(0);
        let b = StagnationBreaker::with_clock(config, clock.clone()).unwrap();
        (b, clock)
    }

    fn with_threshold(no_progress_threshold: u32) -> StagnationConfig {
        StagnationConfig {
            no_progress_threshold,
            ..StagnationConfig::default()
        }
    }

    fn it(files_changed: u64, tests_passing: u64, output_length: u64) -> IterationMetrics {
        IterationMetrics {
            files_changed,
            tests_passing,
            output_length,
        }
    }

    /// An iteration without progress.
    fn idle(output_length: u64) -> IterationMetrics {
        it(0, 0, output_length)
    }

    /// An iteration with progress (a file changed).
    fn work(output_length: u64) -> IterationMetrics {
        it(1, 0, output_length)
    }

    fn collect(b: &StagnationBreaker) -> Seen {
        let seen: Seen = Arc::default();
        let s = Arc::clone(&seen);
        b.add_listener(Arc::new(move |e| {
            s.lock().unwrap().push(e.clone());
            Ok(())
        }));
        seen
    }

    /// The decision expected with `reason`; its slug is the one that reason's rule must carry.
    fn decision(state: State, reason: Option<&str>) -> StagnationDecision {
        let slug = reason.map(|r| {
            [
                ("No progress", "no_progress"),
                ("Output declined", "output_decline"),
                ("Same error", "same_error"),
                ("Same step", "repeated_step"),
                ("A cycle", "cycle"),
            ]
            .into_iter()
            .find(|(prefix, _)| r.starts_with(prefix))
            .map(|(_, slug)| slug)
            .unwrap_or(if r.contains("in a row") {
                "fail_streak"
            } else {
                "fail_window"
            })
        });
        StagnationDecision {
            allow_continue: state != State::Open,
            state,
            reason: reason.map(str::to_string),
            slug,
        }
    }

    #[test]
    fn config_ranges() {
        let code = |c: StagnationConfig| c.validate().err().map(|e| e.code());
        let bad = Some("INVALID_CONFIG");
        assert_eq!(code(StagnationConfig::default()), None);
        assert_eq!(code(with_threshold(0)), bad);
        assert_eq!(code(with_threshold(1)), None);
        let same = |n| StagnationConfig {
            same_error_threshold: n,
            ..StagnationConfig::default()
        };
        assert_eq!(code(same(0)), bad);
        assert_eq!(code(same(1)), None);
        let decline = |n| StagnationConfig {
            output_decline_threshold: n,
            ..StagnationConfig::default()
        };
        assert_eq!(code(decline(0)), bad);
        assert_eq!(code(decline(1)), None);
        assert_eq!(code(decline(100)), None);
        assert_eq!(code(decline(101)), bad);
        assert_eq!(
            StagnationBreaker::with_clock(decline(101), ManualClock::shared(0))
                .unwrap_err()
                .code(),
            "INVALID_CONFIG"
        );
        for v in [
            serde_json::json!({"noProgressTreshold": 3}),
            serde_json::json!({"noProgressThreshold": 2.5}),
            serde_json::json!({"outputDeclineThreshold": 0}),
            serde_json::json!({"errorMatch": "loose"}),
        ] {
            assert_eq!(
                StagnationConfig::from_json(&v).unwrap_err().code(),
                "INVALID_CONFIG",
                "{v}"
            );
        }
        let c = StagnationConfig::from_json(&serde_json::json!({
            "noProgressThreshold": 2, "sameErrorThreshold": 4,
            "outputDeclineThreshold": 50, "errorMatch": "exact"
        }))
        .unwrap();
        assert_eq!(
            c,
            StagnationConfig {
                no_progress_threshold: 2,
                same_error_threshold: 4,
                output_decline_threshold: 50,
                error_match: ErrorMatch::Exact,
                ..StagnationConfig::default()
            }
        );
    }

    #[test]
    fn step_detectors_open_the_circuit_and_progress_resets_the_window() {
        let b = StagnationBreaker::with_clock(
            StagnationConfig::from_json(&serde_json::json!({
                "repeatThreshold": 3, "failWindow": 3, "failWindowPercent": 100
            }))
            .unwrap(),
            ManualClock::shared(0),
        )
        .unwrap();
        let step = |a: &str, failed| AgentStep {
            action: a.into(),
            result: "Error: Path not found".into(),
            failed,
        };
        b.record_step(&step("read a", true));
        b.record_step(&step("read b", true));
        b.record_progress(IterationMetrics {
            files_changed: 1,
            ..IterationMetrics::default()
        });
        b.record_step(&step("read c", true));
        b.record_step(&step("read d", true));
        assert_eq!(b.state(), State::Closed);
        b.record_step(&step("read e", true));
        let d = b.check();
        assert_eq!(d.state, State::Open);
        assert_eq!(
            d.reason.as_deref(),
            Some("3 of the last 3 steps failed without progress")
        );
        // Off by default: the seed's breaker ignores steps.
        let seed = StagnationBreaker::new(StagnationConfig::default()).unwrap();
        for _ in 0..100 {
            seed.record_step(&step("read a", true));
        }
        assert_eq!(seed.state(), State::Closed);
        for bad in [
            serde_json::json!({"repeatThreshold": 1}),
            serde_json::json!({"cycleRepeats": 1001}),
            serde_json::json!({"maxCycleLength": 1}),
            serde_json::json!({"failStreakDistinct": 0}),
            serde_json::json!({"failWindowPercent": 0}),
        ] {
            assert_eq!(
                StagnationConfig::from_json(&bad).unwrap_err().code(),
                "INVALID_CONFIG"
            );
        }
    }

    #[test]
    fn iteration_metrics_from_json() {
        assert_eq!(
            IterationMetrics::from_json(&serde_json::json!({"filesChanged": 1})).unwrap(),
            it(1, 0, 0)
        );
        assert_eq!(
            IterationMetrics::from_json(
                &serde_json::json!({"filesChanged": 2, "testsPassing": 3, "outputLength": 4})
            )
            .unwrap(),
            it(2, 3, 4)
        );
        for v in [
            serde_json::json!({"filesChanged": 1.5}),
            serde_json::json!({"testsPassing": -1}),
            serde_json::json!({"outputLength": "10"}),
            serde_json::json!({"files": 1}),
            serde_json::json!(3),
        ] {
            assert_eq!(
                IterationMetrics::from_json(&v).unwrap_err().code(),
                "INVALID_ARGUMENT",
                "{v}"
            );
        }
    }

    #[test]
    fn progress_is_files_changed_or_a_new_best_test_count() {
        let (b, clock) = breaker(with_threshold(100));
        // testsPassing 0 on the first iteration is not better than 0.
        b.record_progress(it(0, 0, 10));
        assert_eq!(b.status().consecutive_no_progress, 1);
        assert_eq!(b.status().last_progress, None);
        clock.set(100);
        b.record_progress(it(0, 5, 10));
        assert_eq!(b.status().consecutive_no_progress, 0);
        assert_eq!(b.status().last_progress, Some(100));
        clock.set(200);
        // Equal to the best is not progress, nor is lower.
        b.record_progress(it(0, 5, 10));
        b.record_progress(it(0, 4, 10));
        assert_eq!(b.status().consecutive_no_progress, 2);
        // Better than the best of every earlier iteration (5), not just the previous (4).
        b.record_progress(it(0, 5, 10));
        assert_eq!(b.status().consecutive_no_progress, 3);
        b.record_progress(it(0, 6, 10));
        assert_eq!(b.status().consecutive_no_progress, 0);
        assert_eq!(b.status().last_progress, Some(200));
        clock.set(300);
        b.record_progress(it(1, 0, 10));
        assert_eq!(b.status().consecutive_no_progress, 0);
        assert_eq!(b.status().last_progress, Some(300));
    }

    #[test]
    fn no_progress_threshold_moves_closed_to_half_open() {
        let (b, clock) = breaker(StagnationConfig::default());
        let seen = collect(&b);
        b.record_progress(idle(10));
        b.record_progress(idle(10));
        assert_eq!(b.check(), decision(State::Closed, None));
        clock.set(42);
        b.record_progress(idle(10));
        let reason = "No progress in 3 consecutive iterations";
        assert_eq!(b.check(), decision(State::HalfOpen, Some(reason)));
        assert!(b.check().allow_continue);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Event::StateChange {
                from: State::Closed,
                to: State::HalfOpen,
                reason: reason.into(),
                slug: Some("no_progress"),
                at_ms: 42
            }]
        );
    }

    #[test]
    fn half_open_closes_on_progress_without_decline() {
        let (b, _) = breaker(StagnationConfig::default());
        let seen = collect(&b);
        for _ in 0..3 {
            b.record_progress(idle(100));
        }
        b.record_progress(work(100));
        assert_eq!(b.check(), decision(State::Closed, None));
        assert_eq!(b.status().consecutive_no_progress, 0);
        let events = seen.lock().unwrap().clone();
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[1],
            Event::StateChange {
                from: State::HalfOpen,
                to: State::Closed,
                reason: "Progress resumed".into(),
                slug: None,
                at_ms: 0
            }
        );
        // The counter starts over: three more idle iterations are needed.
        b.record_progress(idle(100));
        b.record_progress(idle(100));
        assert_eq!(b.state(), State::Closed);
        b.record_progress(idle(100));
        assert_eq!(b.state(), State::HalfOpen);
    }

    #[test]
    fn half_open_opens_without_progress() {
        let (b, _) = breaker(StagnationConfig::default());
        for _ in 0..3 {
            b.record_progress(idle(100));
        }
        b.record_progress(idle(100));
        assert_eq!(
            b.check(),
            decision(State::Open, Some("No progress in 4 consecutive iterations"))
        );
        assert!(!b.check().allow_continue);
    }

    #[test]
    fn decline_boundary_with_an_integral_baseline() {
        // Baseline 100, threshold 70: 69 declined, 70 not (70 * 100 < 70 * 100 is false).
        for (output, expected) in [(69, State::Open), (70, State::Closed), (0, State::Open)] {
            let (b, _) = breaker(StagnationConfig::default());
            for _ in 0..3 {
                b.record_progress(idle(100));
            }
            b.record_progress(work(output));
            assert_eq!(b.state(), expected, "output {output}");
            if expected == State::Open {
                assert_eq!(
                    b.check().reason.unwrap(),
                    format!("Output declined to {output}% of baseline")
                );
            }
        }
    }

    #[test]
    fn decline_boundary_with_a_fractional_baseline() {
        // Baseline (100 + 100 + 101) / 3 = 100.33..; 70% of it is 70.23..
        for (output, expected) in [(70, State::Open), (71, State::Closed)] {
            let (b, _) = breaker(StagnationConfig::default());
            b.record_progress(idle(100));
            b.record_progress(idle(100));
            b.record_progress(idle(101));
            b.record_progress(work(output));
            assert_eq!(b.state(), expected, "output {output}");
        }
        let (b, _) = breaker(StagnationConfig::default());
        b.record_progress(idle(100));
        b.record_progress(idle(100));
        b.record_progress(idle(101));
        b.record_progress(work(70));
        // floor(70 * 100 / 100.33..) = floor(69.76..) = 69
        assert_eq!(
            b.check().reason.as_deref(),
            Some("Output declined to 69% of baseline")
        );
    }

    #[test]
    fn decline_threshold_100_means_any_drop() {
        let config = StagnationConfig {
            output_decline_threshold: 100,
            ..StagnationConfig::default()
        };
        for (output, expected) in [(99, State::Open), (100, State::Closed)] {
            let (b, _) = breaker(config.clone());
            for _ in 0..3 {
                b.record_progress(idle(100));
            }
            b.record_progress(work(output));
            assert_eq!(b.state(), expected, "output {output}");
        }
    }

    #[test]
    fn baseline_uses_only_earlier_iterations() {
        // Threshold 1: the 2nd iteration decides with a baseline of the 1st alone (200).
        for (output, expected) in [(139, State::Open), (140, State::Closed)] {
            let (b, _) = breaker(with_threshold(1));
            b.record_progress(idle(200));
            assert_eq!(b.state(), State::HalfOpen);
            b.record_progress(work(output));
            assert_eq!(b.state(), expected, "output {output}");
        }
        let (b, _) = breaker(with_threshold(1));
        b.record_progress(idle(200));
        b.record_progress(work(139));
        assert_eq!(
            b.check().reason.as_deref(),
            Some("Output declined to 69% of baseline")
        );
    }

    #[test]
    fn baseline_is_the_first_three_iterations_only() {
        let (b, _) = breaker(with_threshold(5));
        for output in [100, 100, 100, 1000, 1000] {
            b.record_progress(idle(output));
        }
        assert_eq!(b.state(), State::HalfOpen);
        // Against the first three (100) 70 has not declined; against all five (460) it would.
        b.record_progress(work(70));
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().baseline_outputs, vec![100, 100, 100]);
    }

    #[test]
    fn zero_baseline_never_declines_and_decline_in_closed_is_only_recorded() {
        let (b, _) = breaker(StagnationConfig::default());
        for _ in 0..3 {
            b.record_progress(idle(0));
        }
        b.record_progress(work(0));
        assert_eq!(b.state(), State::Closed);

        let (b, _) = breaker(StagnationConfig::default());
        b.record_progress(work(100));
        b.record_progress(work(1));
        b.record_progress(work(1));
        assert_eq!(b.check(), decision(State::Closed, None));
        assert_eq!(b.status().output_trend, vec![100, 1, 1]);
    }

    #[test]
    fn output_trend_keeps_the_last_ten() {
        let (b, _) = breaker(with_threshold(100));
        for n in 1..=12 {
            b.record_progress(idle(n));
        }
        assert_eq!(b.status().output_trend, (3..=12).collect::<Vec<u64>>());
    }

    #[test]
    fn same_error_threshold_opens_with_the_latest_text() {
        let (b, clock) = breaker(StagnationConfig::default());
        let seen = collect(&b);
        for n in 1..=4 {
            b.record_error(&format!("Timeout after {n}s"), false);
        }
        assert_eq!(b.state(), State::Closed);
        assert_eq!(
            b.status().error_counts,
            BTreeMap::from([("Timeout after #s".to_string(), 4)])
        );
        clock.set(9);
        b.record_error("  Timeout after 5s\n", false);
        let reason = "Same error repeated 5 times: \"Timeout after 5s\"";
        assert_eq!(b.check(), decision(State::Open, Some(reason)));
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Event::StateChange {
                from: State::Closed,
                to: State::Open,
                reason: reason.into(),
                slug: Some("same_error"),
                at_ms: 9
            }]
        );
    }

    #[test]
    fn errors_open_from_half_open_and_transient_ones_never_count() {
        let (b, _) = breaker(StagnationConfig {
            same_error_threshold: 2,
            ..StagnationConfig::default()
        });
        for _ in 0..10 {
            b.record_error("rate limited", true);
        }
        assert!(b.status().error_counts.is_empty());
        for _ in 0..3 {
            b.record_progress(idle(1));
        }
        assert_eq!(b.state(), State::HalfOpen);
        b.record_error("boom", false);
        assert_eq!(b.state(), State::HalfOpen);
        b.record_error("boom", false);
        assert_eq!(
            b.check(),
            decision(State::Open, Some("Same error repeated 2 times: \"boom\""))
        );
    }

    #[test]
    fn progress_clears_error_counts() {
        let (b, _) = breaker(StagnationConfig::default());
        for _ in 0..4 {
            b.record_error("boom", false);
        }
        b.record_progress(idle(1));
        assert_eq!(b.status().error_counts.len(), 1);
        b.record_progress(work(1));
        assert!(b.status().error_counts.is_empty());
        for _ in 0..4 {
            b.record_error("boom", false);
        }
        assert_eq!(b.state(), State::Closed);
        b.record_error("boom", false);
        assert_eq!(b.state(), State::Open);
    }

    #[test]
    fn open_is_final_until_reset() {
        let (b, clock) = breaker(StagnationConfig::default());
        let seen = collect(&b);
        for _ in 0..4 {
            b.record_progress(idle(50));
        }
        let open = decision(State::Open, Some("No progress in 4 consecutive iterations"));
        assert_eq!(b.check(), open);
        clock.set(500);
        b.record_progress(idle(7));
        b.record_progress(it(3, 10, 8));
        b.record_progress(idle(9));
        for _ in 0..6 {
            b.record_error("again", false);
        }
        assert_eq!(b.check(), open);
        let s = b.status();
        assert_eq!(s.consecutive_no_progress, 1);
        assert_eq!(s.last_progress, Some(500));
        assert_eq!(s.output_trend, vec![50, 50, 50, 50, 7, 8, 9]);
        assert_eq!(s.error_counts.get("again"), Some(&6));
        assert_eq!(seen.lock().unwrap().len(), 2);

        clock.set(600);
        b.reset();
        assert_eq!(b.check(), decision(State::Closed, None));
        assert_eq!(
            b.status(),
            StagnationStatus {
                state: State::Closed,
                consecutive_no_progress: 0,
                error_counts: BTreeMap::new(),
                output_trend: vec![],
                last_progress: None,
            }
        );
        assert_eq!(b.snapshot().baseline_outputs, Vec::<u64>::new());
        assert_eq!(b.snapshot().best_tests_passing, 0);
        assert_eq!(
            seen.lock().unwrap().last().unwrap(),
            &Event::StateChange {
                from: State::Open,
                to: State::Closed,
                reason: "reset".into(),
                slug: None,
                at_ms: 600
            }
        );
        // After reset testsPassing 1 is progress again (the best was forgotten).
        b.record_progress(it(0, 1, 5));
        assert_eq!(b.status().consecutive_no_progress, 0);
    }

    #[test]
    fn snapshot_round_trip_keeps_every_counter() {
        let (a, clock) = breaker(StagnationConfig::default());
        clock.set(77);
        a.record_progress(it(0, 9, 100));
        a.record_progress(idle(90));
        a.record_progress(idle(80));
        a.record_progress(idle(70));
        a.record_error("boom 1", false);
        let snap = a.snapshot();
        let json = snap.to_json();
        assert_eq!(json["version"], 1);
        assert_eq!(json["kind"], "stagnation");
        assert_eq!(json["consecutiveNoProgress"], 3);
        assert_eq!(json["baselineOutputs"], serde_json::json!([100, 90, 80]));
        assert_eq!(json["bestTestsPassing"], 9);
        assert_eq!(json["lastProgress"], 77);
        assert_eq!(json["errorCounts"], serde_json::json!({"boom #": 1}));
        assert_eq!(json["outputTrend"], serde_json::json!([100, 90, 80, 70]));

        let (b, _) = breaker(StagnationConfig::default());
        b.restore_json(&json).unwrap();
        assert_eq!(b.status().output_trend, vec![100, 90, 80, 70]);
        assert_eq!(b.status().last_progress, Some(77));
        // The snapshot was HALF_OPEN: it comes back CLOSED with no idle iterations.
        assert_eq!(b.check(), decision(State::Closed, None));
        assert_eq!(b.status().consecutive_no_progress, 0);
        // bestTestsPassing came along: 9 is no progress, 10 is.
        b.record_progress(it(0, 9, 100));
        assert_eq!(b.status().consecutive_no_progress, 1);
        b.record_progress(it(0, 10, 100));
        assert_eq!(b.status().consecutive_no_progress, 0);
    }

    #[test]
    fn restore_keeps_open_and_uses_the_restored_baseline() {
        let (a, _) = breaker(StagnationConfig::default());
        for _ in 0..4 {
            a.record_progress(idle(10));
        }
        let open = a.snapshot();
        let (b, _) = breaker(StagnationConfig::default());
        b.restore(&open).unwrap();
        assert_eq!(
            b.check(),
            decision(State::Open, Some("No progress in 4 consecutive iterations"))
        );
        assert_eq!(b.status().consecutive_no_progress, 4);

        // A CLOSED snapshot keeps its counter, so one more idle iteration reaches HALF_OPEN,
        // and the next is judged against the restored baseline (100).
        let snap = StagnationSnapshot {
            version: 1,
            kind: "stagnation".into(),
            state: State::Closed,
            consecutive_no_progress: 2,
            error_counts: BTreeMap::new(),
            output_trend: vec![100, 100, 100],
            last_progress: None,
            baseline_outputs: vec![100, 100, 100],
            best_tests_passing: 0,
            reason: None,
            slug: None,
        };
        let (c, _) = breaker(StagnationConfig::default());
        c.restore(&snap).unwrap();
        c.record_progress(idle(1000));
        assert_eq!(c.state(), State::HalfOpen);
        c.record_progress(work(69));
        assert_eq!(
            c.check().reason.as_deref(),
            Some("Output declined to 69% of baseline")
        );
    }

    #[test]
    fn invalid_snapshots_leave_the_breaker_unchanged() {
        let (b, _) = breaker(StagnationConfig::default());
        b.record_progress(idle(5));
        let before = b.snapshot();
        let good = before.to_json();
        for (key, value) in [
            ("version", serde_json::json!(2)),
            ("kind", serde_json::json!("failure")),
            ("state", serde_json::json!("STUCK")),
            ("baselineOutputs", serde_json::json!([1, 2, 3, 4])),
            ("outputTrend", serde_json::json!([1.5])),
            ("unknown", serde_json::json!(0)),
        ] {
            let mut v = good.clone();
            v[key] = value;
            assert_eq!(
                b.restore_json(&v).unwrap_err().code(),
                "INVALID_SNAPSHOT",
                "{key}"
            );
            assert_eq!(b.snapshot(), before);
        }
        let mut bad = before.clone();
        bad.kind = "budget".into();
        assert_eq!(b.restore(&bad).unwrap_err().code(), "INVALID_SNAPSHOT");
        assert_eq!(b.snapshot(), before);
    }

    #[test]
    fn listeners_are_isolated_and_removable() {
        let (b, _) = breaker(with_threshold(1));
        let seen = collect(&b);
        let failing = b.add_listener(Arc::new(|_| Err("nope".into())));
        b.record_progress(idle(1));
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.listener_errors(), 1);
        assert!(b.remove_listener(failing));
        assert!(!b.remove_listener(failing));
        b.record_progress(idle(1));
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.listener_errors(), 1);
        assert_eq!(seen.lock().unwrap().len(), 2);
    }
}

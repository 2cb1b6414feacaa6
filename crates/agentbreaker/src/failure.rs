//! The FailureBreaker (SPEC 2, seed 004): consecutive failures open the circuit; after a cooldown a
//! probe decides whether it closes again.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{SharedClock, SystemClock, elapsed};
use crate::error::{CallError, Error, Result};
use crate::events::{Event, Listener, ListenerId, Listeners};
use crate::fingerprint::{ErrorMatch, fingerprint};
use crate::json::config_from_value;
use crate::persist;
use crate::state::State;
use crate::text::cap_error;

/// The message of the call that moves OPEN to HALF_OPEN (and of a re-granted probe).
pub const PROBE_GRANTED: &str = "Circuit breaker testing - one operation allowed";
/// The message of a further probe in HALF_OPEN.
pub const PROBE_MORE: &str = "Circuit breaker testing - success will close, failure will re-open";
/// The message of a refusal in HALF_OPEN while the probe's result is awaited.
pub const PROBE_WAIT: &str = "Circuit breaker testing - waiting for the test operation's result";

/// Configuration of a [`FailureBreaker`]; defaults are the seed's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct FailureConfig {
    /// Consecutive failures that open the circuit (>= 1). Default 5.
    pub failure_threshold: u32,
    /// The count that emits a warning; `Some(0)` is off; `None` means 3, or off when
    /// `failure_threshold <= 3`.
    pub warning_threshold: Option<u32>,
    /// Cooldown before the first probe, in ms. Default 30 000.
    pub cooldown_ms: u64,
    /// Cooldown growth per failed probe (>= 1.0). Default 1.0.
    pub backoff_multiplier: f64,
    /// Upper bound of the cooldown (>= `cooldown_ms`). Default 3 600 000.
    pub max_cooldown_ms: u64,
    /// Identical-fingerprint failures in a row that open the circuit early; 0 = off. Default 0.
    pub identical_error_threshold: u32,
    /// Entries kept in `failure_history`. Default 100.
    pub history_limit: u32,
    /// Probe permits in HALF_OPEN (>= 1). Default 1.
    pub half_open_max_probes: u32,
    /// After this long an unanswered probe gives its permit back (>= 1). Default 30 000.
    pub probe_timeout_ms: u64,
    /// How errors are compared for the identical-error rule. Default normalized.
    pub error_match: ErrorMatch,
    /// When set, state is loaded from this file at construction and saved on every transition.
    pub state_path: Option<PathBuf>,
}

impl Default for FailureConfig {
    fn default() -> Self {
        FailureConfig {
            failure_threshold: 5,
            warning_threshold: None,
            cooldown_ms: 30_000,
            backoff_multiplier: 1.0,
            max_cooldown_ms: 3_600_000,
            identical_error_threshold: 0,
            history_limit: 100,
            half_open_max_probes: 1,
            probe_timeout_ms: 30_000,
            error_match: ErrorMatch::Normalized,
            state_path: None,
        }
    }
}

impl FailureConfig {
    /// Reads a config object with the SPEC's camelCase keys (`null` = defaults).
    pub fn from_json(value: &Value) -> Result<Self> {
        let config: FailureConfig = config_from_value(value, "FailureBreaker")?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every range rule; `INVALID_CONFIG` names the first broken one.
    pub fn validate(&self) -> Result<()> {
        if self.failure_threshold < 1 {
            return Err(Error::config("failureThreshold must be >= 1"));
        }
        if let Some(w) = self.warning_threshold
            && w != 0
            && w >= self.failure_threshold
        {
            return Err(Error::config(format!(
                "warningThreshold ({w}) must be less than failureThreshold ({}), or 0 for off",
                self.failure_threshold
            )));
        }
        if !self.backoff_multiplier.is_finite() || self.backoff_multiplier < 1.0 {
            return Err(Error::config(
                "backoffMultiplier must be a finite number >= 1.0",
            ));
        }
        if self.max_cooldown_ms < self.cooldown_ms {
            return Err(Error::config(format!(
                "maxCooldownMs ({}) must be >= cooldownMs ({})",
                self.max_cooldown_ms, self.cooldown_ms
            )));
        }
        if self.half_open_max_probes < 1 {
            return Err(Error::config("halfOpenMaxProbes must be >= 1"));
        }
        if self.probe_timeout_ms < 1 {
            return Err(Error::config("probeTimeoutMs must be >= 1"));
        }
        Ok(())
    }

    /// The warning threshold in effect (0 = off).
    pub fn effective_warning_threshold(&self) -> u32 {
        match self.warning_threshold {
            Some(w) => w,
            None if self.failure_threshold <= 3 => 0,
            None => 3,
        }
    }

    /// The cooldown at a backoff level: min(cooldownMs × multiplier^level, maxCooldownMs).
    pub fn cooldown_at(&self, level: u32) -> u64 {
        if level == 0 || self.backoff_multiplier == 1.0 {
            return self.cooldown_ms.min(self.max_cooldown_ms);
        }
        let exponent = i32::try_from(level).unwrap_or(i32::MAX);
        let scaled = self.cooldown_ms as f64 * self.backoff_multiplier.powi(exponent);
        if !scaled.is_finite() || scaled >= self.max_cooldown_ms as f64 {
            self.max_cooldown_ms
        } else {
            scaled as u64
        }
    }
}

/// The answer of [`FailureBreaker::should_allow_operation`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Permission {
    /// Whether the operation may run.
    pub allowed: bool,
    /// `None` in CLOSED; otherwise the seed's message.
    pub message: Option<String>,
}

/// One recorded failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureRecord {
    /// Clock time of the failure.
    pub at_ms: u64,
    /// The error text (at most 4096 bytes).
    pub error: String,
    /// The state before any transition this failure caused.
    pub state: State,
}

/// [`FailureBreaker::status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureStatus {
    /// Current state (the OPEN→HALF_OPEN move is lazy: OPEN until the next permission check).
    pub state: State,
    /// Failures since the last success.
    pub consecutive_failures: u64,
    /// `failureThreshold`.
    pub threshold: u32,
    /// The newest `historyLimit` failures, oldest first.
    pub failure_history: Vec<FailureRecord>,
    /// When the circuit last opened, `None` unless OPEN or HALF_OPEN.
    pub opened_at: Option<u64>,
    /// The current cooldown (with backoff).
    pub cooldown_ms: u64,
    /// Cooldown left; 0 outside OPEN.
    pub cooldown_remaining_ms: u64,
    /// CLOSED→OPEN transitions since the last reset.
    pub trips: u64,
}

/// [`FailureBreaker::metrics`]: counters over the object's life (not reset, not persisted).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureMetrics {
    /// Failures recorded.
    pub total_failures: u64,
    /// Successes recorded.
    pub total_successes: u64,
    /// CLOSED→OPEN transitions.
    pub trips: u64,
    /// HALF_OPEN→CLOSED transitions.
    pub recoveries: u64,
    /// HALF_OPEN→OPEN transitions.
    pub reopenings: u64,
    /// recoveries / (recoveries + reopenings); `None` when both are 0.
    pub recovery_rate: Option<f64>,
    /// Mean gap between consecutive failures; `None` with fewer than two failures.
    pub mtbf_ms: Option<f64>,
}

/// The persistent form of a [`FailureBreaker`] (`kind: "failure"`, `version: 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureSnapshot {
    /// Always 1.
    pub version: u32,
    /// Always `"failure"`.
    pub kind: String,
    /// The state.
    pub state: State,
    /// Failures since the last success.
    pub consecutive_failures: u64,
    /// When the circuit opened.
    pub opened_at: Option<u64>,
    /// Failed probes since the circuit last closed.
    pub backoff_level: u32,
    /// Trips since the last reset.
    pub trips: u64,
    /// The failure history.
    pub failure_history: Vec<FailureRecord>,
}

impl FailureSnapshot {
    /// Parses a snapshot; anything malformed is `INVALID_SNAPSHOT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let snap: FailureSnapshot = serde_json::from_value(value.clone())
            .map_err(|e| Error::snapshot(format!("not a FailureBreaker snapshot: {e}")))?;
        if snap.version != 1 {
            return Err(Error::snapshot(format!(
                "unknown snapshot version {} (this library reads version 1)",
                snap.version
            )));
        }
        if snap.kind != "failure" {
            return Err(Error::snapshot(format!(
                "snapshot kind is {:?}, expected \"failure\"",
                snap.kind
            )));
        }
        if snap.state == State::Open && snap.opened_at.is_none() {
            return Err(Error::snapshot("an OPEN snapshot needs openedAt"));
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
    consecutive_failures: u64,
    opened_at: Option<u64>,
    backoff_level: u32,
    trips: u64,
    history: VecDeque<FailureRecord>,
    /// Grant times of outstanding probe permits, oldest first.
    probes: VecDeque<u64>,
    /// The current run of identical fingerprints.
    identical_run: Option<(String, u32)>,
    /// Bumped on every change that must be persisted.
    version: u64,
    metrics: Lifetime,
}

#[derive(Debug, Default)]
struct Lifetime {
    total_failures: u64,
    total_successes: u64,
    trips: u64,
    recoveries: u64,
    reopenings: u64,
    first_failure_at: Option<u64>,
    last_failure_at: Option<u64>,
}

/// The persistence side of a breaker with `statePath`: writes are serialized and a stale
/// snapshot never overwrites a newer one.
#[derive(Debug)]
struct StateFile {
    path: PathBuf,
    last_written: Mutex<u64>,
}

/// Work to finish after the state lock is released: events to emit and a snapshot to save.
#[derive(Default)]
struct After {
    events: Vec<Event>,
    save: Option<(u64, FailureSnapshot)>,
}

/// Consecutive-failure circuit breaker with warning, cooldown, backoff, identical-error fast trip,
/// probe permits, history, metrics and persistence. Cheap to share: every method takes `&self`.
pub struct FailureBreaker {
    config: FailureConfig,
    warning_threshold: u32,
    clock: SharedClock,
    inner: Mutex<Inner>,
    listeners: Listeners,
    state_file: Option<StateFile>,
}

impl fmt::Debug for FailureBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FailureBreaker")
            .field("config", &self.config)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl FailureBreaker {
    /// A breaker on the system clock.
    pub fn new(config: FailureConfig) -> Result<Self> {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A breaker reading time from `clock`. With `state_path`, the file is loaded now (a missing
    /// file is a fresh breaker, a corrupt one `INVALID_SNAPSHOT`).
    pub fn with_clock(config: FailureConfig, clock: SharedClock) -> Result<Self> {
        config.validate()?;
        let state_file = config.state_path.clone().map(|path| StateFile {
            path,
            last_written: Mutex::new(0),
        });
        let breaker = FailureBreaker {
            warning_threshold: config.effective_warning_threshold(),
            config,
            clock,
            inner: Mutex::new(Inner::default()),
            listeners: Listeners::default(),
            state_file,
        };
        if let Some(file) = &breaker.state_file {
            breaker.load(&file.path)?;
        }
        Ok(breaker)
    }

    /// The configuration.
    pub fn config(&self) -> &FailureConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, after: After) {
        if let Some((version, snapshot)) = after.save {
            self.save_version(version, &snapshot);
        }
        self.listeners.emit(&after.events);
    }

    fn save_version(&self, version: u64, snapshot: &FailureSnapshot) {
        let Some(file) = &self.state_file else {
            return;
        };
        let mut last = file.last_written.lock().unwrap_or_else(|p| p.into_inner());
        if version <= *last {
            return;
        }
        match write_snapshot(&file.path, snapshot) {
            Ok(()) => *last = version,
            Err(e) => self.listeners.emit(&[Event::Warning {
                message: format!(
                    "Could not save state to {}: {}",
                    file.path.display(),
                    e.message()
                ),
                at_ms: self.clock.now_ms(),
            }]),
        }
    }

    /// Marks a persisted change and, with `statePath`, schedules a save.
    fn changed(&self, inner: &mut Inner, after: &mut After) {
        inner.version += 1;
        if self.state_file.is_some() {
            after.save = Some((inner.version, snapshot_of(inner)));
        }
    }

    fn transition(inner: &mut Inner, to: State, reason: String, now: u64, after: &mut After) {
        let from = inner.state;
        inner.state = to;
        after.events.push(Event::StateChange {
            from,
            to,
            reason,
            at_ms: now,
        });
    }

    /// Records a success: the count returns to 0; in HALF_OPEN the circuit closes.
    pub fn record_success(&self) {
        let now = self.clock.now_ms();
        let mut after = After::default();
        {
            let mut inner = self.lock();
            inner.consecutive_failures = 0;
            inner.identical_run = None;
            inner.metrics.total_successes += 1;
            if inner.state == State::HalfOpen {
                Self::transition(
                    &mut inner,
                    State::Closed,
                    "Test operation succeeded".into(),
                    now,
                    &mut after,
                );
                inner.opened_at = None;
                inner.backoff_level = 0;
                inner.probes.clear();
                inner.metrics.recoveries += 1;
                self.changed(&mut inner, &mut after);
            }
        }
        self.finish(after);
    }

    /// Records a failure with its error text (cut to 4096 bytes).
    pub fn record_failure(&self, error: &str) {
        let now = self.clock.now_ms();
        let error = cap_error(error);
        let fp = (self.config.identical_error_threshold > 0)
            .then(|| fingerprint(error, self.config.error_match));
        let mut after = After::default();
        {
            let mut inner = self.lock();
            let inner = &mut *inner;
            inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
            let m = &mut inner.metrics;
            m.total_failures += 1;
            m.first_failure_at.get_or_insert(now);
            m.last_failure_at = Some(now);
            if self.config.history_limit > 0 {
                while inner.history.len() >= self.config.history_limit as usize {
                    inner.history.pop_front();
                }
                inner.history.push_back(FailureRecord {
                    at_ms: now,
                    error: error.to_string(),
                    state: inner.state,
                });
            }
            let identical = match fp {
                Some(fp) => match &mut inner.identical_run {
                    Some((current, n)) if *current == fp => {
                        *n = n.saturating_add(1);
                        *n
                    }
                    _ => {
                        inner.identical_run = Some((fp, 1));
                        1
                    }
                },
                None => 0,
            };
            match inner.state {
                State::Closed => {
                    let count = inner.consecutive_failures;
                    if self.warning_threshold > 0 && count == u64::from(self.warning_threshold) {
                        after.events.push(Event::Warning {
                            message: warning_message(
                                self.warning_threshold,
                                self.config.failure_threshold,
                            ),
                            at_ms: now,
                        });
                    }
                    let reason = if count >= u64::from(self.config.failure_threshold) {
                        Some(format!("{count} consecutive failures detected"))
                    } else if self.config.identical_error_threshold > 0
                        && identical >= self.config.identical_error_threshold
                    {
                        Some(format!(
                            "Same error repeated {identical} times: \"{}\"",
                            error.trim()
                        ))
                    } else {
                        None
                    };
                    if let Some(reason) = reason {
                        Self::transition(inner, State::Open, reason, now, &mut after);
                        inner.opened_at = Some(now);
                        inner.trips += 1;
                        inner.metrics.trips += 1;
                    }
                }
                State::HalfOpen => {
                    Self::transition(
                        inner,
                        State::Open,
                        "Test operation failed".into(),
                        now,
                        &mut after,
                    );
                    inner.opened_at = Some(now);
                    inner.backoff_level = inner.backoff_level.saturating_add(1);
                    inner.probes.clear();
                    inner.metrics.reopenings += 1;
                }
                State::Open => {}
            }
            let transitioned = after
                .events
                .iter()
                .any(|e| matches!(e, Event::StateChange { .. }));
            if transitioned {
                self.changed(inner, &mut after);
            }
        }
        self.finish(after);
    }

    /// Asks whether an operation may run now (SPEC 2). In OPEN with the cooldown over this call
    /// moves the circuit to HALF_OPEN and is the probe.
    pub fn should_allow_operation(&self) -> Permission {
        let mut inner = self.lock();
        if inner.state == State::Closed {
            return Permission {
                allowed: true,
                message: None,
            };
        }
        let now = self.clock.now_ms();
        let mut after = After::default();
        let permission = if inner.state == State::Open {
            self.permission_open(&mut inner, now, &mut after)
        } else {
            self.permission_half_open(&mut inner, now)
        };
        drop(inner);
        self.finish(after);
        permission
    }

    fn permission_open(&self, inner: &mut Inner, now: u64, after: &mut After) -> Permission {
        let cooldown = self.config.cooldown_at(inner.backoff_level);
        let waited = elapsed(inner.opened_at.unwrap_or(now), now);
        if waited < cooldown {
            return Permission {
                allowed: false,
                message: Some(open_message(
                    cooldown - waited,
                    self.config.failure_threshold,
                )),
            };
        }
        Self::transition(
            inner,
            State::HalfOpen,
            "Cooldown expired".into(),
            now,
            after,
        );
        inner.probes.clear();
        inner.probes.push_back(now);
        self.changed(inner, after);
        granted(PROBE_GRANTED)
    }

    fn permission_half_open(&self, inner: &mut Inner, now: u64) -> Permission {
        if inner.probes.len() < self.config.half_open_max_probes as usize {
            inner.probes.push_back(now);
            return granted(PROBE_MORE);
        }
        let oldest_timed_out = inner
            .probes
            .front()
            .is_some_and(|&t| elapsed(t, now) >= self.config.probe_timeout_ms);
        if oldest_timed_out {
            inner.probes.pop_front();
            inner.probes.push_back(now);
            return granted(PROBE_GRANTED);
        }
        Permission {
            allowed: false,
            message: Some(PROBE_WAIT.to_string()),
        }
    }

    /// The current state (without the lazy OPEN→HALF_OPEN move).
    pub fn state(&self) -> State {
        self.lock().state
    }

    /// The status object of SPEC 2.
    pub fn status(&self) -> FailureStatus {
        let now = self.clock.now_ms();
        let inner = self.lock();
        let cooldown = self.config.cooldown_at(inner.backoff_level);
        let remaining = match (inner.state, inner.opened_at) {
            (State::Open, Some(at)) => cooldown.saturating_sub(elapsed(at, now)),
            _ => 0,
        };
        FailureStatus {
            state: inner.state,
            consecutive_failures: inner.consecutive_failures,
            threshold: self.config.failure_threshold,
            failure_history: inner.history.iter().cloned().collect(),
            opened_at: inner.opened_at,
            cooldown_ms: cooldown,
            cooldown_remaining_ms: remaining,
            trips: inner.trips,
        }
    }

    /// Lifetime counters.
    pub fn metrics(&self) -> FailureMetrics {
        let inner = self.lock();
        let m = &inner.metrics;
        let decided = m.recoveries + m.reopenings;
        let mtbf = match (m.first_failure_at, m.last_failure_at) {
            (Some(first), Some(last)) if m.total_failures >= 2 => {
                Some(elapsed(first, last) as f64 / (m.total_failures - 1) as f64)
            }
            _ => None,
        };
        FailureMetrics {
            total_failures: m.total_failures,
            total_successes: m.total_successes,
            trips: m.trips,
            recoveries: m.recoveries,
            reopenings: m.reopenings,
            recovery_rate: (decided > 0).then(|| m.recoveries as f64 / decided as f64),
            mtbf_ms: mtbf,
        }
    }

    /// Back to CLOSED with zeroed counters, history and backoff; metrics keep counting.
    pub fn reset(&self) {
        let now = self.clock.now_ms();
        let mut after = After::default();
        {
            let mut inner = self.lock();
            if inner.state != State::Closed {
                Self::transition(&mut inner, State::Closed, "reset".into(), now, &mut after);
            }
            clear_state(&mut inner);
            self.changed(&mut inner, &mut after);
        }
        self.finish(after);
    }

    /// The persistent form of the current state.
    pub fn snapshot(&self) -> FailureSnapshot {
        snapshot_of(&self.lock())
    }

    /// Replaces the state with a snapshot's, applying the seed's restart rules (OPEN stays OPEN
    /// with its `openedAt`; HALF_OPEN comes back CLOSED with no failures). On error nothing
    /// changes.
    pub fn restore(&self, snapshot: &FailureSnapshot) -> Result<()> {
        // Re-validate: a snapshot built by hand in Rust skips `from_json`.
        let snapshot = FailureSnapshot::from_json(&snapshot.to_json())?;
        let mut after = After::default();
        {
            let mut inner = self.lock();
            clear_state(&mut inner);
            match snapshot.state {
                State::HalfOpen | State::Closed => {
                    inner.state = State::Closed;
                    if snapshot.state == State::Closed {
                        inner.consecutive_failures = snapshot.consecutive_failures;
                        inner.backoff_level = snapshot.backoff_level;
                    }
                }
                State::Open => {
                    inner.state = State::Open;
                    inner.consecutive_failures = snapshot.consecutive_failures;
                    inner.opened_at = snapshot.opened_at;
                    inner.backoff_level = snapshot.backoff_level;
                }
            }
            inner.trips = snapshot.trips;
            let limit = self.config.history_limit as usize;
            let skip = snapshot.failure_history.len().saturating_sub(limit);
            inner.history = snapshot
                .failure_history
                .into_iter()
                .skip(skip)
                .map(|mut r| {
                    r.error = cap_error(&r.error).to_string();
                    r
                })
                .collect();
            self.changed(&mut inner, &mut after);
        }
        self.finish(after);
        Ok(())
    }

    /// [`FailureBreaker::restore`] from JSON.
    pub fn restore_json(&self, snapshot: &Value) -> Result<()> {
        self.restore(&FailureSnapshot::from_json(snapshot)?)
    }

    /// Writes the snapshot to `path` atomically (temp file, fsync, rename).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        write_snapshot(path.as_ref(), &self.snapshot())
    }

    /// Restores from `path`. `Ok(false)` (and no change) when the file does not exist.
    pub fn load(&self, path: impl AsRef<Path>) -> Result<bool> {
        let path = path.as_ref();
        let Some(bytes) = persist::read_optional(path)? else {
            return Ok(false);
        };
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::snapshot(format!("{} is not valid JSON: {e}", path.display())))?;
        self.restore_json(&value)?;
        Ok(true)
    }

    /// Runs `f` through the breaker: refused (without running `f`) with `CIRCUIT_OPEN` when the
    /// breaker says no; otherwise records success for `Ok` and failure (the error's text) for
    /// `Err`. A panic in `f` is recorded as a failure and then resumed.
    pub fn call<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        E: fmt::Display,
        F: FnOnce() -> Result<T, E>,
    {
        let permission = self.should_allow_operation();
        if !permission.allowed {
            return Err(CallError::Rejected(Error::CircuitOpen(
                permission.message.unwrap_or_default(),
            )));
        }
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(Ok(value)) => {
                self.record_success();
                Ok(value)
            }
            Ok(Err(e)) => {
                self.record_failure(&e.to_string());
                Err(CallError::Failed(e))
            }
            Err(panic) => {
                self.record_failure(&format!("panic: {}", panic_text(&panic)));
                resume_unwind(panic)
            }
        }
    }

    /// Adds a listener for `stateChange` and `warning` events.
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

fn granted(message: &str) -> Permission {
    Permission {
        allowed: true,
        message: Some(message.to_string()),
    }
}

fn clear_state(inner: &mut Inner) {
    inner.state = State::Closed;
    inner.consecutive_failures = 0;
    inner.opened_at = None;
    inner.backoff_level = 0;
    inner.trips = 0;
    inner.history.clear();
    inner.probes.clear();
    inner.identical_run = None;
}

fn snapshot_of(inner: &Inner) -> FailureSnapshot {
    FailureSnapshot {
        version: 1,
        kind: "failure".into(),
        state: inner.state,
        consecutive_failures: inner.consecutive_failures,
        opened_at: inner.opened_at,
        backoff_level: inner.backoff_level,
        trips: inner.trips,
        failure_history: inner.history.iter().cloned().collect(),
    }
}

fn write_snapshot(path: &Path, snapshot: &FailureSnapshot) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(snapshot)
        .map_err(|e| Error::Internal(format!("cannot serialize snapshot: {e}")))?;
    persist::write_atomic(path, &bytes)
}

/// `Warning: 3 consecutive failures. 2 more will open circuit.`
pub fn warning_message(warning_threshold: u32, failure_threshold: u32) -> String {
    let noun = if warning_threshold == 1 {
        "failure"
    } else {
        "failures"
    };
    format!(
        "Warning: {warning_threshold} consecutive {noun}. {} more will open circuit.",
        failure_threshold.saturating_sub(warning_threshold)
    )
}

/// The refusal message in OPEN: `N` is the remaining cooldown in whole seconds, rounded up.
pub fn open_message(remaining_ms: u64, failure_threshold: u32) -> String {
    format!(
        "Circuit breaker OPEN. {} seconds remaining in cooldown. {failure_threshold} consecutive \
         failures detected. Human intervention required.",
        remaining_ms.div_ceil(1000)
    )
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

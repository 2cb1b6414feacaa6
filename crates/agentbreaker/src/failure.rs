//! The FailureBreaker (contract §2, seed 004): consecutive failures open the circuit; after a cooldown a
//! probe decides whether it closes again.

use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{SharedClock, SystemClock, elapsed};
use crate::error::{CallError, Error, Result};
use crate::events::{Event, Listeners};
use crate::fingerprint::{ErrorMatch, fingerprint};
use crate::interop::{config_from_value, panic_message};
use crate::persist;
use crate::state::State;
#[cfg(feature = "redis")]
pub use crate::store::StoreStatus;
use crate::store::{DEFAULT_STORE_TIMEOUT_MS, StoreFailure, StoreUrl};
use crate::text::cap_error;

#[cfg(feature = "redis")]
mod shared;
#[cfg(feature = "redis")]
pub use shared::{STORE_REFUSAL, failure_keys, store_scripts};

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
    /// A Redis URL (`redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS): the
    /// state lives there under `key`, one circuit for every process that uses the same store and
    /// key (contract §12, docs/distributed.md). Needs the `redis` feature.
    pub store: Option<StoreUrl>,
    /// The key prefix of the shared state; required with `store`.
    pub key: Option<String>,
    /// The longest a call waits for the store, in ms (1 to 60 000). Default 50.
    pub store_timeout_ms: u64,
    /// What the breaker does while the store cannot be reached. Default `open`.
    pub store_failure: StoreFailure,
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
            store: None,
            key: None,
            store_timeout_ms: DEFAULT_STORE_TIMEOUT_MS,
            store_failure: StoreFailure::Open,
        }
    }
}

impl FailureConfig {
    /// Reads a config object with the contract's camelCase keys (`null` = defaults).
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
            return Err(Error::config(format_args!(
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
            return Err(Error::config(format_args!(
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
        self.validate_store()
    }

    fn validate_store(&self) -> Result<()> {
        crate::store::validate_store_keys(
            self.store.as_ref(),
            self.key.as_deref(),
            self.store_timeout_ms,
        )?;
        if self.store.is_some() && self.state_path.is_some() {
            return Err(Error::config(
                "statePath and store exclude each other: with store the state lives in the store",
            ));
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
        // A zero cooldown stays zero at every level (0 x 2^1024 would be NaN, not 0).
        if level == 0 || self.backoff_multiplier == 1.0 || self.cooldown_ms == 0 {
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
        let snap = FailureSnapshot::deserialize(value)
            .map_err(|e| Error::snapshot(format_args!("not a FailureBreaker snapshot: {e}")))?;
        persist::check_snapshot_header(snap.version, &snap.kind, "failure")?;
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

/// Lock-free mirrors of the state, so the hot path (a permission and a success in CLOSED with no
/// failures pending) takes no lock and reads no clock. They are written only while the state lock
/// is held, when its guard is dropped (`Locked`): `pending` before `state`, so a reader that sees
/// CLOSED and then nothing pending saw a moment when both were true.
#[derive(Debug, Default)]
struct Fast {
    /// `State as u8` (0 CLOSED, 1 HALF_OPEN, 2 OPEN).
    state: AtomicU8,
    /// Failures or an identical-error run are pending: a success has something to clear.
    pending: AtomicBool,
    /// Lifetime successes (a metric, kept outside the lock so the fast path can count).
    successes: AtomicU64,
    /// The state lives in a store: the mirrors stay at "not CLOSED" so that every call leaves
    /// the local fast path (the store's view has fast paths of its own).
    pinned: bool,
}

impl Fast {
    fn state(&self) -> State {
        match self.state.load(Ordering::SeqCst) {
            0 => State::Closed,
            1 => State::HalfOpen,
            _ => State::Open,
        }
    }

    fn sync(&self, inner: &Inner) {
        if self.pinned {
            return;
        }
        let pending = inner.consecutive_failures > 0 || inner.identical_run.is_some();
        self.pending.store(pending, Ordering::SeqCst);
        let code = match inner.state {
            State::Closed => 0,
            State::HalfOpen => 1,
            State::Open => 2,
        };
        self.state.store(code, Ordering::SeqCst);
    }

    /// CLOSED with nothing pending: a success only counts, a permission is granted.
    fn idle_closed(&self) -> bool {
        self.state.load(Ordering::SeqCst) == 0 && !self.pending.load(Ordering::SeqCst)
    }
}

/// The state lock's guard: on release it refreshes the lock-free mirrors.
struct Locked<'a> {
    guard: MutexGuard<'a, Inner>,
    fast: &'a Fast,
}

impl Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.guard
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.fast.sync(&self.guard);
    }
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
    fast: Fast,
    listeners: Listeners,
    state_file: Option<StateFile>,
    /// The shared state, with `store`.
    #[cfg(feature = "redis")]
    shared: Option<shared::Shared>,
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
    /// file is a fresh breaker, a corrupt one `INVALID_SNAPSHOT`). With `store`, the breaker
    /// connects and reads the shared state, waiting at most `storeTimeoutMs`: credentials the
    /// server refuses or a key of another type are `IO`; no answer in time is an outage
    /// (`storeFailure` decides until the store answers).
    pub fn with_clock(config: FailureConfig, clock: SharedClock) -> Result<Self> {
        config.validate()?;
        let state_file = config.state_path.clone().map(|path| StateFile {
            path,
            last_written: Mutex::new(0),
        });
        let warning_threshold = config.effective_warning_threshold();
        #[cfg(feature = "redis")]
        let shared = match config.store {
            Some(_) => Some(shared::Shared::start(&config, warning_threshold)?),
            None => None,
        };
        #[cfg(feature = "redis")]
        let fast = Fast {
            pinned: shared.is_some(),
            state: AtomicU8::new(if shared.is_some() { 2 } else { 0 }),
            ..Fast::default()
        };
        #[cfg(not(feature = "redis"))]
        let fast = Fast::default();
        let breaker = FailureBreaker {
            warning_threshold,
            config,
            clock,
            inner: Mutex::new(Inner::default()),
            fast,
            listeners: Listeners::default(),
            state_file,
            #[cfg(feature = "redis")]
            shared,
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

    fn lock(&self) -> Locked<'_> {
        Locked {
            guard: self.inner.lock().unwrap_or_else(|p| p.into_inner()),
            fast: &self.fast,
        }
    }

    /// After the state lock is released (the events were queued under it): save, then deliver.
    fn finish(&self, after: After) {
        debug_assert!(
            after.events.is_empty(),
            "events must be queued under the lock"
        );
        if let Some((version, snapshot)) = after.save {
            self.save_version(version, &snapshot);
        }
        self.listeners.deliver();
    }

    fn save_version(&self, version: u64, snapshot: &FailureSnapshot) {
        let Some(file) = &self.state_file else {
            return;
        };
        let failed = {
            let mut last = file.last_written.lock().unwrap_or_else(|p| p.into_inner());
            if version <= *last {
                return;
            }
            match write_snapshot(&file.path, snapshot) {
                Ok(()) => {
                    *last = version;
                    None
                }
                Err(e) => Some(e),
            }
        };
        // The warning goes out after the file lock is released: a listener may save again.
        if let Some(e) = failed {
            self.listeners.emit(&[Event::Warning {
                message: format!(
                    "Could not save state to {}: {}",
                    file.path.display(),
                    e.message()
                ),
                at_ms: self.clock.now_ms(),
            }]);
        }
    }

    /// Marks a persisted change and, with `statePath`, schedules a save.
    fn changed(&self, inner: &mut Inner, after: &mut After) {
        inner.version = inner.version.saturating_add(1);
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
            slug: opened_slug(to),
            at_ms: now,
        });
    }

    /// Records a success: the count returns to 0; in HALF_OPEN the circuit closes.
    pub fn record_success(&self) {
        self.fast.successes.fetch_add(1, Ordering::Relaxed);
        if self.fast.idle_closed() {
            return;
        }
        #[cfg(feature = "redis")]
        if self.shared.is_some() && self.shared_record_success() {
            return;
        }
        let now = self.clock.now_ms();
        let mut after = After::default();
        {
            let mut inner = self.lock();
            inner.consecutive_failures = 0;
            inner.identical_run = None;
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
                inner.metrics.recoveries = inner.metrics.recoveries.saturating_add(1);
                self.changed(&mut inner, &mut after);
            }
            self.listeners.enqueue(after.events.drain(..));
        }
        self.finish(after);
    }

    /// Records a failure with its error text (cut to 4096 bytes).
    pub fn record_failure(&self, error: &str) {
        let error = cap_error(error);
        let fp = (self.config.identical_error_threshold > 0)
            .then(|| fingerprint(error, self.config.error_match));
        #[cfg(feature = "redis")]
        if self.shared.is_some() && self.shared_record_failure(error, fp.as_deref()) {
            return;
        }
        let now = self.clock.now_ms();
        let mut after = After::default();
        {
            let mut inner = self.lock();
            #[cfg(feature = "test-panic")]
            if error == crate::TEST_PANIC_TRIGGER {
                panic!("test-panic: record_failure");
            }
            let inner = &mut *inner;
            inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
            let m = &mut inner.metrics;
            m.total_failures = m.total_failures.saturating_add(1);
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
                        inner.trips = inner.trips.saturating_add(1);
                        inner.metrics.trips = inner.metrics.trips.saturating_add(1);
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
                    inner.metrics.reopenings = inner.metrics.reopenings.saturating_add(1);
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
            self.listeners.enqueue(after.events.drain(..));
        }
        self.finish(after);
    }

    /// Asks whether an operation may run now (contract §2). In OPEN with the cooldown over this call
    /// moves the circuit to HALF_OPEN and is the probe.
    pub fn should_allow_operation(&self) -> Permission {
        if self.fast.state() == State::Closed {
            return Permission {
                allowed: true,
                message: None,
            };
        }
        #[cfg(feature = "redis")]
        if self.shared.is_some()
            && let Some(permission) = self.shared_permission()
        {
            return permission;
        }
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
        self.listeners.enqueue(after.events.drain(..));
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

    /// The current state (without the lazy OPEN→HALF_OPEN move). With a store, the shared
    /// state as this process last heard of it (at most one pub/sub delivery old), or the local
    /// breaker's while it has taken over.
    pub fn state(&self) -> State {
        #[cfg(feature = "redis")]
        if let Some(shared) = &self.shared {
            return shared.state().unwrap_or_else(|| self.lock().state);
        }
        self.fast.state()
    }

    /// With a store: where the state lives now (shared, local, refusing), the URL without its
    /// password, the key, the outages so far and the last error. `None` without a store.
    #[cfg(feature = "redis")]
    pub fn store_status(&self) -> Option<StoreStatus> {
        self.shared.as_ref().map(|_| self.shared_store_status())
    }

    /// The status object of contract §2. With a store it is read from the store (one round trip).
    pub fn status(&self) -> FailureStatus {
        #[cfg(feature = "redis")]
        if self.shared.is_some()
            && let Some(status) = self.shared_status()
        {
            return status;
        }
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
            total_successes: self.fast.successes.load(Ordering::Relaxed),
            trips: m.trips,
            recoveries: m.recoveries,
            reopenings: m.reopenings,
            recovery_rate: (decided > 0).then(|| m.recoveries as f64 / decided as f64),
            mtbf_ms: mtbf,
        }
    }

    /// Back to CLOSED with zeroed counters, history and backoff; metrics keep counting. With a
    /// store this resets the shared state, for every process.
    pub fn reset(&self) {
        #[cfg(feature = "redis")]
        if self.shared.is_some() && self.shared_reset() {
            return;
        }
        let now = self.clock.now_ms();
        let mut after = After::default();
        {
            let mut inner = self.lock();
            if inner.state != State::Closed {
                Self::transition(&mut inner, State::Closed, "reset".into(), now, &mut after);
            }
            clear_state(&mut inner);
            self.changed(&mut inner, &mut after);
            self.listeners.enqueue(after.events.drain(..));
        }
        self.finish(after);
    }

    /// The persistent form of the current state (with a store: of the shared state).
    pub fn snapshot(&self) -> FailureSnapshot {
        #[cfg(feature = "redis")]
        if self.shared.is_some()
            && let Some(snapshot) = self.shared_snapshot()
        {
            return snapshot;
        }
        snapshot_of(&self.lock())
    }

    /// Replaces the state with a snapshot's, applying the seed's restart rules (OPEN stays OPEN
    /// with its `openedAt`; HALF_OPEN comes back CLOSED with no failures). On error nothing
    /// changes.
    pub fn restore(&self, snapshot: &FailureSnapshot) -> Result<()> {
        // Re-validate: a snapshot built by hand in Rust skips `from_json`.
        let snapshot = FailureSnapshot::from_json(&snapshot.to_json())?;
        #[cfg(feature = "redis")]
        if self.shared.is_some() && self.shared_restore(&snapshot) {
            return Ok(());
        }
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
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            Error::snapshot(format_args!("{} is not valid JSON: {e}", path.display()))
        })?;
        self.restore_json(&value)?;
        Ok(true)
    }

    /// The first half of a guarded call, for callers that cannot hand over a closure (async code,
    /// context managers, other languages): asks [`FailureBreaker::should_allow_operation`] and
    /// turns a refusal into [`Error::CircuitOpen`] with the refusal message. After an `Ok`, run the
    /// operation and record its outcome with `record_success` / `record_failure`; an outcome that
    /// is never recorded is a lost probe, and its permit comes back after `probeTimeoutMs`.
    pub fn try_acquire(&self) -> Result<Permission> {
        let permission = self.should_allow_operation();
        if permission.allowed {
            Ok(permission)
        } else {
            Err(Error::CircuitOpen(permission.message.unwrap_or_default()))
        }
    }

    /// Runs `f` through the breaker: refused (without running `f`) with `CIRCUIT_OPEN` when the
    /// breaker says no; otherwise records success for `Ok` and failure (the error's text) for
    /// `Err`. A panic in `f` is recorded as a failure and then resumed.
    pub fn call<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        E: fmt::Display,
        F: FnOnce() -> Result<T, E>,
    {
        // CLOSED grants without side effects: skip building the permission.
        if self.fast.state() != State::Closed && !self.shared_closed() {
            self.try_acquire().map_err(CallError::Rejected)?;
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
                self.record_failure(&format!("panic: {}", panic_message(&*panic)));
                resume_unwind(panic)
            }
        }
    }

    /// [`FailureBreaker::try_acquire`] when it can answer without waiting for the store; `None`
    /// (and nothing done) when it may have to (a store-backed breaker outside CLOSED as far as
    /// this process knows). Bindings answer the hot path with it while holding their language's
    /// lock and release the lock for `try_acquire` when it says `None`. Without a store it is
    /// `try_acquire` (a `statePath` breaker may write its file: bindings release their lock for
    /// it anyway).
    #[inline]
    pub fn try_acquire_without_waiting(&self) -> Option<Result<Permission>> {
        #[cfg(feature = "redis")]
        if let Some(shared) = &self.shared {
            return shared.closed().then_some(Ok(Permission {
                allowed: true,
                message: None,
            }));
        }
        Some(self.try_acquire())
    }

    /// [`FailureBreaker::record_success`] when it needs no round trip to the store: `false`
    /// (and nothing recorded) when it may (a store-backed breaker with failures pending or
    /// outside CLOSED as far as this process knows). See
    /// [`FailureBreaker::try_acquire_without_waiting`].
    #[inline]
    pub fn record_success_without_waiting(&self) -> bool {
        #[cfg(feature = "redis")]
        if let Some(shared) = &self.shared {
            if !shared.idle() {
                return false;
            }
            self.fast.successes.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.record_success();
        true
    }

    /// With a store: CLOSED as far as this process knows (a permission needs no round trip).
    #[inline]
    fn shared_closed(&self) -> bool {
        #[cfg(feature = "redis")]
        if let Some(shared) = &self.shared {
            return shared.closed();
        }
        false
    }

    crate::events::listener_methods!("`stateChange` and `warning`");
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

/// How the seed 004 Lua breaker reported an event: with `print` or with `warn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeedLogLevel {
    /// `print(...)`.
    Print,
    /// `warn(...)`.
    Warn,
}

/// The line seed 004's Lua `CircuitBreaker` printed for a FailureBreaker event, with its
/// `[Circuit Breaker] ` prefix, or `None` for events the seed did not report (a `reset`, a failed
/// save). Bindings that promise seed compatibility (Lua's `CircuitBreaker`) print exactly this.
///
/// The seed printed `OPENED: 5 consecutive failures detected.` both when the circuit first opened
/// and when a half-open test failed (its count never went below the threshold); with another
/// The slug of a FailureBreaker's change to `to`: the rule that opens it.
pub(crate) fn opened_slug(to: State) -> Option<&'static str> {
    (to == State::Open).then_some("consecutive_failures")
}

/// `failureThreshold` the number is that threshold, and an identical-error trip names its rule.
pub fn seed_log_line(event: &Event, failure_threshold: u32) -> Option<(SeedLogLevel, String)> {
    const PREFIX: &str = "[Circuit Breaker] ";
    match event {
        Event::Warning { message, .. } if message.starts_with("Warning: ") => {
            Some((SeedLogLevel::Warn, format!("{PREFIX}{message}")))
        }
        Event::StateChange {
            from, to, reason, ..
        } => {
            let text = match (from, to) {
                (State::Closed, State::Open) => format!("OPENED: {reason}."),
                (State::HalfOpen, State::Open) => {
                    format!("OPENED: {failure_threshold} consecutive failures detected.")
                }
                (State::Open, State::HalfOpen) => {
                    "Cooldown expired. Entering HALF_OPEN state.".to_string()
                }
                (State::HalfOpen, State::Closed) if reason != "reset" => {
                    "Test operation succeeded. Closing circuit.".to_string()
                }
                _ => return None,
            };
            Some((SeedLogLevel::Print, format!("{PREFIX}{text}")))
        }
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::events::ListenerId;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    type Seen = Arc<Mutex<Vec<Event>>>;

    fn breaker(config: FailureConfig) -> (FailureBreaker, Arc<ManualClock>) {
        let clock = ManualClock::shared(0);
        let b = FailureBreaker::with_clock(config, clock.clone()).unwrap();
        (b, clock)
    }

    fn collect(b: &FailureBreaker) -> (ListenerId, Seen) {
        let seen: Seen = Arc::default();
        let s = Arc::clone(&seen);
        let id = b.add_listener(Arc::new(move |e| {
            s.lock().unwrap().push(e.clone());
            Ok(())
        }));
        (id, seen)
    }

    fn change(from: State, to: State, reason: &str, at_ms: u64) -> Event {
        Event::StateChange {
            from,
            to,
            reason: reason.to_string(),
            slug: opened_slug(to),
            at_ms,
        }
    }

    fn trip(b: &FailureBreaker) {
        for _ in 0..b.config().failure_threshold {
            b.record_failure("boom");
        }
        assert_eq!(b.state(), State::Open);
    }

    fn config_code(c: &FailureConfig) -> Option<&'static str> {
        c.validate().err().map(|e| e.code())
    }

    #[test]
    fn validate_checks_every_range_at_its_boundary() {
        let ok = FailureConfig::default();
        assert_eq!(config_code(&ok), None);
        let with = |f: &dyn Fn(&mut FailureConfig)| {
            let mut c = FailureConfig::default();
            f(&mut c);
            config_code(&c)
        };
        let bad = Some("INVALID_CONFIG");
        assert_eq!(with(&|c| c.failure_threshold = 0), bad);
        assert_eq!(
            with(&|c| {
                c.failure_threshold = 1;
                c.warning_threshold = Some(0);
            }),
            None
        );
        // warningThreshold must be < failureThreshold (or 0 = off).
        assert_eq!(with(&|c| c.warning_threshold = Some(5)), bad);
        assert_eq!(with(&|c| c.warning_threshold = Some(6)), bad);
        assert_eq!(with(&|c| c.warning_threshold = Some(4)), None);
        assert_eq!(with(&|c| c.warning_threshold = Some(1)), None);
        assert_eq!(with(&|c| c.warning_threshold = Some(0)), None);
        // backoffMultiplier finite and >= 1.0.
        assert_eq!(with(&|c| c.backoff_multiplier = 1.0), None);
        assert_eq!(with(&|c| c.backoff_multiplier = 0.999), bad);
        assert_eq!(with(&|c| c.backoff_multiplier = f64::NAN), bad);
        assert_eq!(with(&|c| c.backoff_multiplier = f64::INFINITY), bad);
        // maxCooldownMs >= cooldownMs.
        assert_eq!(
            with(&|c| {
                c.cooldown_ms = 1000;
                c.max_cooldown_ms = 1000;
            }),
            None
        );
        assert_eq!(
            with(&|c| {
                c.cooldown_ms = 1000;
                c.max_cooldown_ms = 999;
            }),
            bad
        );
        assert_eq!(
            with(&|c| {
                c.cooldown_ms = 0;
                c.max_cooldown_ms = 0;
            }),
            None
        );
        assert_eq!(with(&|c| c.half_open_max_probes = 0), bad);
        assert_eq!(with(&|c| c.half_open_max_probes = 1), None);
        assert_eq!(with(&|c| c.probe_timeout_ms = 0), bad);
        assert_eq!(with(&|c| c.probe_timeout_ms = 1), None);
        assert_eq!(with(&|c| c.history_limit = 0), None);
        assert_eq!(with(&|c| c.identical_error_threshold = 0), None);
        assert_eq!(with(&|c| c.identical_error_threshold = 1), None);
        // Construction validates too.
        let c = FailureConfig {
            failure_threshold: 0,
            ..FailureConfig::default()
        };
        assert_eq!(
            FailureBreaker::with_clock(c, ManualClock::shared(0))
                .unwrap_err()
                .code(),
            "INVALID_CONFIG"
        );
    }

    #[test]
    fn null_fields_are_defaults_in_every_config() {
        use crate::{BudgetConfig, StagnationConfig};
        let c = FailureConfig::from_json(&serde_json::json!({
            "failureThreshold": null, "cooldownMs": 10, "warningThreshold": null,
            "statePath": null, "errorMatch": null
        }))
        .unwrap();
        assert_eq!(
            c,
            FailureConfig {
                cooldown_ms: 10,
                ..FailureConfig::default()
            }
        );
        let s = StagnationConfig::from_json(&serde_json::json!({"noProgressThreshold": null}));
        assert_eq!(s.unwrap(), StagnationConfig::default());
        let b = BudgetConfig::from_json(&serde_json::json!({"maxToolCallsPerTask": null}));
        assert_eq!(b.unwrap(), BudgetConfig::default());
        // Unknown keys are still refused, null or not.
        let e = FailureConfig::from_json(&serde_json::json!({"failureThreshhold": null}));
        assert_eq!(e.unwrap_err().code(), "INVALID_CONFIG");
    }

    #[test]
    fn from_json_reads_camel_case_and_rejects_typos_and_fractions() {
        let c = FailureConfig::from_json(&serde_json::json!({
            "failureThreshold": 7, "warningThreshold": 2, "cooldownMs": 1000,
            "backoffMultiplier": 1.5, "maxCooldownMs": 9000, "identicalErrorThreshold": 3,
            "historyLimit": 4, "halfOpenMaxProbes": 2, "probeTimeoutMs": 50,
            "errorMatch": "template"
        }))
        .unwrap();
        assert_eq!(c.failure_threshold, 7);
        assert_eq!(c.warning_threshold, Some(2));
        assert_eq!(c.cooldown_ms, 1000);
        assert_eq!(c.backoff_multiplier, 1.5);
        assert_eq!(c.max_cooldown_ms, 9000);
        assert_eq!(c.identical_error_threshold, 3);
        assert_eq!(c.history_limit, 4);
        assert_eq!(c.half_open_max_probes, 2);
        assert_eq!(c.probe_timeout_ms, 50);
        assert_eq!(c.error_match, ErrorMatch::Template);
        assert_eq!(
            FailureConfig::from_json(&Value::Null).unwrap(),
            FailureConfig::default()
        );
        for bad in [
            serde_json::json!({"failureTreshold": 5}),
            serde_json::json!({"failureThreshold": 5.5}),
            serde_json::json!({"failureThreshold": -1}),
            serde_json::json!({"failureThreshold": "5"}),
            serde_json::json!({"errorMatch": "fuzzy"}),
            serde_json::json!({"failureThreshold": 3, "warningThreshold": 3}),
            serde_json::json!([1]),
        ] {
            assert_eq!(
                FailureConfig::from_json(&bad).unwrap_err().code(),
                "INVALID_CONFIG",
                "{bad}"
            );
        }
    }

    #[test]
    fn effective_warning_threshold_defaults_to_three_unless_threshold_is_small() {
        let eff = |failure_threshold, warning_threshold| {
            FailureConfig {
                failure_threshold,
                warning_threshold,
                ..FailureConfig::default()
            }
            .effective_warning_threshold()
        };
        assert_eq!(eff(5, None), 3);
        assert_eq!(eff(4, None), 3);
        assert_eq!(eff(3, None), 0);
        assert_eq!(eff(2, None), 0);
        assert_eq!(eff(1, None), 0);
        assert_eq!(eff(3, Some(2)), 2);
        assert_eq!(eff(10, Some(0)), 0);
        assert_eq!(eff(10, Some(9)), 9);
    }

    #[test]
    fn cooldown_at_doubles_and_caps() {
        let c = FailureConfig {
            backoff_multiplier: 2.0,
            ..FailureConfig::default()
        };
        assert_eq!(c.cooldown_at(0), 30_000);
        assert_eq!(c.cooldown_at(1), 60_000);
        assert_eq!(c.cooldown_at(2), 120_000);
        assert_eq!(c.cooldown_at(3), 240_000);
        assert_eq!(c.cooldown_at(6), 1_920_000);
        // 30 s × 2^7 = 3 840 000 > maxCooldownMs.
        assert_eq!(c.cooldown_at(7), 3_600_000);
        assert_eq!(c.cooldown_at(64), 3_600_000);
        assert_eq!(c.cooldown_at(2000), 3_600_000);
        assert_eq!(c.cooldown_at(u32::MAX), 3_600_000);
        let low_cap = FailureConfig {
            backoff_multiplier: 2.0,
            max_cooldown_ms: 100_000,
            ..FailureConfig::default()
        };
        assert_eq!(low_cap.cooldown_at(1), 60_000);
        assert_eq!(low_cap.cooldown_at(2), 100_000);
        // No overflow with the largest durations either.
        let huge = FailureConfig {
            backoff_multiplier: 3.0,
            cooldown_ms: u64::MAX / 2,
            max_cooldown_ms: u64::MAX,
            ..FailureConfig::default()
        };
        assert_eq!(huge.cooldown_at(0), u64::MAX / 2);
        assert_eq!(huge.cooldown_at(1), u64::MAX);
        assert_eq!(huge.cooldown_at(u32::MAX), u64::MAX);
    }

    #[test]
    fn zero_cooldown_stays_zero_at_every_backoff_level() {
        let c = FailureConfig {
            cooldown_ms: 0,
            backoff_multiplier: 2.0,
            max_cooldown_ms: 60_000,
            ..FailureConfig::default()
        };
        for level in [0, 1, 10, 1023, 1024, 5000, u32::MAX] {
            assert_eq!(c.cooldown_at(level), 0, "level {level}");
        }
    }

    #[test]
    fn cooldown_at_fractional_multiplier_and_no_backoff() {
        let c = FailureConfig {
            backoff_multiplier: 1.5,
            ..FailureConfig::default()
        };
        assert_eq!(c.cooldown_at(0), 30_000);
        assert_eq!(c.cooldown_at(1), 45_000);
        assert_eq!(c.cooldown_at(2), 67_500);
        assert_eq!(c.cooldown_at(3), 101_250);
        assert_eq!(c.cooldown_at(u32::MAX), 3_600_000);
        let flat = FailureConfig::default();
        assert_eq!(flat.cooldown_at(0), 30_000);
        assert_eq!(flat.cooldown_at(5), 30_000);
        assert_eq!(flat.cooldown_at(u32::MAX), 30_000);
    }

    #[test]
    fn backoff_grows_while_probes_fail_and_resets_on_recovery() {
        let (b, clock) = breaker(FailureConfig {
            backoff_multiplier: 2.0,
            ..FailureConfig::default()
        });
        trip(&b);
        assert_eq!(b.status().cooldown_ms, 30_000);
        let mut t = 0;
        for expected in [60_000, 120_000, 240_000] {
            t += b.status().cooldown_ms;
            clock.set(t);
            assert!(b.should_allow_operation().allowed);
            b.record_failure("still broken");
            let s = b.status();
            assert_eq!(s.state, State::Open);
            assert_eq!(s.opened_at, Some(t));
            assert_eq!(s.cooldown_ms, expected);
            assert_eq!(s.cooldown_remaining_ms, expected);
            // One ms before the end of the (longer) cooldown the call is still refused.
            clock.set(t + expected - 1);
            let p = b.should_allow_operation();
            assert!(!p.allowed);
            assert_eq!(
                p.message.unwrap(),
                open_message(1, 5),
                "cooldown {expected}"
            );
            clock.set(t);
        }
        assert_eq!(b.metrics().reopenings, 3);
        t += 240_000;
        clock.set(t);
        assert!(b.should_allow_operation().allowed);
        b.record_success();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.status().cooldown_ms, 30_000);
        trip(&b);
        assert_eq!(b.status().cooldown_ms, 30_000);
        assert_eq!(b.snapshot().backoff_level, 0);
    }

    #[test]
    fn message_texts() {
        assert_eq!(
            warning_message(3, 5),
            "Warning: 3 consecutive failures. 2 more will open circuit."
        );
        assert_eq!(
            warning_message(1, 2),
            "Warning: 1 consecutive failure. 1 more will open circuit."
        );
        assert_eq!(
            warning_message(2, 10),
            "Warning: 2 consecutive failures. 8 more will open circuit."
        );
        let open = |n: u64, t: u32| {
            format!(
                "Circuit breaker OPEN. {n} seconds remaining in cooldown. {t} consecutive \
                 failures detected. Human intervention required."
            )
        };
        assert_eq!(open_message(30_000, 5), open(30, 5));
        assert_eq!(open_message(28_000, 5), open(28, 5));
        assert_eq!(open_message(27_001, 5), open(28, 5));
        assert_eq!(open_message(1_001, 3), open(2, 3));
        assert_eq!(open_message(1_000, 3), open(1, 3));
        assert_eq!(open_message(1, 3), open(1, 3));
    }

    #[test]
    fn open_message_counts_down_in_whole_seconds_rounded_up() {
        let (b, clock) = breaker(FailureConfig::default());
        for _ in 0..4 {
            b.record_failure("Path not found");
        }
        clock.set(1000);
        b.record_failure("Path not found");
        let msg = |at: u64| {
            clock.set(at);
            let p = b.should_allow_operation();
            assert!(!p.allowed, "at {at}");
            p.message.unwrap()
        };
        assert_eq!(
            msg(3000),
            "Circuit breaker OPEN. 28 seconds remaining in cooldown. 5 consecutive failures \
             detected. Human intervention required."
        );
        assert_eq!(msg(1000), open_message(30_000, 5));
        assert_eq!(msg(1001), open_message(29_999, 5));
        assert!(msg(1001).contains(" 30 seconds "));
        assert!(msg(30_999).contains(" 1 seconds "));
        // Lazy: status says OPEN with 0 remaining until the next permission check.
        clock.set(31_000);
        let s = b.status();
        assert_eq!((s.state, s.cooldown_remaining_ms), (State::Open, 0));
        let p = b.should_allow_operation();
        assert_eq!(
            (p.allowed, p.message.as_deref()),
            (true, Some(PROBE_GRANTED))
        );
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(
            b.should_allow_operation().message.as_deref(),
            Some(PROBE_WAIT)
        );
    }

    #[test]
    fn warnings_and_transitions_are_emitted_in_order() {
        let (b, clock) = breaker(FailureConfig::default());
        let (_, seen) = collect(&b);
        for i in 1..=5 {
            clock.set(i * 10);
            b.record_failure("x");
        }
        clock.set(50 + 30_000);
        assert!(b.should_allow_operation().allowed);
        b.record_failure("x");
        clock.set(50 + 60_000);
        assert!(b.should_allow_operation().allowed);
        b.record_success();
        b.record_failure("y");
        b.record_failure("y");
        b.record_failure("y");
        b.record_success();
        b.record_failure("z");
        b.record_failure("z");
        b.record_failure("z");
        b.reset();
        let warning = |at_ms| Event::Warning {
            message: "Warning: 3 consecutive failures. 2 more will open circuit.".into(),
            at_ms,
        };
        let t = 50 + 60_000;
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                warning(30),
                change(
                    State::Closed,
                    State::Open,
                    "5 consecutive failures detected",
                    50
                ),
                change(State::Open, State::HalfOpen, "Cooldown expired", 30_050),
                change(
                    State::HalfOpen,
                    State::Open,
                    "Test operation failed",
                    30_050
                ),
                change(State::Open, State::HalfOpen, "Cooldown expired", t),
                change(
                    State::HalfOpen,
                    State::Closed,
                    "Test operation succeeded",
                    t
                ),
                warning(t),
                warning(t),
            ]
        );
        // reset() from CLOSED emits nothing.
        assert_eq!(seen.lock().unwrap().len(), 8);
        trip(&b);
        b.reset();
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last, change(State::Open, State::Closed, "reset", t));
    }

    #[test]
    fn open_state_counts_failures_but_keeps_opened_at_and_success_only_zeroes() {
        let (b, clock) = breaker(FailureConfig::default());
        trip(&b);
        clock.set(10_000);
        b.record_failure("later");
        let s = b.status();
        assert_eq!(s.state, State::Open);
        assert_eq!(s.consecutive_failures, 6);
        assert_eq!(s.opened_at, Some(0));
        assert_eq!(s.trips, 1);
        assert_eq!(s.failure_history.len(), 6);
        assert_eq!(
            s.failure_history[4],
            FailureRecord {
                at_ms: 0,
                error: "boom".into(),
                state: State::Closed
            }
        );
        assert_eq!(s.failure_history[5].state, State::Open);
        b.record_success();
        let s = b.status();
        assert_eq!(
            (s.state, s.consecutive_failures, s.opened_at),
            (State::Open, 0, Some(0))
        );
        assert_eq!(b.metrics().recoveries, 0);
    }

    #[test]
    fn history_is_a_ring_buffer_of_history_limit() {
        let (b, _) = breaker(FailureConfig {
            history_limit: 3,
            failure_threshold: 10,
            ..FailureConfig::default()
        });
        for i in 0..5 {
            b.record_failure(&format!("e{i}"));
        }
        let errors: Vec<String> = b
            .status()
            .failure_history
            .into_iter()
            .map(|r| r.error)
            .collect();
        assert_eq!(errors, ["e2", "e3", "e4"]);
        let (none, _) = breaker(FailureConfig {
            history_limit: 0,
            ..FailureConfig::default()
        });
        none.record_failure("x");
        assert!(none.status().failure_history.is_empty());
        assert_eq!(none.status().consecutive_failures, 1);
    }

    #[test]
    fn identical_error_rule_trips_early_and_restarts_on_other_errors() {
        let (b, _) = breaker(FailureConfig {
            identical_error_threshold: 3,
            failure_threshold: 10,
            ..FailureConfig::default()
        });
        let (_, seen) = collect(&b);
        b.record_failure("Timeout after 30s");
        b.record_failure("Timeout after 45s");
        b.record_failure("Disk full");
        b.record_failure("Timeout after 1s");
        b.record_failure("Timeout after 2s");
        assert_eq!(b.state(), State::Closed);
        b.record_failure("  Timeout after 3s ");
        assert_eq!(b.state(), State::Open);
        let events = seen.lock().unwrap().clone();
        assert_eq!(
            events.last().unwrap(),
            &change(
                State::Closed,
                State::Open,
                "Same error repeated 3 times: \"Timeout after 3s\"",
                0
            )
        );
        // The open message still names failureThreshold.
        assert!(
            b.should_allow_operation()
                .message
                .unwrap()
                .contains(" 10 consecutive failures detected.")
        );
    }

    #[test]
    fn probes_permits_and_timeout() {
        let (b, clock) = breaker(FailureConfig {
            half_open_max_probes: 2,
            probe_timeout_ms: 1000,
            ..FailureConfig::default()
        });
        trip(&b);
        clock.set(30_000);
        assert_eq!(
            b.should_allow_operation().message.as_deref(),
            Some(PROBE_GRANTED)
        );
        assert_eq!(
            b.should_allow_operation(),
            Permission {
                allowed: true,
                message: Some(PROBE_MORE.into())
            }
        );
        clock.set(30_999);
        assert_eq!(
            b.should_allow_operation(),
            Permission {
                allowed: false,
                message: Some(PROBE_WAIT.into())
            }
        );
        clock.set(31_000);
        assert_eq!(
            b.should_allow_operation(),
            Permission {
                allowed: true,
                message: Some(PROBE_GRANTED.into())
            }
        );
        assert_eq!(b.state(), State::HalfOpen);
        b.record_success();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.should_allow_operation().message, None);
    }

    #[test]
    fn metrics_count_for_the_objects_life() {
        let (b, clock) = breaker(FailureConfig {
            failure_threshold: 2,
            ..FailureConfig::default()
        });
        assert_eq!(b.metrics().recovery_rate, None);
        assert_eq!(b.metrics().mtbf_ms, None);
        b.record_failure("a");
        assert_eq!(b.metrics().mtbf_ms, None);
        clock.set(100);
        b.record_failure("a"); // trip
        clock.set(30_100);
        assert!(b.should_allow_operation().allowed);
        b.record_failure("a"); // reopening
        clock.set(60_100);
        assert!(b.should_allow_operation().allowed);
        b.record_success(); // recovery
        b.reset();
        let m = b.metrics();
        assert_eq!(m.total_failures, 3);
        assert_eq!(m.total_successes, 1);
        assert_eq!(m.trips, 1);
        assert_eq!(m.recoveries, 1);
        assert_eq!(m.reopenings, 1);
        assert_eq!(m.recovery_rate, Some(0.5));
        // (30100 - 0) / (3 - 1)
        assert_eq!(m.mtbf_ms, Some(15_050.0));
        assert_eq!(b.status().trips, 0);
    }

    #[test]
    fn call_records_ok_and_err_and_passes_them_on() {
        let (b, _) = breaker(FailureConfig::default());
        let r: Result<u32, CallError<String>> = b.call(|| Ok(7));
        assert_eq!(r, Ok(7));
        assert_eq!(b.metrics().total_successes, 1);
        let r: Result<u32, CallError<std::io::Error>> =
            b.call(|| Err(std::io::Error::other("disk full: /var")));
        match r {
            Err(CallError::Failed(e)) => assert_eq!(e.to_string(), "disk full: /var"),
            other => panic!("unexpected {other:?}"),
        }
        let r: Result<u32, CallError<String>> = b.call(|| Err("second".to_string()));
        assert_eq!(r, Err(CallError::Failed("second".to_string())));
        let s = b.status();
        assert_eq!(s.consecutive_failures, 2);
        let errors: Vec<&str> = s.failure_history.iter().map(|r| r.error.as_str()).collect();
        assert_eq!(errors, ["disk full: /var", "second"]);
        let r: Result<(), CallError<String>> = b.call(|| Ok(()));
        assert_eq!(r, Ok(()));
        assert_eq!(b.status().consecutive_failures, 0);
    }

    #[test]
    fn refused_call_does_not_run_and_is_circuit_open() {
        let (b, _) = breaker(FailureConfig {
            failure_threshold: 1,
            ..FailureConfig::default()
        });
        b.record_failure("first");
        let ran = AtomicBool::new(false);
        let r: Result<(), CallError<String>> = b.call(|| {
            ran.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(!ran.load(Ordering::SeqCst));
        let Err(CallError::Rejected(e)) = r else {
            panic!("expected a rejection, got {r:?}");
        };
        assert_eq!(e.code(), "CIRCUIT_OPEN");
        assert_eq!(
            e.message(),
            "Circuit breaker OPEN. 30 seconds remaining in cooldown. 1 consecutive failures \
             detected. Human intervention required."
        );
        // The refusal records nothing.
        let s = b.status();
        assert_eq!((s.consecutive_failures, s.failure_history.len()), (1, 1));
        assert_eq!(b.metrics().total_failures, 1);
        assert_eq!(b.metrics().total_successes, 0);
    }

    #[test]
    fn call_is_the_half_open_probe() {
        let (b, clock) = breaker(FailureConfig {
            failure_threshold: 1,
            backoff_multiplier: 2.0,
            ..FailureConfig::default()
        });
        b.record_failure("x");
        clock.set(30_000);
        let r: Result<(), CallError<&str>> = b.call(|| Err("probe failed"));
        assert_eq!(r, Err(CallError::Failed("probe failed")));
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.status().cooldown_ms, 60_000);
        assert_eq!(b.status().failure_history[1].state, State::HalfOpen);
        clock.set(90_000);
        let r: Result<u8, CallError<&str>> = b.call(|| Ok(1));
        assert_eq!(r, Ok(1));
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.metrics().recoveries, 1);
    }

    #[test]
    fn panicking_call_is_recorded_and_resumed() {
        let (b, _) = breaker(FailureConfig::default());
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _: Result<(), CallError<String>> = b.call(|| panic!("kaboom"));
        }));
        // The original payload propagates.
        let payload = outcome.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"kaboom"));
        let s = b.status();
        assert_eq!(s.consecutive_failures, 1);
        assert_eq!(s.failure_history.len(), 1);
        assert!(s.failure_history[0].error.starts_with("panic: "));
        assert_eq!(b.metrics().total_failures, 1);
        // The breaker stays usable.
        let r: Result<u8, CallError<String>> = b.call(|| Ok(3));
        assert_eq!(r, Ok(3));
        assert_eq!(b.status().consecutive_failures, 0);
    }

    #[test]
    fn panicking_call_records_the_panic_message() {
        let (b, _) = breaker(FailureConfig::default());
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _: Result<(), CallError<String>> = b.call(|| panic!("kaboom"));
        }));
        let code = std::hint::black_box(42);
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let _: Result<(), CallError<String>> = b.call(|| panic!("code {code}"));
        }));
        assert_eq!(
            outcome
                .unwrap_err()
                .downcast_ref::<String>()
                .map(String::as_str),
            Some("code 42")
        );
        // decisions.md: "a panic inside the function is recorded as a failure
        // (`panic: <message>`)" -- for &str and String payloads alike.
        let errors: Vec<String> = b
            .status()
            .failure_history
            .into_iter()
            .map(|r| r.error)
            .collect();
        assert_eq!(errors, ["panic: kaboom", "panic: code 42"]);
    }

    #[test]
    fn save_and_load_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("breaker.json");
        let (b, clock) = breaker(FailureConfig {
            backoff_multiplier: 2.0,
            ..FailureConfig::default()
        });
        clock.set(1000);
        trip(&b);
        clock.set(31_000);
        assert!(b.should_allow_operation().allowed);
        b.record_failure("probe failed");
        b.save(&path).unwrap();
        let on_disk: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk["version"], 1);
        assert_eq!(on_disk["kind"], "failure");
        assert_eq!(on_disk["state"], "OPEN");
        assert_eq!(on_disk["openedAt"], 31_000);
        assert_eq!(on_disk["backoffLevel"], 1);
        assert_eq!(on_disk["consecutiveFailures"], 6);
        assert_eq!(on_disk["trips"], 1);
        assert_eq!(on_disk["failureHistory"][5]["state"], "HALF_OPEN");
        assert_eq!(on_disk["failureHistory"][5]["atMs"], 31_000);
        // Only the file itself is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let (c, clock2) = breaker(FailureConfig {
            backoff_multiplier: 2.0,
            ..FailureConfig::default()
        });
        assert!(c.load(&path).unwrap());
        assert_eq!(c.snapshot(), b.snapshot());
        clock2.set(61_000);
        let s = c.status();
        assert_eq!(s.state, State::Open);
        assert_eq!(s.cooldown_ms, 60_000);
        assert_eq!(s.cooldown_remaining_ms, 30_000);
        assert_eq!(
            c.should_allow_operation().message.unwrap(),
            open_message(30_000, 5)
        );
    }

    #[test]
    fn load_missing_corrupt_and_save_without_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (b, _) = breaker(FailureConfig::default());
        trip(&b);
        let before = b.snapshot();
        assert!(!b.load(dir.path().join("missing.json")).unwrap());
        assert_eq!(b.snapshot(), before);
        let corrupt = dir.path().join("corrupt.json");
        std::fs::write(&corrupt, "{not json").unwrap();
        assert_eq!(b.load(&corrupt).unwrap_err().code(), "INVALID_SNAPSHOT");
        std::fs::write(&corrupt, r#"{"version": 1, "kind": "failure"}"#).unwrap();
        assert_eq!(b.load(&corrupt).unwrap_err().code(), "INVALID_SNAPSHOT");
        assert_eq!(b.snapshot(), before);
        let nowhere = dir.path().join("no-such-dir").join("s.json");
        assert_eq!(b.save(&nowhere).unwrap_err().code(), "IO");
        assert!(!dir.path().join("no-such-dir").exists());
    }

    #[test]
    fn state_path_saves_on_transitions_and_loads_at_construction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let config = FailureConfig {
            state_path: Some(path.clone()),
            ..FailureConfig::default()
        };
        let read = || -> Value { serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap() };
        let clock = ManualClock::shared(5000);
        let b = FailureBreaker::with_clock(config.clone(), clock.clone()).unwrap();
        for _ in 0..4 {
            b.record_failure("x");
        }
        // No transition yet: nothing written.
        assert!(!path.exists());
        b.record_failure("x");
        assert_eq!(read()["state"], "OPEN");
        assert_eq!(read()["openedAt"], 5000);

        // A second breaker (a restart) picks the open circuit up with its cooldown running.
        let clock2 = ManualClock::shared(25_000);
        let c = FailureBreaker::with_clock(config.clone(), clock2.clone()).unwrap();
        let s = c.status();
        assert_eq!(s.state, State::Open);
        assert_eq!(s.opened_at, Some(5000));
        assert_eq!(s.cooldown_remaining_ms, 10_000);
        assert_eq!(s.consecutive_failures, 5);

        clock.set(35_000);
        assert!(b.should_allow_operation().allowed);
        assert_eq!(read()["state"], "HALF_OPEN");
        b.record_success();
        assert_eq!(read()["state"], "CLOSED");
        b.record_failure("y");
        assert_eq!(
            read()["consecutiveFailures"],
            0,
            "a plain failure is no transition"
        );
        trip(&b);
        assert_eq!(read()["state"], "OPEN");
        b.reset();
        assert_eq!(read()["state"], "CLOSED");
        assert_eq!(read()["trips"], 0);

        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(
            FailureBreaker::with_clock(config, ManualClock::shared(0))
                .unwrap_err()
                .code(),
            "INVALID_SNAPSHOT"
        );
    }

    #[test]
    fn failed_state_save_is_a_warning_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("state.json");
        let (b, _) = breaker(FailureConfig {
            state_path: Some(path.clone()),
            failure_threshold: 1,
            ..FailureConfig::default()
        });
        let (_, seen) = collect(&b);
        b.record_failure("x");
        assert_eq!(b.state(), State::Open);
        let events = seen.lock().unwrap().clone();
        assert_eq!(events.len(), 2);
        // In the order things happened: the transition, then the save that failed.
        assert!(matches!(
            events[0],
            Event::StateChange {
                to: State::Open,
                ..
            }
        ));
        let Event::Warning { message, .. } = &events[1] else {
            panic!("expected the save warning second, got {events:?}");
        };
        let prefix = format!("Could not save state to {}: ", path.display());
        assert!(message.starts_with(&prefix), "{message}");
    }

    #[test]
    fn restore_applies_the_restart_rules() {
        let (b, clock) = breaker(FailureConfig {
            backoff_multiplier: 2.0,
            history_limit: 2,
            ..FailureConfig::default()
        });
        let (_, seen) = collect(&b);
        let record = |at_ms, error: &str| FailureRecord {
            at_ms,
            error: error.into(),
            state: State::Closed,
        };
        let snap = |state, opened_at, failures, level| FailureSnapshot {
            version: 1,
            kind: "failure".into(),
            state,
            consecutive_failures: failures,
            opened_at,
            backoff_level: level,
            trips: 4,
            failure_history: vec![record(1, "a"), record(2, "b"), record(3, "c")],
        };
        // OPEN stays OPEN with its openedAt: the cooldown continues.
        clock.set(70_000);
        b.restore(&snap(State::Open, Some(10_000), 6, 1)).unwrap();
        let s = b.status();
        assert_eq!(s.state, State::Open);
        assert_eq!(s.opened_at, Some(10_000));
        assert_eq!(s.consecutive_failures, 6);
        assert_eq!(s.cooldown_ms, 60_000);
        assert_eq!(s.cooldown_remaining_ms, 0);
        assert_eq!(s.trips, 4);
        assert_eq!(s.failure_history, vec![record(2, "b"), record(3, "c")]);
        clock.set(40_000);
        assert_eq!(b.status().cooldown_remaining_ms, 30_000);

        // HALF_OPEN comes back CLOSED with no failures and backoff 0.
        b.restore(&snap(State::HalfOpen, Some(10_000), 6, 3))
            .unwrap();
        let s = b.status();
        assert_eq!(
            (s.state, s.consecutive_failures, s.opened_at, s.cooldown_ms),
            (State::Closed, 0, None, 30_000)
        );
        assert_eq!(b.snapshot().backoff_level, 0);
        assert!(b.should_allow_operation().allowed);

        // CLOSED above the threshold opens on its next failure (the >= rule).
        b.restore(&snap(State::Closed, None, 7, 0)).unwrap();
        assert_eq!(b.state(), State::Closed);
        b.record_failure("one more");
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.status().consecutive_failures, 8);
        assert_eq!(b.status().trips, 5);

        // restore is loading, not a transition: only the failure above emitted an event.
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[test]
    fn invalid_snapshots_leave_the_breaker_unchanged() {
        let (b, _) = breaker(FailureConfig::default());
        b.record_failure("kept");
        let before = b.snapshot();
        let good = before.to_json();
        let mut cases = Vec::new();
        for (key, value) in [
            ("version", serde_json::json!(2)),
            ("kind", serde_json::json!("stagnation")),
            ("state", serde_json::json!("AJAR")),
            ("consecutiveFailures", serde_json::json!(-1)),
            ("extra", serde_json::json!(true)),
        ] {
            let mut v = good.clone();
            v[key] = value;
            cases.push(v);
        }
        let mut open_without_time = good.clone();
        open_without_time["state"] = "OPEN".into();
        cases.push(open_without_time);
        cases.push(serde_json::json!("not an object"));
        for case in cases {
            assert_eq!(
                b.restore_json(&case).unwrap_err().code(),
                "INVALID_SNAPSHOT",
                "{case}"
            );
            assert_eq!(b.snapshot(), before);
        }
        // A hand-built Rust snapshot is validated too.
        let mut bad = before.clone();
        bad.version = 0;
        assert_eq!(b.restore(&bad).unwrap_err().code(), "INVALID_SNAPSHOT");
        assert_eq!(b.snapshot(), before);
    }

    #[test]
    fn listeners_can_be_removed_and_failing_ones_are_counted() {
        let (b, _) = breaker(FailureConfig::default());
        let (id, seen) = collect(&b);
        b.add_listener(Arc::new(|_| Err("listener broke".into())));
        for _ in 0..3 {
            b.record_failure("x"); // the 3rd emits a warning
        }
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert_eq!(b.listener_errors(), 1);
        assert!(b.remove_listener(id));
        assert!(!b.remove_listener(id));
        b.record_failure("x");
        b.record_failure("x"); // opens: one event
        assert_eq!(b.state(), State::Open);
        assert_eq!(seen.lock().unwrap().len(), 1);
        assert_eq!(b.listener_errors(), 2);
        assert_eq!(b.status().consecutive_failures, 5);
    }

    #[test]
    fn reset_clears_state_but_not_metrics() {
        let (b, _) = breaker(FailureConfig {
            backoff_multiplier: 2.0,
            ..FailureConfig::default()
        });
        trip(&b);
        b.reset();
        let s = b.status();
        assert_eq!(s.state, State::Closed);
        assert_eq!(s.consecutive_failures, 0);
        assert!(s.failure_history.is_empty());
        assert_eq!(s.opened_at, None);
        assert_eq!(s.trips, 0);
        assert_eq!(s.cooldown_ms, 30_000);
        assert_eq!(b.metrics().total_failures, 5);
        assert_eq!(b.metrics().trips, 1);
    }

    #[test]
    fn try_acquire_is_the_permission_as_a_result() {
        let (b, clock) = breaker(FailureConfig {
            failure_threshold: 1,
            ..FailureConfig::default()
        });
        assert_eq!(b.try_acquire().unwrap().message, None);
        b.record_failure("x");
        let e = b.try_acquire().unwrap_err();
        assert_eq!(e.code(), "CIRCUIT_OPEN");
        assert_eq!(e.message(), open_message(30_000, 1));
        clock.set(30_000);
        assert_eq!(
            b.try_acquire().unwrap().message.as_deref(),
            Some(PROBE_GRANTED)
        );
        assert_eq!(b.try_acquire().unwrap_err().message(), PROBE_WAIT);
    }

    /// A listener that reacts to a failed save by saving again (here: `reset()`) must not
    /// deadlock on the state file's lock.
    #[test]
    fn a_listener_may_save_again_after_a_failed_save() {
        let dir = tempfile::tempdir().unwrap();
        let b = std::sync::Arc::new(
            FailureBreaker::with_clock(
                FailureConfig {
                    state_path: Some(dir.path().join("missing").join("state.json")),
                    failure_threshold: 1,
                    ..FailureConfig::default()
                },
                ManualClock::shared(0),
            )
            .unwrap(),
        );
        let inner = std::sync::Arc::clone(&b);
        let resets = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = std::sync::Arc::clone(&resets);
        b.add_listener(std::sync::Arc::new(move |e| {
            if matches!(e, Event::Warning { .. })
                && counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0
            {
                inner.reset();
            }
            Ok(())
        }));
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::sync::Arc::clone(&b);
        std::thread::spawn(move || {
            worker.record_failure("x");
            let _ = tx.send(());
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("record_failure deadlocked");
        assert_eq!(b.state(), State::Closed);
        assert!(resets.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    }

    #[test]
    fn seed_log_lines_are_the_seeds_prints() {
        let (b, clock) = breaker(FailureConfig::default());
        let (_, seen) = collect(&b);
        for _ in 0..5 {
            b.record_failure("Path not found");
        }
        clock.set(30_000);
        b.should_allow_operation();
        b.record_failure("Path not found");
        clock.set(60_000);
        b.should_allow_operation();
        b.record_success();
        b.reset();
        let lines: Vec<(SeedLogLevel, String)> = seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| seed_log_line(e, 5))
            .collect();
        let p = |s: &str| (SeedLogLevel::Print, format!("[Circuit Breaker] {s}"));
        assert_eq!(
            lines,
            vec![
                (
                    SeedLogLevel::Warn,
                    "[Circuit Breaker] Warning: 3 consecutive failures. 2 more will open circuit."
                        .to_string()
                ),
                p("OPENED: 5 consecutive failures detected."),
                p("Cooldown expired. Entering HALF_OPEN state."),
                p("OPENED: 5 consecutive failures detected."),
                p("Cooldown expired. Entering HALF_OPEN state."),
                p("Test operation succeeded. Closing circuit."),
            ]
        );
    }

    #[test]
    fn breaker_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<FailureBreaker>();
    }
}

//! A FailureBreaker whose state lives in Redis (contract §12; docs/distributed.md).
//!
//! Every transition is one Lua script (`lua/*.lua`) run with EVALSHA, so the rules of contract §2 hold
//! across processes: the script that brings the count to the threshold opens the circuit, once,
//! and only the process whose call ran it emits the `stateChange`. Time is the caller's clock,
//! passed to the script.
//!
//! Each process keeps a *view* of the shared state (state, openedAt, backoff level, whether
//! failures are pending), refreshed by every script reply and by the channel every script
//! publishes to when one of those changes. The view answers without a round trip what it can:
//! a permission in CLOSED, a success with nothing pending, a refusal in OPEN before the cooldown
//! is over, and a refusal in HALF_OPEN while the probe is out and not yet timed out. Everything
//! else is one script call.
//!
//! While the store is down (a call found it unreachable, or the background connection lost it),
//! `storeFailure: "open"` runs the breaker's own local state — seeded from the view when the
//! outage is first noticed, announced by one `warning` — and `"closed"` refuses every
//! permission. When the link is up again the next call announces the rejoin and the shared state
//! decides again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::Value;

use super::{
    FailureBreaker, FailureConfig, FailureRecord, FailureSnapshot, FailureStatus, Inner,
    PROBE_GRANTED, PROBE_MORE, PROBE_WAIT, Permission, granted, open_message,
};
use crate::clock::elapsed;
use crate::error::Result;
use crate::events::Event;
use crate::state::State;
use crate::store::link::{Fault, FaultKind, Link, LinkConfig, LinkGuard, LinkUser, Session};
use crate::store::{StoreFailure, StoreStatus};

const PRELUDE: &str = include_str!("lua/prelude.lua");
const READ: usize = 0;
const FAILURE: usize = 1;
const SUCCESS: usize = 2;
const PERMIT: usize = 3;
const RESET: usize = 4;
const RESTORE: usize = 5;
const BODIES: [&str; 6] = [
    include_str!("lua/read.lua"),
    include_str!("lua/failure.lua"),
    include_str!("lua/success.lua"),
    include_str!("lua/permit.lua"),
    include_str!("lua/reset.lua"),
    include_str!("lua/restore.lua"),
];

/// The message of a refusal while the store is down and `storeFailure` is `"closed"`.
pub const STORE_REFUSAL: &str = "Circuit breaker state store unreachable: operations are refused \
                                 until it answers (storeFailure \"closed\")";

/// The Redis keys of a FailureBreaker under the prefix `key`: the state hash, the probe list and
/// the history list (the channel is the state hash's name with `:events`).
pub fn failure_keys(key: &str) -> [String; 3] {
    [
        format!("{key}:failure"),
        format!("{key}:failure:probes"),
        format!("{key}:failure:history"),
    ]
}

/// The scripts' sources (the prelude and each body), as EVALSHA runs them.
fn sources() -> Vec<String> {
    BODIES
        .iter()
        .map(|body| format!("{PRELUDE}\n{body}"))
        .collect()
}

/// The FailureBreaker's Lua scripts by name (`read`, `failure`, `success`, `permit`, `reset`,
/// `restore`), as the breaker loads them: for operators who want to look at them or load them
/// in advance, and for benchmarks that run them directly.
pub fn store_scripts() -> Vec<(&'static str, String)> {
    ["read", "failure", "success", "permit", "reset", "restore"]
        .into_iter()
        .zip(sources())
        .collect()
}

/// The part of a script reply every script returns.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    generation: String,
    epoch: u64,
    state: State,
    failures: u64,
    opened_at: Option<u64>,
    level: u32,
    trips: u64,
    pending: bool,
}

fn protocol(what: &str) -> Fault {
    Fault::new(
        FaultKind::Protocol,
        format!("unexpected reply from the store ({what})"),
    )
}

/// A whole number in a reply, saturating (Lua writes doubles: a count near `u64::MAX` comes back
/// a little above it).
fn number(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    text.parse::<u64>().ok().or_else(|| {
        let f: f64 = text.parse().ok()?;
        (f.is_finite() && f >= 0.0).then_some(f as u64)
    })
}

fn state_of(field: &[u8]) -> Option<State> {
    match field {
        b"CLOSED" => Some(State::Closed),
        b"HALF_OPEN" => Some(State::HalfOpen),
        b"OPEN" => Some(State::Open),
        _ => None,
    }
}

fn state_name(state: State) -> &'static str {
    match state {
        State::Closed => "CLOSED",
        State::HalfOpen => "HALF_OPEN",
        State::Open => "OPEN",
    }
}

impl Summary {
    fn parse(fields: &[Vec<u8>]) -> Option<Summary> {
        let [
            generation,
            epoch,
            state,
            failures,
            opened_at,
            level,
            trips,
            pending,
            ..,
        ] = fields
        else {
            return None;
        };
        Some(Summary {
            generation: String::from_utf8(generation.clone()).ok()?,
            epoch: number(epoch)?,
            state: state_of(state)?,
            failures: number(failures)?,
            opened_at: if opened_at.starts_with(b"-") {
                None
            } else {
                Some(number(opened_at)?)
            },
            level: u32::try_from(number(level)?).unwrap_or(u32::MAX),
            trips: number(trips)?,
            pending: pending.as_slice() == b"1",
        })
    }
}

/// A script reply: the summary and the script's own fields after it.
fn parse_reply(value: Value) -> std::result::Result<(Summary, Vec<Vec<u8>>), Fault> {
    let Value::Array(items) = value else {
        return Err(protocol("not an array"));
    };
    let mut fields = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::BulkString(b) => fields.push(b),
            Value::SimpleString(s) => fields.push(s.into_bytes()),
            Value::Int(i) => fields.push(i.to_string().into_bytes()),
            _ => return Err(protocol("a field that is not a string")),
        }
    }
    let summary = Summary::parse(&fields).ok_or_else(|| protocol("a malformed state"))?;
    let extra = fields.split_off(8);
    Ok((summary, extra))
}

/// A history entry as the scripts store it: `<atMs> <state> <error>`.
fn parse_record(entry: &[u8]) -> Option<FailureRecord> {
    let mut parts = entry.splitn(3, |b| *b == b' ');
    let at_ms = number(parts.next()?)?;
    let state = state_of(parts.next()?)?;
    let error = String::from_utf8_lossy(parts.next().unwrap_or(b"")).into_owned();
    Some(FailureRecord {
        at_ms,
        error,
        state,
    })
}

/// What this process knows of the shared state.
#[derive(Debug, Default, Clone)]
struct View {
    generation: String,
    epoch: u64,
    state: State,
    failures: u64,
    opened_at: Option<u64>,
    level: u32,
    trips: u64,
    pending: bool,
    /// A HALF_OPEN refusal stays valid until this time while the epoch stays (epoch, ms).
    wait_until: Option<(u64, u64)>,
    /// The link is up.
    up: bool,
    /// A rejoin is to be announced by the next call (the fast paths wait for it).
    announce: bool,
    /// The local breaker took over (seeded) in the current outage.
    local: bool,
}

/// The view and its lock-free mirrors for the fast paths.
#[derive(Debug, Default)]
struct ViewCell {
    /// CLOSED and usable: a permission needs no round trip.
    closed: AtomicBool,
    /// CLOSED, nothing pending, usable: a success needs no round trip.
    idle: AtomicBool,
    view: Mutex<View>,
}

impl ViewCell {
    fn lock(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn refresh(&self, v: &View) {
        let usable = v.up && !v.announce;
        let closed = usable && v.state == State::Closed;
        self.idle.store(closed && !v.pending, Ordering::SeqCst);
        self.closed.store(closed, Ordering::SeqCst);
    }

    /// Applies a summary: always when `force` (a fresh read after connecting), otherwise when it
    /// is newer than the view: another generation whatever its epoch (a state created afresh
    /// starts again at epoch 1, or 0 while the key is missing), or a later epoch; a script reply
    /// also at the same epoch, whose counts are as fresh as any.
    fn apply(&self, s: &Summary, force: bool, reply: bool) {
        let mut v = self.lock();
        let newer =
            s.generation != v.generation || s.epoch > v.epoch || (reply && s.epoch == v.epoch);
        if !(force || newer) {
            return;
        }
        if s.generation != v.generation || s.epoch != v.epoch {
            v.wait_until = None;
        }
        v.generation.clone_from(&s.generation);
        v.epoch = s.epoch;
        v.state = s.state;
        v.failures = s.failures;
        v.opened_at = s.opened_at;
        v.level = s.level;
        v.trips = s.trips;
        v.pending = s.pending;
        self.refresh(&v);
    }

    fn parse_message(payload: &[u8]) -> Option<Summary> {
        let fields: Vec<Vec<u8>> = payload.split(|b| *b == b' ').map(<[u8]>::to_vec).collect();
        Summary::parse(&fields)
    }
}

/// What the link's background thread calls.
struct Hooks {
    view: Arc<ViewCell>,
    keys: [String; 3],
}

impl LinkUser for Hooks {
    fn on_connect(&self, session: &mut Session) -> std::result::Result<(), Fault> {
        let keys = self.keys.each_ref().map(String::as_str);
        let (summary, _) = parse_reply(session.eval(READ, &keys, &[""], None)?)?;
        self.view.apply(&summary, true, true);
        Ok(())
    }

    fn on_message(&self, payload: &[u8]) {
        if let Some(summary) = ViewCell::parse_message(payload) {
            self.view.apply(&summary, false, false);
        }
    }

    fn on_up(&self, rejoined: bool) {
        let mut v = self.view.lock();
        v.up = true;
        v.local = false;
        v.announce = rejoined;
        self.view.refresh(&v);
    }

    fn on_down(&self) {
        let mut v = self.view.lock();
        v.up = false;
        self.view.refresh(&v);
    }
}

/// The shared side of a FailureBreaker with `store`.
pub(super) struct Shared {
    link: Link,
    view: Arc<ViewCell>,
    prefix: String,
    keys: [String; 3],
    /// This process's random id; with `calls`, the generation of a state a call creates.
    nonce: String,
    calls: AtomicU64,
    on_failure: StoreFailure,
    timeout: Duration,
    // The config's numbers as the scripts take them.
    threshold: String,
    warning: String,
    identical: String,
    history: String,
    cooldown: String,
    multiplier: String,
    max_cooldown: String,
    probes: String,
    probe_timeout: String,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("url", self.link.url())
            .field("key", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Connects (waiting at most `storeTimeoutMs`) and reads the shared state.
    pub(super) fn start(config: &FailureConfig, warning_threshold: u32) -> Result<Shared> {
        let url = config
            .store
            .clone()
            .unwrap_or_else(|| crate::store::StoreUrl::new(""));
        let prefix = config.key.clone().unwrap_or_default();
        let keys = failure_keys(&prefix);
        let timeout = Duration::from_millis(config.store_timeout_ms);
        let view = Arc::new(ViewCell::default());
        let hooks = Arc::new(Hooks {
            view: Arc::clone(&view),
            keys: keys.clone(),
        });
        let link = Link::start(
            LinkConfig {
                url,
                timeout,
                channel: Some(format!("{}:events", keys[0])),
                scripts: sources(),
            },
            hooks,
        )?;
        Ok(Shared {
            link,
            view,
            prefix,
            keys,
            // the first part of the generation of every state it creates
            nonce: crate::store::random_id(1),
            calls: AtomicU64::new(0),
            on_failure: config.store_failure,
            timeout,
            threshold: config.failure_threshold.to_string(),
            warning: warning_threshold.to_string(),
            identical: config.identical_error_threshold.to_string(),
            history: config.history_limit.to_string(),
            cooldown: config.cooldown_ms.to_string(),
            multiplier: config.backoff_multiplier.to_string(),
            max_cooldown: config.max_cooldown_ms.to_string(),
            probes: config.half_open_max_probes.to_string(),
            probe_timeout: config.probe_timeout_ms.to_string(),
        })
    }

    fn keys(&self) -> [&str; 3] {
        self.keys.each_ref().map(String::as_str)
    }

    /// The generation of the state a script creates if the key is missing: fresh for every call
    /// (this breaker's random id and the number of its calls), so a state created again after
    /// its keys were deleted, flushed or evicted never has the generation of an earlier one,
    /// and every process applies its news whatever the epochs (the old epoch may be far
    /// above the new state's).
    fn generation(&self) -> String {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n:x}", self.nonce)
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// CLOSED as far as this process knows (and the store is up): grant without asking.
    pub(super) fn closed(&self) -> bool {
        self.view.closed.load(Ordering::SeqCst)
    }

    /// CLOSED with nothing pending: a success changes nothing.
    pub(super) fn idle(&self) -> bool {
        self.view.idle.load(Ordering::SeqCst)
    }

    /// The state as this process sees it (the local breaker's while it has taken over).
    pub(super) fn state(&self) -> Option<State> {
        let v = self.view.lock();
        (!v.local).then_some(v.state)
    }

    pub(super) fn status(&self) -> StoreStatus {
        self.link.store_status(&self.prefix, self.on_failure)
    }

    /// A permission the view can give without a round trip: a refusal in OPEN before the
    /// cooldown is over, or in HALF_OPEN while the probes are out and none has timed out.
    fn answer_locally(&self, config: &FailureConfig, now: u64) -> Option<Permission> {
        let v = self.view.lock();
        if !v.up || v.announce {
            return None;
        }
        match v.state {
            State::Closed => Some(Permission {
                allowed: true,
                message: None,
            }),
            State::Open => {
                let cooldown = config.cooldown_at(v.level);
                let waited = elapsed(v.opened_at.unwrap_or(now), now);
                (waited < cooldown).then(|| Permission {
                    allowed: false,
                    message: Some(open_message(cooldown - waited, config.failure_threshold)),
                })
            }
            State::HalfOpen => match v.wait_until {
                Some((epoch, until)) if epoch == v.epoch && now < until => Some(Permission {
                    allowed: false,
                    message: Some(PROBE_WAIT.to_string()),
                }),
                _ => None,
            },
        }
    }
}

fn change(from: State, to: State, reason: String, at_ms: u64) -> Event {
    Event::StateChange {
        from,
        to,
        reason,
        slug: super::opened_slug(to),
        at_ms,
    }
}

fn field(extra: &[Vec<u8>], i: usize) -> &[u8] {
    extra.get(i).map_or(&[][..], Vec::as_slice)
}

impl FailureBreaker {
    fn shared(&self) -> &Shared {
        // Only called on breakers built with a store.
        self.shared
            .as_ref()
            .unwrap_or_else(|| unreachable!("no shared state"))
    }

    /// Takes the link for a call: `None` when the store is down (the outage announced and the
    /// local breaker seeded, once per outage). A pending rejoin is announced first.
    fn enter(&self) -> Option<LinkGuard<'_>> {
        let shared = self.shared();
        let mut link = shared.link.lock();
        if link.take_rejoin() {
            let mut v = shared.view.lock();
            v.announce = false;
            shared.view.refresh(&v);
            let state = v.state;
            drop(v);
            self.listeners.enqueue([Event::Warning {
                message: format!(
                    "Shared circuit state reachable again at {} (key {}): rejoined the shared \
                     state ({}).",
                    shared.link.url().redacted(),
                    shared.prefix,
                    state_name(state)
                ),
                at_ms: self.clock.now_ms(),
            }]);
        }
        if link.is_up() {
            return Some(link);
        }
        self.fall_back(&mut link);
        drop(link);
        self.listeners.deliver();
        None
    }

    /// After the store was found down: announce the outage and seed the local breaker, once.
    fn fall_back(&self, link: &mut LinkGuard<'_>) {
        let shared = self.shared();
        let Some(reason) = link.take_outage() else {
            return;
        };
        let mut v = shared.view.lock();
        v.local = true;
        {
            let mut inner = self.lock();
            seed(&mut inner, &v);
        }
        drop(v);
        let then = match shared.on_failure {
            StoreFailure::Open => {
                "A local breaker takes over until it answers again (storeFailure \"open\")"
            }
            StoreFailure::Closed => {
                "Operations are refused until it answers again (storeFailure \"closed\")"
            }
        };
        self.listeners.enqueue([Event::Warning {
            message: format!(
                "Shared circuit state unreachable at {} (key {}): {reason}. {then}.",
                shared.link.url().redacted(),
                shared.prefix,
            ),
            at_ms: self.clock.now_ms(),
        }]);
    }

    /// Ends a call that found the store down: the link is marked down, the outage announced.
    fn failed_call(&self, mut link: LinkGuard<'_>, fault: &Fault) {
        link.fail(fault);
        self.fall_back(&mut link);
        drop(link);
        self.listeners.deliver();
    }

    /// `true` when a recorded outcome is dropped (store down, `storeFailure: "closed"`), `false`
    /// when the local breaker records it.
    fn outcome_dropped(&self) -> bool {
        self.shared().on_failure == StoreFailure::Closed
    }

    /// `None`: the local breaker decides (store down, `storeFailure: "open"`).
    fn refusal_while_down(&self) -> Option<Permission> {
        (self.shared().on_failure == StoreFailure::Closed).then(|| Permission {
            allowed: false,
            message: Some(STORE_REFUSAL.to_string()),
        })
    }

    /// `should_allow_operation` with a store. `None`: ask the local breaker.
    pub(super) fn shared_permission(&self) -> Option<Permission> {
        let shared = self.shared();
        if shared.closed() {
            return Some(Permission {
                allowed: true,
                message: None,
            });
        }
        let now = self.clock.now_ms();
        if let Some(p) = shared.answer_locally(&self.config, now) {
            return Some(p);
        }
        let deadline = shared.deadline();
        let Some(mut link) = self.enter() else {
            return self.refusal_while_down();
        };
        let now_text = now.to_string();
        let generation = shared.generation();
        let args = [
            generation.as_str(),
            &now_text,
            &shared.cooldown,
            &shared.multiplier,
            &shared.max_cooldown,
            &shared.probes,
            &shared.probe_timeout,
        ];
        let reply = link
            .eval(PERMIT, &shared.keys(), &args, deadline)
            .and_then(parse_reply);
        let (summary, extra) = match reply {
            Ok(r) => r,
            Err(fault) => {
                self.failed_call(link, &fault);
                return self.refusal_while_down();
            }
        };
        shared.view.apply(&summary, false, true);
        let permission = match field(&extra, 0) {
            b"closed" => Permission {
                allowed: true,
                message: None,
            },
            b"open" => {
                let remaining = number(field(&extra, 1)).unwrap_or(0);
                Permission {
                    allowed: false,
                    message: Some(open_message(remaining, self.config.failure_threshold)),
                }
            }
            b"granted" => {
                if field(&extra, 1) == b"1" {
                    self.listeners.enqueue([change(
                        State::Open,
                        State::HalfOpen,
                        "Cooldown expired".into(),
                        now,
                    )]);
                }
                granted(PROBE_GRANTED)
            }
            b"more" => granted(PROBE_MORE),
            b"wait" => {
                let oldest = number(field(&extra, 1)).unwrap_or(now);
                let until = oldest.saturating_add(self.config.probe_timeout_ms);
                let mut v = shared.view.lock();
                if v.epoch == summary.epoch && v.generation == summary.generation {
                    v.wait_until = Some((summary.epoch, until));
                }
                drop(v);
                Permission {
                    allowed: false,
                    message: Some(PROBE_WAIT.to_string()),
                }
            }
            _ => {
                self.failed_call(link, &protocol("an unknown permission"));
                return self.refusal_while_down();
            }
        };
        drop(link);
        self.listeners.deliver();
        Some(permission)
    }

    /// `record_success` with a store: `true` when done (or dropped), `false` when the local
    /// breaker records it.
    pub(super) fn shared_record_success(&self) -> bool {
        let shared = self.shared();
        if shared.idle() {
            return true;
        }
        let now = self.clock.now_ms();
        let deadline = shared.deadline();
        let Some(mut link) = self.enter() else {
            return self.outcome_dropped();
        };
        let reply = link
            .eval(SUCCESS, &shared.keys(), &[&shared.generation()], deadline)
            .and_then(parse_reply);
        let (summary, extra) = match reply {
            Ok(r) => r,
            Err(fault) => {
                self.failed_call(link, &fault);
                return self.outcome_dropped();
            }
        };
        shared.view.apply(&summary, false, true);
        if field(&extra, 0) == b"1" {
            let mut inner = self.lock();
            inner.metrics.recoveries = inner.metrics.recoveries.saturating_add(1);
            drop(inner);
            self.listeners.enqueue([change(
                State::HalfOpen,
                State::Closed,
                "Test operation succeeded".into(),
                now,
            )]);
        }
        drop(link);
        self.listeners.deliver();
        true
    }

    /// `record_failure` with a store (`error` already capped; `fp` its fingerprint when the
    /// identical-error rule is on): `true` when done (or dropped), `false` when the local
    /// breaker records it.
    pub(super) fn shared_record_failure(&self, error: &str, fp: Option<&str>) -> bool {
        let shared = self.shared();
        let now = self.clock.now_ms();
        let deadline = shared.deadline();
        let Some(mut link) = self.enter() else {
            if self.outcome_dropped() {
                self.count_failure(now);
                return true;
            }
            return false;
        };
        let now_text = now.to_string();
        let generation = shared.generation();
        let args = [
            generation.as_str(),
            &now_text,
            error,
            fp.unwrap_or(""),
            &shared.threshold,
            &shared.warning,
            &shared.identical,
            &shared.history,
        ];
        let reply = link
            .eval(FAILURE, &shared.keys(), &args, deadline)
            .and_then(parse_reply);
        let (summary, extra) = match reply {
            Ok(r) => r,
            Err(fault) => {
                self.failed_call(link, &fault);
                if self.outcome_dropped() {
                    self.count_failure(now);
                    return true;
                }
                return false;
            }
        };
        shared.view.apply(&summary, false, true);
        let mut events = Vec::new();
        if field(&extra, 0) == b"1" {
            events.push(Event::Warning {
                message: super::warning_message(
                    self.warning_threshold,
                    self.config.failure_threshold,
                ),
                at_ms: now,
            });
        }
        {
            let mut inner = self.lock();
            let m = &mut inner.metrics;
            m.total_failures = m.total_failures.saturating_add(1);
            m.first_failure_at.get_or_insert(now);
            m.last_failure_at = Some(now);
            match field(&extra, 1) {
                b"1" => {
                    m.trips = m.trips.saturating_add(1);
                    events.push(change(
                        State::Closed,
                        State::Open,
                        format!("{} consecutive failures detected", summary.failures),
                        now,
                    ));
                }
                b"2" => {
                    m.trips = m.trips.saturating_add(1);
                    let run = number(field(&extra, 2)).unwrap_or(0);
                    events.push(change(
                        State::Closed,
                        State::Open,
                        format!("Same error repeated {run} times: \"{}\"", error.trim()),
                        now,
                    ));
                }
                b"3" => {
                    m.reopenings = m.reopenings.saturating_add(1);
                    events.push(change(
                        State::HalfOpen,
                        State::Open,
                        "Test operation failed".into(),
                        now,
                    ));
                }
                _ => {}
            }
        }
        self.listeners.enqueue(events);
        drop(link);
        self.listeners.deliver();
        true
    }

    fn count_failure(&self, now: u64) {
        let mut inner = self.lock();
        let m = &mut inner.metrics;
        m.total_failures = m.total_failures.saturating_add(1);
        m.first_failure_at.get_or_insert(now);
        m.last_failure_at = Some(now);
    }

    /// Reads the whole shared state (one round trip). `None`: the store is down.
    fn read_shared(&self) -> Option<(Summary, Vec<FailureRecord>)> {
        let shared = self.shared();
        let deadline = shared.deadline();
        let mut link = self.enter()?;
        let reply = link
            .eval(READ, &shared.keys(), &[""], deadline)
            .and_then(parse_reply);
        let (summary, extra) = match reply {
            Ok(r) => r,
            Err(fault) => {
                self.failed_call(link, &fault);
                return None;
            }
        };
        let history: Option<Vec<FailureRecord>> =
            extra.iter().skip(1).map(|e| parse_record(e)).collect();
        let Some(history) = history else {
            self.failed_call(link, &protocol("a malformed history entry"));
            return None;
        };
        shared.view.apply(&summary, false, true);
        drop(link);
        self.listeners.deliver();
        Some((summary, history))
    }

    /// `status()` from the store; `None`: the local breaker's.
    pub(super) fn shared_status(&self) -> Option<FailureStatus> {
        let now = self.clock.now_ms();
        let (s, history) = self.read_shared()?;
        let cooldown = self.config.cooldown_at(s.level);
        let remaining = match (s.state, s.opened_at) {
            (State::Open, Some(at)) => cooldown.saturating_sub(elapsed(at, now)),
            _ => 0,
        };
        Some(FailureStatus {
            state: s.state,
            consecutive_failures: s.failures,
            threshold: self.config.failure_threshold,
            failure_history: history,
            opened_at: s.opened_at,
            cooldown_ms: cooldown,
            cooldown_remaining_ms: remaining,
            trips: s.trips,
        })
    }

    /// `snapshot()` from the store; `None`: the local breaker's.
    pub(super) fn shared_snapshot(&self) -> Option<FailureSnapshot> {
        let (s, history) = self.read_shared()?;
        Some(FailureSnapshot {
            version: 1,
            kind: "failure".into(),
            state: s.state,
            consecutive_failures: s.failures,
            opened_at: s.opened_at,
            backoff_level: s.level,
            trips: s.trips,
            failure_history: history,
        })
    }

    /// `reset()` with a store: `true` when done, `false` when the local breaker resets.
    pub(super) fn shared_reset(&self) -> bool {
        let shared = self.shared();
        let now = self.clock.now_ms();
        let deadline = shared.deadline();
        let Some(mut link) = self.enter() else {
            return false;
        };
        let reply = link
            .eval(RESET, &shared.keys(), &[&shared.generation()], deadline)
            .and_then(parse_reply);
        let (summary, extra) = match reply {
            Ok(r) => r,
            Err(fault) => {
                self.failed_call(link, &fault);
                return false;
            }
        };
        shared.view.apply(&summary, false, true);
        if let Some(prev) = state_of(field(&extra, 0))
            && prev != State::Closed
        {
            self.listeners
                .enqueue([change(prev, State::Closed, "reset".into(), now)]);
        }
        drop(link);
        self.listeners.deliver();
        true
    }

    /// `restore()` with a store (the snapshot validated, the restart rules applied here):
    /// `true` when done, `false` when the local breaker restores.
    pub(super) fn shared_restore(&self, snapshot: &FailureSnapshot) -> bool {
        let shared = self.shared();
        let deadline = shared.deadline();
        let (state, failures, opened_at, level) = match snapshot.state {
            State::Open => (
                State::Open,
                snapshot.consecutive_failures,
                snapshot.opened_at,
                snapshot.backoff_level,
            ),
            State::Closed => (
                State::Closed,
                snapshot.consecutive_failures,
                None,
                snapshot.backoff_level,
            ),
            State::HalfOpen => (State::Closed, 0, None, 0),
        };
        let limit = self.config.history_limit as usize;
        let skip = snapshot.failure_history.len().saturating_sub(limit);
        let entries: Vec<String> = snapshot
            .failure_history
            .iter()
            .skip(skip)
            .map(|r| {
                format!(
                    "{} {} {}",
                    r.at_ms,
                    state_name(r.state),
                    crate::text::cap_error(&r.error)
                )
            })
            .collect();
        let numbers = [
            failures.to_string(),
            opened_at.map(|t| t.to_string()).unwrap_or_default(),
            level.to_string(),
            snapshot.trips.to_string(),
        ];
        let generation = shared.generation();
        let mut args: Vec<&str> = vec![&generation, state_name(state)];
        args.extend(numbers.iter().map(String::as_str));
        args.extend(entries.iter().map(String::as_str));
        let Some(mut link) = self.enter() else {
            return false;
        };
        let reply = link
            .eval(RESTORE, &shared.keys(), &args, deadline)
            .and_then(parse_reply);
        match reply {
            Ok((summary, _)) => {
                shared.view.apply(&summary, false, true);
                drop(link);
                self.listeners.deliver();
                true
            }
            Err(fault) => {
                self.failed_call(link, &fault);
                false
            }
        }
    }

    /// Where the state lives and how the store is doing.
    pub(super) fn shared_store_status(&self) -> StoreStatus {
        self.shared().status()
    }
}

/// Seeds the local breaker from the last shared state this process knew: the state, openedAt,
/// backoff level, count and trips (HALF_OPEN with no probe out); the history starts empty.
fn seed(inner: &mut Inner, v: &View) {
    super::clear_state(inner);
    inner.state = v.state;
    inner.consecutive_failures = v.failures;
    inner.opened_at = match v.state {
        State::Closed => None,
        _ => v.opened_at,
    };
    inner.backoff_level = v.level;
    inner.trips = v.trips;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(fields: &[&str]) -> Value {
        Value::Array(
            fields
                .iter()
                .map(|f| Value::BulkString(f.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn replies_and_messages_parse() {
        let (s, extra) = parse_reply(bulk(&[
            "abc", "7", "OPEN", "5", "1000", "2", "3", "1", "open", "500",
        ]))
        .unwrap();
        assert_eq!(
            s,
            Summary {
                generation: "abc".into(),
                epoch: 7,
                state: State::Open,
                failures: 5,
                opened_at: Some(1000),
                level: 2,
                trips: 3,
                pending: true
            }
        );
        assert_eq!(extra, [b"open".to_vec(), b"500".to_vec()]);
        let m = ViewCell::parse_message(b"abc 8 CLOSED 0 -1 0 3 0").unwrap();
        assert_eq!(
            (m.epoch, m.state, m.opened_at, m.pending),
            (8, State::Closed, None, false)
        );
        // Lua's doubles round counts near u64::MAX up: they saturate.
        let (s, _) = parse_reply(bulk(&[
            "g",
            "1",
            "CLOSED",
            "18446744073709551616",
            "-1",
            "0",
            "0",
            "1",
        ]))
        .unwrap();
        assert_eq!(s.failures, u64::MAX);
        assert!(parse_reply(bulk(&["g", "1", "AJAR", "0", "-1", "0", "0", "0"])).is_err());
        assert!(parse_reply(bulk(&["g", "1"])).is_err());
        assert!(parse_reply(Value::Nil).is_err());
        assert!(ViewCell::parse_message(b"junk").is_none());
    }

    #[test]
    fn history_entries_keep_spaces_in_errors() {
        let r = parse_record(b"1500 HALF_OPEN Path not found: a b").unwrap();
        assert_eq!(
            r,
            FailureRecord {
                at_ms: 1500,
                error: "Path not found: a b".into(),
                state: State::HalfOpen
            }
        );
        assert_eq!(parse_record(b"1 CLOSED ").unwrap().error, "");
        assert!(parse_record(b"x CLOSED e").is_none());
    }

    #[test]
    fn the_view_takes_only_newer_summaries() {
        let cell = ViewCell::default();
        let s = |generation: &str, epoch, state| Summary {
            generation: generation.into(),
            epoch,
            state,
            failures: 0,
            opened_at: None,
            level: 0,
            trips: 0,
            pending: false,
        };
        cell.apply(&s("a", 5, State::Open), false, false);
        assert_eq!(cell.lock().state, State::Open);
        cell.apply(&s("a", 4, State::Closed), false, false);
        assert_eq!(cell.lock().state, State::Open, "an older epoch is ignored");
        cell.apply(&s("a", 5, State::Closed), false, false);
        assert_eq!(
            cell.lock().state,
            State::Open,
            "a message at the same epoch too"
        );
        cell.apply(&s("b", 1, State::Closed), false, false);
        assert_eq!(
            cell.lock().state,
            State::Closed,
            "another generation is taken"
        );
        cell.apply(&s("b", 0, State::HalfOpen), true, true);
        assert_eq!(cell.lock().state, State::HalfOpen, "a fresh read is taken");
        // The keys deleted at epoch 20 and the state created again: another generation, at a
        // lower epoch, is taken from a message and from a reply; so is the missing state ('').
        cell.apply(&s("b", 20, State::Closed), false, false);
        cell.apply(&s("c", 2, State::Open), false, false);
        assert_eq!(cell.lock().state, State::Open, "a new state's message");
        cell.apply(&s("", 0, State::Closed), false, true);
        assert_eq!(cell.lock().state, State::Closed, "the missing state");
        cell.apply(&s("d", 1, State::HalfOpen), false, true);
        assert_eq!(cell.lock().state, State::HalfOpen, "a new state's reply");
        cell.apply(&s("b", 0, State::HalfOpen), true, true);
        // The fast paths need the link up and no rejoin to announce.
        assert!(!cell.closed.load(Ordering::SeqCst));
        cell.apply(&s("b", 1, State::Closed), false, false);
        assert!(!cell.closed.load(Ordering::SeqCst));
        {
            let mut v = cell.lock();
            v.up = true;
            cell.refresh(&v);
        }
        assert!(cell.closed.load(Ordering::SeqCst));
        assert!(cell.idle.load(Ordering::SeqCst));
    }

    #[test]
    fn every_script_has_the_prelude() {
        for source in sources() {
            assert!(source.starts_with(PRELUDE));
        }
        assert_eq!(
            failure_keys("t"),
            ["t:failure", "t:failure:probes", "t:failure:history"]
        );
    }
}

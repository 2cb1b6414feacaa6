//! Model-based property tests: random operation sequences (with clock moves forwards, backwards and
//! by huge jumps) are driven against the real breakers and against small reference models written
//! here straight from contract §2 and §3 and `docs/decisions.md`. After every step the observable
//! state, the answers and the emitted events of both must agree, and a few invariants are checked
//! on the real breaker's observations alone.
//!
//! The models deliberately do not reuse library code (not even `fingerprint`): the fingerprints of
//! the small error pools are derived by hand from contract §6 / decisions, the cooldown with backoff is
//! computed with exact integer arithmetic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use agentbreaker::{
    ErrorMatch, Event, FailureBreaker, FailureConfig, FailureSnapshot, IterationMetrics, Listener,
    ManualClock, SharedClock, StagnationBreaker, StagnationConfig, StagnationSnapshot, State,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// Collects every event a breaker emits.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<Event>>>);

impl Sink {
    fn listener(&self) -> Listener {
        let events = self.0.clone();
        Arc::new(move |e: &Event| {
            events.lock().unwrap().push(e.clone());
            Ok(())
        })
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// An event the model expects. `reasons` lists the acceptable stateChange reasons (any of them).
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    Change {
        from: State,
        to: State,
        reasons: Vec<String>,
        at: u64,
    },
    Warning {
        message: String,
        at: u64,
    },
}

fn change(from: State, to: State, reason: impl Into<String>, at: u64) -> Expected {
    Expected::Change {
        from,
        to,
        reasons: vec![reason.into()],
        at,
    }
}

fn compare_events(actual: &[Event], expected: &[Expected], ctx: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        actual.len(),
        expected.len(),
        "{}: event count differs: actual {:?}, expected {:?}",
        ctx,
        actual,
        expected
    );
    for (a, e) in actual.iter().zip(expected) {
        match (a, e) {
            (
                Event::StateChange {
                    from,
                    to,
                    reason,
                    slug,
                    at_ms,
                },
                Expected::Change {
                    from: ef,
                    to: et,
                    reasons,
                    at,
                },
            ) => {
                prop_assert_eq!((*from, *to), (*ef, *et), "{}: transition", ctx);
                prop_assert_eq!(*at_ms, *at, "{}: stateChange atMs", ctx);
                // A change to OPEN (or a stagnation breaker's to HALF_OPEN) names the rule behind
                // it; a recovery, a probe or a reset names none.
                let names_a_rule = *to != State::Closed && *from != State::Open;
                prop_assert_eq!(slug.is_some(), names_a_rule, "{}: stateChange slug", ctx);
                prop_assert!(
                    reasons.contains(reason),
                    "{}: stateChange reason {:?} not in {:?}",
                    ctx,
                    reason,
                    reasons
                );
            }
            (Event::Warning { message, at_ms }, Expected::Warning { message: em, at }) => {
                prop_assert_eq!(message, em, "{}: warning text", ctx);
                prop_assert_eq!(*at_ms, *at, "{}: warning atMs", ctx);
            }
            _ => prop_assert!(
                false,
                "{}: event kind differs: actual {:?}, expected {:?}",
                ctx,
                a,
                e
            ),
        }
    }
    Ok(())
}

/// The stateChange events of one step form a chain from the state before to the state after;
/// without one the state did not move (restores excepted, which emit nothing).
fn check_state_chain(
    events: &[Event],
    before: State,
    after: State,
    restoring: bool,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let mut state = before;
    for e in events {
        if let Event::StateChange { from, to, .. } = e {
            prop_assert_eq!(
                *from,
                state,
                "{}: stateChange does not start at the state",
                ctx
            );
            prop_assert!(from != to, "{}: stateChange to the same state", ctx);
            state = *to;
        }
    }
    if !restoring {
        prop_assert_eq!(state, after, "{}: state moved without a stateChange", ctx);
    }
    Ok(())
}

fn mode_index(mode: ErrorMatch) -> usize {
    match mode {
        ErrorMatch::Exact => 0,
        ErrorMatch::Normalized => 1,
        ErrorMatch::Template => 2,
        // Not generated: the error pools' hand-computed fingerprints cover the first three modes.
        ErrorMatch::KeyLine => unreachable!("key_line is not generated by error_match_strategy"),
    }
}

fn error_match_strategy() -> impl Strategy<Value = ErrorMatch> {
    prop_oneof![
        2 => Just(ErrorMatch::Normalized),
        1 => Just(ErrorMatch::Exact),
        1 => Just(ErrorMatch::Template),
    ]
}

// ---------------------------------------------------------------------------------------------
// FailureBreaker reference model (contract §2 + decisions "FailureBreaker")
// ---------------------------------------------------------------------------------------------

/// Error texts for `recordFailure` with their fingerprints under `[exact, normalized, template]`,
/// derived by hand from contract §6 / decisions: exact trims; normalized collapses whitespace and turns
/// digit runs into `#`; template also turns dotted identifiers into `<path>`.
const FAILURE_POOL: [(&str, [&str; 3]); 6] = [
    (
        "Path not found: ServerScriptService.Main",
        [
            "Path not found: ServerScriptService.Main",
            "Path not found: ServerScriptService.Main",
            "Path not found: <path>",
        ],
    ),
    (
        "Path not found: ServerScriptService.MainHandler",
        [
            "Path not found: ServerScriptService.MainHandler",
            "Path not found: ServerScriptService.MainHandler",
            "Path not found: <path>",
        ],
    ),
    (
        "Error at line 12",
        ["Error at line 12", "Error at line #", "Error at line #"],
    ),
    (
        "Error at line 345",
        ["Error at line 345", "Error at line #", "Error at line #"],
    ),
    (
        "Error  at   line 7",
        ["Error  at   line 7", "Error at line #", "Error at line #"],
    ),
    (
        "connection refused",
        [
            "connection refused",
            "connection refused",
            "connection refused",
        ],
    ),
];

const PROBE_GRANTED: &str = "Circuit breaker testing - one operation allowed";
const PROBE_MORE: &str = "Circuit breaker testing - success will close, failure will re-open";
const PROBE_WAIT: &str = "Circuit breaker testing - waiting for the test operation's result";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Multiplier {
    One,
    OneAndHalf,
    Two,
}

impl Multiplier {
    fn as_f64(self) -> f64 {
        match self {
            Multiplier::One => 1.0,
            Multiplier::OneAndHalf => 1.5,
            Multiplier::Two => 2.0,
        }
    }

    /// The multiplier as an exact fraction.
    fn ratio(self) -> (u128, u128) {
        match self {
            Multiplier::One => (1, 1),
            Multiplier::OneAndHalf => (3, 2),
            Multiplier::Two => (2, 1),
        }
    }
}

/// The generated config, kept in the model's own terms.
#[derive(Debug, Clone)]
struct FParams {
    failure_threshold: u32,
    /// `None` = not given (3, or off when failure_threshold <= 3), `Some(0)` = off.
    warning_threshold: Option<u32>,
    cooldown_ms: u64,
    multiplier: Multiplier,
    max_cooldown_ms: u64,
    identical_error_threshold: u32,
    history_limit: u32,
    half_open_max_probes: u32,
    probe_timeout_ms: u64,
    error_match: ErrorMatch,
}

impl FParams {
    fn to_config(&self) -> FailureConfig {
        FailureConfig {
            failure_threshold: self.failure_threshold,
            warning_threshold: self.warning_threshold,
            cooldown_ms: self.cooldown_ms,
            backoff_multiplier: self.multiplier.as_f64(),
            max_cooldown_ms: self.max_cooldown_ms,
            identical_error_threshold: self.identical_error_threshold,
            history_limit: self.history_limit,
            half_open_max_probes: self.half_open_max_probes,
            probe_timeout_ms: self.probe_timeout_ms,
            error_match: self.error_match,
            state_path: None,
            ..FailureConfig::default()
        }
    }

    /// contract §2: "when not given and failureThreshold <= 3 it is off" (otherwise 3); 0 = off.
    fn warning(&self) -> u32 {
        match self.warning_threshold {
            Some(w) => w,
            None if self.failure_threshold <= 3 => 0,
            None => 3,
        }
    }
}

fn fparams_strategy() -> impl Strategy<Value = FParams> {
    (
        (
            1u32..=8,
            0u8..4,
            any::<u32>(),
            prop_oneof![
                1 => Just(0u64),
                2 => 1u64..2_000,
                3 => 0u64..=60_000,
            ],
            prop_oneof![
                Just(Multiplier::One),
                Just(Multiplier::OneAndHalf),
                Just(Multiplier::Two),
            ],
            0u8..4,
            0u64..200_000,
        ),
        (
            prop_oneof![3 => Just(0u32), 2 => 1u32..=4],
            0u32..=10,
            1u32..=3,
            prop_oneof![
                2 => 1u64..2_000,
                3 => 1u64..=50_000,
            ],
            error_match_strategy(),
        ),
    )
        .prop_map(
            |(
                (ft, wsel, wraw, cooldown, multiplier, msel, mextra),
                (ident, hist, probes, probe_timeout, error_match),
            )| {
                let warning_threshold = match wsel {
                    0 => None,
                    1 => Some(0),
                    _ if ft > 1 => Some(1 + wraw % (ft - 1)),
                    _ => Some(0),
                };
                let max_cooldown_ms = match msel {
                    0 => cooldown,
                    1 => 3_600_000u64.max(cooldown),
                    2 => cooldown + mextra % (2 * cooldown + 1),
                    _ => cooldown + mextra,
                };
                FParams {
                    failure_threshold: ft,
                    warning_threshold,
                    cooldown_ms: cooldown,
                    multiplier,
                    max_cooldown_ms,
                    identical_error_threshold: ident,
                    history_limit: hist,
                    half_open_max_probes: probes,
                    probe_timeout_ms: probe_timeout,
                    error_match,
                }
            },
        )
}

#[derive(Debug, Clone, PartialEq)]
struct FRecord {
    at_ms: u64,
    error: String,
    state: State,
}

#[derive(Debug, Clone)]
struct FModel {
    p: FParams,
    state: State,
    count: u64,
    opened_at: Option<u64>,
    level: u32,
    trips: u64,
    history: VecDeque<FRecord>,
    /// Grant times of the outstanding probe permits, oldest first.
    probes: VecDeque<u64>,
    /// The identical-error run: fingerprint and length.
    run: Option<(String, u32)>,
    // metrics (life of the object)
    total_failures: u64,
    total_successes: u64,
    m_trips: u64,
    recoveries: u64,
    reopenings: u64,
    first_failure: Option<u64>,
    last_failure: Option<u64>,
    /// False once a failure was recorded at a time before the previous one (mtbf is then
    /// ill-defined by the contract, so it is not compared).
    failure_times_monotone: bool,
}

/// The model's idea of a snapshot.
#[derive(Debug, Clone, PartialEq)]
struct FSnap {
    state: State,
    count: u64,
    opened_at: Option<u64>,
    level: u32,
    trips: u64,
    history: Vec<FRecord>,
}

impl FModel {
    fn new(p: FParams) -> Self {
        FModel {
            p,
            state: State::Closed,
            count: 0,
            opened_at: None,
            level: 0,
            trips: 0,
            history: VecDeque::new(),
            probes: VecDeque::new(),
            run: None,
            total_failures: 0,
            total_successes: 0,
            m_trips: 0,
            recoveries: 0,
            reopenings: 0,
            first_failure: None,
            last_failure: None,
            failure_times_monotone: true,
        }
    }

    /// min(cooldownMs × multiplier^level, maxCooldownMs), exactly.
    fn current_cooldown(&self) -> u64 {
        let (num, den) = self.p.multiplier.ratio();
        let max = u128::from(self.p.max_cooldown_ms);
        let (mut n, mut d) = (u128::from(self.p.cooldown_ms), 1u128);
        for _ in 0..self.level {
            n *= num;
            d *= den;
            if n / d >= max {
                return self.p.max_cooldown_ms;
            }
        }
        u64::try_from((n / d).min(max)).unwrap()
    }

    fn cooldown_remaining(&self, now: u64) -> u64 {
        match (self.state, self.opened_at) {
            (State::Open, Some(at)) => self
                .current_cooldown()
                .saturating_sub(now.saturating_sub(at)),
            _ => 0,
        }
    }

    fn warning_text(&self) -> String {
        let n = self.p.warning();
        let m = self.p.failure_threshold - n;
        let noun = if n == 1 { "failure" } else { "failures" };
        format!("Warning: {n} consecutive {noun}. {m} more will open circuit.")
    }

    fn record_success(&mut self, now: u64) -> Vec<Expected> {
        let mut ev = Vec::new();
        self.count = 0;
        self.total_successes += 1;
        self.run = None;
        self.probes.clear();
        if self.state == State::HalfOpen {
            self.state = State::Closed;
            self.opened_at = None;
            self.level = 0;
            self.recoveries += 1;
            ev.push(change(
                State::HalfOpen,
                State::Closed,
                "Test operation succeeded",
                now,
            ));
        }
        ev
    }

    fn record_failure(&mut self, idx: usize, now: u64) -> Vec<Expected> {
        let mut ev = Vec::new();
        let (text, fps) = FAILURE_POOL[idx];
        let fp = fps[mode_index(self.p.error_match)].to_string();
        let before = self.state;
        self.count += 1;
        self.total_failures += 1;
        if self.first_failure.is_none() {
            self.first_failure = Some(now);
        }
        if self.last_failure.is_some_and(|last| now < last) {
            self.failure_times_monotone = false;
        }
        self.last_failure = Some(now);
        if self.p.history_limit > 0 {
            self.history.push_back(FRecord {
                at_ms: now,
                error: text.to_string(),
                state: before,
            });
            while self.history.len() > self.p.history_limit as usize {
                self.history.pop_front();
            }
        }
        self.run = match self.run.take() {
            Some((f, n)) if f == fp => Some((f, n + 1)),
            _ => Some((fp, 1)),
        };
        self.probes.clear();
        match before {
            State::Closed => {
                let w = self.p.warning();
                if w > 0 && self.count == u64::from(w) {
                    ev.push(Expected::Warning {
                        message: self.warning_text(),
                        at: now,
                    });
                }
                let run_len = self.run.as_ref().map_or(0, |(_, n)| *n);
                let by_count = self.count >= u64::from(self.p.failure_threshold);
                let by_identical = self.p.identical_error_threshold > 0
                    && run_len >= self.p.identical_error_threshold;
                if by_count || by_identical {
                    let mut reasons = Vec::new();
                    if by_count {
                        reasons.push(format!("{} consecutive failures detected", self.count));
                    }
                    if by_identical {
                        reasons.push(format!(
                            "Same error repeated {} times: \"{}\"",
                            self.p.identical_error_threshold,
                            text.trim()
                        ));
                    }
                    self.state = State::Open;
                    self.opened_at = Some(now);
                    self.trips += 1;
                    self.m_trips += 1;
                    ev.push(Expected::Change {
                        from: State::Closed,
                        to: State::Open,
                        reasons,
                        at: now,
                    });
                }
            }
            State::HalfOpen => {
                self.state = State::Open;
                self.opened_at = Some(now);
                self.level += 1;
                self.reopenings += 1;
                ev.push(change(
                    State::HalfOpen,
                    State::Open,
                    "Test operation failed",
                    now,
                ));
            }
            State::Open => {}
        }
        ev
    }

    fn should_allow(&mut self, now: u64) -> ((bool, Option<String>), Vec<Expected>) {
        let mut ev = Vec::new();
        let answer =
            match self.state {
                State::Closed => (true, None),
                State::Open => {
                    let opened = self.opened_at.expect("OPEN has openedAt");
                    let cooldown = self.current_cooldown();
                    let elapsed = now.saturating_sub(opened);
                    if elapsed >= cooldown {
                        self.state = State::HalfOpen;
                        self.probes.clear();
                        self.probes.push_back(now);
                        ev.push(change(
                            State::Open,
                            State::HalfOpen,
                            "Cooldown expired",
                            now,
                        ));
                        (true, Some(PROBE_GRANTED.to_string()))
                    } else {
                        let secs = (cooldown - elapsed).div_ceil(1000);
                        (
                            false,
                            Some(format!(
                                "Circuit breaker OPEN. {secs} seconds remaining in cooldown. {} \
                             consecutive failures detected. Human intervention required.",
                                self.p.failure_threshold
                            )),
                        )
                    }
                }
                State::HalfOpen => {
                    if self.probes.len() < self.p.half_open_max_probes as usize {
                        self.probes.push_back(now);
                        (true, Some(PROBE_MORE.to_string()))
                    } else if self.probes.front().is_some_and(|&oldest| {
                        now.saturating_sub(oldest) >= self.p.probe_timeout_ms
                    }) {
                        self.probes.pop_front();
                        self.probes.push_back(now);
                        (true, Some(PROBE_GRANTED.to_string()))
                    } else {
                        (false, Some(PROBE_WAIT.to_string()))
                    }
                }
            };
        (answer, ev)
    }

    fn reset(&mut self, now: u64) -> Vec<Expected> {
        let mut ev = Vec::new();
        if self.state != State::Closed {
            ev.push(change(self.state, State::Closed, "reset", now));
        }
        self.state = State::Closed;
        self.count = 0;
        self.opened_at = None;
        self.level = 0;
        self.trips = 0;
        self.history.clear();
        self.probes.clear();
        self.run = None;
        ev
    }

    fn snapshot(&self) -> FSnap {
        FSnap {
            state: self.state,
            count: self.count,
            opened_at: self.opened_at,
            level: self.level,
            trips: self.trips,
            history: self.history.iter().cloned().collect(),
        }
    }

    /// restore(snapshot): state, counters, history, backoff and trips come from the snapshot;
    /// HALF_OPEN comes back CLOSED with 0 failures and level 0; probes and the identical-error
    /// run are cleared. A fresh object also starts its metrics from zero.
    fn restore(&mut self, s: &FSnap, fresh: bool) {
        if fresh {
            let p = self.p.clone();
            *self = FModel::new(p);
        }
        self.state = s.state;
        self.count = s.count;
        self.opened_at = s.opened_at;
        self.level = s.level;
        self.trips = s.trips;
        self.history = s.history.iter().cloned().collect();
        if s.state == State::HalfOpen {
            self.state = State::Closed;
            self.count = 0;
            self.level = 0;
            self.opened_at = None;
        }
        self.probes.clear();
        self.run = None;
    }
}

#[derive(Debug, Clone)]
enum FOp {
    Success,
    Failure(usize),
    Allow,
    Reset,
    Advance(u64),
    AdvanceCooldown,
    AdvanceProbeTimeout,
    AdvanceHuge(u64),
    SetBack(u64),
    SetZero,
    JumpNearMax(u64),
    SnapRestoreFresh,
    SnapRestoreFreshJson,
    RestoreSelf,
}

fn fop_strategy() -> impl Strategy<Value = FOp> {
    prop_oneof![
        6 => Just(FOp::Success),
        16 => (0..FAILURE_POOL.len()).prop_map(FOp::Failure),
        16 => Just(FOp::Allow),
        2 => Just(FOp::Reset),
        6 => prop_oneof![0u64..3_000, 0u64..80_000].prop_map(FOp::Advance),
        6 => Just(FOp::AdvanceCooldown),
        4 => Just(FOp::AdvanceProbeTimeout),
        2 => (1_000_000u64..1_000_000_000_000).prop_map(FOp::AdvanceHuge),
        4 => (1u64..100_000).prop_map(FOp::SetBack),
        2 => Just(FOp::SetZero),
        1 => (0u64..100_000).prop_map(FOp::JumpNearMax),
        2 => Just(FOp::SnapRestoreFresh),
        2 => Just(FOp::SnapRestoreFreshJson),
        2 => Just(FOp::RestoreSelf),
    ]
}

fn new_failure_breaker(p: &FParams, clock: &Arc<ManualClock>, sink: &Sink) -> FailureBreaker {
    let shared: SharedClock = clock.clone();
    let b = FailureBreaker::with_clock(p.to_config(), shared).expect("valid config");
    b.add_listener(sink.listener());
    b
}

fn compare_failure_snapshot(
    real: &FailureSnapshot,
    model: &FSnap,
    ctx: &str,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(real.version, 1, "{}: snapshot version", ctx);
    prop_assert_eq!(&real.kind, "failure", "{}: snapshot kind", ctx);
    prop_assert_eq!(real.state, model.state, "{}: snapshot state", ctx);
    prop_assert_eq!(
        real.consecutive_failures,
        model.count,
        "{}: snapshot count",
        ctx
    );
    prop_assert_eq!(
        real.opened_at,
        model.opened_at,
        "{}: snapshot openedAt",
        ctx
    );
    prop_assert_eq!(real.backoff_level, model.level, "{}: snapshot level", ctx);
    prop_assert_eq!(real.trips, model.trips, "{}: snapshot trips", ctx);
    let hist: Vec<FRecord> = real
        .failure_history
        .iter()
        .map(|r| FRecord {
            at_ms: r.at_ms,
            error: r.error.clone(),
            state: r.state,
        })
        .collect();
    prop_assert_eq!(hist, model.history.clone(), "{}: snapshot history", ctx);
    Ok(())
}

fn compare_failure(
    real: &FailureBreaker,
    model: &FModel,
    now: u64,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let s = real.status();
    prop_assert_eq!(s.state, model.state, "{}: state", ctx);
    prop_assert_eq!(real.state(), model.state, "{}: state()", ctx);
    prop_assert_eq!(
        s.consecutive_failures,
        model.count,
        "{}: consecutiveFailures",
        ctx
    );
    prop_assert_eq!(s.threshold, model.p.failure_threshold, "{}: threshold", ctx);
    prop_assert_eq!(s.opened_at, model.opened_at, "{}: openedAt", ctx);
    prop_assert_eq!(
        s.cooldown_ms,
        model.current_cooldown(),
        "{}: cooldownMs",
        ctx
    );
    prop_assert_eq!(
        s.cooldown_remaining_ms,
        model.cooldown_remaining(now),
        "{}: cooldownRemainingMs",
        ctx
    );
    prop_assert_eq!(s.trips, model.trips, "{}: status trips", ctx);
    prop_assert_eq!(
        s.failure_history.len(),
        model.history.len(),
        "{}: failureHistory length",
        ctx
    );
    for (r, m) in s.failure_history.iter().zip(&model.history) {
        prop_assert_eq!(
            (r.at_ms, r.error.as_str(), r.state),
            (m.at_ms, m.error.as_str(), m.state),
            "{}: failureHistory entry",
            ctx
        );
    }

    let m = real.metrics();
    prop_assert_eq!(
        m.total_failures,
        model.total_failures,
        "{}: totalFailures",
        ctx
    );
    prop_assert_eq!(
        m.total_successes,
        model.total_successes,
        "{}: totalSuccesses",
        ctx
    );
    prop_assert_eq!(m.trips, model.m_trips, "{}: metrics trips", ctx);
    prop_assert_eq!(m.recoveries, model.recoveries, "{}: recoveries", ctx);
    prop_assert_eq!(m.reopenings, model.reopenings, "{}: reopenings", ctx);
    let denom = model.recoveries + model.reopenings;
    match m.recovery_rate {
        None => prop_assert_eq!(denom, 0, "{}: recoveryRate null", ctx),
        Some(r) => {
            prop_assert!(denom > 0, "{}: recoveryRate {} with no results", ctx, r);
            let want = model.recoveries as f64 / denom as f64;
            prop_assert!(
                (r - want).abs() < 1e-9,
                "{}: recoveryRate {} vs {}",
                ctx,
                r,
                want
            );
        }
    }
    if model.total_failures < 2 {
        prop_assert_eq!(m.mtbf_ms, None, "{}: mtbfMs with < 2 failures", ctx);
    } else if model.failure_times_monotone {
        let span = (model.last_failure.unwrap() - model.first_failure.unwrap()) as f64;
        let want = span / (model.total_failures - 1) as f64;
        let got = m.mtbf_ms;
        prop_assert!(
            got.is_some_and(|g| (g - want).abs() <= 1e-9 * want.max(1.0)),
            "{}: mtbfMs {:?} vs {}",
            ctx,
            got,
            want
        );
    }
    Ok(())
}

/// Observation-only bookkeeping for the probe invariants: grant times of the permits handed out in
/// the current HALF_OPEN cycle and not yet superseded by a timeout re-grant.
#[derive(Debug, Default)]
struct ProbeTracker {
    outstanding: VecDeque<u64>,
}

/// What a batch of generated sequences exercised (see `generators_reach_interesting_situations`).
#[derive(Debug, Default)]
struct FStats {
    trips_by_count: u64,
    trips_by_identical: u64,
    warnings: u64,
    half_opens: u64,
    extra_probes: u64,
    probe_waits: u64,
    probe_regrants: u64,
    recoveries: u64,
    reopenings: u64,
    backoff_above_base: u64,
    capped_cooldowns: u64,
    open_refusals: u64,
    refusals_after_backwards_clock: u64,
    near_max_steps: u64,
    half_open_restores: u64,
    open_restores: u64,
    history_wraps: u64,
    warning_and_trip_in_one_step: u64,
    grants_with_two_timed_out_permits: u64,
}

fn run_failure(p: FParams, ops: Vec<FOp>, stats: &mut FStats) -> Result<(), TestCaseError> {
    let clock = ManualClock::shared(0);
    let sink = Sink::default();
    let mut real = new_failure_breaker(&p, &clock, &sink);
    let mut model = FModel::new(p.clone());
    let mut tracker = ProbeTracker::default();

    for (i, op) in ops.iter().enumerate() {
        let ctx = format!("step {i} {op:?} (t={} before)", clock.now());
        let before_status = real.status();
        let before_metrics = real.metrics();
        let mut expected = Vec::new();
        let mut answer: Option<agentbreaker::Permission> = None;
        let mut expected_answer: Option<(bool, Option<String>)> = None;

        match op {
            FOp::Success => {
                real.record_success();
                expected = model.record_success(clock.now());
            }
            FOp::Failure(idx) => {
                real.record_failure(FAILURE_POOL[*idx].0);
                expected = model.record_failure(*idx, clock.now());
            }
            FOp::Allow => {
                answer = Some(real.should_allow_operation());
                let (a, ev) = model.should_allow(clock.now());
                expected_answer = Some(a);
                expected = ev;
            }
            FOp::Reset => {
                real.reset();
                expected = model.reset(clock.now());
            }
            FOp::Advance(ms) | FOp::AdvanceHuge(ms) => clock.advance(*ms),
            FOp::AdvanceCooldown => clock.advance(model.current_cooldown()),
            FOp::AdvanceProbeTimeout => clock.advance(p.probe_timeout_ms),
            FOp::SetBack(ms) => clock.set(clock.now().saturating_sub(*ms)),
            FOp::SetZero => clock.set(0),
            FOp::JumpNearMax(k) => clock.set(u64::MAX - k),
            FOp::SnapRestoreFresh | FOp::SnapRestoreFreshJson => {
                let snap = real.snapshot();
                let msnap = model.snapshot();
                compare_failure_snapshot(&snap, &msnap, &ctx)?;
                let fresh = new_failure_breaker(&p, &clock, &sink);
                if matches!(op, FOp::SnapRestoreFresh) {
                    fresh.restore(&snap).expect("restore of own snapshot");
                } else {
                    let json = serde_json::to_string(&snap.to_json()).unwrap();
                    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
                    fresh
                        .restore_json(&value)
                        .expect("restore_json of own snapshot");
                }
                real = fresh;
                model.restore(&msnap, true);
            }
            FOp::RestoreSelf => {
                let snap = real.snapshot();
                let msnap = model.snapshot();
                compare_failure_snapshot(&snap, &msnap, &ctx)?;
                real.restore(&snap).expect("restore of own snapshot");
                model.restore(&msnap, false);
            }
        }
        let now = clock.now();
        let events = sink.take();
        compare_events(&events, &expected, &ctx)?;
        if let (Some(a), Some((allowed, message))) = (&answer, &expected_answer) {
            prop_assert_eq!(a.allowed, *allowed, "{}: allowed ({:?})", ctx, a);
            prop_assert_eq!(&a.message, message, "{}: message", ctx);
        }
        compare_failure(&real, &model, now, &ctx)?;

        // ---- invariants on the real breaker's observations alone ----
        let after = real.status();
        let after_metrics = real.metrics();
        record_failure_stats(
            stats,
            &p,
            op,
            &events,
            answer.as_ref(),
            &before_status,
            &after,
            now,
        );
        if events.len() == 2 {
            stats.warning_and_trip_in_one_step += 1;
        }
        if answer.as_ref().is_some_and(|a| a.allowed)
            && before_status.state == State::HalfOpen
            && tracker
                .outstanding
                .iter()
                .filter(|&&t| now.saturating_sub(t) >= p.probe_timeout_ms)
                .count()
                >= 2
        {
            stats.grants_with_two_timed_out_permits += 1;
        }
        let opens = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::StateChange {
                        to: State::Open,
                        ..
                    }
                )
            })
            .count();
        prop_assert!(
            opens <= 1,
            "{}: {} stateChanges to OPEN in one step",
            ctx,
            opens
        );
        let trips_delta = after_metrics.trips.saturating_sub(before_metrics.trips);
        let closed_to_open = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::StateChange {
                        from: State::Closed,
                        to: State::Open,
                        ..
                    }
                )
            })
            .count() as u64;
        let restored = matches!(
            op,
            FOp::SnapRestoreFresh | FOp::SnapRestoreFreshJson | FOp::RestoreSelf
        );
        check_state_chain(&events, before_status.state, after.state, restored, &ctx)?;
        if !restored {
            prop_assert_eq!(
                trips_delta,
                closed_to_open,
                "{}: one trip per CLOSED->OPEN event",
                ctx
            );
        }
        if matches!(op, FOp::Failure(_)) && before_status.state == State::Closed {
            let threshold = u64::from(p.failure_threshold);
            if after.consecutive_failures >= threshold {
                prop_assert_eq!(after.state, State::Open, "{}: threshold reached", ctx);
            } else if p.identical_error_threshold == 0 {
                prop_assert_eq!(
                    after.state,
                    State::Closed,
                    "{}: below threshold must stay CLOSED",
                    ctx
                );
            }
        }
        // Counters never decrease except on reset / restore / success as specified.
        let fresh_object = matches!(op, FOp::SnapRestoreFresh | FOp::SnapRestoreFreshJson);
        if !fresh_object {
            prop_assert!(after_metrics.total_failures >= before_metrics.total_failures);
            prop_assert!(after_metrics.total_successes >= before_metrics.total_successes);
            prop_assert!(after_metrics.trips >= before_metrics.trips);
            prop_assert!(after_metrics.recoveries >= before_metrics.recoveries);
            prop_assert!(after_metrics.reopenings >= before_metrics.reopenings);
        }
        let may_lower = restored || matches!(op, FOp::Reset);
        if !may_lower {
            prop_assert!(
                after.trips >= before_status.trips,
                "{}: trips decreased",
                ctx
            );
            prop_assert!(
                after.failure_history.len() >= before_status.failure_history.len(),
                "{}: history shrank",
                ctx
            );
            if !matches!(op, FOp::Success) {
                prop_assert!(
                    after.consecutive_failures >= before_status.consecutive_failures,
                    "{}: consecutiveFailures decreased",
                    ctx
                );
            }
        }

        // Probe permits per HALF_OPEN cycle.
        if before_status.state != State::HalfOpen {
            tracker.outstanding.clear();
        }
        if let Some(a) = &answer
            && after.state == State::HalfOpen
        {
            let max = p.half_open_max_probes as usize;
            if before_status.state != State::HalfOpen {
                prop_assert!(a.allowed, "{}: the OPEN->HALF_OPEN call is the probe", ctx);
                tracker.outstanding.push_back(now);
            } else if a.allowed {
                if tracker.outstanding.len() < max {
                    tracker.outstanding.push_back(now);
                } else {
                    let oldest = *tracker.outstanding.front().unwrap();
                    prop_assert!(
                        now.saturating_sub(oldest) >= p.probe_timeout_ms,
                        "{}: permit {} granted with {} outstanding, oldest at {}",
                        ctx,
                        max + 1,
                        max,
                        oldest
                    );
                    tracker.outstanding.pop_front();
                    tracker.outstanding.push_back(now);
                }
            } else {
                // Refused: every permit is out, and the oldest is younger than probeTimeoutMs
                // (otherwise the breaker would be wedged by a lost result).
                prop_assert_eq!(
                    tracker.outstanding.len(),
                    max,
                    "{}: refused with permits left",
                    ctx
                );
                let oldest = *tracker.outstanding.front().unwrap();
                prop_assert!(
                    now.saturating_sub(oldest) < p.probe_timeout_ms,
                    "{}: wedged in HALF_OPEN: oldest permit at {} is {} ms old (timeout {})",
                    ctx,
                    oldest,
                    now.saturating_sub(oldest),
                    p.probe_timeout_ms
                );
            }
        }
        if after.state != State::HalfOpen {
            tracker.outstanding.clear();
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn record_failure_stats(
    stats: &mut FStats,
    p: &FParams,
    op: &FOp,
    events: &[Event],
    answer: Option<&agentbreaker::Permission>,
    before: &agentbreaker::FailureStatus,
    after: &agentbreaker::FailureStatus,
    now: u64,
) {
    for e in events {
        match e {
            Event::Warning { .. } => stats.warnings += 1,
            Event::StateChange {
                from: State::Closed,
                to: State::Open,
                reason,
                ..
            } => {
                if reason.starts_with("Same error") {
                    stats.trips_by_identical += 1;
                } else {
                    stats.trips_by_count += 1;
                }
            }
            Event::StateChange {
                from: State::Open,
                to: State::HalfOpen,
                ..
            } => stats.half_opens += 1,
            Event::StateChange {
                from: State::HalfOpen,
                to: State::Closed,
                ..
            } => stats.recoveries += 1,
            Event::StateChange {
                from: State::HalfOpen,
                to: State::Open,
                ..
            } => stats.reopenings += 1,
            _ => {}
        }
    }
    if let Some(a) = answer {
        match a.message.as_deref() {
            Some(PROBE_MORE) => stats.extra_probes += 1,
            Some(PROBE_WAIT) => stats.probe_waits += 1,
            Some(PROBE_GRANTED) if before.state == State::HalfOpen => stats.probe_regrants += 1,
            Some(m) if m.starts_with("Circuit breaker OPEN") => {
                stats.open_refusals += 1;
                if before.opened_at.is_some_and(|at| now < at) {
                    stats.refusals_after_backwards_clock += 1;
                }
            }
            _ => {}
        }
    }
    if after.cooldown_ms > p.cooldown_ms {
        stats.backoff_above_base += 1;
    }
    if p.multiplier != Multiplier::One
        && p.cooldown_ms > 0
        && p.cooldown_ms < p.max_cooldown_ms
        && after.cooldown_ms == p.max_cooldown_ms
    {
        stats.capped_cooldowns += 1;
    }
    if now > u64::MAX / 2 && matches!(op, FOp::Failure(_) | FOp::Allow) {
        stats.near_max_steps += 1;
    }
    if matches!(
        op,
        FOp::SnapRestoreFresh | FOp::SnapRestoreFreshJson | FOp::RestoreSelf
    ) {
        match before.state {
            State::HalfOpen => stats.half_open_restores += 1,
            State::Open => stats.open_restores += 1,
            State::Closed => {}
        }
    }
    if matches!(op, FOp::Failure(_))
        && p.history_limit > 0
        && before.failure_history.len() == p.history_limit as usize
    {
        stats.history_wraps += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// StagnationBreaker reference model (contract §3 + decisions "StagnationBreaker")
// ---------------------------------------------------------------------------------------------

/// Error texts for `recordError` with their fingerprints under `[exact, normalized, template]`.
const STAGNATION_POOL: [(&str, [&str; 3]); 8] = [
    (
        "Error at line 12",
        ["Error at line 12", "Error at line #", "Error at line #"],
    ),
    (
        "Error at line 345",
        ["Error at line 345", "Error at line #", "Error at line #"],
    ),
    (
        "  Error at line 7  ",
        ["Error at line 7", "Error at line #", "Error at line #"],
    ),
    (
        "Error at   line 99",
        ["Error at   line 99", "Error at line #", "Error at line #"],
    ),
    (
        "request 42 failed with status 500",
        [
            "request 42 failed with status 500",
            "request # failed with status #",
            "request # failed with status #",
        ],
    ),
    (
        "request 7 failed with status 503",
        [
            "request 7 failed with status 503",
            "request # failed with status #",
            "request # failed with status #",
        ],
    ),
    (
        "Path not found: ServerScriptService.Main",
        [
            "Path not found: ServerScriptService.Main",
            "Path not found: ServerScriptService.Main",
            "Path not found: <path>",
        ],
    ),
    (
        "Path not found: ServerScriptService.MainHandler",
        [
            "Path not found: ServerScriptService.MainHandler",
            "Path not found: ServerScriptService.MainHandler",
            "Path not found: <path>",
        ],
    ),
];

#[derive(Debug, Clone)]
struct SParams {
    no_progress_threshold: u32,
    same_error_threshold: u32,
    output_decline_threshold: u32,
    error_match: ErrorMatch,
}

impl SParams {
    fn to_config(&self) -> StagnationConfig {
        StagnationConfig {
            no_progress_threshold: self.no_progress_threshold,
            same_error_threshold: self.same_error_threshold,
            output_decline_threshold: self.output_decline_threshold,
            error_match: self.error_match,
            // The step detectors are off (the seed's breaker); they have their own unit tests.
            ..StagnationConfig::default()
        }
    }
}

fn sparams_strategy() -> impl Strategy<Value = SParams> {
    (
        1u32..=5,
        1u32..=6,
        prop_oneof![
            3 => Just(70u32),
            1 => Just(100u32),
            1 => Just(50u32),
            1 => Just(1u32),
            2 => 1u32..=100,
        ],
        error_match_strategy(),
    )
        .prop_map(|(np, se, decline, error_match)| SParams {
            no_progress_threshold: np,
            same_error_threshold: se,
            output_decline_threshold: decline,
            error_match,
        })
}

#[derive(Debug, Clone, PartialEq)]
struct SModel {
    state: State,
    cnp: u64,
    counts: BTreeMap<String, u64>,
    trend: VecDeque<u64>,
    last_progress: Option<u64>,
    baseline: Vec<u64>,
    best: u64,
    reason: Option<String>,
}

impl SModel {
    fn new() -> Self {
        SModel {
            state: State::Closed,
            cnp: 0,
            counts: BTreeMap::new(),
            trend: VecDeque::new(),
            last_progress: None,
            baseline: Vec::new(),
            best: 0,
            reason: None,
        }
    }

    fn transition(&mut self, to: State, reason: Option<String>, now: u64, ev: &mut Vec<Expected>) {
        let event_reason = match &reason {
            Some(r) => r.clone(),
            None => "Progress resumed".to_string(),
        };
        ev.push(change(self.state, to, event_reason, now));
        self.state = to;
        self.reason = reason;
    }

    fn record_progress(
        &mut self,
        p: &SParams,
        files: u64,
        tests: u64,
        output: u64,
        now: u64,
    ) -> Vec<Expected> {
        let mut ev = Vec::new();
        let progress = files > 0 || tests > self.best;
        self.best = self.best.max(tests);
        // Baseline: mean of the first (up to) three earlier iterations; declined when
        // output * 100 < threshold * mean, i.e. output * 100 * n < threshold * sum.
        let n = self.baseline.len() as u128;
        let sum: u128 = self.baseline.iter().map(|&x| u128::from(x)).sum();
        let declined = n > 0
            && sum > 0
            && u128::from(output) * 100 * n < u128::from(p.output_decline_threshold) * sum;
        let declined_percent = if n > 0 && sum > 0 {
            u128::from(output) * 100 * n / sum
        } else {
            0
        };
        if self.baseline.len() < 3 {
            self.baseline.push(output);
        }
        self.trend.push_back(output);
        while self.trend.len() > 10 {
            self.trend.pop_front();
        }
        if progress {
            self.cnp = 0;
            self.counts.clear();
            self.last_progress = Some(now);
        } else {
            self.cnp += 1;
        }
        match self.state {
            State::Closed => {
                if self.cnp >= u64::from(p.no_progress_threshold) {
                    let r = format!("No progress in {} consecutive iterations", self.cnp);
                    self.transition(State::HalfOpen, Some(r), now, &mut ev);
                }
            }
            State::HalfOpen => {
                if progress && !declined {
                    self.cnp = 0;
                    self.transition(State::Closed, None, now, &mut ev);
                } else if progress {
                    let r = format!("Output declined to {declined_percent}% of baseline");
                    self.transition(State::Open, Some(r), now, &mut ev);
                } else {
                    let r = format!("No progress in {} consecutive iterations", self.cnp);
                    self.transition(State::Open, Some(r), now, &mut ev);
                }
            }
            State::Open => {}
        }
        ev
    }

    fn record_error(
        &mut self,
        p: &SParams,
        idx: usize,
        transient: bool,
        now: u64,
    ) -> Vec<Expected> {
        let mut ev = Vec::new();
        if transient {
            return ev;
        }
        let (text, fps) = STAGNATION_POOL[idx];
        let fp = fps[mode_index(p.error_match)].to_string();
        let c = self.counts.entry(fp).or_insert(0);
        *c += 1;
        let reached = *c >= u64::from(p.same_error_threshold);
        if reached && self.state != State::Open {
            let r = format!(
                "Same error repeated {} times: \"{}\"",
                p.same_error_threshold,
                text.trim()
            );
            self.transition(State::Open, Some(r), now, &mut ev);
        }
        ev
    }

    fn reset(&mut self, now: u64) -> Vec<Expected> {
        let mut ev = Vec::new();
        if self.state != State::Closed {
            ev.push(change(self.state, State::Closed, "reset", now));
        }
        *self = SModel::new();
        ev
    }

    /// OPEN restores as OPEN, HALF_OPEN as CLOSED with consecutiveNoProgress 0; everything else
    /// (counts, trend, lastProgress, baseline, best) is carried over.
    fn restored(&self) -> SModel {
        let mut m = self.clone();
        if m.state == State::HalfOpen {
            m.state = State::Closed;
            m.cnp = 0;
            m.reason = None;
        }
        m
    }
}

#[derive(Debug, Clone)]
enum SOp {
    Progress { files: u64, tests: u64, output: u64 },
    Error { idx: usize, transient: bool },
    Check,
    Reset,
    Advance(u64),
    SetBack(u64),
    SnapRestoreFresh,
    SnapRestoreFreshJson,
    RestoreSelf,
}

fn sop_strategy() -> impl Strategy<Value = SOp> {
    sop_strategy_with(
        prop_oneof![
            1 => Just(0u64),
            1 => 0u64..=40,
            3 => 0u64..=200,
        ]
        .boxed(),
    )
}

fn sop_strategy_with(output: BoxedStrategy<u64>) -> impl Strategy<Value = SOp> {
    prop_oneof![
        8 => (
            prop_oneof![6 => Just(0u64), 1 => 1u64..=2],
            prop_oneof![2 => 0u64..=3, 1 => 0u64..=10],
            output,
        )
            .prop_map(|(files, tests, output)| SOp::Progress { files, tests, output }),
        6 => (0..STAGNATION_POOL.len(), prop::bool::weighted(0.2))
            .prop_map(|(idx, transient)| SOp::Error { idx, transient }),
        3 => Just(SOp::Check),
        1 => Just(SOp::Reset),
        2 => (0u64..100_000).prop_map(SOp::Advance),
        1 => (1u64..100_000).prop_map(SOp::SetBack),
        1 => Just(SOp::SnapRestoreFresh),
        1 => Just(SOp::SnapRestoreFreshJson),
        1 => Just(SOp::RestoreSelf),
    ]
}

/// Sequences whose outputs are a steady base B or exact fractions of it (and their neighbours),
/// with a decline threshold that makes `output * 100 == threshold * baseline` common, so the
/// strict "<" of "declined" is exercised on its boundary.
fn steady_output_strategy() -> impl Strategy<Value = (SParams, Vec<SOp>)> {
    (
        sparams_strategy(),
        prop::sample::select(vec![50u32, 70, 100]),
        prop::sample::select(vec![100u64, 200, 50]),
    )
        .prop_flat_map(|(mut p, threshold, base)| {
            p.output_decline_threshold = threshold;
            let at = base * u64::from(threshold) / 100;
            let outputs = prop::sample::select(vec![base, base, at, at, at - 1, at + 1, base / 2]);
            let ops = prop::collection::vec(sop_strategy_with(outputs.boxed()), 1..57);
            (Just(p), Just(base), ops)
        })
        .prop_map(|(p, base, ops)| {
            // The baseline is B: three quiet iterations first.
            let quiet = SOp::Progress {
                files: 0,
                tests: 0,
                output: base,
            };
            let mut all = vec![quiet; 3];
            all.extend(ops);
            (p, all)
        })
}

fn new_stagnation_breaker(p: &SParams, clock: &Arc<ManualClock>, sink: &Sink) -> StagnationBreaker {
    let shared: SharedClock = clock.clone();
    let b = StagnationBreaker::with_clock(p.to_config(), shared).expect("valid config");
    b.add_listener(sink.listener());
    b
}

fn compare_stagnation_snapshot(
    real: &StagnationSnapshot,
    m: &SModel,
    ctx: &str,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(real.version, 1, "{}: snapshot version", ctx);
    prop_assert_eq!(&real.kind, "stagnation", "{}: snapshot kind", ctx);
    prop_assert_eq!(real.state, m.state, "{}: snapshot state", ctx);
    prop_assert_eq!(real.consecutive_no_progress, m.cnp, "{}: snapshot cnp", ctx);
    prop_assert_eq!(
        &real.error_counts,
        &m.counts,
        "{}: snapshot errorCounts",
        ctx
    );
    prop_assert_eq!(
        real.output_trend.clone(),
        m.trend.iter().copied().collect::<Vec<_>>(),
        "{}: snapshot outputTrend",
        ctx
    );
    prop_assert_eq!(
        real.last_progress,
        m.last_progress,
        "{}: snapshot lastProgress",
        ctx
    );
    prop_assert_eq!(
        &real.baseline_outputs,
        &m.baseline,
        "{}: snapshot baseline",
        ctx
    );
    prop_assert_eq!(real.best_tests_passing, m.best, "{}: snapshot best", ctx);
    prop_assert_eq!(&real.reason, &m.reason, "{}: snapshot reason", ctx);
    Ok(())
}

fn compare_stagnation(
    real: &StagnationBreaker,
    m: &SModel,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let s = real.status();
    prop_assert_eq!(s.state, m.state, "{}: state", ctx);
    prop_assert_eq!(real.state(), m.state, "{}: state()", ctx);
    prop_assert_eq!(
        s.consecutive_no_progress,
        m.cnp,
        "{}: consecutiveNoProgress",
        ctx
    );
    prop_assert_eq!(&s.error_counts, &m.counts, "{}: errorCounts", ctx);
    prop_assert_eq!(
        s.output_trend.clone(),
        m.trend.iter().copied().collect::<Vec<_>>(),
        "{}: outputTrend",
        ctx
    );
    prop_assert_eq!(s.last_progress, m.last_progress, "{}: lastProgress", ctx);
    let c = real.check();
    prop_assert_eq!(c.state, m.state, "{}: check().state", ctx);
    prop_assert_eq!(
        c.allow_continue,
        m.state != State::Open,
        "{}: check().allowContinue",
        ctx
    );
    prop_assert_eq!(&c.reason, &m.reason, "{}: check().reason", ctx);
    Ok(())
}

/// What a batch of generated stagnation sequences exercised.
#[derive(Debug, Default)]
struct SStats {
    to_half_open: u64,
    half_open_to_closed: u64,
    decline_opens: u64,
    no_progress_opens: u64,
    same_error_opens: u64,
    merged_fingerprints: u64,
    transient_errors: u64,
    resets_from_non_closed: u64,
    half_open_restores: u64,
    open_restores: u64,
    trend_full: u64,
    half_open_decline_boundary: u64,
}

fn run_stagnation(p: SParams, ops: Vec<SOp>, stats: &mut SStats) -> Result<(), TestCaseError> {
    // The texts recorded (non-transiently) under each fingerprint since it was last cleared.
    let mut texts_by_fp: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let clock = ManualClock::shared(1_000);
    let sink = Sink::default();
    let mut real = new_stagnation_breaker(&p, &clock, &sink);
    let mut model = SModel::new();

    for (i, op) in ops.iter().enumerate() {
        let ctx = format!("step {i} {op:?} (t={} before)", clock.now());
        let before = real.status();
        let before_snap = real.snapshot();
        let now = clock.now();
        let mut expected = Vec::new();
        match op {
            SOp::Progress {
                files,
                tests,
                output,
            } => {
                real.record_progress(IterationMetrics {
                    files_changed: *files,
                    tests_passing: *tests,
                    output_length: *output,
                });
                expected = model.record_progress(&p, *files, *tests, *output, now);
            }
            SOp::Error { idx, transient } => {
                real.record_error(STAGNATION_POOL[*idx].0, *transient);
                expected = model.record_error(&p, *idx, *transient, now);
            }
            SOp::Check => {
                let c = real.check();
                prop_assert_eq!(c.state, model.state, "{}: check state", ctx);
                prop_assert_eq!(c.allow_continue, model.state != State::Open, "{}", ctx);
                prop_assert_eq!(&c.reason, &model.reason, "{}: check reason", ctx);
            }
            SOp::Reset => {
                real.reset();
                expected = model.reset(now);
            }
            SOp::Advance(ms) => clock.advance(*ms),
            SOp::SetBack(ms) => clock.set(clock.now().saturating_sub(*ms)),
            SOp::SnapRestoreFresh | SOp::SnapRestoreFreshJson => {
                let snap = real.snapshot();
                compare_stagnation_snapshot(&snap, &model, &ctx)?;
                let fresh = new_stagnation_breaker(&p, &clock, &sink);
                if matches!(op, SOp::SnapRestoreFresh) {
                    fresh.restore(&snap).expect("restore of own snapshot");
                } else {
                    let json = serde_json::to_string(&snap.to_json()).unwrap();
                    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
                    fresh
                        .restore_json(&value)
                        .expect("restore_json of own snapshot");
                }
                real = fresh;
                model = model.restored();
            }
            SOp::RestoreSelf => {
                let snap = real.snapshot();
                compare_stagnation_snapshot(&snap, &model, &ctx)?;
                real.restore(&snap).expect("restore of own snapshot");
                model = model.restored();
            }
        }
        let events = sink.take();
        compare_events(&events, &expected, &ctx)?;
        compare_stagnation(&real, &model, &ctx)?;

        // ---- invariants on the real breaker's observations alone ----
        let after = real.status();
        for e in &events {
            if let Event::StateChange {
                from, to, reason, ..
            } = e
            {
                match (from, to) {
                    (State::Closed, State::HalfOpen) => stats.to_half_open += 1,
                    (State::HalfOpen, State::Closed) => stats.half_open_to_closed += 1,
                    (_, State::Open) if reason.starts_with("Output declined") => {
                        stats.decline_opens += 1;
                    }
                    (_, State::Open) if reason.starts_with("No progress") => {
                        stats.no_progress_opens += 1;
                    }
                    (_, State::Open) if reason.starts_with("Same error") => {
                        stats.same_error_opens += 1;
                    }
                    (_, State::Closed) => stats.resets_from_non_closed += 1,
                    _ => {}
                }
            }
        }
        match op {
            SOp::Error {
                transient: true, ..
            } => stats.transient_errors += 1,
            SOp::Error { idx, .. } => {
                let fp = STAGNATION_POOL[*idx].1[mode_index(p.error_match)].to_string();
                let texts = texts_by_fp.entry(fp).or_default();
                let text = STAGNATION_POOL[*idx].0;
                if texts.iter().any(|t| *t != text) {
                    stats.merged_fingerprints += 1;
                }
                texts.push(text);
            }
            SOp::SnapRestoreFresh | SOp::SnapRestoreFreshJson | SOp::RestoreSelf => {
                match before.state {
                    State::HalfOpen => stats.half_open_restores += 1,
                    State::Open => stats.open_restores += 1,
                    State::Closed => {}
                }
            }
            _ => {}
        }
        if after.error_counts.is_empty() {
            texts_by_fp.clear();
        }
        if after.output_trend.len() == 10 {
            stats.trend_full += 1;
        }
        if let SOp::Progress {
            files,
            tests,
            output,
        } = op
            && before.state == State::HalfOpen
            && (*files > 0 || *tests > before_snap.best_tests_passing)
        {
            let base = &before_snap.baseline_outputs;
            let sum: u64 = base.iter().sum();
            if sum > 0
                && output * 100 * base.len() as u64 == u64::from(p.output_decline_threshold) * sum
            {
                stats.half_open_decline_boundary += 1;
            }
        }
        prop_assert!(after.output_trend.len() <= 10, "{}: trend too long", ctx);
        prop_assert!(events.len() <= 1, "{}: more than one event in a step", ctx);
        let restoring = matches!(
            op,
            SOp::SnapRestoreFresh | SOp::SnapRestoreFreshJson | SOp::RestoreSelf
        );
        check_state_chain(&events, before.state, after.state, restoring, &ctx)?;
        if before.state == State::Open && !restoring && !matches!(op, SOp::Reset) {
            prop_assert_eq!(
                after.state,
                State::Open,
                "{}: OPEN is final until reset",
                ctx
            );
        }
        if matches!(
            op,
            SOp::Error {
                transient: true,
                ..
            }
        ) {
            prop_assert_eq!(
                &after,
                &before,
                "{}: a transient error changed something",
                ctx
            );
        }
        if matches!(op, SOp::Error { .. } | SOp::Check)
            || matches!(op, SOp::Advance(_) | SOp::SetBack(_))
        {
            prop_assert!(
                after.consecutive_no_progress == before.consecutive_no_progress,
                "{}: consecutiveNoProgress moved",
                ctx
            );
            for (k, v) in &before.error_counts {
                prop_assert!(
                    after.error_counts.get(k).is_some_and(|a| a >= v),
                    "{}: error count for {:?} decreased",
                    ctx,
                    k
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// A config and a sequence that starts by tripping the breaker, then mostly asks for permission
/// and moves the clock.
fn probe_heavy_strategy() -> impl Strategy<Value = (FParams, Vec<FOp>)> {
    (
        fparams_strategy(),
        prop::collection::vec(
            prop_oneof![
                6 => Just(FOp::Allow),
                2 => prop_oneof![0u64..2_000, 0u64..60_000].prop_map(FOp::Advance),
                2 => Just(FOp::AdvanceProbeTimeout),
                2 => Just(FOp::AdvanceCooldown),
                1 => (1u64..60_000).prop_map(FOp::SetBack),
                1 => Just(FOp::Success),
                2 => (0..FAILURE_POOL.len()).prop_map(FOp::Failure),
                1 => Just(FOp::SnapRestoreFresh),
            ],
            1..60,
        ),
    )
        .prop_map(|(p, ops)| {
            let mut all = vec![FOp::Failure(5); p.failure_threshold as usize];
            all.extend(ops);
            (p, all)
        })
}

/// 256 cases per property (proptest's default), or `PROPTEST_CASES` for a longer search. No
/// regression files are written into the source tree.
fn proptest_config() -> ProptestConfig {
    let mut config = ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 256;
    }
    config
}

proptest! {
    #![proptest_config(proptest_config())]

    /// The FailureBreaker and its reference model agree after every step of a random sequence.
    #[test]
    fn failure_breaker_matches_model(
        p in fparams_strategy(),
        ops in prop::collection::vec(fop_strategy(), 1..60),
    ) {
        run_failure(p, ops, &mut FStats::default())?;
    }

    /// Probe-heavy sequences: trip at once, then mostly permission checks and clock moves, so
    /// that HALF_OPEN cycles with several probes, lost results and timeouts are common.
    #[test]
    fn failure_breaker_half_open_probes_match_model((p, ops) in probe_heavy_strategy()) {
        run_failure(p, ops, &mut FStats::default())?;
    }

    /// The StagnationBreaker and its reference model agree after every step.
    #[test]
    fn stagnation_breaker_matches_model(
        p in sparams_strategy(),
        ops in prop::collection::vec(sop_strategy(), 1..60),
    ) {
        run_stagnation(p, ops, &mut SStats::default())?;
    }

    /// The same with steady outputs, so that HALF_OPEN iterations land on the decline boundary.
    #[test]
    fn stagnation_breaker_steady_output_matches_model((p, ops) in steady_output_strategy()) {
        run_stagnation(p, ops, &mut SStats::default())?;
    }
}

// ---------------------------------------------------------------------------------------------
// Sanity checks of the models themselves against the contract's worked examples (so that a model bug
// cannot hide a library bug by agreeing with it).
// ---------------------------------------------------------------------------------------------

fn default_fparams() -> FParams {
    FParams {
        failure_threshold: 5,
        warning_threshold: None,
        cooldown_ms: 30_000,
        multiplier: Multiplier::One,
        max_cooldown_ms: 3_600_000,
        identical_error_threshold: 0,
        history_limit: 100,
        half_open_max_probes: 1,
        probe_timeout_ms: 30_000,
        error_match: ErrorMatch::Normalized,
    }
}

#[test]
fn model_backoff_two_gives_30_60_120_seconds() {
    let mut m = FModel::new(FParams {
        multiplier: Multiplier::Two,
        ..default_fparams()
    });
    let mut seen = Vec::new();
    for level in 0..3 {
        m.level = level;
        seen.push(m.current_cooldown());
    }
    assert_eq!(seen, vec![30_000, 60_000, 120_000]);
    m.level = 20;
    assert_eq!(m.current_cooldown(), 3_600_000);
    let mut h = FModel::new(FParams {
        multiplier: Multiplier::OneAndHalf,
        cooldown_ms: 1_001,
        ..default_fparams()
    });
    h.level = 1;
    assert_eq!(h.current_cooldown(), 1_501); // floor(1501.5)
}

#[test]
fn model_reproduces_spec_open_message_and_warning() {
    let mut m = FModel::new(default_fparams());
    let mut events = Vec::new();
    for _ in 0..4 {
        events.extend(m.record_failure(0, 0));
    }
    assert_eq!(
        events,
        vec![Expected::Warning {
            message: "Warning: 3 consecutive failures. 2 more will open circuit.".into(),
            at: 0
        }]
    );
    m.record_failure(0, 1000);
    assert_eq!(m.state, State::Open);
    let (answer, _) = m.should_allow(3000);
    assert_eq!(
        answer,
        (
            false,
            Some(
                "Circuit breaker OPEN. 28 seconds remaining in cooldown. 5 consecutive failures \
                 detected. Human intervention required."
                    .into()
            )
        )
    );
    let (answer, ev) = m.should_allow(31_000);
    assert_eq!(answer, (true, Some(PROBE_GRANTED.into())));
    assert_eq!(ev.len(), 1);
    assert_eq!(m.should_allow(31_001).0, (false, Some(PROBE_WAIT.into())));
    // A lost result gives its permit back after probeTimeoutMs.
    assert_eq!(m.should_allow(61_000).0, (true, Some(PROBE_GRANTED.into())));
}

#[test]
fn model_stagnation_half_open_decline_opens() {
    let p = SParams {
        no_progress_threshold: 2,
        same_error_threshold: 5,
        output_decline_threshold: 70,
        error_match: ErrorMatch::Normalized,
    };
    let mut m = SModel::new();
    m.record_progress(&p, 0, 0, 100, 0);
    m.record_progress(&p, 0, 0, 100, 0);
    assert_eq!(m.state, State::HalfOpen);
    // Progress, but 40 < 70% of the baseline 100.
    m.record_progress(&p, 1, 0, 40, 5);
    assert_eq!(m.state, State::Open);
    assert_eq!(
        m.reason.as_deref(),
        Some("Output declined to 40% of baseline")
    );
    assert_eq!(m.last_progress, Some(5));
}

/// The generators are only useful if they reach the situations the properties are about: run a
/// fixed-seed batch of the same strategies and require each situation to occur.
#[test]
fn generators_reach_interesting_situations() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut fs = FStats::default();
    let general = (
        fparams_strategy(),
        prop::collection::vec(fop_strategy(), 1..60),
    );
    for _ in 0..256 {
        let (p, ops) = general.new_tree(&mut runner).unwrap().current();
        run_failure(p, ops, &mut fs).unwrap();
        let (p, ops) = probe_heavy_strategy()
            .new_tree(&mut runner)
            .unwrap()
            .current();
        run_failure(p, ops, &mut fs).unwrap();
    }
    eprintln!("{fs:#?}");
    let f = [
        ("trips by count", fs.trips_by_count),
        ("trips by identical error", fs.trips_by_identical),
        ("warnings", fs.warnings),
        ("OPEN->HALF_OPEN", fs.half_opens),
        ("extra probes", fs.extra_probes),
        ("probe waits", fs.probe_waits),
        ("probe re-grants after timeout", fs.probe_regrants),
        ("recoveries", fs.recoveries),
        ("reopenings", fs.reopenings),
        ("backoff above base", fs.backoff_above_base),
        ("capped cooldowns", fs.capped_cooldowns),
        ("OPEN refusals", fs.open_refusals),
        (
            "refusals with the clock before openedAt",
            fs.refusals_after_backwards_clock,
        ),
        ("steps near u64::MAX", fs.near_max_steps),
        ("HALF_OPEN restores", fs.half_open_restores),
        ("OPEN restores", fs.open_restores),
        ("history wraps", fs.history_wraps),
        (
            "warning and trip in one step",
            fs.warning_and_trip_in_one_step,
        ),
        (
            "grants with two timed-out permits",
            fs.grants_with_two_timed_out_permits,
        ),
    ];
    for (what, n) in f {
        assert!(
            n >= 10,
            "failure generators reached {what:?} only {n} times"
        );
    }

    let mut ss = SStats::default();
    let stag = (
        sparams_strategy(),
        prop::collection::vec(sop_strategy(), 1..60),
    );
    for _ in 0..256 {
        let (p, ops) = stag.new_tree(&mut runner).unwrap().current();
        run_stagnation(p, ops, &mut ss).unwrap();
        let (p, ops) = steady_output_strategy()
            .new_tree(&mut runner)
            .unwrap()
            .current();
        run_stagnation(p, ops, &mut ss).unwrap();
    }
    eprintln!("{ss:#?}");
    let s = [
        ("CLOSED->HALF_OPEN", ss.to_half_open),
        ("HALF_OPEN->CLOSED", ss.half_open_to_closed),
        ("opens on output decline", ss.decline_opens),
        ("opens on no progress", ss.no_progress_opens),
        ("opens on same error", ss.same_error_opens),
        ("merged fingerprints", ss.merged_fingerprints),
        ("transient errors", ss.transient_errors),
        ("resets from non-CLOSED", ss.resets_from_non_closed),
        ("HALF_OPEN restores", ss.half_open_restores),
        ("OPEN restores", ss.open_restores),
        ("full trends", ss.trend_full),
        (
            "HALF_OPEN iterations on the decline boundary",
            ss.half_open_decline_boundary,
        ),
    ];
    for (what, n) in s {
        assert!(
            n >= 10,
            "stagnation generators reached {what:?} only {n} times"
        );
    }
}

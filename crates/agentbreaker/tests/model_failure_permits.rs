//! Model-based test of the FailureBreaker's probe permits, from the caller's side: random
//! sequences of `try_acquire` (keeping the permits it grants), permits completed with a success or
//! a failure, permits dropped without a result (lost: a crash, a cancelled task), results that
//! arrive late (after a timeout re-granted their permit) or without any permit, guarded `call`s
//! that return `Ok`, `Err` or panic, clock moves, `reset`, snapshot/restore, and restores of
//! counters at the very top of their types.
//!
//! The reference model is written from contract §2 and decisions "Probe permits" only (exact integer
//! cooldowns; multipliers 1 and 2, exact in floating point too). Besides agreeing with the model
//! after every step, the real breaker must keep these invariants on its own observations:
//!
//! - it opens exactly when a failure in CLOSED brings the count to `failureThreshold` (never
//!   earlier, never later);
//! - at most `halfOpenMaxProbes` permits are live in a HALF_OPEN cycle, and a further one is
//!   granted only in place of one that is `probeTimeoutMs` old;
//! - a lost probe never wedges the breaker: in HALF_OPEN, once the oldest permit is
//!   `probeTimeoutMs` old, the next `try_acquire` is granted;
//! - counters never decrease (lifetime metrics) and never overflow (they saturate: a debug build
//!   would panic on overflow).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, Once};

use agentbreaker::{
    CallError, Event, FailureBreaker, FailureConfig, FailureSnapshot, ManualClock, State,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

mod support;

const GRANTED: &str = "Circuit breaker testing - one operation allowed";
const MORE: &str = "Circuit breaker testing - success will close, failure will re-open";
const WAIT: &str = "Circuit breaker testing - waiting for the test operation's result";

/// Panics raised on purpose inside guarded calls carry this text; the panic hook stays quiet
/// about them (and only them).
const PLANNED_PANIC: &str = "planned panic in a guarded call";

fn quiet_planned_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|s| *s == PLANNED_PANIC);
            if !planned {
                default(info);
            }
        }));
    });
}

#[derive(Debug, Clone)]
struct Params {
    failure_threshold: u32,
    cooldown_ms: u64,
    doubling: bool,
    max_cooldown_ms: u64,
    max_probes: u32,
    probe_timeout_ms: u64,
}

impl Params {
    fn config(&self) -> FailureConfig {
        FailureConfig {
            failure_threshold: self.failure_threshold,
            warning_threshold: Some(0),
            cooldown_ms: self.cooldown_ms,
            backoff_multiplier: if self.doubling { 2.0 } else { 1.0 },
            max_cooldown_ms: self.max_cooldown_ms,
            half_open_max_probes: self.max_probes,
            probe_timeout_ms: self.probe_timeout_ms,
            ..FailureConfig::default()
        }
    }
}

fn params() -> impl Strategy<Value = Params> {
    (
        1u32..=6,
        prop_oneof![Just(0u64), 1u64..3_000],
        any::<bool>(),
        0u64..20_000,
        prop_oneof![2 => Just(1u32), 1 => 2u32..=4],
        1u64..3_000,
    )
        .prop_map(
            |(failure_threshold, cooldown_ms, doubling, extra, max_probes, probe_timeout_ms)| {
                Params {
                    failure_threshold,
                    cooldown_ms,
                    doubling,
                    max_cooldown_ms: cooldown_ms + extra,
                    max_probes,
                    probe_timeout_ms,
                }
            },
        )
}

// -------------------------------------------------------------------------------------------------
// The reference model (contract §2)

#[derive(Debug, Clone, Default)]
struct Model {
    state: State,
    failures: u64,
    opened_at: Option<u64>,
    level: u32,
    trips: u64,
    /// Grant times of the live permits of the current HALF_OPEN cycle, oldest first.
    live: VecDeque<u64>,
    total_failures: u64,
    total_successes: u64,
    lifetime_trips: u64,
    recoveries: u64,
    reopenings: u64,
}

/// What the model expects a step to emit: (from, to) of each stateChange.
type Changes = Vec<(State, State)>;

impl Model {
    /// min(cooldownMs × multiplier^level, maxCooldownMs), in integers.
    fn cooldown(&self, p: &Params) -> u64 {
        if !p.doubling || p.cooldown_ms == 0 {
            return p.cooldown_ms;
        }
        let mut c = u128::from(p.cooldown_ms);
        for _ in 0..self.level {
            c *= 2;
            if c >= u128::from(p.max_cooldown_ms) {
                return p.max_cooldown_ms;
            }
        }
        c as u64
    }

    fn success(&mut self) -> Changes {
        self.failures = 0;
        self.total_successes += 1;
        self.live.clear();
        if self.state == State::HalfOpen {
            self.state = State::Closed;
            self.opened_at = None;
            self.level = 0;
            self.recoveries += 1;
            return vec![(State::HalfOpen, State::Closed)];
        }
        Vec::new()
    }

    fn failure(&mut self, p: &Params, now: u64) -> Changes {
        self.failures = self.failures.saturating_add(1);
        self.total_failures += 1;
        self.live.clear();
        match self.state {
            State::Closed if self.failures >= u64::from(p.failure_threshold) => {
                self.state = State::Open;
                self.opened_at = Some(now);
                self.trips = self.trips.saturating_add(1);
                self.lifetime_trips += 1;
                vec![(State::Closed, State::Open)]
            }
            State::HalfOpen => {
                self.state = State::Open;
                self.opened_at = Some(now);
                self.level = self.level.saturating_add(1);
                self.reopenings += 1;
                vec![(State::HalfOpen, State::Open)]
            }
            _ => Vec::new(),
        }
    }

    /// `shouldAllowOperation`: (allowed, message), and the changes.
    fn allow(&mut self, p: &Params, now: u64) -> ((bool, Option<String>), Changes) {
        match self.state {
            State::Closed => ((true, None), Vec::new()),
            State::Open => {
                let cooldown = self.cooldown(p);
                let waited = now.saturating_sub(self.opened_at.unwrap());
                if waited < cooldown {
                    let secs = (cooldown - waited).div_ceil(1000);
                    let message = format!(
                        "Circuit breaker OPEN. {secs} seconds remaining in cooldown. {} \
                         consecutive failures detected. Human intervention required.",
                        p.failure_threshold
                    );
                    return ((false, Some(message)), Vec::new());
                }
                self.state = State::HalfOpen;
                self.live = VecDeque::from([now]);
                (
                    (true, Some(GRANTED.into())),
                    vec![(State::Open, State::HalfOpen)],
                )
            }
            State::HalfOpen => {
                if self.live.len() < p.max_probes as usize {
                    self.live.push_back(now);
                    ((true, Some(MORE.into())), Vec::new())
                } else if now.saturating_sub(self.live[0]) >= p.probe_timeout_ms {
                    self.live.pop_front();
                    self.live.push_back(now);
                    ((true, Some(GRANTED.into())), Vec::new())
                } else {
                    ((false, Some(WAIT.into())), Vec::new())
                }
            }
        }
    }

    fn reset(&mut self) -> Changes {
        let changes = if self.state == State::Closed {
            Vec::new()
        } else {
            vec![(self.state, State::Closed)]
        };
        self.state = State::Closed;
        self.failures = 0;
        self.opened_at = None;
        self.level = 0;
        self.trips = 0;
        self.live.clear();
        changes
    }

    /// restore: OPEN stays OPEN with its openedAt; HALF_OPEN comes back CLOSED with 0 failures and
    /// level 0; no permits survive. `fresh`: a new object, whose lifetime metrics start at 0.
    fn restore(&mut self, s: &FailureSnapshot, fresh: bool) {
        if fresh {
            *self = Model::default();
        }
        self.live.clear();
        self.trips = s.trips;
        match s.state {
            State::Open => {
                self.state = State::Open;
                self.failures = s.consecutive_failures;
                self.opened_at = s.opened_at;
                self.level = s.backoff_level;
            }
            State::Closed => {
                self.state = State::Closed;
                self.failures = s.consecutive_failures;
                self.opened_at = None;
                self.level = s.backoff_level;
            }
            State::HalfOpen => {
                self.state = State::Closed;
                self.failures = 0;
                self.opened_at = None;
                self.level = 0;
            }
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Operations

#[derive(Debug, Clone)]
enum Op {
    /// `try_acquire`; a granted permit is kept by the caller.
    Acquire,
    /// The caller finishes one of its permits with a success or a failure.
    Complete {
        pick: usize,
        ok: bool,
    },
    /// The caller drops one of its permits without a result.
    Lose {
        pick: usize,
    },
    /// A result recorded without holding any permit (or after its permit was re-granted).
    Success,
    Failure,
    /// `call(f)` with `f` returning Ok, returning Err, or panicking.
    CallOk,
    CallErr,
    CallPanic,
    Advance(u64),
    AdvanceCooldown,
    AdvanceProbeTimeout,
    /// The clock goes back (treated as no time passing).
    SetBack(u64),
    Reset,
    /// snapshot → JSON text → restore into a fresh breaker (a restart).
    Restart,
    /// restore(snapshot()) on the same breaker.
    RestoreSelf,
    /// Restore a snapshot whose counters sit `k` below the top of their types.
    RestoreNearMax {
        k: u64,
        state: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => Just(Op::Acquire),
        6 => (any::<usize>(), any::<bool>()).prop_map(|(pick, ok)| Op::Complete { pick, ok }),
        6 => any::<usize>().prop_map(|pick| Op::Lose { pick }),
        2 => Just(Op::Success),
        6 => Just(Op::Failure),
        2 => Just(Op::CallOk),
        3 => Just(Op::CallErr),
        1 => Just(Op::CallPanic),
        4 => (0u64..2_000).prop_map(Op::Advance),
        4 => Just(Op::AdvanceCooldown),
        6 => Just(Op::AdvanceProbeTimeout),
        1 => (1u64..5_000).prop_map(Op::SetBack),
        1 => Just(Op::Reset),
        1 => Just(Op::Restart),
        1 => Just(Op::RestoreSelf),
        1 => (0u64..3, 0u8..3).prop_map(|(k, state)| Op::RestoreNearMax { k, state }),
    ]
}

// -------------------------------------------------------------------------------------------------
// The run

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl Recorder {
    fn attach(&self, b: &FailureBreaker) {
        let events = Arc::clone(&self.0);
        b.add_listener(Arc::new(move |e: &Event| {
            events.lock().unwrap().push(e.clone());
            Ok(())
        }));
    }

    fn changes(&self) -> Changes {
        std::mem::take(&mut *self.0.lock().unwrap())
            .into_iter()
            .filter_map(|e| match e {
                Event::StateChange { from, to, .. } => Some((from, to)),
                _ => None,
            })
            .collect()
    }
}

/// What one run exercised, to check that the generator reaches the situations that matter.
#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    trips: u64,
    lost_permits: u64,
    regrants_after_timeout: u64,
    waits: u64,
    late_results: u64,
    recoveries: u64,
    reopenings: u64,
    panics: u64,
    saturated: u64,
}

fn run(p: &Params, ops: &[Op], reached: &mut Reached) -> Result<(), TestCaseError> {
    quiet_planned_panics();
    let clock = ManualClock::shared(1_000);
    let recorder = Recorder::default();
    let make = || {
        let b = FailureBreaker::with_clock(p.config(), clock.clone()).unwrap();
        recorder.attach(&b);
        b
    };
    let mut real = make();
    let mut model = Model::default();
    // The caller's permits: grant times, oldest first, including ones a result already settled
    // (their holders may still report late).
    let mut held: Vec<u64> = Vec::new();
    // The invariant trackers, fed only by the real breaker's answers.
    let mut live: VecDeque<u64> = VecDeque::new();
    let mut lifetime = real.metrics();

    for (step, op) in ops.iter().enumerate() {
        let now = clock.now();
        let ctx = format!("step {step} {op:?} at t={now}");
        let before = real.status();
        let mut answer: Option<(bool, Option<String>)> = None;
        let mut expected_answer = None;
        let mut expected: Changes = Vec::new();
        let mut failure_recorded = false;
        match op {
            Op::Acquire => {
                let got = real.try_acquire();
                let (want, changes) = model.allow(p, now);
                let got = match got {
                    Ok(permission) => {
                        prop_assert!(permission.allowed, "{}", ctx);
                        held.push(now);
                        (true, permission.message)
                    }
                    Err(e) => {
                        prop_assert_eq!(e.code(), "CIRCUIT_OPEN", "{}", ctx);
                        (false, Some(e.message().to_string()))
                    }
                };
                answer = Some(got);
                expected_answer = Some(want);
                expected = changes;
            }
            Op::Complete { pick, ok } => {
                if held.is_empty() {
                    continue;
                }
                let granted_at = held.remove(pick % held.len());
                if !live.contains(&granted_at) && before.state != State::Closed {
                    reached.late_results += 1;
                }
                if *ok {
                    real.record_success();
                    expected = model.success();
                } else {
                    real.record_failure("probe failed");
                    expected = model.failure(p, now);
                    failure_recorded = true;
                }
            }
            Op::Lose { pick } => {
                if !held.is_empty() {
                    held.remove(pick % held.len());
                    reached.lost_permits += 1;
                }
            }
            Op::Success => {
                real.record_success();
                expected = model.success();
            }
            Op::Failure => {
                real.record_failure("no permit");
                expected = model.failure(p, now);
                failure_recorded = true;
            }
            Op::CallOk | Op::CallErr | Op::CallPanic => {
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    real.call(|| match op {
                        Op::CallOk => Ok(7),
                        Op::CallErr => Err("call failed"),
                        _ => std::panic::panic_any(PLANNED_PANIC),
                    })
                }));
                let (want, mut changes) = model.allow(p, now);
                match (&outcome, want.0) {
                    (Ok(Err(CallError::Rejected(e))), false) => {
                        prop_assert_eq!(e.code(), "CIRCUIT_OPEN", "{}", ctx);
                        prop_assert_eq!(Some(e.message().to_string()), want.1, "{}", ctx);
                    }
                    (Ok(Ok(7)), true) => {
                        prop_assert!(matches!(op, Op::CallOk), "{}", ctx);
                        changes.extend(model.success());
                    }
                    (Ok(Err(CallError::Failed(_))), true) => {
                        prop_assert!(matches!(op, Op::CallErr), "{}", ctx);
                        changes.extend(model.failure(p, now));
                        failure_recorded = true;
                    }
                    (Err(_), true) => {
                        prop_assert!(matches!(op, Op::CallPanic), "{}", ctx);
                        reached.panics += 1;
                        changes.extend(model.failure(p, now));
                        failure_recorded = true;
                        let last = real.status().failure_history.pop().unwrap();
                        prop_assert_eq!(last.error, format!("panic: {PLANNED_PANIC}"));
                    }
                    (other, allowed) => prop_assert!(
                        false,
                        "{}: call gave {:?}, the model says allowed={}",
                        ctx,
                        other
                            .as_ref()
                            .map(|r| r.as_ref().map_err(|e| e.to_string())),
                        allowed
                    ),
                }
                expected = changes;
            }
            Op::Advance(ms) => clock.advance(*ms),
            Op::AdvanceCooldown => clock.advance(model.cooldown(p)),
            Op::AdvanceProbeTimeout => clock.advance(p.probe_timeout_ms),
            Op::SetBack(ms) => clock.set(now.saturating_sub(*ms)),
            Op::Reset => {
                real.reset();
                expected = model.reset();
            }
            Op::Restart => {
                let text = serde_json::to_string(&real.snapshot().to_json()).unwrap();
                let snap =
                    FailureSnapshot::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
                real = make();
                real.restore_json(&serde_json::from_str(&text).unwrap())
                    .unwrap();
                model.restore(&snap, true);
                lifetime = real.metrics();
                held.clear();
            }
            Op::RestoreSelf => {
                let snap = real.snapshot();
                real.restore(&snap).unwrap();
                model.restore(&snap, false);
            }
            Op::RestoreNearMax { k, state } => {
                let state = [State::Closed, State::HalfOpen, State::Open][*state as usize];
                let snap = FailureSnapshot {
                    version: 1,
                    kind: "failure".into(),
                    state,
                    consecutive_failures: u64::MAX - k,
                    opened_at: (state != State::Closed).then_some(now),
                    // Not with a zero cooldown: there the core gives maxCooldownMs once
                    // 2^level overflows a float (0 × inf), where contract §2's min(0 × 2^level, max)
                    // is 0 (reported; see docs/reliability.md).
                    backoff_level: if p.cooldown_ms == 0 && p.doubling {
                        1000
                    } else {
                        u32::MAX - *k as u32
                    },
                    trips: u64::MAX - k,
                    failure_history: Vec::new(),
                };
                real.restore(&snap).unwrap();
                model.restore(&snap, false);
                reached.saturated += 1;
            }
        }
        let now = clock.now();
        let ctx = format!("{ctx} (t={now} after)");

        // ---- the model agrees ----
        prop_assert_eq!(
            recorder.changes(),
            expected.clone(),
            "{}: stateChanges",
            ctx
        );
        if let (Some(got), Some(want)) = (&answer, &expected_answer) {
            prop_assert_eq!(got, want, "{}: answer", ctx);
        }
        let s = real.status();
        let snap = real.snapshot();
        prop_assert_eq!(s.state, model.state, "{}: state", ctx);
        prop_assert_eq!(s.consecutive_failures, model.failures, "{}: count", ctx);
        prop_assert_eq!(s.opened_at, model.opened_at, "{}: openedAt", ctx);
        prop_assert_eq!(snap.backoff_level, model.level, "{}: backoff level", ctx);
        prop_assert_eq!(s.trips, model.trips, "{}: trips", ctx);
        prop_assert_eq!(s.cooldown_ms, model.cooldown(p), "{}: cooldown", ctx);
        let m = real.metrics();
        prop_assert_eq!(
            (m.total_failures, m.total_successes, m.trips),
            (
                model.total_failures,
                model.total_successes,
                model.lifetime_trips
            ),
            "{}: metrics",
            ctx
        );
        prop_assert_eq!(
            (m.recoveries, m.reopenings),
            (model.recoveries, model.reopenings),
            "{}: metrics",
            ctx
        );

        // ---- invariants on the real breaker alone ----
        // Opens exactly at the threshold.
        if failure_recorded && before.state == State::Closed {
            let at_threshold = s.consecutive_failures >= u64::from(p.failure_threshold);
            prop_assert_eq!(
                s.state == State::Open,
                at_threshold,
                "{}: CLOSED with {} failures of {} after a failure",
                ctx,
                s.consecutive_failures,
                p.failure_threshold
            );
            if at_threshold {
                reached.trips += 1;
            }
        }
        // Counters never decrease within an object's life; trips and counts saturate.
        prop_assert!(m.total_failures >= lifetime.total_failures, "{}", ctx);
        prop_assert!(m.total_successes >= lifetime.total_successes, "{}", ctx);
        prop_assert!(m.trips >= lifetime.trips, "{}", ctx);
        prop_assert!(m.recoveries >= lifetime.recoveries, "{}", ctx);
        prop_assert!(m.reopenings >= lifetime.reopenings, "{}", ctx);
        reached.recoveries += m.recoveries - lifetime.recoveries;
        reached.reopenings += m.reopenings - lifetime.reopenings;
        // Permits: live ones are tracked from the answers; a result (which returns every
        // permit) or any move out of HALF_OPEN ends the cycle.
        let result_recorded = m.total_failures + m.total_successes
            != lifetime.total_failures + lifetime.total_successes;
        if s.state != State::HalfOpen || result_recorded {
            live.clear();
        }
        if s.state == State::HalfOpen
            && let Some((allowed, message)) = &answer
        {
            let oldest_timed_out = live
                .front()
                .is_some_and(|&t| now.saturating_sub(t) >= p.probe_timeout_ms);
            let room = live.len() < p.max_probes as usize;
            if before.state == State::HalfOpen {
                // No wedge: room or a timed-out permit means a grant.
                prop_assert_eq!(
                    *allowed,
                    room || oldest_timed_out,
                    "{}: {} live permits, oldest timed out: {}",
                    ctx,
                    live.len(),
                    oldest_timed_out
                );
            }
            if *allowed {
                if !room {
                    // Re-granted in place of the timed-out oldest one.
                    live.pop_front();
                    reached.regrants_after_timeout += 1;
                    prop_assert_eq!(message.as_deref(), Some(GRANTED), "{}", ctx);
                }
                live.push_back(now);
            } else {
                reached.waits += 1;
                prop_assert_eq!(message.as_deref(), Some(WAIT), "{}", ctx);
            }
            prop_assert!(
                live.len() <= p.max_probes as usize,
                "{}: {} live permits with halfOpenMaxProbes {}",
                ctx,
                live.len(),
                p.max_probes
            );
        }
        lifetime = m;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: support::cases(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random caller behaviour against the model, with the invariants above after every step.
    #[test]
    fn permits_follow_the_model_and_never_wedge(p in params(), ops in prop::collection::vec(op(), 1..80)) {
        run(&p, &ops, &mut Reached::default())?;
    }
}

/// The generator reaches what the invariants are about: trips, lost permits, timeouts that give a
/// permit back, refusals while probes are out, late results, recoveries, reopenings, panicking
/// calls and saturated counters (a fixed seed, so this is deterministic).
#[test]
fn generator_reaches_the_interesting_situations() {
    let mut total = Reached::default();
    let strategy = (params(), prop::collection::vec(op(), 1..80));
    support::sample(&strategy, 200, |(p, ops)| {
        run(&p, &ops, &mut total).unwrap()
    });
    eprintln!("{total:#?}");
    support::assert_reached(
        10,
        [
            ("trips", total.trips),
            ("lost permits", total.lost_permits),
            ("re-grants after a timeout", total.regrants_after_timeout),
            ("refusals while probes are out", total.waits),
            ("late results", total.late_results),
            ("recoveries", total.recoveries),
            ("reopenings", total.reopenings),
            ("panicking calls", total.panics),
            ("saturated counters", total.saturated),
        ],
    );
}

/// The model itself against contract §2's worked numbers (so a model bug cannot agree with a library
/// bug): backoff 2.0 gives 30 s, 60 s, 120 s; a lost probe's permit returns after the timeout.
#[test]
fn model_matches_the_spec_examples() {
    let p = Params {
        failure_threshold: 5,
        cooldown_ms: 30_000,
        doubling: true,
        max_cooldown_ms: 3_600_000,
        max_probes: 1,
        probe_timeout_ms: 30_000,
    };
    let mut m = Model::default();
    let cooldowns: Vec<u64> = (0..3)
        .map(|level| {
            m.level = level;
            m.cooldown(&p)
        })
        .collect();
    assert_eq!(cooldowns, [30_000, 60_000, 120_000]);
    m.level = u32::MAX;
    assert_eq!(m.cooldown(&p), 3_600_000);
    let mut m = Model::default();
    for _ in 0..4 {
        assert!(m.failure(&p, 0).is_empty());
    }
    assert_eq!(m.failure(&p, 0), [(State::Closed, State::Open)]);
    assert!(!m.allow(&p, 29_999).0.0);
    assert_eq!(m.allow(&p, 30_000).0, (true, Some(GRANTED.into())));
    assert_eq!(m.allow(&p, 59_999).0, (false, Some(WAIT.into())));
    assert_eq!(m.allow(&p, 60_000).0, (true, Some(GRANTED.into())));
}

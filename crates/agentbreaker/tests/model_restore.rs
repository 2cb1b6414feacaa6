//! restore(snapshot(x)) behaves as x: a breaker `x` is driven by a random prefix of operations,
//! then copied by every route a snapshot travels — `restore` of the Rust value, `restore_json` of
//! the JSON text, `save` + `load` through a file, and construction with `statePath` on that file —
//! and all copies and `x` are driven by the same random suffix. After every suffix step the copies
//! and `x` must answer the same, emit the same events and hold the same status and snapshot; their
//! lifetime metrics (not part of a snapshot) must move by the same amounts.
//!
//! A snapshot deliberately leaves out a few things (contract §2/§3 and decisions), so the reference for
//! the copies is `x` itself only when none of them matters, and otherwise `x` after
//! `x.restore(x.snapshot())`, with the documented normalization checked explicitly:
//!
//! - FailureBreaker: HALF_OPEN comes back CLOSED with 0 failures and backoff level 0; the
//!   identical-error run in progress is forgotten (it only matters in CLOSED with failures
//!   counted, when the identical-error rule is on); outstanding probe permits are dropped (only
//!   in HALF_OPEN).
//! - StagnationBreaker: HALF_OPEN comes back CLOSED with `consecutiveNoProgress` 0; the step
//!   detectors' recent steps are forgotten. (The error map's eviction order is rebuilt from the
//!   sorted keys; the error pool here is far below the 1024-key cap, where it cannot matter.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use agentbreaker::{
    AgentStep, ErrorMatch, Event, FailureBreaker, FailureConfig, FailureMetrics, IterationMetrics,
    ManualClock, StagnationBreaker, StagnationConfig, State,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

mod support;

/// A listener's view of a breaker.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl Recorder {
    fn listener(&self) -> agentbreaker::Listener {
        let events = Arc::clone(&self.0);
        Arc::new(move |e: &Event| {
            events.lock().unwrap().push(e.clone());
            Ok(())
        })
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Error texts: some share a normalized fingerprint, some differ only in numbers.
const ERRORS: [&str; 5] = [
    "Path not found: Main.Handler",
    "Path not found: Main.Script",
    "timeout after 30s",
    "timeout after 45s",
    "connection refused",
];

// -------------------------------------------------------------------------------------------------
// FailureBreaker

#[derive(Debug, Clone)]
enum FOp {
    Success,
    Failure(usize),
    Allow,
    Reset,
    Advance(u64),
}

fn fop() -> impl Strategy<Value = FOp> {
    prop_oneof![
        3 => Just(FOp::Success),
        8 => (0..ERRORS.len()).prop_map(FOp::Failure),
        6 => Just(FOp::Allow),
        1 => Just(FOp::Reset),
        5 => prop_oneof![0u64..500, 0u64..5_000].prop_map(FOp::Advance),
    ]
}

fn fconfig() -> impl Strategy<Value = FailureConfig> {
    (
        1u32..=5,
        prop_oneof![1 => Just(0u32), 2 => 2u32..=4],
        0u64..3_000,
        prop_oneof![Just(1.0f64), Just(2.0f64), Just(1.5f64)],
        1u32..=3,
        1u64..3_000,
        0u32..=6,
    )
        .prop_map(
            |(threshold, identical, cooldown, multiplier, probes, probe_timeout, history)| {
                FailureConfig {
                    failure_threshold: threshold,
                    warning_threshold: if threshold > 2 {
                        Some(threshold - 1)
                    } else {
                        None
                    },
                    cooldown_ms: cooldown,
                    backoff_multiplier: multiplier,
                    max_cooldown_ms: cooldown * 5,
                    identical_error_threshold: identical,
                    history_limit: history,
                    half_open_max_probes: probes,
                    probe_timeout_ms: probe_timeout,
                    error_match: ErrorMatch::Normalized,
                    state_path: None,
                    ..FailureConfig::default()
                }
            },
        )
}

/// One FailureBreaker and its listener.
struct FCopy {
    name: &'static str,
    breaker: FailureBreaker,
    events: Recorder,
    metrics_at_start: FailureMetrics,
}

impl FCopy {
    fn new(name: &'static str, breaker: FailureBreaker) -> Self {
        let events = Recorder::default();
        breaker.add_listener(events.listener());
        FCopy {
            name,
            metrics_at_start: breaker.metrics(),
            breaker,
            events,
        }
    }

    fn apply(&self, op: &FOp) -> Option<agentbreaker::Permission> {
        match op {
            FOp::Success => self.breaker.record_success(),
            FOp::Failure(i) => self.breaker.record_failure(ERRORS[*i]),
            FOp::Allow => return Some(self.breaker.should_allow_operation()),
            FOp::Reset => self.breaker.reset(),
            FOp::Advance(_) => {}
        }
        None
    }

    /// Lifetime metrics since the copy was made.
    fn metrics_delta(&self) -> [u64; 5] {
        let (m, s) = (self.breaker.metrics(), &self.metrics_at_start);
        [
            m.total_failures - s.total_failures,
            m.total_successes - s.total_successes,
            m.trips - s.trips,
            m.recoveries - s.recoveries,
            m.reopenings - s.reopenings,
        ]
    }
}

fn failure_copies(
    x: &FailureBreaker,
    config: &FailureConfig,
    clock: &Arc<ManualClock>,
    dir: &Path,
) -> Vec<FCopy> {
    let make = |c: FailureConfig| FailureBreaker::with_clock(c, clock.clone()).unwrap();
    let snap = x.snapshot();
    let by_value = make(config.clone());
    by_value.restore(&snap).unwrap();
    let by_json = make(config.clone());
    let text = serde_json::to_string(&snap.to_json()).unwrap();
    by_json
        .restore_json(&serde_json::from_str(&text).unwrap())
        .unwrap();
    let path = dir.join("state.json");
    x.save(&path).unwrap();
    let by_file = make(config.clone());
    assert!(by_file.load(&path).unwrap());
    // A restart on the file with statePath (it then saves its own transitions to another file).
    std::fs::copy(&path, dir.join("restart.json")).unwrap();
    let by_restart = make(FailureConfig {
        state_path: Some(dir.join("restart.json")),
        ..config.clone()
    });
    vec![
        FCopy::new("restore", by_value),
        FCopy::new("restore_json", by_json),
        FCopy::new("save+load", by_file),
        FCopy::new("statePath", by_restart),
    ]
}

/// Compares a copy with the reference after a step: `answers` and `events` are (reference, copy).
fn compare_failure(
    reference: &FCopy,
    copy: &FCopy,
    answers: (
        &Option<agentbreaker::Permission>,
        &Option<agentbreaker::Permission>,
    ),
    reference_events: &[Event],
    ctx: &str,
) -> Result<(), TestCaseError> {
    let ctx = format!("{ctx}, {} vs {}", copy.name, reference.name);
    prop_assert_eq!(answers.1, answers.0, "{}: answer", ctx);
    prop_assert_eq!(copy.events.take(), reference_events, "{}: events", ctx);
    prop_assert_eq!(
        copy.breaker.status(),
        reference.breaker.status(),
        "{}: status",
        ctx
    );
    prop_assert_eq!(
        copy.breaker.snapshot(),
        reference.breaker.snapshot(),
        "{}: snapshot",
        ctx
    );
    prop_assert_eq!(
        copy.metrics_delta(),
        reference.metrics_delta(),
        "{}: metrics since the copy",
        ctx
    );
    Ok(())
}

#[derive(Debug, Default)]
struct FReached {
    as_is: u64,
    normalized_half_open: u64,
    forgotten_runs: u64,
}

/// A prefix that may end by tripping the breaker and letting the cooldown pass, so that the copy
/// is often taken in HALF_OPEN (cooldowns here are at most 15 s).
fn fprefix() -> impl Strategy<Value = Vec<FOp>> {
    (
        prop::collection::vec(fop(), 0..40),
        prop::bool::weighted(0.25),
    )
        .prop_map(|(mut ops, to_half_open)| {
            if to_half_open {
                ops.extend(std::iter::repeat_n(FOp::Failure(4), 5));
                ops.extend([FOp::Advance(15_000), FOp::Allow]);
            }
            ops
        })
}

fn run_failure(
    config: FailureConfig,
    prefix: &[FOp],
    suffix: &[FOp],
    reached: &mut FReached,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::shared(5_000);
    let x = FCopy::new(
        "x",
        FailureBreaker::with_clock(config.clone(), clock.clone()).unwrap(),
    );
    for op in prefix {
        if let FOp::Advance(ms) = op {
            clock.advance(*ms);
        }
        x.apply(op);
    }
    let x = x.breaker;
    let before = x.snapshot();
    let copies = failure_copies(&x, &config, &clock, dir.path());
    // Whether the snapshot leaves out something that still matters.
    let run_matters = config.identical_error_threshold > 0
        && before.state == State::Closed
        && before.consecutive_failures > 0;
    let half_open = before.state == State::HalfOpen;
    if half_open || run_matters {
        x.restore(&before).unwrap();
        if half_open {
            let s = x.snapshot();
            prop_assert_eq!(
                (
                    s.state,
                    s.consecutive_failures,
                    s.backoff_level,
                    s.opened_at
                ),
                (State::Closed, 0, 0, None),
                "HALF_OPEN restores as a fresh CLOSED"
            );
            prop_assert_eq!(
                (s.trips, s.failure_history),
                (before.trips, before.failure_history.clone()),
                "and keeps trips and history"
            );
            reached.normalized_half_open += 1;
        } else {
            prop_assert_eq!(x.snapshot(), before.clone(), "restore of CLOSED keeps all");
            reached.forgotten_runs += 1;
        }
    } else {
        reached.as_is += 1;
    }
    let reference = FCopy::new("x", x);
    for copy in &copies {
        compare_failure(
            &reference,
            copy,
            (&None, &None),
            &[],
            "right after the copy",
        )?;
    }
    for (i, op) in suffix.iter().enumerate() {
        if let FOp::Advance(ms) = op {
            clock.advance(*ms);
        }
        let want = reference.apply(op);
        let want_events = reference.events.take();
        for copy in &copies {
            let got = copy.apply(op);
            compare_failure(
                &reference,
                copy,
                (&want, &got),
                &want_events,
                &format!("suffix step {i} {op:?}"),
            )?;
        }
    }
    Ok(())
}

// -------------------------------------------------------------------------------------------------
// StagnationBreaker

#[derive(Debug, Clone)]
enum SOp {
    Progress { files: u64, tests: u64, output: u64 },
    Error { which: usize, transient: bool },
    Step { which: usize, failed: bool },
    Check,
    Reset,
    Advance(u64),
}

fn sop() -> impl Strategy<Value = SOp> {
    prop_oneof![
        6 => (
            prop_oneof![3 => Just(0u64), 1 => 1u64..3],
            prop_oneof![2 => Just(0u64), 1 => 0u64..6],
            prop_oneof![Just(100u64), 0u64..200],
        )
            .prop_map(|(files, tests, output)| SOp::Progress { files, tests, output }),
        5 => (0..ERRORS.len(), prop::bool::weighted(0.2))
            .prop_map(|(which, transient)| SOp::Error { which, transient }),
        4 => (0usize..3, any::<bool>()).prop_map(|(which, failed)| SOp::Step { which, failed }),
        2 => Just(SOp::Check),
        1 => Just(SOp::Reset),
        2 => (0u64..10_000).prop_map(SOp::Advance),
    ]
}

fn sconfig() -> impl Strategy<Value = StagnationConfig> {
    (1u32..=4, 1u32..=5, 1u32..=100, any::<bool>()).prop_map(
        |(no_progress, same_error, decline, steps)| StagnationConfig {
            no_progress_threshold: no_progress,
            same_error_threshold: same_error,
            output_decline_threshold: decline,
            repeat_threshold: if steps { 3 } else { 0 },
            cycle_repeats: if steps { 2 } else { 0 },
            fail_streak_threshold: if steps { 3 } else { 0 },
            fail_window: if steps { 4 } else { 0 },
            ..StagnationConfig::default()
        },
    )
}

fn apply_stagnation(b: &StagnationBreaker, op: &SOp) -> Option<agentbreaker::StagnationDecision> {
    match op {
        SOp::Progress {
            files,
            tests,
            output,
        } => b.record_progress(IterationMetrics {
            files_changed: *files,
            tests_passing: *tests,
            output_length: *output,
        }),
        SOp::Error { which, transient } => b.record_error(ERRORS[*which], *transient),
        SOp::Step { which, failed } => b.record_step(&AgentStep {
            action: ["read file", "run tests", "edit file"][*which].into(),
            result: if *failed { "error: 3 failed" } else { "ok" }.into(),
            failed: *failed,
        }),
        SOp::Check => return Some(b.check()),
        SOp::Reset => b.reset(),
        SOp::Advance(_) => {}
    }
    None
}

#[derive(Debug, Default)]
struct SReached {
    as_is: u64,
    normalized_half_open: u64,
    forgotten_steps: u64,
}

/// A prefix, and whether to finish it with iterations without progress while the breaker is
/// CLOSED, so that the copy is often taken in HALF_OPEN.
fn sprefix() -> impl Strategy<Value = (Vec<SOp>, bool)> {
    (
        prop::collection::vec(sop(), 0..40),
        prop::bool::weighted(0.25),
    )
}

fn run_stagnation(
    config: StagnationConfig,
    (prefix, to_half_open): &(Vec<SOp>, bool),
    suffix: &[SOp],
    reached: &mut SReached,
) -> Result<(), TestCaseError> {
    let clock = ManualClock::shared(0);
    let make = || StagnationBreaker::with_clock(config.clone(), clock.clone()).unwrap();
    let x = make();
    // Steps recorded since the step history was last emptied (a reset).
    let mut steps_remembered = false;
    for op in prefix {
        if let SOp::Advance(ms) = op {
            clock.advance(*ms);
        }
        apply_stagnation(&x, op);
        match op {
            SOp::Reset => steps_remembered = false,
            SOp::Step { .. } => steps_remembered |= config.repeat_threshold > 0,
            _ => {}
        }
    }
    while *to_half_open && x.state() == State::Closed {
        apply_stagnation(
            &x,
            &SOp::Progress {
                files: 0,
                tests: 0,
                output: 100,
            },
        );
    }
    let before = x.snapshot();
    let by_value = make();
    by_value.restore(&before).unwrap();
    let by_json = make();
    let text = serde_json::to_string(&before.to_json()).unwrap();
    by_json
        .restore_json(&serde_json::from_str(&text).unwrap())
        .unwrap();
    let half_open = before.state == State::HalfOpen;
    if half_open || steps_remembered {
        x.restore(&before).unwrap();
        let s = x.snapshot();
        if half_open {
            prop_assert_eq!(
                (s.state, s.consecutive_no_progress, s.reason.clone()),
                (State::Closed, 0, None),
                "HALF_OPEN restores as CLOSED with no iterations without progress"
            );
            let mut rest = before.clone();
            rest.state = State::Closed;
            rest.consecutive_no_progress = 0;
            rest.reason = None;
            rest.slug = None;
            prop_assert_eq!(s, rest, "and keeps the rest");
            reached.normalized_half_open += 1;
        } else {
            prop_assert_eq!(s, before.clone(), "restore keeps every counter");
            reached.forgotten_steps += 1;
        }
    } else {
        reached.as_is += 1;
    }
    let copies = [("restore", by_value), ("restore_json", by_json)];
    let recorders: Vec<Recorder> = std::iter::once(&x)
        .chain(copies.iter().map(|(_, b)| b))
        .map(|b| {
            let r = Recorder::default();
            b.add_listener(r.listener());
            r
        })
        .collect();
    for (i, op) in suffix.iter().enumerate() {
        if let SOp::Advance(ms) = op {
            clock.advance(*ms);
        }
        let want = apply_stagnation(&x, op);
        let want_events = recorders[0].take();
        for (j, (name, copy)) in copies.iter().enumerate() {
            let ctx = format!("suffix step {i} {op:?}, {name}");
            let got = apply_stagnation(copy, op);
            prop_assert_eq!(&got, &want, "{}: answer", ctx);
            prop_assert_eq!(
                recorders[j + 1].take(),
                want_events.clone(),
                "{}: events",
                ctx
            );
            prop_assert_eq!(copy.status(), x.status(), "{}: status", ctx);
            prop_assert_eq!(copy.check(), x.check(), "{}: check", ctx);
            prop_assert_eq!(copy.snapshot(), x.snapshot(), "{}: snapshot", ctx);
        }
    }
    Ok(())
}

// -------------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(ProptestConfig {
        cases: support::cases(128),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn failure_breaker_restored_from_its_snapshot_behaves_as_itself(
        config in fconfig(),
        prefix in fprefix(),
        suffix in prop::collection::vec(fop(), 1..40),
    ) {
        run_failure(config, &prefix, &suffix, &mut FReached::default())?;
    }

    #[test]
    fn stagnation_breaker_restored_from_its_snapshot_behaves_as_itself(
        config in sconfig(),
        prefix in sprefix(),
        suffix in prop::collection::vec(sop(), 1..40),
    ) {
        run_stagnation(config, &prefix, &suffix, &mut SReached::default())?;
    }
}

/// Both the exact case and each documented normalization are reached often (fixed seed).
#[test]
fn generators_reach_every_kind_of_copy() {
    let mut f = FReached::default();
    let fs = (fconfig(), fprefix(), prop::collection::vec(fop(), 1..40));
    support::sample(&fs, 150, |(c, p, q)| {
        run_failure(c, &p, &q, &mut f).unwrap()
    });
    let mut s = SReached::default();
    let ss = (sconfig(), sprefix(), prop::collection::vec(sop(), 1..40));
    support::sample(&ss, 150, |(c, p, q)| {
        run_stagnation(c, &p, &q, &mut s).unwrap()
    });
    eprintln!("{f:?}\n{s:?}");
    support::assert_reached(
        10,
        [
            ("failure: copies of x as it is", f.as_is),
            ("failure: HALF_OPEN normalized", f.normalized_half_open),
            ("failure: identical-error run forgotten", f.forgotten_runs),
            ("stagnation: copies of x as it is", s.as_is),
            ("stagnation: HALF_OPEN normalized", s.normalized_half_open),
            ("stagnation: recent steps forgotten", s.forgotten_steps),
        ],
    );
}

//! Threads racing one breaker through many trip / probe / close cycles (contract §0: "the
//! Nth failure opens the circuit exactly once and emits exactly one event"; decisions
//! "Listeners"): every transition is counted exactly once by the listener and by the metrics,
//! totals are exact, listeners that call back in (and even change the state) never deadlock, the
//! state file written from many threads ends at the last transition, and a BudgetBreaker task
//! raced by `ingest` and `tick` halts exactly once.
//!
//! Each test releases its threads together with a `Barrier` and runs under a watchdog that fails
//! it instead of letting a deadlock hang the run. `AGENTBREAKER_CONCURRENCY_ROUNDS` sets the
//! operations per thread (default 2000); `make reliability-rust-race` runs this binary under
//! valgrind's helgrind and DRD with fewer rounds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use agentbreaker::{
    BudgetBreaker, BudgetConfig, CallError, Event, FailureBreaker, FailureConfig, FailureSnapshot,
    ManualClock, State,
};
use serde_json::json;

const THREADS: usize = 8;
/// Generous: valgrind runs these tests 50 times slower on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(600);

fn rounds() -> usize {
    match std::env::var("AGENTBREAKER_CONCURRENCY_ROUNDS") {
        Ok(v) => v.trim().parse().expect("a whole number"),
        Err(_) => 2000,
    }
}

/// Runs `f` on its own thread; fails the test if it has not finished within `DEADLINE`.
fn watchdog<F: FnOnce() + Send + 'static>(what: &str, f: F) {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
            unreachable!("{what}: the worker ended without reporting");
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished after {DEADLINE:?} (deadlock?)")
        }
    }
}

/// Runs `f(thread)` on `THREADS` threads released together; returns their results.
fn together<T: Send + 'static>(f: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let barrier = Arc::new(Barrier::new(THREADS));
    let f = Arc::new(f);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (barrier, f) = (Arc::clone(&barrier), Arc::clone(&f));
            thread::spawn(move || {
                barrier.wait();
                f(t)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Transitions seen by a listener, by (from, to).
type Transitions = Arc<Mutex<HashMap<(State, State), u64>>>;

fn count(transitions: &Transitions, from: State, to: State) -> u64 {
    transitions
        .lock()
        .unwrap()
        .get(&(from, to))
        .copied()
        .unwrap_or(0)
}

/// What one worker did.
#[derive(Debug, Default, Clone, Copy)]
struct Done {
    failures: u64,
    successes: u64,
    refused: u64,
}

/// Eight threads flap one breaker (cooldown 0, so every permission check in OPEN starts a probe)
/// with failures, successes, permission checks and guarded calls; a listener counts every
/// transition, reads the breaker back on each one and itself records a success on every tenth
/// opening. The listener's counts equal the metrics exactly: one CLOSED->OPEN event per trip,
/// one HALF_OPEN->OPEN per reopening, one HALF_OPEN->CLOSED per recovery, and one OPEN->HALF_OPEN
/// per probe cycle; lifetime totals are the sums of what every thread (and the listener) recorded.
#[test]
fn trip_cycles_under_contention_count_every_transition_once() {
    watchdog("trip cycles", || {
        let rounds = rounds();
        let breaker = Arc::new(
            FailureBreaker::with_clock(
                FailureConfig {
                    failure_threshold: 3,
                    warning_threshold: Some(2),
                    cooldown_ms: 0,
                    half_open_max_probes: 2,
                    ..FailureConfig::default()
                },
                ManualClock::shared(0),
            )
            .unwrap(),
        );
        let transitions: Transitions = Arc::default();
        let listener_successes = Arc::new(AtomicU64::new(0));
        let warnings = Arc::new(AtomicU64::new(0));
        {
            let weak = Arc::downgrade(&breaker);
            let (transitions, listener_successes, warnings) = (
                Arc::clone(&transitions),
                Arc::clone(&listener_successes),
                Arc::clone(&warnings),
            );
            breaker.add_listener(Arc::new(move |e: &Event| {
                let b = weak.upgrade().unwrap();
                match e {
                    Event::StateChange { from, to, .. } => {
                        // Calling back in: reads, and sometimes a write.
                        let _ = b.status();
                        let _ = b.state();
                        let _ = b.metrics();
                        let n = {
                            let mut t = transitions.lock().unwrap();
                            let n = t.entry((*from, *to)).or_insert(0);
                            *n += 1;
                            *n
                        };
                        if (*from, *to) == (State::Closed, State::Open) && n % 10 == 0 {
                            b.record_success();
                            listener_successes.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Event::Warning { .. } => {
                        warnings.fetch_add(1, Ordering::SeqCst);
                    }
                    Event::Halt { .. } | Event::Verdict { .. } => unreachable!(),
                }
                Ok(())
            }));
        }
        let b = Arc::clone(&breaker);
        let done = together(move |t| {
            let mut d = Done::default();
            // A fixed pseudo-random order per thread (a fixed cycle would always spend the probe
            // permits on permission checks and then fail).
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
            for i in 0..rounds {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                match seed % 9 {
                    0..=2 => {
                        b.record_failure(if i % 2 == 0 { "flap" } else { "flop" });
                        d.failures += 1;
                    }
                    3 | 4 => {
                        b.record_success();
                        d.successes += 1;
                    }
                    5 | 6 => {
                        b.should_allow_operation();
                    }
                    _ => match b.call(|| if i % 3 == 0 { Ok(()) } else { Err("boom") }) {
                        Ok(()) => d.successes += 1,
                        Err(CallError::Failed(_)) => d.failures += 1,
                        Err(CallError::Rejected(e)) => {
                            assert_eq!(e.code(), "CIRCUIT_OPEN");
                            d.refused += 1;
                        }
                    },
                }
            }
            d
        });
        let failures: u64 = done.iter().map(|d| d.failures).sum();
        let successes: u64 = done.iter().map(|d| d.successes).sum();
        let m = breaker.metrics();
        let final_state = breaker.state();
        assert_eq!(m.total_failures, failures);
        assert_eq!(
            m.total_successes,
            successes + listener_successes.load(Ordering::SeqCst)
        );
        assert_eq!(count(&transitions, State::Closed, State::Open), m.trips);
        assert_eq!(
            count(&transitions, State::HalfOpen, State::Open),
            m.reopenings
        );
        assert_eq!(
            count(&transitions, State::HalfOpen, State::Closed),
            m.recoveries
        );
        assert_eq!(
            count(&transitions, State::Open, State::HalfOpen),
            m.recoveries + m.reopenings + u64::from(final_state == State::HalfOpen)
        );
        let total: u64 = transitions.lock().unwrap().values().sum();
        assert_eq!(
            total,
            m.trips
                + m.reopenings
                + m.recoveries
                + count(&transitions, State::Open, State::HalfOpen),
            "no other transitions: {:?}",
            transitions.lock().unwrap()
        );
        assert!(warnings.load(Ordering::SeqCst) > 0);
        assert!(m.trips >= 10, "the breaker should have flapped: {m:?}");
        assert_eq!(breaker.listener_errors(), 0);
        eprintln!(
            "trip cycles: {THREADS} threads x {rounds} ops: {} trips, {} recoveries, {} \
             reopenings, {failures} failures, {successes} successes",
            m.trips, m.recoveries, m.reopenings
        );
    });
}

/// Eight threads flap a breaker with `statePath`: each transition saves from whichever thread
/// caused it, concurrently with the others. Afterwards the file holds the state of the last
/// transition (a stale snapshot never overwrote a newer one), no save failed, and no temporary
/// file is left.
#[test]
fn state_file_written_from_many_threads_ends_at_the_last_transition() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let config = FailureConfig {
        failure_threshold: 2,
        cooldown_ms: 0,
        state_path: Some(path.clone()),
        ..FailureConfig::default()
    };
    let dir_path = dir.path().to_path_buf();
    watchdog("state file", move || {
        // Saves fsync: fewer rounds than the in-memory tests.
        let rounds = rounds().div_ceil(20).max(10);
        let breaker =
            Arc::new(FailureBreaker::with_clock(config.clone(), ManualClock::shared(0)).unwrap());
        let failed_saves = Arc::new(AtomicU64::new(0));
        {
            let failed_saves = Arc::clone(&failed_saves);
            breaker.add_listener(Arc::new(move |e: &Event| {
                if matches!(e, Event::Warning { message, .. } if message.starts_with("Could not save"))
                {
                    failed_saves.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            }));
        }
        let b = Arc::clone(&breaker);
        together(move |t| {
            for i in 0..rounds {
                match (t + i) % 4 {
                    0 | 1 => b.record_failure("flap"),
                    2 => {
                        b.should_allow_operation();
                    }
                    _ => b.record_success(),
                }
            }
        });
        assert_eq!(failed_saves.load(Ordering::SeqCst), 0);
        let on_disk = FailureSnapshot::from_json(
            &serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap(),
        )
        .unwrap();
        let now = breaker.snapshot();
        // Plain failures change the count without a transition (and without a save): compare
        // what a transition sets.
        assert_eq!(
            (
                on_disk.state,
                on_disk.opened_at,
                on_disk.backoff_level,
                on_disk.trips
            ),
            (now.state, now.opened_at, now.backoff_level, now.trips)
        );
        assert!(breaker.metrics().trips > 0);
        let names: Vec<String> = std::fs::read_dir(&dir_path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["state.json"]);
    });
}

/// A BudgetBreaker: eight threads each feed their own task tool calls while a ticker thread moves
/// the clock past the duration limit and ticks. Every task halts exactly once — by its tool-call
/// cap in `ingest` or by its duration in `tick` or `ingest`, whichever comes first — and the
/// listener receives exactly one halt event per task.
#[test]
fn budget_task_raced_by_ingest_and_tick_halts_once() {
    watchdog("budget ingest and tick", || {
        let rounds = rounds();
        for round in 0..5u64 {
            let clock = ManualClock::shared(0);
            let breaker = Arc::new(
                BudgetBreaker::with_clock(
                    BudgetConfig {
                        max_tool_calls_per_task: (rounds as u64 / 2).max(2),
                        max_task_duration_secs: 1,
                        ..BudgetConfig::default()
                    },
                    clock.clone(),
                )
                .unwrap(),
            );
            let halts_seen: Arc<Mutex<Vec<String>>> = Arc::default();
            {
                let halts_seen = Arc::clone(&halts_seen);
                breaker.add_listener(Arc::new(move |e: &Event| {
                    if let Event::Halt { halt, .. } = e {
                        halts_seen.lock().unwrap().push(halt.task_id.clone());
                    }
                    Ok(())
                }));
            }
            for t in 0..THREADS {
                breaker
                    .ingest(&json!({"type": "heartbeat", "taskId": format!("t{t}"), "phase": "starting"}))
                    .unwrap();
            }
            let b = Arc::clone(&breaker);
            let ticker_clock = clock.clone();
            let results = together(move |t| {
                let mut halts = Vec::new();
                if t == 0 {
                    // The ticker: the clock passes the 1 s limit part-way through.
                    for i in 0..rounds {
                        if i == rounds / (2 + round as usize) {
                            ticker_clock.advance(1_001);
                        }
                        halts.extend(b.tick().into_iter().map(|h| h.task_id));
                    }
                } else {
                    let event =
                        json!({"type": "tool_use", "name": "Bash", "taskId": format!("t{t}")});
                    for _ in 0..rounds {
                        if let Some(h) = b.ingest(&event).unwrap() {
                            halts.push(h.task_id);
                        }
                    }
                }
                halts
            });
            // The ticker's own task t0 got no tool calls: it halts by duration in a tick.
            let mut returned: Vec<String> = results.into_iter().flatten().collect();
            returned.sort();
            let want: Vec<String> = (0..THREADS).map(|t| format!("t{t}")).collect();
            assert_eq!(
                returned, want,
                "round {round}: each task halts exactly once"
            );
            let mut delivered = halts_seen.lock().unwrap().clone();
            delivered.sort();
            assert_eq!(delivered, want, "round {round}: one halt event per halt");
            assert!(breaker.snapshot().tasks.iter().all(|t| t.halted));
        }
    });
}

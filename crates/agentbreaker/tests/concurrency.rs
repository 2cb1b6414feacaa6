//! Threaded tests: every breaker is shared across threads (`Send + Sync`, `&self` methods) and
//! under concurrent use thresholds never overshoot, each transition emits exactly one event, and
//! listeners run outside the internal locks so they may call back in (contract §0, section 2,
//! decisions "Listeners" and "Probe permits").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use agentbreaker::{
    Action, BudgetBreaker, BudgetConfig, Event, ExitReason, ExitStrategy, FailureBreaker,
    FailureConfig, IterationMetrics, Listener, Listeners, Loop, LoopConfig, ManualClock,
    Observation, Outcome, StagnationBreaker, StagnationConfig, State, StrategyConfig, SystemClock,
    fingerprint::ErrorMatch,
};
use serde_json::json;

/// Threads per scenario.
const THREADS: usize = 8;

/// A listener that stores every event it receives.
fn recorder() -> (Listener, Arc<Mutex<Vec<Event>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let listener: Listener = Arc::new(move |e: &Event| {
        sink.lock().unwrap().push(e.clone());
        Ok(())
    });
    (listener, seen)
}

fn state_changes(events: &[Event]) -> Vec<(State, State, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::StateChange {
                from, to, reason, ..
            } => Some((*from, *to, reason.clone())),
            _ => None,
        })
        .collect()
}

fn warnings(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Runs `f(thread_index)` on `THREADS` threads released together by a barrier and returns their
/// results in thread order.
fn run_together<T, F>(threads: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> T + Send + Sync + 'static,
{
    let barrier = Arc::new(Barrier::new(threads));
    let f = Arc::new(f);
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let f = Arc::clone(&f);
            thread::spawn(move || {
                barrier.wait();
                f(i)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Runs `f` on its own thread and fails the test when it has not finished after `secs` seconds
/// (a deadlock would otherwise hang the test run).
fn within_deadline<F>(secs: u64, what: &str, f: F)
where
    F: FnOnce() + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: surface its panic.
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
            panic!("{what}: worker ended without reporting");
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: did not finish within {secs} s (deadlock?)")
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Compile-time thread safety

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn every_public_breaker_type_is_send_and_sync() {
    assert_send_sync::<FailureBreaker>();
    assert_send_sync::<StagnationBreaker>();
    assert_send_sync::<BudgetBreaker>();
    assert_send_sync::<ExitStrategy>();
    assert_send_sync::<Loop>();
    assert_send_sync::<ManualClock>();
    assert_send_sync::<SystemClock>();
    assert_send_sync::<Listeners>();
    assert_send_sync::<Arc<dyn agentbreaker::Clock>>();
    assert_send_sync::<agentbreaker::Error>();
    assert_send_sync::<Event>();
    assert_send_sync::<FailureConfig>();
    assert_send_sync::<StagnationConfig>();
    assert_send_sync::<BudgetConfig>();
    assert_send_sync::<LoopConfig>();
    assert_send_sync::<StrategyConfig>();
}

// -------------------------------------------------------------------------------------------------
// FailureBreaker

/// N threads × K failures on one breaker with threshold T and warning threshold W: the count is
/// exactly N×K, the circuit opens exactly once (at exactly T) and warns exactly once.
#[test]
fn failure_threshold_trips_exactly_once_under_contention() {
    const PER_THREAD: usize = 25;
    const THRESHOLD: u32 = 50;
    const WARNING: u32 = 20;
    const TOTAL: u64 = (THREADS * PER_THREAD) as u64;
    for iteration in 0..200 {
        let clock = ManualClock::shared(1_000);
        let config = FailureConfig {
            failure_threshold: THRESHOLD,
            warning_threshold: Some(WARNING),
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock.clone()).unwrap());
        let (listener, seen) = recorder();
        breaker.add_listener(listener);
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |t| {
            for k in 0..PER_THREAD {
                b.record_failure(&format!("thread {t} failure {k}"));
            }
        });

        let status = breaker.status();
        assert_eq!(status.state, State::Open, "iteration {iteration}");
        assert_eq!(status.consecutive_failures, TOTAL, "iteration {iteration}");
        assert_eq!(status.trips, 1, "iteration {iteration}");
        assert_eq!(status.opened_at, Some(1_000));
        // historyLimit 100 (default): the newest 100 of the 200 failures.
        assert_eq!(status.failure_history.len(), 100);
        // Only the newest 100 are kept (failures 101..=200), all recorded after the 50th failure
        // opened the circuit.
        assert!(
            status
                .failure_history
                .iter()
                .all(|r| r.state == State::Open),
            "iteration {iteration}"
        );

        let m = breaker.metrics();
        assert_eq!(m.total_failures, TOTAL);
        assert_eq!(m.total_successes, 0);
        assert_eq!(m.trips, 1);
        assert_eq!(m.reopenings, 0);
        assert_eq!(m.recoveries, 0);
        assert_eq!(m.mtbf_ms, Some(0.0)); // the clock never moved

        let events = seen.lock().unwrap().clone();
        let changes = state_changes(&events);
        assert_eq!(
            changes,
            vec![(
                State::Closed,
                State::Open,
                "50 consecutive failures detected".to_string()
            )],
            "iteration {iteration}"
        );
        assert_eq!(
            warnings(&events),
            vec!["Warning: 20 consecutive failures. 30 more will open circuit.".to_string()],
            "iteration {iteration}"
        );
        assert_eq!(events.len(), 2);
        assert_eq!(breaker.listener_errors(), 0);
    }
}

/// With a history large enough to keep every failure, exactly T entries carry `state: CLOSED`
/// (the T-th failure is recorded with the state before its transition) and the rest `OPEN`.
#[test]
fn failure_history_states_are_consistent_under_contention() {
    const PER_THREAD: usize = 30;
    const THRESHOLD: u32 = 37;
    for _ in 0..100 {
        let clock = ManualClock::shared(0);
        let config = FailureConfig {
            failure_threshold: THRESHOLD,
            history_limit: 1_000,
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock).unwrap());
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |t| {
            for k in 0..PER_THREAD {
                b.record_failure(&format!("t{t}-{k}"));
            }
        });
        let history = breaker.status().failure_history;
        assert_eq!(history.len(), THREADS * PER_THREAD);
        let closed = history.iter().filter(|r| r.state == State::Closed).count();
        assert_eq!(closed, THRESHOLD as usize);
        // CLOSED entries come first, then OPEN: the order of the ring buffer is the order of the
        // lock, and the state only moves CLOSED -> OPEN once.
        assert!(
            history[..THRESHOLD as usize]
                .iter()
                .all(|r| r.state == State::Closed)
        );
        assert!(
            history[THRESHOLD as usize..]
                .iter()
                .all(|r| r.state == State::Open)
        );
        // Every failure text appears exactly once.
        let texts: BTreeSet<&str> = history.iter().map(|r| r.error.as_str()).collect();
        assert_eq!(texts.len(), THREADS * PER_THREAD);
    }
}

/// In HALF_OPEN with halfOpenMaxProbes = P and a frozen clock (no probe times out), exactly P
/// permits are granted across all threads, and OPEN -> HALF_OPEN happens exactly once.
#[test]
fn half_open_grants_exactly_max_probes_across_threads() {
    const PROBES: u32 = 3;
    const CALLS_PER_THREAD: usize = 50;
    for iteration in 0..200 {
        let clock = ManualClock::shared(0);
        let config = FailureConfig {
            failure_threshold: 1,
            cooldown_ms: 1_000,
            half_open_max_probes: PROBES,
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock.clone()).unwrap());
        breaker.record_failure("boom");
        assert_eq!(breaker.state(), State::Open);
        clock.set(1_000);
        let (listener, seen) = recorder();
        breaker.add_listener(listener);

        let b = Arc::clone(&breaker);
        let results = run_together(THREADS, move |_| {
            (0..CALLS_PER_THREAD)
                .map(|_| b.should_allow_operation())
                .collect::<Vec<_>>()
        });
        let all: Vec<_> = results.into_iter().flatten().collect();
        assert_eq!(all.len(), THREADS * CALLS_PER_THREAD);
        let allowed = all.iter().filter(|p| p.allowed).count();
        assert_eq!(allowed, PROBES as usize, "iteration {iteration}");
        let first = all
            .iter()
            .filter(|p| {
                p.message.as_deref() == Some("Circuit breaker testing - one operation allowed")
            })
            .count();
        let more = all
            .iter()
            .filter(|p| {
                p.message.as_deref()
                    == Some("Circuit breaker testing - success will close, failure will re-open")
            })
            .count();
        let waiting = all
            .iter()
            .filter(|p| {
                !p.allowed
                    && p.message.as_deref()
                        == Some("Circuit breaker testing - waiting for the test operation's result")
            })
            .count();
        assert_eq!(first, 1, "iteration {iteration}");
        assert_eq!(more, PROBES as usize - 1, "iteration {iteration}");
        assert_eq!(
            waiting,
            all.len() - PROBES as usize,
            "iteration {iteration}"
        );

        assert_eq!(breaker.state(), State::HalfOpen);
        let changes = state_changes(&seen.lock().unwrap());
        assert_eq!(
            changes,
            vec![(State::Open, State::HalfOpen, "Cooldown expired".to_string())]
        );
    }
}

/// Threads racing the probe results: the first result decides, exactly one HALF_OPEN -> CLOSED
/// (or -> OPEN) transition happens, and later results do not transition again.
#[test]
fn concurrent_probe_results_transition_once() {
    for iteration in 0..200 {
        let clock = ManualClock::shared(0);
        let config = FailureConfig {
            failure_threshold: 1,
            cooldown_ms: 10,
            half_open_max_probes: THREADS as u32,
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock.clone()).unwrap());
        breaker.record_failure("x");
        clock.set(10);
        for _ in 0..THREADS {
            assert!(breaker.should_allow_operation().allowed);
        }
        let (listener, seen) = recorder();
        breaker.add_listener(listener);
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |_| b.record_success());
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(
            state_changes(&seen.lock().unwrap()),
            vec![(
                State::HalfOpen,
                State::Closed,
                "Test operation succeeded".to_string()
            )],
            "iteration {iteration}"
        );
        let m = breaker.metrics();
        assert_eq!(m.recoveries, 1);
        assert_eq!(m.total_successes, THREADS as u64);
        assert_eq!(m.recovery_rate, Some(1.0));
    }
}

/// Many threads mixing successes and failures on a breaker that never opens: the lifetime totals
/// are exact and nothing transitions.
#[test]
fn mixed_successes_and_failures_keep_exact_totals() {
    const OPS_PER_THREAD: u64 = 2_000;
    let clock = ManualClock::shared(0);
    let config = FailureConfig {
        failure_threshold: u32::MAX,
        warning_threshold: Some(0),
        ..FailureConfig::default()
    };
    let breaker = Arc::new(FailureBreaker::with_clock(config, clock).unwrap());
    let (listener, seen) = recorder();
    breaker.add_listener(listener);
    let b = Arc::clone(&breaker);
    run_together(THREADS, move |t| {
        // Thread t records a failure on every op whose index is not a multiple of t + 2.
        let mut failures = 0u64;
        for i in 0..OPS_PER_THREAD {
            if i % (t as u64 + 2) == 0 {
                b.record_success();
            } else {
                b.record_failure("flaky");
                failures += 1;
            }
            assert!(b.should_allow_operation().allowed);
        }
        failures
    });
    let expected_successes: u64 = (0..THREADS as u64)
        .map(|t| OPS_PER_THREAD.div_ceil(t + 2))
        .sum();
    let expected_failures = THREADS as u64 * OPS_PER_THREAD - expected_successes;
    let m = breaker.metrics();
    assert_eq!(m.total_successes, expected_successes);
    assert_eq!(m.total_failures, expected_failures);
    assert_eq!(m.trips, 0);
    assert_eq!(breaker.state(), State::Closed);
    assert!(breaker.status().consecutive_failures <= expected_failures);
    assert!(seen.lock().unwrap().is_empty());
}

/// Failures while OPEN from many threads keep counting exactly and never re-emit a transition.
#[test]
fn failures_while_open_never_transition_again() {
    let clock = ManualClock::shared(0);
    let config = FailureConfig {
        failure_threshold: 2,
        ..FailureConfig::default()
    };
    let breaker = Arc::new(FailureBreaker::with_clock(config, clock).unwrap());
    breaker.record_failure("a");
    breaker.record_failure("a");
    let (listener, seen) = recorder();
    breaker.add_listener(listener);
    let b = Arc::clone(&breaker);
    run_together(THREADS, move |_| {
        for _ in 0..500 {
            b.record_failure("a");
            assert!(!b.should_allow_operation().allowed);
        }
    });
    assert_eq!(
        breaker.status().consecutive_failures,
        2 + 500 * THREADS as u64
    );
    assert_eq!(breaker.metrics().trips, 1);
    assert!(seen.lock().unwrap().is_empty());
}

/// The identical-error rule under contention: many threads failing with texts that share one
/// normalized fingerprint trip the circuit exactly once.
#[test]
fn identical_error_rule_trips_once_under_contention() {
    for _ in 0..100 {
        let clock = ManualClock::shared(0);
        let config = FailureConfig {
            failure_threshold: 1_000,
            identical_error_threshold: 10,
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock).unwrap());
        let (listener, seen) = recorder();
        breaker.add_listener(listener);
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |t| {
            for k in 0..5 {
                b.record_failure(&format!("timeout after {t}{k} ms"));
            }
        });
        let changes = state_changes(&seen.lock().unwrap());
        assert_eq!(changes.len(), 1);
        assert_eq!((changes[0].0, changes[0].1), (State::Closed, State::Open));
        assert!(
            changes[0]
                .2
                .starts_with("Same error repeated 10 times: \"timeout after "),
            "{}",
            changes[0].2
        );
        assert_eq!(breaker.metrics().trips, 1);
        assert_eq!(breaker.status().consecutive_failures, 40);
    }
}

// -------------------------------------------------------------------------------------------------
// StagnationBreaker

/// Threads recording the same error (same normalized fingerprint, different numbers): exactly one
/// stateChange to OPEN, and the final count is exact.
#[test]
fn stagnation_same_error_opens_once_with_exact_counts() {
    const PER_THREAD: u64 = 40;
    const THRESHOLD: u32 = 100;
    for iteration in 0..200 {
        let clock = ManualClock::shared(0);
        let config = StagnationConfig {
            same_error_threshold: THRESHOLD,
            ..StagnationConfig::default()
        };
        let breaker = Arc::new(StagnationBreaker::with_clock(config, clock).unwrap());
        let (listener, seen) = recorder();
        breaker.add_listener(listener);
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |t| {
            for k in 0..PER_THREAD {
                b.record_error(&format!("Error at line {t}:{k}: undefined value"), false);
                // Transient errors never count, even interleaved.
                b.record_error("rate limited", true);
            }
        });
        let status = breaker.status();
        assert_eq!(status.state, State::Open);
        assert_eq!(
            status.error_counts.into_iter().collect::<Vec<_>>(),
            vec![(
                "Error at line #: undefined value".to_string(),
                THREADS as u64 * PER_THREAD
            )],
            "iteration {iteration}"
        );
        let changes = state_changes(&seen.lock().unwrap());
        assert_eq!(changes.len(), 1, "iteration {iteration}");
        assert_eq!((changes[0].0, changes[0].1), (State::Closed, State::Open));
        assert!(
            changes[0]
                .2
                .starts_with("Same error repeated 100 times: \"Error at line "),
            "{}",
            changes[0].2
        );
        let check = breaker.check();
        assert!(!check.allow_continue);
        assert_eq!(check.reason.as_deref(), Some(changes[0].2.as_str()));
    }
}

/// Threads recording iterations without progress: CLOSED -> HALF_OPEN exactly once at the
/// threshold, the next iteration (no progress) -> OPEN exactly once; the counter is exact.
#[test]
fn stagnation_no_progress_transitions_once_each() {
    const PER_THREAD: u64 = 50;
    for _ in 0..100 {
        let clock = ManualClock::shared(0);
        let breaker =
            Arc::new(StagnationBreaker::with_clock(StagnationConfig::default(), clock).unwrap());
        let (listener, seen) = recorder();
        breaker.add_listener(listener);
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |_| {
            for _ in 0..PER_THREAD {
                b.record_progress(IterationMetrics {
                    files_changed: 0,
                    tests_passing: 0,
                    output_length: 100,
                });
            }
        });
        let status = breaker.status();
        assert_eq!(status.consecutive_no_progress, THREADS as u64 * PER_THREAD);
        assert_eq!(status.state, State::Open);
        assert_eq!(status.output_trend, vec![100; 10]);
        // Listeners run outside the lock, so two transitions made by different threads may be
        // delivered in either order; each is delivered exactly once.
        let mut changes = state_changes(&seen.lock().unwrap());
        changes.sort_by_key(|c| c.2.clone());
        assert_eq!(
            changes,
            vec![
                (
                    State::Closed,
                    State::HalfOpen,
                    "No progress in 3 consecutive iterations".to_string()
                ),
                (
                    State::HalfOpen,
                    State::Open,
                    "No progress in 4 consecutive iterations".to_string()
                ),
            ]
        );
    }
}

// -------------------------------------------------------------------------------------------------
// BudgetBreaker

fn tool_use(task: &str) -> serde_json::Value {
    json!({"type": "tool_use", "taskId": task, "name": "bash", "input": {"cmd": "ls"}})
}

/// Threads ingesting tool_use events for one task with maxToolCallsPerTask M: exactly one halt,
/// the one of the (M+1)-th call.
#[test]
fn budget_tool_cap_halts_exactly_once_for_a_shared_task() {
    const PER_THREAD: usize = 20;
    const CAP: u64 = 100;
    for iteration in 0..200 {
        let clock = ManualClock::shared(0);
        let config = BudgetConfig {
            max_tool_calls_per_task: CAP,
            ..BudgetConfig::default()
        };
        let breaker = Arc::new(BudgetBreaker::with_clock(config, clock).unwrap());
        let (listener, seen) = recorder();
        breaker.add_listener(listener);
        let b = Arc::clone(&breaker);
        let halts: Vec<_> = run_together(THREADS, move |_| {
            (0..PER_THREAD)
                .filter_map(|_| b.ingest(&tool_use("t1")).unwrap())
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect();
        assert_eq!(halts.len(), 1, "iteration {iteration}");
        let h = halts[0].to_json();
        assert_eq!(h["kind"], "ToolCallLimit");
        assert_eq!(h["slug"], "tool_call_limit");
        assert_eq!(h["taskId"], "t1");
        assert_eq!(h["actual"], 101);
        assert_eq!(h["limit"], 100);
        assert_eq!(h["message"], "tool calls: 101 of 100");

        let snap = breaker.snapshot();
        assert_eq!(snap.tasks.len(), 1);
        assert_eq!(snap.tasks[0].task_id, "t1");
        // Events after the halt are ignored: the count stops at the halting call.
        assert_eq!(snap.tasks[0].tool_calls, CAP + 1);
        assert!(snap.tasks[0].halted);

        let events = seen.lock().unwrap().clone();
        assert_eq!(events.len(), 1);
        assert!(matches!(&events[0], Event::Halt { halt, at_ms: 0 } if *halt == halts[0]));
    }
}

/// Distinct taskIds (parallel siblings): each thread's task has its own counter and gets its own
/// halt at its own (M+1)-th call.
#[test]
fn budget_parallel_siblings_keep_separate_counters() {
    const CAP: u64 = 30;
    for _ in 0..100 {
        let clock = ManualClock::shared(0);
        let config = BudgetConfig {
            max_tool_calls_per_task: CAP,
            ..BudgetConfig::default()
        };
        let breaker = Arc::new(BudgetBreaker::with_clock(config, clock).unwrap());
        let b = Arc::clone(&breaker);
        let per_thread = run_together(THREADS, move |t| {
            let task = format!("task-{t}");
            let results: Vec<_> = (0..=CAP)
                .map(|_| b.ingest(&tool_use(&task)).unwrap())
                .collect();
            (task, results)
        });
        for (task, results) in &per_thread {
            let (last, before) = results.split_last().unwrap();
            assert!(before.iter().all(Option::is_none), "{task} halted early");
            let halt = last.as_ref().expect("the (M+1)-th call halts").to_json();
            assert_eq!(halt["taskId"], task.as_str());
            assert_eq!(halt["actual"], CAP + 1);
        }
        let snap = breaker.snapshot();
        assert_eq!(snap.tasks.len(), THREADS);
        for task in &snap.tasks {
            assert_eq!(task.tool_calls, CAP + 1);
            assert!(task.halted);
        }
        assert!(snap.stack.is_empty());
    }
}

/// Tokens spent from many threads sum exactly (integer cents, so float addition is exact) and
/// the spend halt fires once.
#[test]
fn budget_spend_halts_exactly_once() {
    for _ in 0..100 {
        let clock = ManualClock::shared(0);
        let config = BudgetConfig {
            max_token_spend_cents_per_task: 100,
            ..BudgetConfig::default()
        };
        let breaker = Arc::new(BudgetBreaker::with_clock(config, clock).unwrap());
        let b = Arc::clone(&breaker);
        // 10 000 output tokens at 1500 cents per million = 15 cents per event.
        let halts: Vec<_> = run_together(THREADS, move |_| {
            (0..4)
                .filter_map(|_| {
                    b.ingest(&json!({"type": "usage", "taskId": "shared", "model": "x",
                        "usage": {"output_tokens": 10_000}}))
                        .unwrap()
                })
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect();
        assert_eq!(halts.len(), 1);
        let h = halts[0].to_json();
        assert_eq!(h["kind"], "TokenSpendLimit");
        // The first total above 100 cents is 7 × 15 = 105.
        assert_eq!(h["actualCents"], 105.0);
        assert_eq!(h["message"], "token spend: 105¢ of 100¢");
    }
}

// -------------------------------------------------------------------------------------------------
// Listeners calling back in

/// A FailureBreaker listener that calls getStatus, shouldAllowOperation and recordSuccess from
/// inside the callback does not deadlock, and sees the state after the transition.
#[test]
fn failure_listener_may_call_back_into_the_breaker() {
    within_deadline(5, "failure listener re-entry", || {
        let clock = ManualClock::shared(0);
        let config = FailureConfig {
            failure_threshold: 3,
            warning_threshold: Some(2),
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock).unwrap());
        let observed = Arc::new(Mutex::new(Vec::new()));
        let weak = Arc::downgrade(&breaker);
        let obs = Arc::clone(&observed);
        breaker.add_listener(Arc::new(move |e: &Event| {
            let b = weak.upgrade().unwrap();
            let status = b.status();
            let permission = b.should_allow_operation();
            if let Event::StateChange {
                to: State::Open, ..
            } = e
            {
                b.record_success();
            }
            obs.lock().unwrap().push((
                status.state,
                status.consecutive_failures,
                permission.allowed,
            ));
            Ok(())
        }));
        breaker.record_failure("a");
        breaker.record_failure("a"); // warning, state still CLOSED
        breaker.record_failure("a"); // opens; the listener zeroes the count
        assert_eq!(
            *observed.lock().unwrap(),
            vec![(State::Closed, 2, true), (State::Open, 3, false)]
        );
        let status = breaker.status();
        assert_eq!(status.state, State::Open);
        assert_eq!(status.consecutive_failures, 0);
        assert_eq!(breaker.metrics().total_successes, 1);
        assert_eq!(breaker.listener_errors(), 0);
    });
}

/// Re-entrant listeners while several threads hammer the breaker: no deadlock, counts exact.
#[test]
fn reentrant_listener_under_contention_does_not_deadlock() {
    within_deadline(10, "re-entrant listener under contention", || {
        let clock = ManualClock::shared(0);
        let config = FailureConfig {
            failure_threshold: 5,
            cooldown_ms: 0,
            ..FailureConfig::default()
        };
        let breaker = Arc::new(FailureBreaker::with_clock(config, clock).unwrap());
        let calls = Arc::new(AtomicUsize::new(0));
        let weak = Arc::downgrade(&breaker);
        let c = Arc::clone(&calls);
        breaker.add_listener(Arc::new(move |_e: &Event| {
            let b = weak.upgrade().unwrap();
            let _ = b.status();
            let _ = b.metrics();
            let _ = b.snapshot();
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }));
        let b = Arc::clone(&breaker);
        run_together(THREADS, move |t| {
            for i in 0..300 {
                if (i + t) % 7 == 0 {
                    b.record_success();
                } else {
                    b.record_failure("e");
                }
                let _ = b.should_allow_operation();
            }
        });
        let m = breaker.metrics();
        assert_eq!(m.total_failures + m.total_successes, THREADS as u64 * 300);
        assert!(calls.load(Ordering::SeqCst) > 0);
        assert_eq!(breaker.listener_errors(), 0);
    });
}

/// StagnationBreaker listeners may call check/status/record_progress from inside the callback.
#[test]
fn stagnation_listener_may_call_back_into_the_breaker() {
    within_deadline(5, "stagnation listener re-entry", || {
        let clock = ManualClock::shared(0);
        let config = StagnationConfig {
            same_error_threshold: 2,
            ..StagnationConfig::default()
        };
        let breaker = Arc::new(StagnationBreaker::with_clock(config, clock).unwrap());
        let weak = Arc::downgrade(&breaker);
        let observed = Arc::new(Mutex::new(Vec::new()));
        let obs = Arc::clone(&observed);
        breaker.add_listener(Arc::new(move |_e: &Event| {
            let b = weak.upgrade().unwrap();
            let check = b.check();
            b.record_progress(IterationMetrics {
                files_changed: 1,
                tests_passing: 0,
                output_length: 10,
            });
            obs.lock()
                .unwrap()
                .push((check.state, b.status().error_counts.len()));
            Ok(())
        }));
        breaker.record_error("same", false);
        breaker.record_error("same", false);
        // Inside the listener the state was already OPEN; its progress cleared the counts but
        // did not close the circuit (OPEN is final until reset).
        assert_eq!(*observed.lock().unwrap(), vec![(State::Open, 0)]);
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.status().last_progress, Some(0));
    });
}

/// BudgetBreaker halt listeners may ingest and snapshot from inside the callback.
#[test]
fn budget_listener_may_call_back_into_the_breaker() {
    within_deadline(5, "budget listener re-entry", || {
        let clock = ManualClock::shared(0);
        let config = BudgetConfig {
            max_tool_calls_per_task: 1,
            ..BudgetConfig::default()
        };
        let breaker = Arc::new(BudgetBreaker::with_clock(config, clock).unwrap());
        let weak = Arc::downgrade(&breaker);
        let inner_halts = Arc::new(AtomicU64::new(0));
        let ih = Arc::clone(&inner_halts);
        breaker.add_listener(Arc::new(move |e: &Event| {
            let b = weak.upgrade().unwrap();
            assert!(matches!(e, Event::Halt { .. }));
            let snap = b.snapshot();
            assert!(snap.tasks.iter().any(|t| t.halted));
            // The halted task ignores further events: this returns no halt.
            if b.ingest(&tool_use("a")).unwrap().is_some() {
                ih.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        }));
        assert!(breaker.ingest(&tool_use("a")).unwrap().is_none());
        assert!(breaker.ingest(&tool_use("a")).unwrap().is_some());
        assert_eq!(inner_halts.load(Ordering::SeqCst), 0);
        assert_eq!(breaker.snapshot().tasks[0].tool_calls, 2);
        assert_eq!(breaker.listener_errors(), 0);
    });
}

/// Loop listeners may call status() and even observe() from inside the callback.
#[test]
fn loop_listener_may_call_back_into_the_loop() {
    within_deadline(5, "loop listener re-entry", || {
        let clock = ManualClock::shared(0);
        let config = LoopConfig {
            max_iterations: 100,
            stagnation: StagnationConfig {
                no_progress_threshold: 1,
                ..StagnationConfig::default()
            },
            ..LoopConfig::default()
        };
        let lp = Arc::new(Loop::with_clock(config, clock).unwrap());
        let weak = Arc::downgrade(&lp);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        lp.add_listener(Arc::new(move |e: &Event| {
            let l = weak.upgrade().unwrap();
            let status = l.status();
            s.lock().unwrap().push((e.clone(), status.iteration));
            Ok(())
        }));
        // No progress with threshold 1: CLOSED -> HALF_OPEN on iteration 1.
        let d = lp.observe(&Observation::output("working on it")).unwrap();
        assert_eq!(d.action, Action::Continue);
        assert_eq!(d.breaker.state, State::HalfOpen);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].1, 1);
        assert!(matches!(
            seen[0].0,
            Event::StateChange {
                from: State::Closed,
                to: State::HalfOpen,
                ..
            }
        ));
    });
}

// -------------------------------------------------------------------------------------------------
// Loop shared across threads

/// Observations from several threads: iteration numbers are unique and contiguous 1..=N, exactly
/// one observation exits (at maxIterations) and every later one is INVALID_ARGUMENT.
#[test]
fn loop_shared_across_threads_numbers_iterations_uniquely() {
    const MAX: u32 = 64;
    const PER_THREAD: usize = 10; // 80 attempts for 64 iterations
    for iteration in 0..50 {
        let clock = ManualClock::shared(0);
        let config = LoopConfig {
            max_iterations: MAX,
            ..LoopConfig::default()
        };
        let lp = Arc::new(Loop::with_clock(config, clock).unwrap());
        let l = Arc::clone(&lp);
        let results: Vec<_> = run_together(THREADS, move |t| {
            (0..PER_THREAD)
                .map(|i| {
                    l.observe(&Observation {
                        output: format!("thread {t} step {i}: edited a file"),
                        files_changed: 1,
                        ..Observation::default()
                    })
                })
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect();
        let mut iterations = Vec::new();
        let mut exits = Vec::new();
        let mut refused = 0;
        for r in &results {
            match r {
                Ok(d) => {
                    iterations.push(d.iteration);
                    if d.action == Action::Exit {
                        exits.push(d.clone());
                    } else {
                        assert_eq!(d.reason, None);
                        assert_eq!(d.outcome, None);
                    }
                }
                Err(e) => {
                    assert_eq!(e.code(), "INVALID_ARGUMENT");
                    refused += 1;
                }
            }
        }
        iterations.sort_unstable();
        assert_eq!(
            iterations,
            (1..=MAX).collect::<Vec<_>>(),
            "iteration {iteration}"
        );
        assert_eq!(refused, THREADS * PER_THREAD - MAX as usize);
        assert_eq!(exits.len(), 1);
        assert_eq!(exits[0].iteration, MAX);
        assert_eq!(exits[0].reason, Some(ExitReason::MaxIterations));
        assert_eq!(exits[0].outcome, Some(Outcome::Failure));
        let status = lp.status();
        assert_eq!(status.iteration, MAX);
        assert!(status.exited);
        assert_eq!(status.breaker.output_trend.len(), 10);
    }
}

/// A loop whose strategy exits on the first completion: with every thread reporting completion,
/// exactly one observation exits with `completed`.
#[test]
fn loop_shared_across_threads_exits_once_on_completion() {
    for _ in 0..100 {
        let clock = ManualClock::shared(0);
        let lp = Arc::new(Loop::with_clock(LoopConfig::default(), clock).unwrap());
        let l = Arc::clone(&lp);
        let results: Vec<_> = run_together(THREADS, move |_| {
            l.observe(&Observation {
                output: "EXIT_SIGNAL: true".into(),
                files_changed: 1,
                ..Observation::default()
            })
        });
        let ok: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].iteration, 1);
        assert_eq!(ok[0].reason, Some(ExitReason::Completed));
        assert_eq!(ok[0].outcome, Some(Outcome::Success));
        assert!(
            results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| e.code() == "INVALID_ARGUMENT")
        );
    }
}

/// The fingerprint mode is shared state-free: concurrent fingerprinting agrees with sequential.
#[test]
fn fingerprint_is_thread_safe() {
    let inputs: Vec<String> = (0..200)
        .map(|i| format!("Path not found: src/mod{i}.rs at 12:{i} id 0xdeadbeef{i:04}"))
        .collect();
    let expected: Vec<String> = inputs
        .iter()
        .map(|s| agentbreaker::fingerprint(s, ErrorMatch::Template))
        .collect();
    let inputs = Arc::new(inputs);
    let expected = Arc::new(expected);
    run_together(THREADS, move |_| {
        for (i, s) in inputs.iter().enumerate() {
            assert_eq!(
                agentbreaker::fingerprint(s, ErrorMatch::Template),
                expected[i]
            );
        }
    });
}

/// Listeners see state changes in the order they happened, even when many threads cause them:
/// every event's `from` is the previous event's `to`.
#[test]
fn state_changes_reach_listeners_as_an_unbroken_chain() {
    for _round in 0..20 {
        let clock = agentbreaker::ManualClock::shared(0);
        let breaker = Arc::new(
            FailureBreaker::with_clock(
                FailureConfig {
                    failure_threshold: 2,
                    cooldown_ms: 0,
                    ..FailureConfig::default()
                },
                clock,
            )
            .expect("valid config"),
        );
        let seen: Arc<Mutex<Vec<(State, State)>>> = Arc::default();
        let sink = Arc::clone(&seen);
        breaker.add_listener(Arc::new(move |e| {
            if let Event::StateChange { from, to, .. } = e {
                sink.lock().expect("lock").push((*from, *to));
            }
            Ok(())
        }));
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let b = Arc::clone(&breaker);
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    for i in 0..300 {
                        // Fail, fail (opens), probe (half-open), succeed (closes).
                        match (t + i) % 4 {
                            0 | 1 => b.record_failure("flap"),
                            2 => {
                                b.should_allow_operation();
                            }
                            _ => b.record_success(),
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
        let seen = seen.lock().expect("lock");
        // Every transition the metrics count reached the listener, exactly once.
        let m = breaker.metrics();
        let to_half_open =
            m.recoveries + m.reopenings + u64::from(breaker.state() == State::HalfOpen);
        let transitions = m.trips + m.reopenings + m.recoveries + to_half_open;
        assert_eq!(
            seen.len() as u64,
            transitions,
            "{m:?} {:?}",
            breaker.state()
        );
        assert!(
            seen.len() >= 20,
            "the breaker should have flapped: {}",
            seen.len()
        );
        assert_eq!(seen[0].0, State::Closed);
        for pair in seen.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "out of order: {pair:?} in {seen:?}");
        }
        assert_eq!(seen.last().map(|e| e.1), Some(breaker.state()));
    }
}

//! The test-only panic trigger (feature `test-panic`): a panic inside a breaker's lock leaves the
//! breaker usable (the poisoned lock is recovered). Run with
//! `cargo test -p agentbreaker --features test-panic --test test_panic`.

#![cfg(feature = "test-panic")]

use std::panic::{AssertUnwindSafe, catch_unwind};

use agentbreaker::{
    FailureBreaker, FailureConfig, ManualClock, State, TEST_PANIC_TRIGGER, analyze,
};

#[test]
fn a_panic_inside_the_lock_leaves_the_breaker_working() {
    let b = FailureBreaker::with_clock(
        FailureConfig {
            failure_threshold: 2,
            ..FailureConfig::default()
        },
        ManualClock::shared(0),
    )
    .unwrap();
    b.record_failure("first");
    assert!(catch_unwind(AssertUnwindSafe(|| b.record_failure(TEST_PANIC_TRIGGER))).is_err());
    // The panic happened before anything was recorded; the breaker still counts correctly.
    assert_eq!(b.status().consecutive_failures, 1);
    b.record_failure("second");
    assert_eq!(b.state(), State::Open);
    assert!(catch_unwind(|| analyze(TEST_PANIC_TRIGGER)).is_err());
    assert_eq!(analyze("done").confidence, 40);
}

#[test]
fn a_panic_while_observing_leaves_the_loop_as_it_was() {
    use agentbreaker::{Loop, LoopConfig, Observation};
    use serde_json::json;
    let lp = Loop::new(LoopConfig::from_json(&json!({"budget": {}})).unwrap()).unwrap();
    let first = lp.observe(&Observation {
        output: "working".into(),
        files_changed: 1,
        ..Observation::default()
    });
    assert_eq!(first.unwrap().iteration, 1);
    let panicking = Observation::from_json(&json!({
        "output": TEST_PANIC_TRIGGER,
        "events": [{"type": "tool_use", "name": "Bash", "input": {}}]
    }))
    .unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| lp.observe(&panicking))).is_err());
    // Nothing of the failed observation was applied: not the iteration, not the budget event.
    let status = lp.status();
    assert_eq!(status.iteration, 1);
    let tasks = status.budget.unwrap().tasks;
    assert!(tasks.iter().all(|t| t.tool_calls == 0), "{tasks:?}");
    let next = lp.observe(&Observation {
        output: "still working".into(),
        files_changed: 1,
        ..Observation::default()
    });
    assert_eq!(next.unwrap().iteration, 2);
}

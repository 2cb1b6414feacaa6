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

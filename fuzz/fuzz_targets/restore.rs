//! Any bytes as a persisted snapshot: `FailureSnapshot::from_json` / `StagnationSnapshot::from_json`
//! and `restore_json` on fresh breakers. A rejected snapshot is INVALID_SNAPSHOT and leaves the
//! breaker as it was; an accepted one round-trips (snapshot, restore elsewhere, snapshot again:
//! the same), and the restored breaker keeps working at any clock time.
#![no_main]

use agentbreaker::{
    FailureBreaker, FailureConfig, FailureSnapshot, IterationMetrics, ManualClock,
    StagnationBreaker, StagnationConfig, StagnationSnapshot, State,
};
use agentbreaker_fuzz::check_error;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Clock times the restored breakers are driven at.
fn times(opened_at: Option<u64>) -> Vec<u64> {
    let mut t = vec![0, 1, 29_999, 30_000, 3_600_000, u64::MAX / 2, u64::MAX];
    if let Some(o) = opened_at {
        for d in [0, 1, 29_999, 30_000, 60_000, 3_600_000] {
            t.push(o.saturating_add(d));
        }
        t.push(o.saturating_sub(1));
    }
    t
}

fn failure(value: &Value, config: FailureConfig) {
    let clock = ManualClock::shared(0);
    let breaker = FailureBreaker::with_clock(config.clone(), clock.clone()).expect("config");
    let before = breaker.snapshot();
    let parsed = FailureSnapshot::from_json(value);
    match breaker.restore_json(value) {
        Err(e) => {
            check_error(&e, "INVALID_SNAPSHOT");
            assert!(parsed.is_err());
            assert_eq!(
                breaker.snapshot(),
                before,
                "a rejected snapshot changed the breaker"
            );
            return;
        }
        Ok(()) => assert!(parsed.is_ok()),
    }
    let first = breaker.snapshot();
    assert!(first.failure_history.len() <= config.history_limit as usize);
    assert_ne!(first.state, State::HalfOpen, "HALF_OPEN restores as CLOSED");
    assert_eq!(
        FailureSnapshot::from_json(&first.to_json()).expect("its own snapshot parses"),
        first
    );
    let other = FailureBreaker::with_clock(config, clock.clone()).expect("config");
    other.restore(&first).expect("its own snapshot restores");
    assert_eq!(
        other.snapshot(),
        first,
        "snapshot -> restore -> snapshot changed it"
    );

    for t in times(first.opened_at) {
        clock.set(t);
        let status = breaker.status();
        serde_json::to_string(&status).expect("status serializes");
        serde_json::to_string(&breaker.metrics()).expect("metrics serialize");
        let p = breaker.should_allow_operation();
        match breaker.state() {
            State::Open => assert!(!p.allowed, "{p:?}"),
            State::Closed => assert!(p.allowed && p.message.is_none(), "{p:?}"),
            State::HalfOpen => assert!(p.message.is_some(), "{p:?}"),
        }
    }
    for t in times(first.opened_at) {
        clock.set(t);
        breaker.record_failure("Path not found: ServerScriptService.Main");
        breaker.should_allow_operation();
        breaker.record_success();
    }
    serde_json::to_string(&breaker.snapshot()).expect("snapshot serializes");
}

fn stagnation(value: &Value) {
    let clock = ManualClock::shared(0);
    let breaker =
        StagnationBreaker::with_clock(StagnationConfig::default(), clock.clone()).expect("config");
    let before = breaker.snapshot();
    let parsed = StagnationSnapshot::from_json(value);
    match breaker.restore_json(value) {
        Err(e) => {
            check_error(&e, "INVALID_SNAPSHOT");
            assert!(parsed.is_err());
            assert_eq!(
                breaker.snapshot(),
                before,
                "a rejected snapshot changed the breaker"
            );
            return;
        }
        Ok(()) => assert!(parsed.is_ok()),
    }
    let first = breaker.snapshot();
    assert_ne!(first.state, State::HalfOpen, "HALF_OPEN restores as CLOSED");
    assert!(first.output_trend.len() <= 10);
    assert_eq!(
        StagnationSnapshot::from_json(&first.to_json()).expect("its own snapshot parses"),
        first
    );
    let other =
        StagnationBreaker::with_clock(StagnationConfig::default(), clock.clone()).expect("config");
    other.restore(&first).expect("its own snapshot restores");
    assert_eq!(
        other.snapshot(),
        first,
        "snapshot -> restore -> snapshot changed it"
    );

    for t in times(first.last_progress) {
        clock.set(t);
        serde_json::to_string(&breaker.status()).expect("status serializes");
        let d = breaker.check();
        assert_eq!(d.allow_continue, d.state != State::Open);
        breaker.record_error("TypeError: x is undefined", false);
        for metrics in [
            IterationMetrics::default(),
            IterationMetrics {
                files_changed: u64::MAX,
                tests_passing: u64::MAX,
                output_length: u64::MAX,
            },
            IterationMetrics {
                files_changed: 0,
                tests_passing: 1,
                output_length: 1,
            },
        ] {
            breaker.record_progress(metrics);
        }
    }
    serde_json::to_string(&breaker.snapshot()).expect("snapshot serializes");
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    failure(&value, FailureConfig::default());
    failure(
        &value,
        FailureConfig {
            failure_threshold: 2,
            backoff_multiplier: 2.0,
            max_cooldown_ms: u64::MAX,
            identical_error_threshold: 2,
            history_limit: 3,
            half_open_max_probes: 2,
            error_match: agentbreaker::fingerprint::ErrorMatch::Template,
            ..FailureConfig::default()
        },
    );
    stagnation(&value);
});

//! The FailureBreaker with its state in a real Redis (SPEC 12): sharing between breakers, the
//! cost of each call, outages (kill, SIGSTOP, restart empty, SCRIPT FLUSH) and bad input.
//! Every test starts its own redis-server (tests/redis_support); they are `#[ignore]`d in a
//! plain `cargo test` and run by `make test-redis`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod redis_support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentbreaker::{
    Event, FailureBreaker, FailureConfig, ManualClock, State, StoreFailure, StoreMode, StoreUrl,
};
use redis_support::{RedisServer, eventually};

type Seen = Arc<Mutex<Vec<Event>>>;

fn config(url: &str, key: &str) -> FailureConfig {
    FailureConfig {
        store: Some(StoreUrl::new(url)),
        key: Some(key.to_string()),
        store_timeout_ms: 2000,
        ..FailureConfig::default()
    }
}

fn breaker(config: FailureConfig, clock: &Arc<ManualClock>) -> (FailureBreaker, Seen) {
    let b = FailureBreaker::with_clock(config, clock.clone()).unwrap();
    let seen: Seen = Arc::default();
    let s = Arc::clone(&seen);
    b.add_listener(Arc::new(move |e| {
        s.lock().unwrap().push(e.clone());
        Ok(())
    }));
    (b, seen)
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn two_breakers_share_one_circuit() {
    let server = RedisServer::start();
    let clock = ManualClock::shared(1000);
    let (a, seen_a) = breaker(config(&server.url(), "share"), &clock);
    let (b, seen_b) = breaker(config(&server.url(), "share"), &clock);
    for _ in 0..2 {
        a.record_failure("boom");
        b.record_failure("boom");
    }
    assert_eq!(a.status().consecutive_failures, 4);
    a.record_failure("boom");
    assert_eq!(a.state(), State::Open);
    // b learns of it through pub/sub.
    assert!(eventually(Duration::from_millis(500), || b.state() == State::Open));
    assert!(!b.should_allow_operation().allowed);
    let opened = |seen: &Seen| {
        seen.lock()
            .unwrap()
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
            .count()
    };
    assert_eq!(opened(&seen_a), 1);
    assert_eq!(opened(&seen_b), 0);
    assert_eq!(b.status().trips, 1);
    clock.advance(30_000);
    assert!(b.should_allow_operation().allowed, "b gets the probe");
    assert!(!a.should_allow_operation().allowed, "one probe fleet-wide");
    b.record_success();
    assert!(eventually(Duration::from_millis(500), || a.state() == State::Closed));
    assert!(a.should_allow_operation().allowed);
    assert_eq!(a.store_status().unwrap().mode, StoreMode::Shared);
    let _ = StoreFailure::Open;
    let _ = Instant::now();
}

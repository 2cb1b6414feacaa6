//! One circuit for a fleet (contract §12): 8 processes record outcomes on one key of a real Redis at
//! the same time, and the contract §2 rules hold across them.
//!
//! - `no_increment_is_lost`: every process records only failures (the threshold out of reach):
//!   the shared count is exactly the number recorded, and each failure was one round trip.
//! - `every_trip_is_counted_once_and_one_probe_per_half_open`: the processes flap one breaker
//!   (threshold 3, cooldown 0) through thousands of trips. Every trip is counted exactly once
//!   (the shared `trips`, the processes' `metrics().trips` and the `stateChange` CLOSED→OPEN
//!   events fleet-wide agree), exactly one process reports each transition, and each half-open
//!   period grants exactly one probe fleet-wide.
//!
//! - `faults_during_a_fleet_run`: the processes keep calling (storeTimeoutMs 50) while the server
//!   has its scripts flushed, is paused with SIGSTOP, killed and restarted empty: no process
//!   crashes or errs, no call takes much longer than the timeout, each outage is announced once
//!   per process, and every process is back on the shared state at the end.
//!
//! The workers are this test binary started again with `AGENTBREAKER_FLEET_WORKER` set (real
//! processes, each with its own connections). `AGENTBREAKER_FLEET_OUTCOMES` sets the outcomes per
//! process (default 10 000; `make reliability-redis` runs 100 000). The tests are ignored by a
//! plain `cargo test` and run by `make test-redis`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod redis_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentbreaker::failure::{PROBE_GRANTED, PROBE_MORE};
use agentbreaker::{Event, FailureBreaker, FailureConfig, State, StoreMode, StoreUrl};
use redis_support::RedisServer;
use serde_json::{Value, json};

const WORKERS: usize = 8;
const WORKER_ENV: &str = "AGENTBREAKER_FLEET_WORKER";
const RESULT: &str = "FLEET-RESULT ";

fn outcomes() -> u64 {
    std::env::var("AGENTBREAKER_FLEET_OUTCOMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn config(url: &str, key: &str, phase: &str) -> FailureConfig {
    let base = FailureConfig {
        store: Some(StoreUrl::new(url)),
        key: Some(key.to_string()),
        // Eight processes on two cores: a slow answer must not count as an outage here.
        store_timeout_ms: 5000,
        ..FailureConfig::default()
    };
    match phase {
        "count" => FailureConfig {
            failure_threshold: u32::MAX,
            warning_threshold: Some(0),
            ..base
        },
        "chaos" => FailureConfig {
            failure_threshold: 3,
            warning_threshold: Some(0),
            cooldown_ms: 20,
            max_cooldown_ms: 20,
            probe_timeout_ms: 200,
            store_timeout_ms: 50,
            ..base
        },
        _ => FailureConfig {
            failure_threshold: 3,
            warning_threshold: Some(0),
            cooldown_ms: 0,
            max_cooldown_ms: 0,
            half_open_max_probes: 1,
            probe_timeout_ms: 600_000,
            ..base
        },
    }
}

/// Runs the fleet: `WORKERS` processes of `phase`, started together; their result lines.
fn run_fleet(server: &RedisServer, key: &str, phase: &str) -> Vec<Value> {
    let start_at = epoch_ms() + 2000;
    collect(spawn_fleet(server, key, phase, start_at, 0))
}

/// Starts the workers; they begin at `start_at` (epoch ms) and, in the chaos phase, stop calling
/// at `until`.
fn spawn_fleet(
    server: &RedisServer,
    key: &str,
    phase: &str,
    start_at: u64,
    until: u64,
) -> Vec<std::process::Child> {
    let exe = std::env::current_exe().unwrap();
    (0..WORKERS)
        .map(|id| {
            Command::new(&exe)
                .args(["--exact", "worker", "--ignored", "--nocapture"])
                .env(WORKER_ENV, phase)
                .env("AGENTBREAKER_FLEET_URL", server.url())
                .env("AGENTBREAKER_FLEET_KEY", key)
                .env("AGENTBREAKER_FLEET_ID", id.to_string())
                .env("AGENTBREAKER_FLEET_START", start_at.to_string())
                .env("AGENTBREAKER_FLEET_UNTIL", until.to_string())
                .env("AGENTBREAKER_FLEET_OUTCOMES", outcomes().to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// Waits for the workers and returns their result lines; a worker that failed fails the test.
fn collect(children: Vec<std::process::Child>) -> Vec<Value> {
    let mut results = Vec::new();
    for mut child in children {
        let out = child.stdout.take().unwrap();
        let mut line_found = None;
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            if let Some(json) = line.strip_prefix(RESULT) {
                line_found = Some(serde_json::from_str::<Value>(json).unwrap());
            }
        }
        let status = child.wait().unwrap();
        assert!(status.success(), "a worker failed: {status}");
        results.push(line_found.expect("a worker printed no result"));
    }
    results
}

fn sum(results: &[Value], path: &[&str]) -> u64 {
    results
        .iter()
        .map(|r| {
            path.iter()
                .fold(r, |v, k| &v[*k])
                .as_u64()
                .unwrap_or_else(|| panic!("{path:?} in {r}"))
        })
        .sum()
}

/// The worker: waits for the start time, records its outcomes and prints what it saw.
#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn worker() {
    let Ok(phase) = std::env::var(WORKER_ENV) else {
        return; // only as a child of the fleet tests
    };
    let var = |name: &str| std::env::var(name).unwrap();
    let id: u64 = var("AGENTBREAKER_FLEET_ID").parse().unwrap();
    let start_at: u64 = var("AGENTBREAKER_FLEET_START").parse().unwrap();
    let n = outcomes();
    let b = FailureBreaker::new(config(
        &var("AGENTBREAKER_FLEET_URL"),
        &var("AGENTBREAKER_FLEET_KEY"),
        &phase,
    ))
    .unwrap();
    let transitions: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let t = Arc::clone(&transitions);
    b.add_listener(Arc::new(move |e| {
        let name = match e {
            Event::StateChange { from, to, .. } => format!("{from:?}->{to:?}"),
            Event::Warning { .. } => "warning".to_string(),
            _ => "other".to_string(),
        };
        *t.lock().unwrap().entry(name).or_default() += 1;
        Ok(())
    }));
    while epoch_ms() < start_at {
        std::thread::sleep(Duration::from_millis(1));
    }
    if phase == "chaos" {
        chaos_worker(&b, id, &transitions);
        return;
    }
    let started = Instant::now();
    let (mut failures, mut successes, mut probes, mut refusals) = (0u64, 0u64, 0u64, 0u64);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (id + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut recorded = 0;
    while recorded < n {
        if phase == "count" {
            b.record_failure("tool server down");
            failures += 1;
            recorded += 1;
            continue;
        }
        let p = b.should_allow_operation();
        if !p.allowed {
            refusals += 1;
            std::thread::yield_now();
            continue;
        }
        if matches!(p.message.as_deref(), Some(m) if m == PROBE_GRANTED || m == PROBE_MORE) {
            probes += 1;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if rng % 100 < 40 {
            b.record_failure("tool server down");
            failures += 1;
        } else {
            b.record_success();
            successes += 1;
        }
        recorded += 1;
    }
    let elapsed = started.elapsed();
    let m = b.metrics();
    let store = b.store_status().unwrap();
    let result = json!({
        "id": id,
        "failures": failures,
        "successes": successes,
        "probes": probes,
        "refusals": refusals,
        "seconds": elapsed.as_secs_f64(),
        "transitions": *transitions.lock().unwrap(),
        "metrics": {
            "totalFailures": m.total_failures,
            "totalSuccesses": m.total_successes,
            "trips": m.trips,
            "recoveries": m.recoveries,
            "reopenings": m.reopenings,
        },
        "shared": store.mode == StoreMode::Shared && store.outages == 0,
    });
    println!("{RESULT}{result}");
}

fn transitions(results: &[Value], name: &str) -> u64 {
    results
        .iter()
        .map(|r| r["transitions"][name].as_u64().unwrap_or(0))
        .sum()
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn no_increment_is_lost() {
    let server = RedisServer::start();
    let key = "fleet:count";
    let calls_before = server.evalsha_calls();
    let results = run_fleet(&server, key, "count");
    let n = outcomes();
    let total = n * WORKERS as u64;
    assert_eq!(sum(&results, &["failures"]), total);
    assert_eq!(sum(&results, &["metrics", "totalFailures"]), total);
    for r in &results {
        assert_eq!(r["shared"], true, "a worker lost the store: {r}");
    }
    let reader = FailureBreaker::new(config(&server.url(), key, "count")).unwrap();
    let status = reader.status();
    assert_eq!(status.consecutive_failures, total, "no increment lost");
    assert_eq!(
        status.failure_history.len(),
        100,
        "the history ring is capped"
    );
    assert_eq!(status.state, State::Closed);
    // One round trip per failure, plus one read per process when it connected and the read
    // above (and its own connect).
    let calls = server.evalsha_calls() - calls_before;
    assert_eq!(calls, total + WORKERS as u64 + 2, "round trips");
    let slowest = results
        .iter()
        .map(|r| r["seconds"].as_f64().unwrap())
        .fold(0.0, f64::max);
    eprintln!(
        "{WORKERS} processes x {n} failures on one key: {total} recorded, shared count {}, \
         {:.0} recorded outcomes/s across the fleet",
        status.consecutive_failures,
        total as f64 / slowest
    );
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn every_trip_is_counted_once_and_one_probe_per_half_open() {
    let server = RedisServer::start();
    let key = "fleet:cycle";
    let results = run_fleet(&server, key, "cycle");
    let n = outcomes();
    for r in &results {
        assert_eq!(r["shared"], true, "a worker lost the store: {r}");
        assert_eq!(r["transitions"].get("warning"), None, "{r}");
    }
    assert_eq!(
        sum(&results, &["failures"]) + sum(&results, &["successes"]),
        n * WORKERS as u64
    );
    assert_eq!(
        sum(&results, &["metrics", "totalFailures"]),
        sum(&results, &["failures"])
    );
    assert_eq!(
        sum(&results, &["metrics", "totalSuccesses"]),
        sum(&results, &["successes"])
    );
    let reader = FailureBreaker::new(config(&server.url(), key, "cycle")).unwrap();
    let status = reader.status();
    let opened = transitions(&results, "Closed->Open");
    let probing = transitions(&results, "Open->HalfOpen");
    let closed = transitions(&results, "HalfOpen->Closed");
    let reopened = transitions(&results, "HalfOpen->Open");
    // Every trip counted exactly once, by exactly one process.
    assert!(opened > 100, "the fleet tripped only {opened} times");
    assert_eq!(
        status.trips, opened,
        "shared trips vs opened events fleet-wide"
    );
    assert_eq!(sum(&results, &["metrics", "trips"]), opened);
    assert_eq!(sum(&results, &["metrics", "recoveries"]), closed);
    assert_eq!(sum(&results, &["metrics", "reopenings"]), reopened);
    // Each half-open period granted exactly one probe fleet-wide (the move to HALF_OPEN is the
    // probe; with one permit and a probe timeout out of reach nothing else is granted).
    assert_eq!(
        sum(&results, &["probes"]),
        probing,
        "probes vs half-open periods"
    );
    // Each half-open period ended once (except the one still running at the end).
    let running = u64::from(status.state == State::HalfOpen);
    assert_eq!(closed + reopened + running, probing);
    // And the circuit closed once for every trip but the one still open.
    let not_closed = u64::from(status.state != State::Closed);
    assert_eq!(opened, closed + not_closed);
    let slowest = results
        .iter()
        .map(|r| r["seconds"].as_f64().unwrap())
        .fold(0.0, f64::max);
    eprintln!(
        "{WORKERS} processes x {n} outcomes on one key in {slowest:.1} s: {opened} trips, \
         {probing} half-open periods ({closed} closed, {reopened} reopened), {} refusals",
        sum(&results, &["refusals"])
    );
}

/// The chaos worker: calls as fast as it can until `AGENTBREAKER_FLEET_UNTIL`, timing every
/// call, then waits (calling now and then) until it is back on the shared state.
fn chaos_worker(b: &FailureBreaker, id: u64, events: &Arc<Mutex<BTreeMap<String, u64>>>) {
    let until: u64 = std::env::var("AGENTBREAKER_FLEET_UNTIL")
        .unwrap()
        .parse()
        .unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (id + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut slowest = Duration::ZERO;
    let mut calls = 0u64;
    let mut timed = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        slowest = slowest.max(t.elapsed());
        calls += 1;
    };
    let mut local_modes = 0u64;
    while epoch_ms() < until {
        let mut allowed = false;
        timed(&mut || allowed = b.should_allow_operation().allowed);
        if allowed {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if rng % 100 < 30 {
                timed(&mut || b.record_failure("flaky tool"));
            } else {
                timed(&mut || b.record_success());
            }
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
        if rng % 64 == 0 {
            timed(&mut || {
                let _ = b.status();
            });
        }
        if b.store_status().unwrap().mode != StoreMode::Shared {
            local_modes += 1;
        }
    }
    // Back on the shared state (the last fault is a restart a few seconds before the end).
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.store_status().unwrap().mode != StoreMode::Shared && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    b.should_allow_operation();
    let store = b.store_status().unwrap();
    let result = json!({
        "id": id,
        "calls": calls,
        "slowestMs": slowest.as_secs_f64() * 1000.0,
        "callsWhileDown": local_modes,
        "outages": store.outages,
        "shared": store.mode == StoreMode::Shared,
        "transitions": *events.lock().unwrap(),
    });
    println!("{RESULT}{result}");
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn faults_during_a_fleet_run() {
    let mut server = RedisServer::start();
    let key = "fleet:chaos";
    // Rounds of faults: `AGENTBREAKER_FLEET_FAULT_ROUNDS` (default 1; make reliability-redis
    // runs 10).
    let rounds: u64 = std::env::var("AGENTBREAKER_FLEET_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let round_ms = 4000;
    let start_at = epoch_ms() + 2000;
    let until = start_at + rounds * round_ms + 1500;
    let children = spawn_fleet(&server, key, "chaos", start_at, until);
    let at = |ms: u64| {
        let wait = (start_at + ms).saturating_sub(epoch_ms());
        std::thread::sleep(Duration::from_millis(wait));
    };
    for round in 0..rounds {
        let base = round * round_ms;
        at(base + 500);
        server.cli(&["SCRIPT", "FLUSH"]);
        at(base + 1000);
        server.pause();
        at(base + 1600);
        server.resume();
        at(base + 2500);
        server.kill();
        at(base + 2800);
        server.restart();
    }
    let results = collect(children);
    let mut slowest: f64 = 0.0;
    for r in &results {
        assert_eq!(r["shared"], true, "a worker did not rejoin: {r}");
        let outages = r["outages"].as_u64().unwrap();
        assert!(outages >= rounds, "every round has outages: {r}");
        let warnings = r["transitions"]["warning"].as_u64().unwrap_or(0);
        // One warning when an outage is found and one when it is over, at most.
        assert!(warnings <= 2 * outages, "{r}");
        assert!(warnings >= 1, "{r}");
        slowest = slowest.max(r["slowestMs"].as_f64().unwrap());
    }
    // storeTimeoutMs is 50; eight processes and a server share two cores here, so the bound
    // leaves room for the scheduler (docs/distributed.md gives the figures).
    assert!(slowest < 300.0, "the slowest call took {slowest:.1} ms");
    eprintln!(
        "{WORKERS} processes, {rounds} round(s) of SCRIPT FLUSH, SIGSTOP, kill and restart: \
         {} calls, slowest {slowest:.1} ms (storeTimeoutMs 50), outages per process {:?}",
        sum(&results, &["calls"]),
        results
            .iter()
            .map(|r| r["outages"].as_u64().unwrap())
            .collect::<Vec<_>>()
    );
}

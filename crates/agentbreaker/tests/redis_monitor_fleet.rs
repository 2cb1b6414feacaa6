//! One budget for a fleet (contract section 12): 8 processes send a Monitor's events for one
//! task of one tenant key of a real Redis at the same time.
//!
//! - `no_increment_is_lost`: every process sends tool calls (of two tools) and usage events with
//!   the budgets out of reach: the shared tool calls, calls per tool and spend are exactly what
//!   the fleet sent, each counted event was one round trip, and every process's last verdict saw
//!   the fleet's totals so far.
//! - `the_cap_holds_fleet_wide`: the same with `maxToolCallsPerTask` = L, well below what the
//!   fleet sends: exactly L tool calls are answered without a halt across the fleet (the
//!   (L+1)th call fleet-wide is refused, whichever process makes it), and the shared count is L
//!   plus one refused call per process (the call that found the cap passed; a halted task
//!   answers later events with its halt without counting them).
//! - `faults_during_a_fleet_run`: the processes keep sending events (storeTimeoutMs 50) while the
//!   server has its scripts flushed, is paused with SIGSTOP, killed and restarted: no process
//!   crashes or errs, no event takes much longer than the timeout, each outage is announced at
//!   most once per process, and every process is back on the shared counters at the end. The
//!   workers pause 0.2 ms between events: eight processes spinning on two cores would measure the
//!   scheduler's run queue (hundreds of ms), not the timeout.
//!
//! The workers are this test binary started again with `AGENTBREAKER_FLEET_WORKER` set.
//! `AGENTBREAKER_FLEET_OUTCOMES` sets the events per process (default 10 000; `make
//! reliability-redis` runs 100 000). The tests are ignored by a plain `cargo test` and run by
//! `make test-redis`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod redis_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentbreaker::{Event, Monitor, StoreMode, VerdictAction};
use redis_support::RedisServer;
use serde_json::{Value, json};

const WORKERS: usize = 8;
const WORKER_ENV: &str = "AGENTBREAKER_FLEET_WORKER";
const RESULT: &str = "FLEET-RESULT ";
/// The tenant's task: every process counts for it.
const TASK: &str = "tenant-42";
/// A usage event's cost (a multiple of 1/4: sums of it are exact in doubles, in any order).
const CENTS: f64 = 1.25;

fn events() -> u64 {
    std::env::var("AGENTBREAKER_FLEET_OUTCOMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// The cap of `the_cap_holds_fleet_wide`: about a third of what the fleet sends.
fn cap() -> u64 {
    events() * WORKERS as u64 / 3
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn config(url: &str, key: &str, phase: &str) -> Value {
    let tool_cap = if phase == "cap" { cap() } else { u64::MAX / 2 };
    json!({
        "profile": "seed",
        "store": url,
        "key": key,
        // Eight processes on two cores: a slow answer must not count as an outage here.
        "storeTimeoutMs": if phase == "chaos" { 50 } else { 5000 },
        "budget": {"maxToolCallsPerTask": tool_cap, "maxTokenSpendCentsPerTask": u64::MAX / 2,
                   "maxTaskDurationSecs": 86_400},
        "toolLimits": {"web_fetch": u64::MAX / 2},
        // Only the budgets: the step detectors must not halt a stream of identical calls.
        "stagnation": {"noProgressThreshold": 1000, "sameErrorThreshold": 1000},
    })
}

fn run_fleet(server: &RedisServer, key: &str, phase: &str) -> Vec<Value> {
    collect(spawn_fleet(server, key, phase, epoch_ms() + 2000, 0))
}

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
                .env("AGENTBREAKER_FLEET_OUTCOMES", events().to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect()
}

fn collect(children: Vec<std::process::Child>) -> Vec<Value> {
    let mut results = Vec::new();
    for mut child in children {
        let out = child.stdout.take().unwrap();
        let mut found = None;
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            if let Some(json) = line.strip_prefix(RESULT) {
                found = Some(serde_json::from_str::<Value>(json).unwrap());
            }
        }
        let status = child.wait().unwrap();
        assert!(status.success(), "a worker failed: {status}");
        results.push(found.expect("a worker printed no result"));
    }
    results
}

fn sum(results: &[Value], key: &str) -> u64 {
    results
        .iter()
        .map(|r| r[key].as_u64().unwrap_or_else(|| panic!("{key} in {r}")))
        .sum()
}

fn tool_use(name: &str) -> Value {
    json!({"type": "tool_use", "name": name, "taskId": TASK, "input": {"q": "x"}})
}

fn usage() -> Value {
    json!({"type": "usage", "costCents": CENTS, "taskId": TASK})
}

/// The worker: waits for the start time, sends its events and prints what it saw.
#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn worker() {
    let Ok(phase) = std::env::var(WORKER_ENV) else {
        return; // only as a child of the fleet tests
    };
    let var = |name: &str| std::env::var(name).unwrap();
    let id: u64 = var("AGENTBREAKER_FLEET_ID").parse().unwrap();
    let start_at: u64 = var("AGENTBREAKER_FLEET_START").parse().unwrap();
    let n = events();
    let m = Monitor::from_json(
        &config(
            &var("AGENTBREAKER_FLEET_URL"),
            &var("AGENTBREAKER_FLEET_KEY"),
            &phase,
        ),
        agentbreaker::SystemClock::shared(),
    )
    .unwrap();
    let heard: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let h = Arc::clone(&heard);
    m.add_listener(Arc::new(move |e| {
        let name = match e {
            Event::Verdict { verdict, .. } => verdict.action.as_str().to_string(),
            Event::Warning { .. } => "warning".to_string(),
            _ => "other".to_string(),
        };
        *h.lock().unwrap().entry(name).or_default() += 1;
        Ok(())
    }));
    while epoch_ms() < start_at {
        std::thread::sleep(Duration::from_millis(1));
    }
    if phase == "chaos" {
        chaos_worker(&m, id, &heard);
        return;
    }
    let started = Instant::now();
    let (mut calls, mut allowed, mut halts, mut spends) = (0u64, 0u64, 0u64, 0u64);
    let (mut search, mut fetch) = (0u64, 0u64);
    let mut last_seen = 0u64;
    let mut rising = true;
    for i in 0..n {
        let name = if (i + id) % 3 == 0 {
            "web_fetch"
        } else {
            "search"
        };
        let v = m.observe(&tool_use(name)).unwrap();
        calls += 1;
        if name == "web_fetch" {
            fetch += 1;
        } else {
            search += 1;
        }
        if v.action == VerdictAction::Halt {
            halts += 1;
        } else {
            allowed += 1;
        }
        if phase == "count" {
            m.observe(&usage()).unwrap();
            spends += 1;
            // The fleet's count as this process saw it never goes back.
            let seen = m.status()["tasks"][0]["toolCalls"].as_u64().unwrap();
            rising &= seen > last_seen;
            last_seen = seen;
        }
    }
    let elapsed = started.elapsed();
    let store = m.store_status().unwrap();
    let result = json!({
        "id": id,
        "calls": calls,
        "search": search,
        "fetch": fetch,
        "spends": spends,
        "allowed": allowed,
        "halts": halts,
        "rising": rising,
        "lastSeen": last_seen,
        "seconds": elapsed.as_secs_f64(),
        "heard": *heard.lock().unwrap(),
        "shared": store.mode == StoreMode::Shared && store.outages == 0,
    });
    println!("{RESULT}{result}");
}

fn stored(server: &RedisServer, key: &str, field: &str) -> String {
    server
        .cli(&["HGET", &format!("{key}:task:{TASK}"), field])
        .trim()
        .to_string()
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn no_increment_is_lost() {
    let server = RedisServer::start();
    let key = "fleet:monitor";
    let before = server.evalsha_calls();
    let results = run_fleet(&server, key, "count");
    let n = events();
    let total = n * WORKERS as u64;
    for r in &results {
        assert_eq!(r["shared"], true, "a worker lost the store: {r}");
        assert_eq!(r["halts"], 0, "{r}");
        assert_eq!(r["rising"], true, "{r}");
    }
    assert_eq!(sum(&results, "calls"), total);
    assert_eq!(
        stored(&server, key, "toolCalls"),
        total.to_string(),
        "no increment lost"
    );
    assert_eq!(
        stored(&server, key, "tool:search"),
        sum(&results, "search").to_string()
    );
    assert_eq!(
        stored(&server, key, "tool:web_fetch"),
        sum(&results, "fetch").to_string()
    );
    let spent: f64 = stored(&server, key, "spendCents").parse().unwrap();
    assert_eq!(spent, total as f64 * CENTS);
    // One round trip per counted event (the first of each process opens the task with it).
    assert_eq!(server.evalsha_calls() - before, 2 * total, "round trips");
    // The process that finished last saw the whole fleet's count.
    let highest = results
        .iter()
        .map(|r| r["lastSeen"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(highest, total);
    let slowest = results
        .iter()
        .map(|r| r["seconds"].as_f64().unwrap())
        .fold(0.0, f64::max);
    eprintln!(
        "{WORKERS} processes x {n} tool calls and {n} usage events on one task: {total} calls, \
         {spent} cents stored; {:.0} counted events/s across the fleet",
        2.0 * total as f64 / slowest
    );
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn the_cap_holds_fleet_wide() {
    let server = RedisServer::start();
    let key = "fleet:cap";
    let results = run_fleet(&server, key, "cap");
    let cap = cap();
    for r in &results {
        assert_eq!(r["shared"], true, "a worker lost the store: {r}");
    }
    assert_eq!(
        sum(&results, "allowed"),
        cap,
        "exactly the cap's calls were let through fleet-wide"
    );
    let halted = results.iter().filter(|r| r["halts"].as_u64().unwrap() > 0);
    let halted = halted.count() as u64;
    assert_eq!(halted, WORKERS as u64, "every process met the cap");
    // Each process counted the one call that found the cap passed; a halted task answers the
    // rest with its halt without counting them.
    assert_eq!(
        stored(&server, key, "toolCalls"),
        (cap + halted).to_string()
    );
    // Each process reported its halt once to its listeners (later answers repeat it silently).
    for r in &results {
        assert_eq!(r["heard"]["halt"], 1, "{r}");
    }
    eprintln!(
        "{WORKERS} processes x {} tool calls on one task with maxToolCallsPerTask {cap}: {} let \
         through, {} halted answers",
        events(),
        sum(&results, "allowed"),
        sum(&results, "halts")
    );
}

/// The chaos worker: sends events as fast as it can until `AGENTBREAKER_FLEET_UNTIL`, timing
/// each, then waits until it is back on the shared counters.
fn chaos_worker(m: &Monitor, id: u64, heard: &Arc<Mutex<BTreeMap<String, u64>>>) {
    let until: u64 = std::env::var("AGENTBREAKER_FLEET_UNTIL")
        .unwrap()
        .parse()
        .unwrap();
    let mut slowest = Duration::ZERO;
    let mut sent = 0u64;
    let mut local = 0u64;
    let mut i = id;
    while epoch_ms() < until {
        i += 1;
        let event = match i % 4 {
            0 => usage(),
            1 => json!({"type": "alive", "taskId": TASK}),
            _ => tool_use("search"),
        };
        let t = Instant::now();
        let v = m.observe(&event).unwrap();
        slowest = slowest.max(t.elapsed());
        assert_ne!(v.action, VerdictAction::Halt, "{v:?}");
        sent += 1;
        if m.store_status().unwrap().mode != StoreMode::Shared {
            local += 1;
        }
        if i % 64 == 0 {
            let t = Instant::now();
            m.tick();
            m.status();
            slowest = slowest.max(t.elapsed());
        }
        // An agent between events (and room on two cores for the server and 7 other workers:
        // eight processes spinning would measure the scheduler's queue, not the timeout).
        std::thread::sleep(Duration::from_micros(200));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while m.store_status().unwrap().mode != StoreMode::Shared && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    m.observe(&json!({"type": "alive", "taskId": TASK}))
        .unwrap();
    let store = m.store_status().unwrap();
    let result = json!({
        "id": id,
        "sent": sent,
        "slowestMs": slowest.as_secs_f64() * 1000.0,
        "eventsWhileDown": local,
        "outages": store.outages,
        "shared": store.mode == StoreMode::Shared,
        "heard": *heard.lock().unwrap(),
    });
    println!("{RESULT}{result}");
}

#[test]
#[ignore = "needs redis-server: run by make test-redis"]
fn faults_during_a_fleet_run() {
    let mut server = RedisServer::start();
    let key = "fleet:monitor-chaos";
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
        let warnings = r["heard"]["warning"].as_u64().unwrap_or(0);
        // One warning when an outage is found and one when it is over, at most.
        assert!(warnings <= 2 * outages, "{r}");
        assert!(warnings >= 1, "{r}");
        slowest = slowest.max(r["slowestMs"].as_f64().unwrap());
    }
    // storeTimeoutMs is 50; eight processes and a server share two cores here.
    assert!(slowest < 300.0, "the slowest event took {slowest:.1} ms");
    // After the last restart (empty) the fleet counts again: the shared count is there.
    let stored: u64 = stored(&server, key, "toolCalls").parse().unwrap_or(0);
    assert!(stored > 0, "counting resumed after the restart");
    eprintln!(
        "{WORKERS} processes, {rounds} round(s) of SCRIPT FLUSH, SIGSTOP, kill and restart: {} \
         events, slowest {slowest:.1} ms (storeTimeoutMs 50), outages per process {:?}",
        sum(&results, "sent"),
        results
            .iter()
            .map(|r| r["outages"].as_u64().unwrap())
            .collect::<Vec<_>>()
    );
}

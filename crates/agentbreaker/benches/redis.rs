//! The Redis store's speed (issue 19), measured on one redis-server in one run and written to
//! `target/bench/redis.jsonl` for `make bench` (tools/bench_table.py):
//!
//! - recorded failures through Redis-backed FailureBreakers in 8 processes on one key (each a
//!   round trip running the `failure` script), beside the server's own `redis-benchmark` running
//!   EVALSHA of the same script with the same arguments from 8 clients: the goal is a fleet
//!   throughput within 2x of it;
//! - the same from 1 process and 1 client (the cost of one round trip through the breaker);
//! - a guarded no-op call in CLOSED through a Redis-backed breaker (no round trip) beside the
//!   same call through a local breaker;
//! - a Monitor's `tool_use` events with the budget counters in Redis (each a round trip running
//!   the `count` script): 8 processes on one task of one key beside redis-benchmark's EVALSHA of
//!   the same script from 8 clients, and one process beside the same events through a local
//!   Monitor.
//!
//! `make bench-redis` runs it beside a throw-away server (`AGENTBREAKER_REDIS_URL`);
//! `AGENTBREAKER_BENCH_OUTCOMES` sets the failures (and events) per process (default 20 000).
//! The Python row of the issue (a guarded call from Python beside pybreaker's
//! CircuitRedisStorage) is `make bench-python-redis`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentbreaker::failure::{failure_keys, store_scripts};
use agentbreaker::monitor::{monitor_store_scripts, task_key};
use agentbreaker::{FailureBreaker, FailureConfig, ManualClock, Monitor, StoreUrl};
use serde_json::{Value, json};

const WORKER_ENV: &str = "AGENTBREAKER_BENCH_WORKER";
/// `failure` (recorded failures) or `monitor` (a Monitor's tool_use events).
const KIND_ENV: &str = "AGENTBREAKER_BENCH_KIND";
const PROCESSES: usize = 8;

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn config(url: &str, key: &str) -> FailureConfig {
    FailureConfig {
        store: Some(StoreUrl::new(url)),
        key: Some(key.to_string()),
        failure_threshold: u32::MAX,
        warning_threshold: Some(0),
        store_timeout_ms: 5000,
        ..FailureConfig::default()
    }
}

fn outcomes() -> u64 {
    std::env::var("AGENTBREAKER_BENCH_OUTCOMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// A Monitor config with the budgets out of reach (`store`: in Redis under `key`).
fn monitor_config(store: Option<(&str, &str)>) -> Value {
    let mut c = json!({
        "profile": "seed",
        "budget": {"maxToolCallsPerTask": u64::MAX / 2, "maxTaskDurationSecs": 86_400},
        "stagnation": {"noProgressThreshold": 1000, "sameErrorThreshold": 1000},
    });
    if let Some((url, key)) = store {
        c["store"] = json!(url);
        c["key"] = json!(key);
        c["storeTimeoutMs"] = json!(5000);
    }
    c
}

/// The Monitor's event of the benchmark: a tool call of the task `bench`.
fn tool_use() -> Value {
    json!({"type": "tool_use", "name": "search", "taskId": "bench", "input": {"q": "x"}})
}

/// A worker process: waits for the start time, records its failures (or sends its Monitor
/// events), prints the nanoseconds.
fn worker() {
    let var = |name: &str| std::env::var(name).unwrap();
    let n: u64 = var("AGENTBREAKER_BENCH_N").parse().unwrap();
    let start_at: u64 = var("AGENTBREAKER_BENCH_START").parse().unwrap();
    let url = var("AGENTBREAKER_REDIS_URL");
    let key = var(WORKER_ENV);
    if var(KIND_ENV) == "monitor" {
        let m = Monitor::from_json(&monitor_config(Some((&url, &key))), ManualClock::shared(0))
            .unwrap();
        let event = tool_use();
        m.observe(&json!({"type": "alive", "taskId": "bench"}))
            .unwrap();
        while epoch_ms() < start_at {
            std::thread::sleep(Duration::from_micros(200));
        }
        let t = Instant::now();
        for _ in 0..n {
            assert!(!m.observe(&event).unwrap().is_halt());
        }
        let ns = t.elapsed().as_nanos();
        let shared = m.store_status().unwrap().outages == 0;
        println!("BENCH-WORKER {ns} {shared}");
        return;
    }
    let b = FailureBreaker::new(config(&url, &key)).unwrap();
    while epoch_ms() < start_at {
        std::thread::sleep(Duration::from_micros(200));
    }
    let t = Instant::now();
    for _ in 0..n {
        b.record_failure("tool server down");
    }
    let ns = t.elapsed().as_nanos();
    let shared = b.store_status().unwrap().outages == 0;
    println!("BENCH-WORKER {ns} {shared}");
}

/// Runs `processes` workers of `kind` on one key; the fleet's nanoseconds per recorded failure
/// (or Monitor event).
fn fleet(url: &str, kind: &str, key: &str, processes: usize, n: u64) -> f64 {
    let exe = std::env::current_exe().unwrap();
    let start_at = epoch_ms() + 1500;
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(&exe)
                .env(WORKER_ENV, key)
                .env(KIND_ENV, kind)
                .env("AGENTBREAKER_REDIS_URL", url)
                .env("AGENTBREAKER_BENCH_N", n.to_string())
                .env("AGENTBREAKER_BENCH_START", start_at.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut slowest = 0u128;
    for mut child in children {
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("BENCH-WORKER ") {
                let mut parts = rest.split(' ');
                slowest = slowest.max(parts.next().unwrap().parse().unwrap());
                assert_eq!(parts.next(), Some("true"), "a worker lost the store");
            }
        }
        assert!(child.wait().unwrap().success());
    }
    slowest as f64 / (n as f64 * processes as f64)
}

/// redis-benchmark's nanoseconds per EVALSHA of the `failure` script (or the Monitor's `count`),
/// `clients` connections, with the arguments our calls pass.
fn peer(url: &str, kind: &str, clients: usize, total: u64) -> f64 {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_connection().unwrap();
    let scripts = if kind == "monitor" {
        monitor_store_scripts()
    } else {
        store_scripts()
    };
    let (_, source) = scripts
        .into_iter()
        .find(|(name, _)| *name == "failure" || *name == "count")
        .unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(&source)
        .query(&mut con)
        .unwrap();
    let port = url
        .rsplit_once(':')
        .unwrap()
        .1
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let keys: Vec<String> = if kind == "monitor" {
        vec![task_key(&format!("bench:peer:{}", epoch_ms()), "bench")]
    } else {
        failure_keys("bench:peer").to_vec()
    };
    let now = epoch_ms().to_string();
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", "127.0.0.1", "-p", &port, "-c", &clients.to_string()])
        .args(["-n", &total.to_string(), "--csv", "EVALSHA", &sha])
        .arg(keys.len().to_string())
        .args(&keys);
    if kind == "monitor" {
        // now, ttlMs, trackedTools, calls, cents, then the tool: name, calls, limited.
        cmd.args(["0", "86700000", "64", "1", "0", "search", "1", "0"]);
    } else {
        cmd.args([
            "0123456789abcdef",
            &now,
            "tool server down",
            "",
            "4294967295",
            "0",
        ])
        .args(["0", "100"]);
    }
    let out = cmd
        .output()
        .expect("redis-benchmark (Debian's redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("\"EVALSHA"))
        .unwrap_or_else(|| panic!("no EVALSHA row in redis-benchmark's output: {text}"));
    let rps: f64 = row
        .split("\",\"")
        .nth(1)
        .unwrap()
        .trim_matches('"')
        .parse()
        .unwrap();
    // The script really ran: the peer's count is the requests sent.
    let field = if kind == "monitor" {
        "toolCalls"
    } else {
        "failures"
    };
    let count: u64 = redis::cmd("HGET")
        .arg(&keys[0])
        .arg(field)
        .query(&mut con)
        .unwrap();
    assert!(
        count >= total,
        "redis-benchmark's scripts did not run ({count})"
    );
    1e9 / rps
}

/// Nanoseconds per guarded no-op call (CLOSED, nothing pending).
fn guarded_call(b: &FailureBreaker) -> f64 {
    let n = 2_000_000;
    for _ in 0..10_000 {
        let _ = black_box(b.call(|| Ok::<_, String>(black_box(1))));
    }
    let t = Instant::now();
    for _ in 0..n {
        let _ = black_box(b.call(|| Ok::<_, String>(black_box(1))));
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    if std::env::var_os(WORKER_ENV).is_some() {
        worker();
        return;
    }
    let url = std::env::var("AGENTBREAKER_REDIS_URL")
        .expect("AGENTBREAKER_REDIS_URL names the server (make bench-redis starts one)");
    let out_path = std::env::var("AGENTBREAKER_BENCH_OUT").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/bench/redis.jsonl"
        )
        .to_string()
    });
    let n = outcomes();
    let total = n * PROCESSES as u64;
    let mut rows = Vec::new();

    // Best of three fleet runs, each on a key of its own; the peer likewise.
    let ours8 = (0..3)
        .map(|i| fleet(&url, "failure", &format!("bench:fleet:{i}"), PROCESSES, n))
        .fold(f64::INFINITY, f64::min);
    let peer8 = (0..3)
        .map(|_| peer(&url, "failure", PROCESSES, total))
        .fold(f64::INFINITY, f64::min);
    rows.push(json!({
        "surface": "rust",
        "operation": "Redis store: recorded failures, 8 processes on one key (fleet time per outcome)",
        "ours_ns": ours8,
        "peer": "redis-benchmark EVALSHA of the same script, 8 clients",
        "peer_ns": peer8,
        "min_ratio": 0.5,
        "note": format!("{:.0} outcomes/s vs {:.0} scripts/s", 1e9 / ours8, 1e9 / peer8),
    }));
    let ours1 = (0..3)
        .map(|i| fleet(&url, "failure", &format!("bench:one:{i}"), 1, n))
        .fold(f64::INFINITY, f64::min);
    let peer1 = (0..3)
        .map(|_| peer(&url, "failure", 1, n))
        .fold(f64::INFINITY, f64::min);
    rows.push(json!({
        "surface": "rust",
        "operation": "Redis store: one recorded failure, 1 process (a round trip)",
        "ours_ns": ours1,
        "peer": "redis-benchmark EVALSHA of the same script, 1 client",
        "peer_ns": peer1,
    }));

    let shared = FailureBreaker::new(config(&url, "bench:closed")).unwrap();
    let local = FailureBreaker::new(FailureConfig::default()).unwrap();
    let ours = guarded_call(&shared);
    let theirs = guarded_call(&local);
    rows.push(json!({
        "surface": "rust",
        "operation": "Redis store: guarded no-op call in CLOSED (no round trip)",
        "ours_ns": ours,
        "peer": "the same call through a local FailureBreaker",
        "peer_ns": theirs,
    }));

    // A Monitor's budget counters: tool_use events on one task.
    let monitor8 = (0..3)
        .map(|i| fleet(&url, "monitor", &format!("bench:monitor:{i}"), PROCESSES, n))
        .fold(f64::INFINITY, f64::min);
    let count8 = (0..3)
        .map(|_| peer(&url, "monitor", PROCESSES, total))
        .fold(f64::INFINITY, f64::min);
    rows.push(json!({
        "surface": "rust",
        "operation": "Redis store: Monitor tool_use events, 8 processes on one task (fleet time per event)",
        "ours_ns": monitor8,
        "peer": "redis-benchmark EVALSHA of the same script, 8 clients",
        "peer_ns": count8,
        "min_ratio": 0.5,
        "note": format!("{:.0} events/s vs {:.0} scripts/s", 1e9 / monitor8, 1e9 / count8),
    }));
    let monitor1 = (0..3)
        .map(|i| fleet(&url, "monitor", &format!("bench:monitor-one:{i}"), 1, n))
        .fold(f64::INFINITY, f64::min);
    let local = Monitor::from_json(&monitor_config(None), ManualClock::shared(0)).unwrap();
    let event = tool_use();
    let t = Instant::now();
    for _ in 0..n {
        black_box(local.observe(&event).unwrap());
    }
    let local_ns = t.elapsed().as_nanos() as f64 / n as f64;
    rows.push(json!({
        "surface": "rust",
        "operation": "Redis store: one Monitor tool_use event, 1 process (a round trip)",
        "ours_ns": monitor1,
        "peer": "the same event through a local Monitor",
        "peer_ns": local_ns,
        "note": "the peer makes no round trip: the figure is what sharing the budget costs",
    }));

    if let Some(dir) = std::path::Path::new(&out_path).parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&out_path)
        .unwrap();
    for row in &rows {
        writeln!(file, "{row}").unwrap();
        println!("{row}");
    }
}

//! Bounded memory under an endless stream of distinct input (contract §6: error texts capped at 4096
//! bytes and the error map at 1024 keys; contract §2: the failure history is a ring of `historyLimit`;
//! contract §3: the output trend keeps 10 values; decisions: step history bounded by the step
//! thresholds, output-loop memory as 64-bit hashes, at most 10 000 open tasks).
//!
//! A counting global allocator measures the live heap of this test binary. Each test feeds one
//! breaker `AGENTBREAKER_BOUNDED_EVENTS` distinct inputs (default 100 000; `make reliability` uses
//! 1 000 000) and checks that the live heap the breaker holds (a) stays under a bound computed from
//! the design's caps, at its peak as well as at the end, and (b) stops growing: the growth between
//! the first quarter of the stream and its end is within a small slack. The tests take a lock, so
//! only one measures at a time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentbreaker::monitor::MAX_MONITOR_TASKS;
use agentbreaker::{
    AgentEvent, AgentStep, BudgetBreaker, BudgetConfig, FailureBreaker, FailureConfig,
    IterationMetrics, ManualClock, Monitor, MonitorConfig, MonitorEvent, StagnationBreaker,
    StagnationConfig, State,
};
use serde_json::json;

// -------------------------------------------------------------------------------------------------
// The counting allocator

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are updated.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's pointer, layout and size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One measurement at a time: other tests in this binary would allocate into the counters.
static MEASURING: Mutex<()> = Mutex::new(());

const KIB: usize = 1024;
/// Room for what the test loop itself holds at a peak (one input being built, the allocator's
/// own rounding is not counted) and for test-harness allocations on other threads.
const SLACK: usize = 64 * KIB;
/// The error text cap (contract §6).
const MAX_ERROR_BYTES: usize = 4096;
/// The error map cap (contract §6).
const MAX_ERROR_KEYS: usize = 1024;

fn events() -> usize {
    match std::env::var("AGENTBREAKER_BOUNDED_EVENTS") {
        Ok(v) => v
            .trim()
            .parse()
            .expect("AGENTBREAKER_BOUNDED_EVENTS: a whole number"),
        Err(_) => 100_000,
    }
}

/// Live heap figures of one run, relative to the live heap before the breaker was made.
#[derive(Debug)]
struct Heap {
    /// After the first quarter of the inputs.
    at_quarter: usize,
    /// After all of them.
    at_end: usize,
    /// The highest point during the run.
    peak: usize,
}

/// Makes a breaker with `make`, feeds it `n` inputs with `feed(&breaker, i)`, and measures the
/// live heap it holds; checks `check(&breaker)` at the end, before it is dropped.
///
/// A throw-away breaker is fed the first inputs beforehand, so that what the library allocates
/// once per process (the fingerprint regexes, compiled on first use, and their caches) is not
/// counted as the breaker's.
fn measure<B>(
    n: usize,
    make: impl Fn() -> B,
    mut feed: impl FnMut(&B, usize),
    check: impl FnOnce(&B),
) -> Heap {
    let warm = make();
    for i in 0..n.min(2000) {
        feed(&warm, i);
    }
    drop(warm);
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let breaker = make();
    let mut at_quarter = 0;
    for i in 0..n {
        feed(&breaker, i);
        if i + 1 == n / 4 {
            at_quarter = LIVE.load(Ordering::SeqCst).saturating_sub(base);
        }
    }
    let heap = Heap {
        at_quarter,
        at_end: LIVE.load(Ordering::SeqCst).saturating_sub(base),
        peak: PEAK.load(Ordering::SeqCst).saturating_sub(base),
    };
    check(&breaker);
    drop(breaker);
    heap
}

fn check_bounded(what: &str, n: usize, heap: &Heap, bound: usize) {
    eprintln!(
        "{what}: {n} inputs; live heap {} KiB after a quarter, {} KiB at the end, peak {} KiB; \
         bound {} KiB",
        heap.at_quarter / KIB,
        heap.at_end / KIB,
        heap.peak / KIB,
        bound / KIB
    );
    assert!(
        heap.peak <= bound,
        "{what}: peak live heap {} bytes is over the bound of {bound} bytes",
        heap.peak
    );
    assert!(
        heap.at_end <= heap.at_quarter + SLACK,
        "{what}: the heap kept growing: {} bytes after a quarter, {} bytes at the end",
        heap.at_quarter,
        heap.at_end
    );
}

/// A word of letters only, different for every `i`: digits would be normalized away by the
/// fingerprint (contract §6), and only the letters g..v are used so that no run of them is a hex id.
fn word(mut i: usize) -> String {
    let mut w = String::new();
    loop {
        w.push((b'g' + (i % 16) as u8) as char);
        i /= 16;
        if i == 0 {
            return w;
        }
    }
}

/// The `i`-th error text: distinct under every fingerprint mode, and every 1000th one is 10 000
/// bytes long, past the 4096-byte cap.
fn error_text(i: usize) -> String {
    let w = word(i);
    if i % 1000 == 999 {
        format!("{w} failed: {}", "z".repeat(10_000))
    } else {
        format!("module {w} failed while loading {w}")
    }
}

// -------------------------------------------------------------------------------------------------
// The breakers

/// One FailureBreaker, every failure a distinct error (with the identical-error rule on, so each
/// is fingerprinted), with probes and successes mixed in. Bound: the history ring of
/// `historyLimit` records, each at most 4096 bytes of text plus the record.
#[test]
fn failure_breaker_memory_is_bounded_by_the_history_ring() {
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let n = events();
    let history_limit = 100usize;
    let clock = ManualClock::shared(0);
    let heap = measure(
        n,
        || {
            FailureBreaker::with_clock(
                FailureConfig {
                    identical_error_threshold: 3,
                    history_limit: history_limit as u32,
                    cooldown_ms: 10,
                    half_open_max_probes: 2,
                    ..FailureConfig::default()
                },
                clock.clone(),
            )
            .unwrap()
        },
        |b, i| {
            b.record_failure(&error_text(i));
            if i % 7 == 0 {
                clock.advance(10);
                b.should_allow_operation();
            }
            if i % 50 == 0 {
                b.record_success();
            }
        },
        |b| {
            let s = b.status();
            assert_eq!(s.failure_history.len(), history_limit);
            assert!(
                s.failure_history
                    .iter()
                    .all(|r| r.error.len() <= MAX_ERROR_BYTES)
            );
            assert_eq!(b.metrics().total_failures, n as u64);
        },
    );
    let record = std::mem::size_of::<agentbreaker::FailureRecord>();
    // The ring's buffer may be up to twice its length; each record holds one capped text.
    let bound = history_limit * (MAX_ERROR_BYTES + 2 * record) + SLACK;
    check_bounded("FailureBreaker", n, &heap, bound);
}

/// One StagnationBreaker, every error a distinct fingerprint, iterations without progress (with
/// an occasional progress, which clears the map), and every step distinct with all four step
/// detectors on. Bound: 1024 keys, each a capped text kept twice (map and eviction order), plus
/// the map's tables; the trend (10 values) and the step history (hashes only) are small.
#[test]
fn stagnation_breaker_memory_is_bounded_by_the_error_map_cap() {
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let n = events();
    let heap = measure(
        n,
        || {
            StagnationBreaker::with_clock(
                StagnationConfig {
                    same_error_threshold: 3,
                    repeat_threshold: 50,
                    cycle_repeats: 10,
                    max_cycle_length: 20,
                    fail_streak_threshold: 50,
                    // The step history keeps the longest look-back: 200 steps (1000 at most).
                    fail_window: 200,
                    ..StagnationConfig::default()
                },
                ManualClock::shared(0),
            )
            .unwrap()
        },
        |b, i| {
            b.record_error(&error_text(i), false);
            b.record_step(&AgentStep {
                action: format!("run {}", word(i)),
                result: error_text(i),
                failed: i % 3 != 0,
            });
            b.record_progress(IterationMetrics {
                files_changed: u64::from(i % 100_003 == 100_002),
                tests_passing: 0,
                output_length: i as u64,
            });
        },
        |b| {
            let s = b.status();
            assert!(s.error_counts.len() <= MAX_ERROR_KEYS);
            assert!(s.output_trend.len() <= 10);
            if n >= 2 * MAX_ERROR_KEYS {
                assert_eq!(s.error_counts.len(), MAX_ERROR_KEYS, "the map is full");
            }
            assert!(s.error_counts.values().all(|&c| c == 1), "all distinct");
            // Distinct errors never repeat, but the breaker stops making progress: it opened.
            assert_ne!(b.state(), State::Closed);
        },
    );
    // The map holds at most 1024 keys; a key is a fingerprint of at most 4096 bytes, stored twice
    // (in the map and in the eviction order). With this stream's texts (under 64 bytes, and
    // 4096 bytes for one in a thousand, so at most two in any 1024 consecutive keys) that is
    // at most `key_bytes` of key text; on top come the table (a slot is a String, a count and a
    // control byte; under churn hashbrown moves into a table twice as big when deleted slots use
    // up its spare room, so 1024 keys may occupy 4096 slots; here that happens after about 10 000
    // evictions), the order queue (1024 Strings, buffer up to twice that) and
    // the step history (at most 1000 records of 24 bytes, the largest look-back the step
    // thresholds allow, buffer up to twice that).
    const SHORT_TEXT: usize = 64;
    assert!(error_text(n.saturating_sub(2)).len() < SHORT_TEXT);
    let key_bytes = MAX_ERROR_KEYS * SHORT_TEXT + 2 * MAX_ERROR_BYTES;
    let bound =
        2 * key_bytes + 4096 * (24 + 8 + 1) + 2 * MAX_ERROR_KEYS * 24 + 2 * 1000 * 24 + SLACK;
    // (For texts all 4096 bytes long the same formula gives 1024 * 2 * 4096 = 8 MiB of keys: the
    // design's worst case.)
    check_bounded("StagnationBreaker", n, &heap, bound);
}

/// One BudgetBreaker, a million events: tool calls with distinct inputs, assistant outputs with
/// distinct texts, usage, and a steady churn of tasks opened and closed by heartbeats on top of
/// 64 long-lived ones. Bound: per open task its counters and the last `loopWindow` outputs as
/// 64-bit hashes (at most `maxTokensPerOutput` each).
#[test]
fn budget_breaker_memory_is_bounded_by_open_tasks_and_output_windows() {
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let n = events();
    let clock = ManualClock::shared(0);
    let long_lived = 64usize;
    let max_tokens = 512usize;
    let loop_window = 3usize;
    let config = BudgetConfig {
        max_tool_calls_per_task: u64::MAX / 2,
        max_token_spend_cents_per_task: u64::MAX / 2,
        max_task_duration_secs: u64::MAX / 2000,
        max_idle_secs: u64::MAX / 2000,
        loop_window: loop_window as u32,
        max_tokens_per_output: max_tokens as u32,
        ..BudgetConfig::default()
    };
    // Each event is built just before it is ingested and freed after: one at a time is within
    // the slack.
    let tool = |task: &str, i: usize| {
        AgentEvent::from_json(&json!({
            "type": "tool_use", "name": "Bash", "taskId": task,
            "input": {"command": format!("grep {} src/", word(i)), "n": i},
        }))
        .unwrap()
    };
    let say = |task: &str, i: usize| {
        // 10 to 40 distinct words, and 600 (past maxTokensPerOutput) once in a hundred.
        let words = if i % 100 == 2 { 600 } else { 10 + i % 31 };
        let text: Vec<String> = (0..words).map(|j| word(i * 600 + j)).collect();
        AgentEvent::from_json(&json!({"type": "assistant", "taskId": task, "text": text.join(" ")}))
            .unwrap()
    };
    let usage = |task: &str| {
        AgentEvent::from_json(&json!({
            "type": "usage", "taskId": task,
            "usage": {"input_tokens": 1000, "output_tokens": 10}
        }))
        .unwrap()
    };
    let heartbeat = |task: &str, phase: &str| {
        AgentEvent::from_json(&json!({"type": "heartbeat", "taskId": task, "phase": phase}))
            .unwrap()
    };
    let ids: Vec<String> = (0..long_lived)
        .map(|t| format!("task-{}", word(t)))
        .collect();
    let heap = measure(
        n,
        || BudgetBreaker::with_clock(config.clone(), clock.clone()).unwrap(),
        |b, i| {
            let task = &ids[i % long_lived];
            let halt = match i % 4 {
                0 | 1 => b.ingest_event(&tool(task, i)).unwrap(),
                2 => b.ingest_event(&say(task, i)).unwrap(),
                _ => {
                    // A short-lived sibling task, opened and closed again.
                    let child = format!("child-{}", word(i));
                    b.ingest_event(&heartbeat(&child, "starting")).unwrap();
                    b.ingest_event(&usage(&child)).unwrap();
                    b.ingest_event(&heartbeat(&child, "done")).unwrap();
                    b.ingest_event(&usage(task)).unwrap()
                }
            };
            assert!(halt.is_none(), "event {i} halted: {halt:?}");
            if i % 1000 == 0 {
                clock.advance(1);
                assert!(b.tick().is_empty());
            }
        },
        |b| {
            let snap = b.snapshot();
            assert_eq!(snap.tasks.len(), long_lived);
            assert!(snap.stack.is_empty());
            let calls: u64 = snap.tasks.iter().map(|t| t.tool_calls).sum();
            assert_eq!(calls, (n as u64).div_ceil(4) + (n as u64 + 2) / 4);
        },
    );
    // Per task: the task record and its id (twice: the task and the id index), the window of
    // token-hash sets, and the maps' entries.
    let per_task = 256 + 2 * 64 + loop_window * (max_tokens * 8 + 24);
    let bound = long_lived * per_task + SLACK;
    check_bounded("BudgetBreaker", n, &heap, bound);
}

/// One Monitor (the coding-agent profile, budgets out of the way) fed distinct tool calls in 16
/// long-lived tasks — every fourth call left without a result, so steps fill up to their cap of
/// 64 calls —, a 10 MB result once in a thousand, failures with distinct errors, re-applied and
/// new edits, and short-lived tasks opened and closed. Bound: per task, a step of 64 calls, the
/// itemized tools, the error counts, the digests and the step history, at their caps.
#[test]
fn monitor_memory_is_bounded_by_its_per_task_caps() {
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let n = events();
    let clock = ManualClock::shared(0);
    let long_lived = 16usize;
    let mut config = MonitorConfig::default();
    config.budget.max_tool_calls_per_task = u64::MAX / 2;
    config.budget.max_token_spend_cents_per_task = u64::MAX / 2;
    config.budget.max_task_duration_secs = u64::MAX / 2000;
    config.budget.max_idle_secs = u64::MAX / 2000;
    // Every rule that could halt a task out of the way: the test is about memory.
    config.stagnation.repeat_threshold = 0;
    config.stagnation.cycle_repeats = 0;
    config.stagnation.fail_streak_threshold = 0;
    config.stagnation.fail_window = 0;
    config.stagnation.same_error_threshold = u32::MAX;
    config.stagnation.no_progress_threshold = 1000;
    config.failure.failure_threshold = u32::MAX;
    config.failure.warning_threshold = None;
    let big = "y".repeat(10 << 20);
    let ids: Vec<String> = (0..long_lived)
        .map(|t| format!("task-{}", word(t)))
        .collect();
    let heap = measure(
        n,
        || Monitor::with_clock(config.clone(), clock.clone()).unwrap(),
        |m, i| {
            let task = &ids[i % long_lived];
            let id = word(i);
            let name = format!("tool-{}", word(i % 5000));
            let use_ = json!({"type": "tool_use", "taskId": task, "name": name, "id": id,
                              "input": {"q": word(i), "n": i}});
            let v = m.observe(&use_).unwrap();
            assert!(!v.is_halt(), "event {i}: {v:?}");
            match i % 4 {
                0 => {} // left unanswered
                1 => {
                    // The 10 MB text is borrowed, not copied into the event.
                    let text = if i % 1000 == 1 { big.as_str() } else { "ok" };
                    let result = MonitorEvent::tool_result(true, text, Some(id.as_str()))
                        .for_task(task.as_str());
                    m.observe_event(&result).unwrap();
                }
                2 => {
                    m.observe(&json!({"type": "progress", "taskId": task, "files": 1,
                                      "digest": word(i % 3000)}))
                        .unwrap();
                    m.observe(&json!({"type": "tool_result", "taskId": task, "id": id,
                                      "ok": false, "text": error_text(i)}))
                        .unwrap();
                }
                _ => {
                    let child = format!("child-{}", word(i));
                    m.observe(&json!({"type": "heartbeat", "taskId": child, "phase": "starting"}))
                        .unwrap();
                    m.observe(&json!({"type": "assistant", "taskId": child, "text": word(i)}))
                        .unwrap();
                    m.observe(&json!({"type": "heartbeat", "taskId": child, "phase": "done"}))
                        .unwrap();
                    m.observe(&json!({"type": "assistant", "taskId": task, "text": word(i)}))
                        .unwrap();
                }
            }
            if i % 1000 == 0 {
                clock.advance(1);
                assert!(m.tick().is_empty());
            }
        },
        |m| {
            let status = m.status();
            assert_eq!(status["tasks"].as_array().unwrap().len(), long_lived);
            assert!(
                status["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|t| t["halted"] == false)
            );
        },
    );
    // Per task: a step of 64 calls (names, ids and descriptions up to 256 + 256 + 160 bytes, an
    // error line of 160), 64 itemized tools of up to 256 bytes, 64 error lines, 256 digests, the
    // step history and the recent-step descriptions, the output window, the ids.
    let per_task = 64 * (256 + 256 + 160 + 160 + 96)
        + 64 * (256 + 48)
        + 64 * (160 + 48)
        + 256 * 8
        + 1024 * 24
        + 8 * 160
        + 512 * 8 * 2
        + 1024;
    let bound = long_lived * per_task + SLACK;
    check_bounded("Monitor", n, &heap, bound);
}

/// 100 000 tasks: a Monitor refuses to open more than 4096 at once (INVALID_EVENT, nothing
/// changed), and tasks closed with a done heartbeat make room again.
#[test]
fn monitor_tasks_are_capped() {
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let m = Monitor::with_clock(MonitorConfig::default(), ManualClock::shared(0)).unwrap();
    let base = LIVE.load(Ordering::SeqCst);
    let mut refused = 0;
    for i in 0..100_000usize {
        let task = format!("t{}", word(i));
        match m.observe(&json!({"type": "tool_use", "taskId": task, "name": "x"})) {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.code(), "INVALID_EVENT");
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 100_000 - MAX_MONITOR_TASKS);
    let held = LIVE.load(Ordering::SeqCst).saturating_sub(base);
    eprintln!(
        "Monitor: 100 000 tasks asked for, 4096 open, {} KiB",
        held / KIB
    );
    assert!(held < 4096 * 4 * KIB, "{held} bytes for 4096 open tasks");
    m.observe(&json!({"type": "heartbeat", "taskId": format!("t{}", word(0)), "phase": "done"}))
        .unwrap();
    m.observe(&json!({"type": "tool_use", "taskId": "new", "name": "x"}))
        .unwrap();
}

//! The hot paths, beside the Rust breakers people use today (`recloser`, `failsafe`), in one run.
//! `make bench-rust` runs it and turns criterion's estimates into `target/bench/rust.jsonl`.
//!
//! Group names are the operations; in a group, `agentbreaker` is ours and every other function is
//! a peer.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use agentbreaker::{
    AgentEvent, AgentStep, BudgetBreaker, BudgetConfig, EventKind, FailureBreaker, FailureConfig,
    IterationMetrics, Loop, LoopConfig, ManualClock, Monitor, MonitorConfig, Observation,
    StagnationBreaker, StagnationConfig, Usage, analyze, profile,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use failsafe::CircuitBreaker as _;

fn closed_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("FailureBreaker closed path (permission + success)");
    let ours = FailureBreaker::new(FailureConfig::default()).unwrap();
    g.bench_function("agentbreaker", |b| {
        b.iter(|| {
            black_box(ours.should_allow_operation());
            ours.record_success();
        })
    });
    let recloser = recloser::Recloser::default();
    g.bench_function("recloser", |b| {
        b.iter(|| black_box(recloser.call(|| Ok::<(), ()>(()))))
    });
    let failsafe = failsafe::Config::new().build();
    g.bench_function("failsafe", |b| {
        b.iter(|| black_box(failsafe.call(|| Ok::<(), ()>(()))))
    });
    g.finish();

    let mut g = c.benchmark_group("FailureBreaker guarded call of a no-op");
    g.bench_function("agentbreaker", |b| {
        b.iter(|| black_box(ours.call(|| Ok::<(), String>(()))))
    });
    g.bench_function("recloser", |b| {
        b.iter(|| black_box(recloser.call(|| Ok::<(), ()>(()))))
    });
    g.bench_function("failsafe", |b| {
        b.iter(|| black_box(failsafe.call(|| Ok::<(), ()>(()))))
    });
    g.finish();
}

fn open_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("FailureBreaker open-path refusal");
    let clock = ManualClock::shared(0);
    let ours = FailureBreaker::with_clock(FailureConfig::default(), clock).unwrap();
    for _ in 0..5 {
        ours.record_failure("Path not found");
    }
    g.bench_function("agentbreaker", |b| b.iter(|| black_box(ours.try_acquire())));
    let recloser = recloser::Recloser::custom()
        .closed_len(1)
        .open_wait(Duration::from_secs(3600))
        .build();
    let _ = recloser.call(|| Err::<(), ()>(()));
    g.bench_function("recloser", |b| {
        b.iter(|| black_box(recloser.call(|| Ok::<(), ()>(()))))
    });
    g.finish();
}

/// Two threads share one breaker; the figure is per operation pair.
fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("FailureBreaker closed path, 2 threads sharing one breaker");
    let ours = Arc::new(FailureBreaker::new(FailureConfig::default()).unwrap());
    g.bench_function("agentbreaker", |b| {
        b.iter_custom(|iters| {
            let barrier = Arc::new(Barrier::new(2));
            let other = {
                let (ours, barrier) = (Arc::clone(&ours), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..iters {
                        black_box(ours.should_allow_operation());
                        ours.record_success();
                    }
                })
            };
            barrier.wait();
            let start = Instant::now();
            for _ in 0..iters {
                black_box(ours.should_allow_operation());
                ours.record_success();
            }
            other.join().unwrap();
            start.elapsed() / 2
        })
    });
    let recloser = Arc::new(recloser::Recloser::default());
    g.bench_function("recloser", |b| {
        b.iter_custom(|iters| {
            let barrier = Arc::new(Barrier::new(2));
            let other = {
                let (r, barrier) = (Arc::clone(&recloser), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..iters {
                        black_box(r.call(|| Ok::<(), ()>(())).ok());
                    }
                })
            };
            barrier.wait();
            let start = Instant::now();
            for _ in 0..iters {
                black_box(recloser.call(|| Ok::<(), ()>(())).ok());
            }
            other.join().unwrap();
            start.elapsed() / 2
        })
    });
    g.finish();
}

fn stagnation(c: &mut Criterion) {
    let mut g = c.benchmark_group("StagnationBreaker record_progress + check");
    let ours = StagnationBreaker::new(StagnationConfig::default()).unwrap();
    let mut n = 0u64;
    g.bench_function("agentbreaker", |b| {
        b.iter(|| {
            n += 1;
            ours.record_progress(IterationMetrics {
                files_changed: 1,
                tests_passing: n,
                output_length: 900,
            });
            black_box(ours.check())
        })
    });
    g.finish();
}

fn budget(c: &mut Criterion) {
    // Limits out of reach, so no task halts (a halted task ignores its events) and every ingest
    // does the full work. A fresh breaker per operation.
    let fresh = || {
        BudgetBreaker::new(BudgetConfig {
            max_tool_calls_per_task: u64::MAX / 2,
            max_token_spend_cents_per_task: u64::MAX / 2,
            ..BudgetConfig::default()
        })
        .unwrap()
    };
    let tool_use = AgentEvent {
        task_id: None,
        kind: EventKind::ToolUse("web_fetch".into()),
    };
    let usage = AgentEvent {
        task_id: None,
        kind: EventKind::Usage {
            model: Some("claude-sonnet-4".into()),
            usage: Usage {
                input_tokens: 4000,
                output_tokens: 300,
                cache_creation_input_tokens: 1200,
                cache_read_input_tokens: 24_000,
            },
        },
    };
    let mut g = c.benchmark_group("BudgetBreaker ingest of a tool_use event");
    let ours = fresh();
    g.bench_function("agentbreaker", |b| {
        b.iter(|| black_box(ours.ingest_event(&tool_use)))
    });
    g.finish();
    let mut g = c.benchmark_group("BudgetBreaker ingest of a usage event");
    let ours = fresh();
    g.bench_function("agentbreaker", |b| {
        b.iter(|| black_box(ours.ingest_event(&usage)))
    });
    g.finish();
    // 512-token assistant outputs, each sharing about 80% of its tokens with the one before
    // (Jaccard ~0.8, under the 0.95 loop threshold): every ingest hashes, sorts and compares.
    let assistant: Vec<AgentEvent> = (0..8)
        .map(|v| AgentEvent {
            task_id: None,
            kind: EventKind::Assistant(
                (0..512)
                    .map(|i| format!("token{}", i + v * 60))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        })
        .collect();
    let mut g = c.benchmark_group("BudgetBreaker ingest of a 512-token assistant event");
    let ours = fresh();
    let mut i = 0usize;
    g.bench_function("agentbreaker", |b| {
        b.iter(|| {
            i = (i + 1) % assistant.len();
            let halt = ours.ingest_event(&assistant[i]).unwrap();
            assert!(halt.is_none(), "no output loop in this benchmark");
            black_box(halt)
        })
    });
    g.finish();
    // The JSON form bindings use.
    let json = serde_json::json!({"type": "tool_use", "name": "web_fetch", "input": {"url": "https://example.com"}});
    let mut g = c.benchmark_group("BudgetBreaker ingest of a tool_use event from JSON");
    let ours = fresh();
    g.bench_function("agentbreaker", |b| b.iter(|| black_box(ours.ingest(&json))));
    g.finish();
}

fn analyzer(c: &mut Criterion) {
    let paragraph = "I looked at the failing parser test and it is not done yet. The tokenizer \
                     splits identifiers at underscores, which breaks snake_case names. Next steps: \
                     fix the tokenizer, then run the suite again. 12 passed, 1 failed.\n";
    let mut text = String::new();
    while text.len() < 4096 {
        text.push_str(paragraph);
    }
    text.truncate(4096);
    let mut g = c.benchmark_group("analyzer on a 4 KB response");
    g.bench_function("agentbreaker", |b| {
        b.iter(|| black_box(analyze(black_box(&text))))
    });
    g.finish();
}

fn agent_loop(c: &mut Criterion) {
    let config = LoopConfig {
        max_iterations: u32::MAX,
        ..LoopConfig::default()
    };
    let lp = Loop::new(config).unwrap();
    let obs = Observation {
        output: "Refactored the tokenizer; 12 passed, 1 failed. Next steps: the parser.".into(),
        files_changed: 1,
        tests_passing: 12,
        ..Observation::default()
    };
    let mut g = c.benchmark_group("Loop observe (one iteration)");
    g.bench_function("agentbreaker", |b| {
        b.iter(|| black_box(lp.observe(&obs).unwrap()))
    });
    g.finish();
}

/// The Monitor (coding-agent profile) on a stream of varied steps, beside the breakers it
/// composes doing their part of the same work (the BudgetBreaker's ingest of the event and the
/// StagnationBreaker's step detectors on the completed step).
fn monitor(c: &mut Criterion) {
    let mut config = MonitorConfig::default();
    // The budgets out of the way so the stream can run forever without a halt.
    config.budget.max_tool_calls_per_task = u64::MAX / 2;
    config.budget.max_task_duration_secs = u64::MAX / 4000;
    let clock = ManualClock::shared(0);
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    ];
    let line = "test_parser.py::test_tokenizer_splits_identifiers PASSED  [ 42%]\n";
    let result_text = |w: &str| {
        let mut t = format!("{w}: ");
        while t.len() < 1024 {
            t.push_str(line);
        }
        t.truncate(1024);
        t
    };
    let uses: Vec<serde_json::Value> = words
        .iter()
        .map(|w| {
            serde_json::json!({"type": "tool_use", "name": "Bash", "id": w,
                                    "input": {"command": format!("pytest -q tests/{w}")}})
        })
        .collect();
    let results: Vec<serde_json::Value> = words
        .iter()
        .map(|w| {
            serde_json::json!({"type": "tool_result", "id": w, "ok": true,
                                    "text": result_text(w)})
        })
        .collect();

    let mut g = c.benchmark_group("Monitor observe of a tool_use event");
    let m = Monitor::with_clock(config.clone(), clock.clone()).unwrap();
    let mut i = 0usize;
    g.bench_function("agentbreaker", |b| {
        b.iter_batched(
            || {
                // The previous call answered, so each tool_use begins a step.
                i = (i + 1) % words.len();
                m.observe(&results[(i + words.len() - 1) % words.len()])
                    .unwrap();
                i
            },
            |i| {
                let v = m.observe(&uses[i]).unwrap();
                assert!(!v.is_halt(), "{v:?}");
                black_box(v)
            },
            BatchSize::PerIteration,
        )
    });
    let budget = BudgetBreaker::new(config.budget.clone()).unwrap();
    g.bench_function("BudgetBreaker ingest (the part it composes)", |b| {
        b.iter(|| black_box(budget.ingest(&uses[0])))
    });
    g.finish();

    let mut g = c.benchmark_group("Monitor observe of a tool_result with 1 KB of text");
    let m = Monitor::with_clock(config.clone(), clock.clone()).unwrap();
    let mut i = 0usize;
    g.bench_function("agentbreaker", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % words.len();
                m.observe(&uses[i]).unwrap();
                i
            },
            |i| {
                // Completes the step: the step detectors and every rule run.
                let v = m.observe(&results[i]).unwrap();
                assert!(!v.is_halt(), "{v:?}");
                black_box(v)
            },
            BatchSize::PerIteration,
        )
    });
    let stagnation = StagnationBreaker::new(profile("coding-agent").unwrap().stagnation).unwrap();
    let steps: Vec<AgentStep> = words
        .iter()
        .map(|w| AgentStep {
            action: format!("Bash: pytest -q tests/{w}"),
            result: result_text(w),
            failed: false,
        })
        .collect();
    let mut j = 0usize;
    g.bench_function(
        "StagnationBreaker record_step (the part it composes)",
        |b| {
            b.iter(|| {
                j = (j + 1) % steps.len();
                stagnation.record_step(&steps[j]);
            })
        },
    );
    g.finish();
}

/// Issue 22: what the metrics cost per verdict. The Monitor's observe of a tool_use (one
/// `agentbreaker.tool_calls` update) with a recorder adding into a `Registry`, as `run
/// --metrics-file` sets it up (compare with "Monitor observe of a tool_use event"); and the work of
/// a halt verdict (its updates built by the pure function and added to a registry: a counter with
/// its reason and the steps histogram), the most an ordinary verdict adds.
fn metrics(c: &mut Criterion) {
    use agentbreaker::metrics::{self, Registry, Update};
    use std::sync::Mutex;

    let mut config = MonitorConfig::default();
    config.budget.max_tool_calls_per_task = u64::MAX / 2;
    config.budget.max_task_duration_secs = u64::MAX / 4000;
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];
    let uses: Vec<serde_json::Value> = words
        .iter()
        .map(|w| {
            serde_json::json!({"type": "tool_use", "name": "Bash", "id": w,
                               "input": {"command": format!("pytest -q tests/{w}")}})
        })
        .collect();
    let results: Vec<serde_json::Value> = words
        .iter()
        .map(|w| serde_json::json!({"type": "tool_result", "id": w, "ok": true, "text": w}))
        .collect();
    let mut g = c.benchmark_group("Monitor observe of a tool_use event, metrics recorded");
    let m = Monitor::with_clock(config, ManualClock::shared(0)).unwrap();
    let registry = Arc::new(Mutex::new(Registry::new()));
    let sink = Arc::clone(&registry);
    m.set_metrics_recorder(
        Some(Arc::new(move |u: &[Update]| {
            sink.lock().unwrap().record_all(u)
        })),
        metrics::Options::default(),
    );
    let mut i = 0usize;
    g.bench_function("agentbreaker", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % words.len();
                m.observe(&results[(i + words.len() - 1) % words.len()])
                    .unwrap();
                i
            },
            |i| black_box(m.observe(&uses[i]).unwrap()),
            BatchSize::PerIteration,
        )
    });
    g.finish();
    assert!(registry.lock().unwrap().total(&metrics::TOOL_CALLS) > 0.0);

    let mut g = c.benchmark_group("metrics of a halt verdict, recorded in a registry");
    let halt = agentbreaker::Verdict {
        action: agentbreaker::VerdictAction::Halt,
        reason: Some(agentbreaker::Rule::RepeatedStep),
        message: Some("the same step 5 times in a row (5 of 5): `pytest -q`".into()),
        nudge: None,
        task_id: Some("session".into()),
        step: 12,
        detail: None,
    };
    let mut r = Registry::new();
    g.bench_function("agentbreaker", |b| {
        b.iter(|| {
            r.record_all(&metrics::verdict_updates(
                black_box(&halt),
                metrics::Options::default(),
            ))
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = closed_path, open_path, two_threads, stagnation, budget, analyzer, agent_loop,
        monitor, metrics
}
criterion_main!(benches);

//! Snapshot and restore of a Monitor, as a hook does it (a new process per event): for random
//! event streams, a monitor snapshotted at a random point, restored from the snapshot's JSON text
//! into a fresh monitor and fed the rest of the stream gives exactly the verdicts — and ends in
//! exactly the state — of a monitor that never stopped (contract: docs/monitor.md, "Status,
//! snapshot, restore, reset").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use agentbreaker::{ManualClock, Monitor, Rule, Verdict, VerdictAction};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One thing that happens to a monitor.
#[derive(Debug, Clone)]
enum Op {
    Observe(Value),
    /// Time passes, then a tick.
    Tick(u64),
}

fn task() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        6 => Just(None),
        1 => Just(Some("sub-a")),
        1 => Just(Some("sub-b")),
    ]
}

fn with_task(mut event: Value, task: Option<&str>) -> Value {
    if let Some(t) = task {
        event["taskId"] = json!(t);
    }
    event
}

/// Events from small alphabets, so that repeats, cycles, failures and budgets all happen.
fn event() -> impl Strategy<Value = Value> {
    let command = prop::sample::select(vec!["pytest -q", "make", "ls src", "cat a.py"]);
    let output = prop::sample::select(vec![
        "1 failed in 0.3s",
        "ok",
        "error: no such file",
        "3 passed",
        "",
    ]);
    let id = prop::sample::select(vec!["a", "b", "c"]);
    let text = prop::sample::select(vec!["", "Let me try again.", "Done."]);
    prop_oneof![
        3 => (text, task()).prop_map(|(t, k)| with_task(json!({"type": "assistant", "text": t}), k)),
        5 => (command, prop::option::of(id.clone()), task()).prop_map(|(c, i, k)| {
            let mut e = json!({"type": "tool_use", "name": "Bash", "input": {"command": c}});
            if let Some(i) = i {
                e["id"] = json!(i);
            }
            with_task(e, k)
        }),
        5 => (any::<bool>(), output, prop::option::of(id), task()).prop_map(|(ok, o, i, k)| {
            let mut e = json!({"type": "tool_result", "ok": ok, "text": o});
            if let Some(i) = i {
                e["id"] = json!(i);
            }
            with_task(e, k)
        }),
        1 => (0u64..2000, task()).prop_map(|(t, k)| {
            with_task(json!({"type": "usage", "usage": {"input_tokens": t * 1000}}), k)
        }),
        1 => (prop::sample::select(vec!["d1", "d2"]), 0u64..3, task()).prop_map(|(d, f, k)| {
            with_task(json!({"type": "progress", "files": f, "digest": d}), k)
        }),
        1 => (any::<bool>(), task()).prop_map(|(t, k)| {
            with_task(json!({"type": "error", "text": "model call failed", "transient": t}), k)
        }),
        1 => (prop::sample::select(vec!["starting", "done"]), prop::sample::select(vec!["sub-a", "sub-b"]))
            .prop_map(|(p, t)| json!({"type": "heartbeat", "taskId": t, "phase": p})),
        1 => task().prop_map(|k| with_task(json!({"type": "alive"}), k)),
        1 => Just(json!({"type": "thinking"})),
        1 => Just(json!({"type": "tool_result", "ok": "not a bool"})),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => event().prop_map(Op::Observe),
        1 => (0u64..90_000).prop_map(Op::Tick),
    ]
}

/// A configuration where every rule is near: small thresholds and budgets.
fn config() -> Value {
    json!({
        "profile": "seed",
        "failure": {"failureThreshold": 4, "identicalErrorThreshold": 3},
        "stagnation": {"noProgressThreshold": 6, "sameErrorThreshold": 4, "repeatThreshold": 3,
                       "cycleRepeats": 2, "failStreakThreshold": 3, "failWindow": 5},
        "budget": {"maxToolCallsPerTask": 25, "maxTokenSpendCentsPerTask": 2000,
                   "maxTaskDurationSecs": 400, "maxIdleSecs": 120, "loopWindow": 3},
        "toolLimits": {"Bash": 18},
        "warnBefore": 1,
        "budgetWarnPercent": 60
    })
}

/// What one op answered: the verdict, an error code, or a tick's verdicts.
fn apply(m: &Monitor, clock: &ManualClock, op: &Op) -> Vec<Result<Verdict, &'static str>> {
    match op {
        Op::Observe(e) => vec![m.observe(e).map_err(|e| e.code())],
        Op::Tick(ms) => {
            clock.advance(*ms);
            m.tick().into_iter().map(Ok).collect()
        }
    }
}

fn fresh(now: u64) -> (Monitor, Arc<ManualClock>) {
    let clock = ManualClock::shared(now);
    (Monitor::from_json(&config(), clock.clone()).unwrap(), clock)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(support::cases(256)))]

    #[test]
    fn restore_at_any_point_continues_with_the_same_verdicts(
        ops in prop::collection::vec(op(), 1..160),
        cut in any::<prop::sample::Index>(),
    ) {
        let cut = cut.index(ops.len() + 1);
        let (whole, whole_clock) = fresh(0);
        let expected: Vec<_> = ops.iter().flat_map(|o| apply(&whole, &whole_clock, o)).collect();

        let (first, first_clock) = fresh(0);
        let mut got: Vec<_> = ops[..cut].iter().flat_map(|o| apply(&first, &first_clock, o)).collect();
        // As a hook would: the snapshot as text in a file, a new process, a new monitor.
        let text = serde_json::to_string(&first.snapshot()).unwrap();
        let (second, second_clock) = fresh(first_clock.now());
        second.restore(&serde_json::from_str(&text).unwrap()).unwrap();
        got.extend(ops[cut..].iter().flat_map(|o| apply(&second, &second_clock, o)));

        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(second.snapshot(), whole.snapshot());
    }
}

/// The generator reaches what the property is about: warnings and halts of many rules, refused
/// events, and restores in the middle of an open step.
#[test]
fn the_generator_reaches_the_rules() {
    let mut reached: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    let strategy = prop::collection::vec(op(), 1..160);
    support::sample(&strategy, 400, |ops| {
        let (m, clock) = fresh(0);
        for o in &ops {
            for v in apply(&m, &clock, o) {
                match v {
                    Err(_) => *reached.entry("refused event").or_default() += 1,
                    Ok(v) if v.action == VerdictAction::Continue => {}
                    Ok(v) => {
                        let slug = v.reason.map_or("?", Rule::slug);
                        let key = if v.is_halt() { "halt" } else { "warn" };
                        *reached.entry(key).or_default() += 1;
                        *reached.entry(slug).or_default() += 1;
                    }
                }
            }
        }
        let snap = m.snapshot();
        if snap["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| !t["current"].is_null())
        {
            *reached.entry("snapshot with an open step").or_default() += 1;
        }
    });
    support::assert_reached(
        5,
        [
            "refused event",
            "halt",
            "warn",
            "repeated_step",
            "cycle",
            "fail_streak",
            "consecutive_failures",
            "tool_call_limit",
            "idle_timeout",
            "snapshot with an open step",
        ]
        .into_iter()
        .map(|k| (k, reached.get(k).copied().unwrap_or(0))),
    );
}

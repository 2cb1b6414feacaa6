use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::clock::ManualClock;

fn monitor(config: Value) -> (Monitor, Arc<ManualClock>) {
    let clock = ManualClock::shared(0);
    let m = Monitor::from_json(&config, clock.clone()).unwrap();
    (m, clock)
}

fn seed(extra: Value) -> Value {
    let mut c = json!({"profile": "seed"});
    if let (Value::Object(c), Value::Object(e)) = (&mut c, extra) {
        c.extend(e);
    }
    c
}

fn obs(m: &Monitor, e: Value) -> Verdict {
    m.observe(&e).unwrap_or_else(|err| panic!("{e}: {err}"))
}

/// One step: a model call, one tool call and its result; the verdict of the result.
fn step(m: &Monitor, n: u32, command: &str, ok: bool, output: &str) -> Verdict {
    obs(m, json!({"type": "assistant", "text": ""}));
    obs(
        m,
        json!({"type": "tool_use", "name": "Bash", "id": format!("c{n}"),
               "input": {"command": command}}),
    );
    obs(
        m,
        json!({"type": "tool_result", "id": format!("c{n}"), "ok": ok, "text": output}),
    )
}

fn slug(v: &Verdict) -> Option<&'static str> {
    v.reason.map(Rule::slug)
}

#[test]
fn monitors_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Monitor>();
}

#[test]
fn the_same_failing_command_is_warned_then_halted() {
    let (m, _) = monitor(seed(
        json!({"stagnation": {"repeatThreshold": 5, "noProgressThreshold": 100}}),
    ));
    let verdicts: Vec<Verdict> = (0..5)
        .map(|i| step(&m, i, "pytest -q", false, "1 failed in 0.3s"))
        .collect();
    let actions: Vec<&str> = verdicts.iter().map(|v| v.action.as_str()).collect();
    // The seed's same-error rule (5) and consecutive failures (5) are as close: repeated_step
    // comes first in the check order.
    assert_eq!(
        actions,
        ["continue", "continue", "warn", "continue", "halt"]
    );
    assert_eq!(slug(&verdicts[2]), Some("repeated_step"));
    assert_eq!(
        verdicts[2].nudge.as_deref(),
        Some(
            "You have run `pytest -q` 3 times with the same failure. Repeating it will not \
             change the outcome: try a different approach."
        )
    );
    assert_eq!(slug(&verdicts[4]), Some("repeated_step"));
    assert_eq!(verdicts[4].step, 5);
    assert_eq!(verdicts[4].task_id.as_deref(), Some("session"));
    assert_eq!(verdicts[4].detail.as_ref().unwrap()["count"], 5);
    // Halted stays halted: the next call is answered with the same halt.
    let again = obs(
        &m,
        json!({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}),
    );
    assert_eq!(again, verdicts[4]);
}

#[test]
fn polling_with_changing_output_is_not_a_repeat_but_fifteen_polls_are_stagnation() {
    // The same command with another result each time is not a repeated step; done fifteen
    // times without any progress, it is the coding-agent profile's stagnation (no_progress
    // with at most 3 distinct actions).
    let (m, _) = monitor(json!({}));
    let states = [
        "queued",
        "waiting",
        "in_progress",
        "running",
        "pending",
        "started",
    ];
    let mut verdicts = Vec::new();
    for i in 0..15u32 {
        let output = format!("status: {}", states[i as usize % states.len()]);
        verdicts.push(step(&m, i, "gh run view 42", true, &output));
    }
    assert!(
        verdicts.iter().all(|v| slug(v) != Some("repeated_step")),
        "{verdicts:?}"
    );
    assert_eq!(verdicts[12].action, VerdictAction::Warn);
    assert_eq!(slug(&verdicts[12]), Some("no_progress"));
    assert!(verdicts[14].is_halt());
    assert_eq!(slug(&verdicts[14]), Some("no_progress"));
    assert_eq!(verdicts[14].detail.as_ref().unwrap()["distinctActions"], 1);
    // Fifteen steps without progress exploring different files is not.
    let (m, _) = monitor(json!({}));
    let names = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
        "chi", "psi", "omega", "one", "two", "three", "four", "five", "six",
    ];
    for (i, name) in (0u32..).zip(names) {
        let v = step(
            &m,
            i,
            &format!("cat src/{name}.py"),
            true,
            &format!("def {name}(): ..."),
        );
        assert_eq!(v.action, VerdictAction::Continue, "step {i}: {v:?}");
    }
}

#[test]
fn other_tasks_go_on_when_one_is_halted() {
    let (m, _) = monitor(seed(json!({"budget": {"maxToolCallsPerTask": 2}})));
    for _ in 0..2 {
        obs(&m, json!({"type": "tool_use", "name": "a", "taskId": "t1"}));
    }
    let halt = obs(&m, json!({"type": "tool_use", "name": "a", "taskId": "t1"}));
    assert_eq!(slug(&halt), Some("tool_call_limit"));
    assert_eq!(halt.message.as_deref(), Some("tool calls: 3 of 2"));
    let other = obs(&m, json!({"type": "tool_use", "name": "a", "taskId": "t2"}));
    assert_eq!(other.action, VerdictAction::Continue);
    assert_eq!(other.task_id.as_deref(), Some("t2"));
    assert_eq!(obs(&m, json!({"type": "alive", "taskId": "t1"})), halt);
    m.reset();
    let fresh = obs(&m, json!({"type": "tool_use", "name": "a", "taskId": "t1"}));
    assert_eq!(fresh.action, VerdictAction::Continue);
}

#[test]
fn budgets_warn_once_at_their_percent() {
    let (m, _) = monitor(seed(json!({"budget": {"maxToolCallsPerTask": 10}})));
    let actions: Vec<&str> = (0..11)
        .map(|_| {
            obs(&m, json!({"type": "tool_use", "name": "x"}))
                .action
                .as_str()
        })
        .collect();
    assert_eq!(
        actions,
        [
            "continue", "continue", "continue", "continue", "continue", "continue", "continue",
            "warn", "continue", "continue", "halt"
        ]
    );
}

#[test]
fn tool_limits_count_each_tool() {
    let (m, _) = monitor(json!({"toolLimits": {"web_fetch": 3}, "budgetWarnPercent": 60}));
    let mut actions = Vec::new();
    for _ in 0..4 {
        actions.push(obs(&m, json!({"type": "tool_use", "name": "web_fetch"})).action);
        obs(&m, json!({"type": "tool_use", "name": "Read"}));
    }
    assert_eq!(
        actions,
        [
            VerdictAction::Continue,
            VerdictAction::Warn,
            VerdictAction::Continue,
            VerdictAction::Halt
        ]
    );
    let status = m.status();
    assert_eq!(status["tasks"][0]["toolCallsByName"]["web_fetch"], 4);
    assert_eq!(status["tasks"][0]["halt"]["reason"], "tool_limit");
    assert_eq!(status["tasks"][0]["halt"]["detail"]["tool"], "web_fetch");
}

#[test]
fn a_tool_limit_near_u64_max_does_not_overflow_the_ladder() {
    let (m, _) = monitor(json!({"toolLimits": {"web_fetch": u64::MAX / 2}}));
    let v = obs(&m, json!({"type": "tool_use", "name": "web_fetch"}));
    assert_eq!(v.action, VerdictAction::Continue);
}

#[test]
fn results_pair_by_id_then_name_then_order() {
    let (m, _) = monitor(seed(
        json!({"stagnation": {"repeatThreshold": 2}, "warnBefore": 0}),
    ));
    // Two parallel calls answered out of order, by id: the same step twice is a repeat.
    for _ in 0..2 {
        obs(&m, json!({"type": "assistant", "text": "checking"}));
        obs(
            &m,
            json!({"type": "tool_use", "name": "Read", "id": "a", "input": {"path": "x"}}),
        );
        obs(
            &m,
            json!({"type": "tool_use", "name": "Grep", "id": "b", "input": {"q": "y"}}),
        );
        let first = obs(
            &m,
            json!({"type": "tool_result", "id": "b", "ok": true, "text": "B"}),
        );
        assert_eq!(
            first.action,
            VerdictAction::Continue,
            "the step is not complete yet"
        );
        obs(
            &m,
            json!({"type": "tool_result", "id": "a", "ok": true, "text": "A"}),
        );
    }
    assert_eq!(m.status()["tasks"][0]["halt"]["reason"], "repeated_step");

    // By name: B's result names its tool, so A and B keep their own results.
    let (m, _) = monitor(seed(
        json!({"stagnation": {"repeatThreshold": 2}, "warnBefore": 0}),
    ));
    let mut last = None;
    for _ in 0..2 {
        obs(&m, json!({"type": "assistant", "text": ""}));
        obs(
            &m,
            json!({"type": "tool_use", "name": "Read", "input": {"path": "x"}}),
        );
        obs(
            &m,
            json!({"type": "tool_use", "name": "Grep", "input": {"q": "y"}}),
        );
        obs(
            &m,
            json!({"type": "tool_result", "name": "Grep", "ok": true, "text": "B"}),
        );
        last = Some(obs(
            &m,
            json!({"type": "tool_result", "ok": true, "text": "A"}),
        ));
    }
    assert_eq!(slug(last.as_ref().unwrap()), Some("repeated_step"));
}

#[test]
fn a_result_without_a_call_is_counted_not_paired() {
    let (m, _) = monitor(json!({}));
    let v = obs(
        &m,
        json!({"type": "tool_result", "ok": false, "text": "stray"}),
    );
    assert_eq!(v.action, VerdictAction::Continue);
    assert_eq!(m.status()["tasks"][0]["unpairedResults"], 1);
}

#[test]
fn steps_complete_on_their_last_result_and_tool_calls_alone_make_steps() {
    let (m, _) = monitor(seed(
        json!({"stagnation": {"repeatThreshold": 3}, "warnBefore": 0}),
    ));
    // Hooks report tool calls only: each call and its result is a step.
    let mut verdicts = Vec::new();
    for i in 0..3 {
        obs(
            &m,
            json!({"type": "tool_use", "name": "Bash", "id": i.to_string(),
                        "input": {"command": "make"}}),
        );
        verdicts.push(obs(
            &m,
            json!({"type": "tool_result", "id": i.to_string(), "ok": true,
                                      "text": "make: Nothing to be done"}),
        ));
    }
    assert_eq!(verdicts[2].action, VerdictAction::Halt);
    assert_eq!(verdicts[2].step, 3);
}

#[test]
fn re_applied_edits_are_not_progress() {
    // The same edit with the same resulting content, reported as a file change each time.
    let edit = |m: &Monitor, i: u32, digest: &str| {
        obs(
            m,
            json!({"type": "assistant", "text": "Fixing the import."}),
        );
        obs(
            m,
            json!({"type": "tool_use", "name": "Edit", "id": format!("e{i}"),
                       "input": {"file_path": "a.py", "old_string": "x", "new_string": "y"}}),
        );
        obs(
            m,
            json!({"type": "progress", "files": ["a.py"], "digest": digest}),
        );
        obs(
            m,
            json!({"type": "tool_result", "id": format!("e{i}"), "ok": true,
                       "text": format!("edited ({i})")}),
        )
    };
    let (m, _) = monitor(seed(json!({"stagnation": {"noProgressThreshold": 4}})));
    let verdicts: Vec<Verdict> = (0..5).map(|i| edit(&m, i, "sha:1")).collect();
    // The first edit is progress; the next four re-apply it.
    assert_eq!(verdicts[4].action, VerdictAction::Halt, "{verdicts:?}");
    assert_eq!(slug(&verdicts[4]), Some("no_progress"));
    // Different resulting content each time is progress.
    let (m, _) = monitor(seed(json!({"stagnation": {"noProgressThreshold": 4}})));
    for i in 0..10 {
        let v = edit(&m, i, &format!("sha:{i}"));
        assert_eq!(v.action, VerdictAction::Continue, "edit {i}: {v:?}");
    }
}

#[test]
fn an_output_loop_needs_a_task_that_only_talks() {
    let quiet = json!({"warnBefore": 0, "stagnation": {"noProgressThreshold": 100}});
    let (m, _) = monitor(seed(quiet.clone()));
    // The same sentence before different tool calls is not a loop.
    for i in 0..6 {
        obs(
            &m,
            json!({"type": "assistant", "text": "We need to scroll up further."}),
        );
        obs(
            &m,
            json!({"type": "tool_use", "name": "scroll_up", "id": format!("s{i}"),
                        "input": {"line": i * 100}}),
        );
        let v = obs(
            &m,
            json!({"type": "tool_result", "id": format!("s{i}"), "ok": true,
                                "text": format!("lines {i}")}),
        );
        assert_eq!(v.action, VerdictAction::Continue);
    }
    // Three near-identical answers with nothing else: the third completes when the fourth
    // model call begins.
    let (m, _) = monitor(seed(quiet));
    let mut last = None;
    for _ in 0..4 {
        last = Some(obs(
            &m,
            json!({"type": "assistant", "text": "I am done with the task."}),
        ));
    }
    let v = last.unwrap();
    assert_eq!(slug(&v), Some("output_loop"));
    assert_eq!(v.step, 3);
}

#[test]
fn malformed_events_change_nothing() {
    let (m, _) = monitor(json!({}));
    step(&m, 0, "ls", true, "a");
    obs(&m, json!({"type": "tool_use", "name": "Read", "id": "r"}));
    let before = m.snapshot();
    for bad in [
        json!({"type": "tool_result", "ok": "yes"}),
        json!({"type": "assistant"}),
        json!({"type": "tool_use", "name": ""}),
        json!("text"),
        json!({"type": "usage", "costCents": -5}),
    ] {
        assert_eq!(
            m.observe(&bad).unwrap_err().code(),
            "INVALID_EVENT",
            "{bad}"
        );
    }
    assert_eq!(m.snapshot(), before);
    let unknown = obs(&m, json!({"type": "thinking", "text": "hmm"}));
    assert_eq!(unknown.action, VerdictAction::Continue);
    assert_eq!(m.status()["ignoredEvents"], 1);
}

#[test]
fn tick_halts_idle_and_long_tasks() {
    let (m, clock) = monitor(seed(json!({"budget": {"maxIdleSecs": 10,
                                                     "maxTaskDurationSecs": 100}})));
    obs(
        &m,
        json!({"type": "heartbeat", "taskId": "t", "phase": "starting"}),
    );
    clock.set(8_000);
    let warn = m.tick();
    assert_eq!(warn.len(), 1);
    assert_eq!(slug(&warn[0]), Some("idle_timeout"));
    assert_eq!(warn[0].action, VerdictAction::Warn);
    clock.set(10_500);
    let halt = m.tick();
    assert_eq!(slug(&halt[0]), Some("idle_timeout"));
    assert!(halt[0].is_halt());
    assert_eq!(halt[0].message.as_deref(), Some("idle: 10.5s of 10s"));
    assert!(m.tick().is_empty(), "a halt is reported once by tick");
}

#[test]
fn snapshot_and_restore_continue_the_stream() {
    let events: Vec<Value> = (0..6)
        .flat_map(|i| {
            [
                json!({"type": "assistant", "text": "retrying"}),
                json!({"type": "tool_use", "name": "Bash", "id": format!("c{i}"),
                       "input": {"command": "cargo build"}}),
                json!({"type": "usage", "usage": {"input_tokens": 1000, "output_tokens": 50}}),
                json!({"type": "tool_result", "id": format!("c{i}"), "ok": false,
                       "text": "error[E0433]: failed to resolve"}),
            ]
        })
        .collect();
    let (whole, _) = monitor(json!({}));
    let expected: Vec<Verdict> = events.iter().map(|e| obs(&whole, e.clone())).collect();
    for cut in 0..events.len() {
        let (first, _) = monitor(json!({}));
        let mut got: Vec<Verdict> = events[..cut]
            .iter()
            .map(|e| obs(&first, e.clone()))
            .collect();
        let snap = first.snapshot();
        let text = serde_json::to_string(&snap).unwrap();
        let (second, _) = monitor(json!({}));
        second
            .restore(&serde_json::from_str(&text).unwrap())
            .unwrap();
        got.extend(events[cut..].iter().map(|e| obs(&second, e.clone())));
        assert_eq!(got, expected, "cut at {cut}");
        assert_eq!(second.snapshot(), whole.snapshot());
    }
    assert!(expected.iter().any(Verdict::is_halt));
}

#[test]
fn bad_snapshots_are_refused_and_change_nothing() {
    let (m, _) = monitor(json!({}));
    step(&m, 0, "ls", true, "x");
    let good = m.snapshot();
    let before = m.snapshot();
    let mut too_many_calls = good.clone();
    too_many_calls["tasks"][0]["current"] = json!({"number": 2, "calls": (0..100).map(|i| json!({
        "id": null, "name": "x", "action": "0000000000000000", "describe": format!("{i}"),
        "result": null})).collect::<Vec<_>>()});
    for bad in [
        json!(null),
        json!({"version": 2, "kind": "monitor", "tasks": [], "stack": [], "ignoredEvents": 0,
               "lastEventAt": null}),
        json!({"version": 1, "kind": "budget", "tasks": [], "stack": [], "ignoredEvents": 0,
               "lastEventAt": null}),
        {
            let mut s = good.clone();
            s["tasks"][0]["history"]["steps"][0]["signature"] = json!("nothex");
            s
        },
        {
            let mut s = good.clone();
            s["extra"] = json!(1);
            s
        },
        too_many_calls,
    ] {
        assert_eq!(
            m.restore(&bad).unwrap_err().code(),
            "INVALID_SNAPSHOT",
            "{bad}"
        );
        assert_eq!(m.snapshot(), before);
    }
    m.restore(&good).unwrap();
}

#[test]
fn listeners_receive_every_warning_and_halt() {
    let (m, _) = monitor(seed(json!({"stagnation": {"repeatThreshold": 4}})));
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let s = Arc::clone(&seen);
    m.add_listener(Arc::new(move |e| {
        s.lock().unwrap().push(e.to_json());
        Ok(())
    }));
    for i in 0..6 {
        step(&m, i, "npm test", false, "Error: Cannot find module 'x'");
    }
    let seen = seen.lock().unwrap();
    let kinds: Vec<(String, String)> = seen
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "verdict");
            assert!(e["atMs"].is_u64());
            (
                e["action"].as_str().unwrap().into(),
                e["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("warn".into(), "repeated_step".into())),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| k.0 == "halt").count(),
        1,
        "{kinds:?}"
    );
}

#[test]
fn memory_stays_bounded_under_hostile_streams() {
    let (m, _) = monitor(json!({}));
    // Many distinct tool calls without results, in one step.
    for i in 0..20_000 {
        obs(
            &m,
            json!({"type": "tool_use", "name": format!("tool{i}"), "id": format!("{i}"),
                        "input": {"q": i}}),
        );
    }
    let status = m.status();
    assert!(
        status["tasks"][0]["toolCallsByName"]
            .as_object()
            .unwrap()
            .len()
            <= MAX_TRACKED_TOOLS
    );
    let snap = serde_json::to_string(&m.snapshot()).unwrap();
    assert!(snap.len() < 200_000, "{}", snap.len());
    // A huge result.
    let (m, _) = monitor(json!({}));
    let big = "x".repeat(10 << 20);
    step(&m, 0, "cat big.log", true, &big);
    step(&m, 1, "cat big.log", false, &big);
    assert!(serde_json::to_string(&m.snapshot()).unwrap().len() < 20_000);
    // Many tasks: bounded by the cap, refused beyond it.
    let (m, _) = monitor(json!({}));
    for i in 0..MAX_MONITOR_TASKS {
        obs(&m, json!({"type": "alive", "taskId": format!("t{i}")}));
    }
    let e = m
        .observe(&json!({"type": "alive", "taskId": "one-more"}))
        .unwrap_err();
    assert_eq!(e.code(), "INVALID_EVENT");
    obs(
        &m,
        json!({"type": "heartbeat", "taskId": "t0", "phase": "done"}),
    );
    obs(&m, json!({"type": "alive", "taskId": "one-more"}));
}

#[test]
fn spend_uses_the_price_table_or_the_given_cost() {
    let (m, _) = monitor(seed(json!({"budget": {"maxTokenSpendCentsPerTask": 10}})));
    obs(
        &m,
        json!({"type": "usage", "usage": {"input_tokens": 1_000_000}}),
    ); // 300¢
    let v = m.status();
    assert_eq!(v["tasks"][0]["spendCents"], 300.0);
    let (m, _) = monitor(seed(json!({"budget": {"maxTokenSpendCentsPerTask": 10}})));
    assert_eq!(
        obs(&m, json!({"type": "usage", "costCents": 8.5})).action,
        VerdictAction::Warn
    );
    let halt = obs(&m, json!({"type": "usage", "costCents": 2}));
    assert_eq!(slug(&halt), Some("token_spend_limit"));
    assert_eq!(halt.message.as_deref(), Some("token spend: 10.5¢ of 10¢"));
}

#[test]
fn transient_errors_do_not_fail_a_step() {
    let (m, _) = monitor(seed(
        json!({"stagnation": {"failStreakThreshold": 2}, "warnBefore": 0}),
    ));
    for _ in 0..3 {
        obs(
            &m,
            json!({"type": "assistant", "text": "calling the model again"}),
        );
        obs(
            &m,
            json!({"type": "error", "text": "429 rate limited", "transient": true}),
        );
    }
    assert_eq!(m.status()["tasks"][0]["halted"], false);
    let (m, _) = monitor(seed(
        json!({"stagnation": {"failStreakThreshold": 2}, "warnBefore": 0}),
    ));
    let mut last = None;
    for i in 0..3 {
        obs(
            &m,
            json!({"type": "error", "text": format!("format error: no action in reply {i}")}),
        );
        last = Some(obs(&m, json!({"type": "assistant", "text": "again"})));
    }
    assert_eq!(slug(last.as_ref().unwrap()), Some("fail_streak"));
}

#[test]
fn a_fail_streak_nudge_says_how_many_errors_it_saw() {
    // The first warning of a run of failed steps, with the errors each step's result shows.
    let first_warning = |errors: [&str; 4]| {
        let (m, _) = monitor(json!({"stagnation": {"failStreakThreshold": 4}, "warnBefore": 1}));
        for (i, error) in errors.iter().enumerate() {
            let id = format!("t{i}");
            let events = [
                json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"n": i}}),
                json!({"type": "tool_result", "id": id, "ok": false, "text": error}),
                json!({"type": "assistant", "text": "trying again"}),
            ];
            for event in events {
                let verdict = obs(&m, event);
                if verdict.action == VerdictAction::Warn {
                    return verdict;
                }
            }
        }
        panic!("no warning after four failed steps");
    };
    let (a, b) = ("ENOENT: no such file", "EACCES: permission denied");
    let same = first_warning([a, a, a, a]);
    assert_eq!(slug(&same), Some("fail_streak"), "{same:?}");
    let nudge = same.nudge.expect("a warning has a nudge");
    assert!(
        nudge.contains("with the same error: `ENOENT: no such file`"),
        "{nudge}"
    );
    let two = first_warning([a, b, a, b]);
    assert_eq!(slug(&two), Some("fail_streak"), "{two:?}");
    let nudge = two.nudge.expect("a warning has a nudge");
    assert!(!nudge.contains("the same error"), "{nudge}");
    assert!(
        nudge.contains("with only 2 different errors (the last: `"),
        "{nudge}"
    );
}

#[test]
fn a_nudge_about_an_error_without_text_says_so() {
    let (m, _) = monitor(json!({"stagnation": {"failStreakThreshold": 4}, "warnBefore": 1}));
    let mut nudge = None;
    for i in 0..4 {
        let id = format!("t{i}");
        let events = [
            json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"n": i}}),
            json!({"type": "tool_result", "id": id, "ok": false, "text": " \n"}),
            json!({"type": "assistant", "text": "trying again"}),
        ];
        for event in events {
            let verdict = obs(&m, event);
            if verdict.action == VerdictAction::Warn && nudge.is_none() {
                nudge = verdict.nudge;
            }
        }
    }
    let nudge = nudge.expect("a warning after four failed steps");
    assert!(nudge.contains("with the same error: (no text)."), "{nudge}");
    assert!(!nudge.contains("``"), "{nudge}");
}

#[test]
fn an_edit_applied_again_is_the_same_step_whatever_the_tool_printed() {
    // The same edit re-applied: the file grows by the same block each time, so the tool's
    // output (its line count) differs, but the content digest the edit produced is the same.
    let (m, _) = monitor(json!({}));
    let mut verdicts = Vec::new();
    for i in 0..6u32 {
        obs(&m, json!({"type": "assistant", "text": ""}));
        obs(
            &m,
            json!({"type": "tool_use", "name": "edit", "id": format!("e{i}"),
                        "input": {"file": "A.java", "at": "1:1", "text": "import x;"}}),
        );
        obs(
            &m,
            json!({"type": "progress", "files": ["A.java"], "digest": "same-edit"}),
        );
        verdicts.push(obs(&m, json!({"type": "tool_result", "id": format!("e{i}"), "ok": true,
                                      "text": format!("[File: A.java ({} lines total)]", 54 * (i + 1))})));
    }
    // The first application is progress and a step like the others: five in a row halt.
    assert_eq!(slug(&verdicts[2]), Some("repeated_step"));
    assert_eq!(verdicts[2].action, VerdictAction::Warn);
    assert!(verdicts[4].is_halt(), "{verdicts:?}");
    assert_eq!(slug(&verdicts[4]), Some("repeated_step"));
}

#[test]
fn counts_in_results_are_kept_so_a_moving_poll_is_no_repeat() {
    let (m, _) = monitor(json!({}));
    for i in 0..10u32 {
        let v = step(
            &m,
            i,
            "gh run watch",
            true,
            &format!("{} of 60 jobs done", (i + 1) * 5),
        );
        assert_ne!(slug(&v), Some("repeated_step"), "poll {i}: {v:?}");
    }
    // ... while durations, timestamps and ids are not: the same result.
    let (m, _) = monitor(json!({}));
    let mut last = None;
    for i in 0..5u32 {
        last = Some(step(
            &m,
            i,
            "gh run watch",
            true,
            &format!("queued at 2026-11-26T03:{i:02}:00Z after 0.{i}s (run 5f3a9c2e8{i})"),
        ));
    }
    assert_eq!(slug(last.as_ref().unwrap()), Some("repeated_step"));
}

#[test]
fn an_assistant_event_with_spend_answers_the_more_severe_verdict() {
    // The assistant's own part halts (an output loop); the spend it carries would only have
    // warned (80% of 10 cents): the answer is the halt, and a halted task counts nothing more.
    let (m, _) = monitor(seed(json!({
        "warnBefore": 0,
        "stagnation": {"noProgressThreshold": 1000, "sameErrorThreshold": 1000},
        "budget": {"loopWindow": 3, "maxTokenSpendCentsPerTask": 10}
    })));
    for text in ["same answer", "same answer", "same answer"] {
        let v = obs(
            &m,
            json!({"type": "assistant", "text": text, "costCents": 1}),
        );
        assert_eq!(v.action, VerdictAction::Continue, "{v:?}");
    }
    let v = obs(
        &m,
        json!({"type": "assistant", "text": "other", "costCents": 6}),
    );
    assert_eq!(
        (v.action, slug(&v)),
        (VerdictAction::Halt, Some("output_loop"))
    );
    let status = m.status();
    assert_eq!(status["tasks"][0]["spendCents"], json!(3.0), "{status}");

    // The other way round: the assistant part continues, the spend warns: the warning.
    let (m, _) = monitor(seed(json!({
        "stagnation": {"noProgressThreshold": 1000, "sameErrorThreshold": 1000},
        "budget": {"loopWindow": 1000, "maxTokenSpendCentsPerTask": 10}
    })));
    let v = obs(
        &m,
        json!({"type": "assistant", "text": "a", "costCents": 9}),
    );
    assert_eq!(
        (v.action, slug(&v)),
        (VerdictAction::Warn, Some("token_spend_limit"))
    );
    assert_eq!(v.step, 1);
}

#[test]
fn a_long_output_loop_window_restores_its_own_snapshot() {
    // 1100 different talk-only answers keep 1098 similarities under loopWindow 2000: more than
    // the 1024 a default config keeps, and still what this Monitor wrote (contract §11.9).
    let off = json!({"noProgressThreshold": 1000});
    let config = seed(json!({"budget": {"loopWindow": 2000}, "stagnation": off}));
    let (m, _) = monitor(config.clone());
    for i in 0..1100 {
        if i % 500 == 499 {
            // Progress now and then, so the no-progress rule stays quiet (the output loop is
            // not reset by it).
            obs(&m, json!({"type": "progress", "files": 1}));
        }
        let text = format!("answer number {i} about topic {}", i * 7);
        let v = obs(&m, json!({"type": "assistant", "text": text}));
        assert_ne!(v.action, VerdictAction::Halt, "{i}: {v:?}");
    }
    let snapshot = m.snapshot();
    let kept = snapshot["tasks"][0]["similarities"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(kept > 1024, "{kept}");
    let (restored, _) = monitor(config);
    restored.restore(&snapshot).unwrap();
    assert_eq!(restored.snapshot(), snapshot);
}

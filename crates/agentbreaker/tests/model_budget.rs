//! Model-based test of the BudgetBreaker (contract §4, decisions "BudgetBreaker"): random event streams
//! — heartbeats opening and closing tasks, tool calls, usage, assistant outputs (identical ones,
//! reordered ones, overlapping ones, empty ones), events with and without `taskId`, unknown event
//! types — with clock moves, `tick` and `reset`, against a reference model written from the contract.
//! After every step the halts returned, the halt events delivered to a listener and the live
//! snapshot must agree with the model.
//!
//! Invariants checked on the real breaker alone: a task halts at most once while it is open (and
//! exactly one halt event reaches the listener per halt); a halted task's counters never move;
//! every counter only grows while a task is open; the tool-call halt comes exactly at call
//! `maxToolCallsPerTask + 1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use agentbreaker::{
    BudgetBreaker, BudgetConfig, BudgetSnapshot, Event, Halt, HaltReason, ManualClock, Price,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

mod support;
use serde_json::{Value, json};

const TASKS: [&str; 3] = ["a", "b", "c"];
const SESSION: &str = "session";

/// Assistant outputs: 0, 1 and 5 have the same token set; 2 and 7 overlap 0 by half; 3 and 4 are
/// empty (two empty outputs compare as 1.0); 6 shares nothing with the others.
const TEXTS: [&str; 8] = [
    "the build failed again",
    "the build failed again",
    "the build failed once more",
    "",
    "  \n\t ",
    "again failed build the",
    "completely different words here now",
    "the the the build",
];

#[derive(Debug, Clone)]
struct Params {
    max_tools: u64,
    max_cents: u64,
    max_duration_secs: u64,
    max_idle_secs: u64,
    jaccard: f64,
    window: u32,
}

impl Params {
    fn config(&self) -> BudgetConfig {
        BudgetConfig {
            max_tool_calls_per_task: self.max_tools,
            max_token_spend_cents_per_task: self.max_cents,
            max_task_duration_secs: self.max_duration_secs,
            max_idle_secs: self.max_idle_secs,
            similarity_jaccard_threshold: self.jaccard,
            loop_window: self.window,
            // 1 cent per 10 000 input tokens for model "m".
            prices: BTreeMap::from([
                (
                    "m".to_string(),
                    Price {
                        input: 100.0,
                        ..Price::default()
                    },
                ),
                ("*".to_string(), Price::SONNET_4),
            ]),
            ..BudgetConfig::default()
        }
    }
}

fn params() -> impl Strategy<Value = Params> {
    (
        1u64..=6,
        1u64..=12,
        1u64..=5,
        1u64..=5,
        prop_oneof![Just(0.5), Just(0.75), Just(0.95), Just(1.0)],
        2u32..=4,
    )
        .prop_map(
            |(max_tools, max_cents, max_duration_secs, max_idle_secs, jaccard, window)| Params {
                max_tools,
                max_cents,
                max_duration_secs,
                max_idle_secs,
                jaccard,
                window,
            },
        )
}

#[derive(Debug, Clone)]
enum Kind {
    Starting,
    Done,
    Error,
    Tool,
    /// `tokens` × 10 000 input tokens, priced by model "m" (1 ¢ each) or by "*" (3 ¢ each).
    Usage {
        tokens: u64,
        model_m: bool,
    },
    Say(usize),
    Unknown,
}

#[derive(Debug, Clone)]
enum Op {
    Ingest {
        kind: Kind,
        /// `None`: no taskId (the top of the stack, or the session).
        task: Option<usize>,
    },
    Tick,
    Advance(u64),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    let task = prop_oneof![1 => Just(None), 3 => (0..TASKS.len()).prop_map(Some)];
    let kind = prop_oneof![
        3 => Just(Kind::Starting),
        2 => Just(Kind::Done),
        1 => Just(Kind::Error),
        8 => Just(Kind::Tool),
        3 => (0u64..4, any::<bool>()).prop_map(|(tokens, model_m)| Kind::Usage { tokens, model_m }),
        6 => (0..TEXTS.len()).prop_map(Kind::Say),
        1 => Just(Kind::Unknown),
    ];
    prop_oneof![
        20 => (kind, task).prop_map(|(kind, task)| Op::Ingest { kind, task }),
        3 => Just(Op::Tick),
        4 => prop_oneof![0u64..600, 0u64..3_000].prop_map(Op::Advance),
        1 => Just(Op::Reset),
    ]
}

fn event_json(kind: &Kind, task: Option<&str>) -> Value {
    let mut e = match kind {
        Kind::Starting => json!({"type": "heartbeat", "phase": "starting"}),
        Kind::Done => json!({"type": "heartbeat", "phase": "done"}),
        Kind::Error => json!({"type": "heartbeat", "phase": "error"}),
        Kind::Tool => json!({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}),
        Kind::Usage { tokens, model_m } => {
            let mut u = json!({"type": "usage", "usage": {"input_tokens": tokens * 10_000}});
            if *model_m {
                u["model"] = json!("m");
            }
            u
        }
        Kind::Say(i) => json!({"type": "assistant", "text": TEXTS[*i]}),
        Kind::Unknown => json!({"type": "system", "subtype": "init"}),
    };
    if let Some(t) = task {
        e["taskId"] = json!(t);
    }
    e
}

// -------------------------------------------------------------------------------------------------
// The reference model (contract §4 + decisions)

#[derive(Debug, Clone)]
struct Task {
    id: String,
    started: u64,
    last_event: u64,
    tools: u64,
    cents: u64,
    outputs: VecDeque<BTreeSet<String>>,
    halted: bool,
}

/// A halt as the model sees it: task, kind, and the figure it reports.
#[derive(Debug, Clone, PartialEq)]
struct MHalt {
    task: String,
    kind: &'static str,
    figure: f64,
}

#[derive(Debug, Default)]
struct Model {
    /// Open tasks in the order they were opened.
    tasks: Vec<Task>,
    stack: Vec<String>,
    ignored: u64,
    last_event: Option<u64>,
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let common = a.intersection(b).count();
    common as f64 / a.union(b).count() as f64
}

impl Model {
    fn task(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    fn ingest(&mut self, p: &Params, kind: &Kind, task: Option<&str>, now: u64) -> Option<MHalt> {
        if let Kind::Unknown = kind {
            self.ignored += 1;
            return None;
        }
        self.last_event = Some(now);
        if let Kind::Done | Kind::Error = kind {
            let id = task.expect("heartbeats carry a taskId");
            self.tasks.retain(|t| t.id != id);
            self.stack.retain(|t| t != id);
            return None;
        }
        let id = task
            .map(str::to_string)
            .or_else(|| self.stack.last().cloned())
            .unwrap_or_else(|| SESSION.to_string());
        if self.task(&id).is_none() {
            self.tasks.push(Task {
                id: id.clone(),
                started: now,
                last_event: now,
                tools: 0,
                cents: 0,
                outputs: VecDeque::new(),
                halted: false,
            });
        }
        let t = self.task(&id).unwrap();
        t.last_event = now;
        if let Kind::Starting = kind {
            if !self.stack.contains(&id) {
                self.stack.push(id);
            }
            return None;
        }
        if t.halted {
            return None;
        }
        let halt = match kind {
            Kind::Tool => {
                t.tools += 1;
                (t.tools > p.max_tools).then_some(("ToolCallLimit", t.tools as f64))
            }
            Kind::Usage { tokens, model_m } => {
                t.cents += tokens * if *model_m { 1 } else { 3 };
                (t.cents > p.max_cents).then_some(("TokenSpendLimit", t.cents as f64))
            }
            Kind::Say(i) => {
                let set: BTreeSet<String> =
                    TEXTS[*i].split_whitespace().map(str::to_string).collect();
                t.outputs.push_back(set);
                while t.outputs.len() > p.window as usize {
                    t.outputs.pop_front();
                }
                if t.outputs.len() == p.window as usize {
                    let smallest = (1..t.outputs.len())
                        .map(|k| jaccard(&t.outputs[k - 1], &t.outputs[k]))
                        .fold(f64::INFINITY, f64::min);
                    (smallest >= p.jaccard).then_some(("OutputLoop", smallest))
                } else {
                    None
                }
            }
            _ => None,
        };
        let ran = now - t.started;
        let halt = halt.or_else(|| {
            (ran > p.max_duration_secs * 1000).then_some(("DurationLimit", ran as f64 / 1000.0))
        });
        halt.map(|(kind, figure)| {
            t.halted = true;
            MHalt {
                task: t.id.clone(),
                kind,
                figure,
            }
        })
    }

    fn tick(&mut self, p: &Params, now: u64) -> Vec<MHalt> {
        let mut halts = Vec::new();
        let last_event = self.last_event;
        for t in self.tasks.iter_mut().filter(|t| !t.halted) {
            let ran = now - t.started;
            let idle_since = if t.id == SESSION {
                last_event.unwrap_or(t.last_event)
            } else {
                t.last_event
            };
            let idle = now - idle_since;
            let halt = if ran > p.max_duration_secs * 1000 {
                Some(("DurationLimit", ran as f64 / 1000.0))
            } else if idle > p.max_idle_secs * 1000 {
                Some(("IdleTimeout", idle as f64 / 1000.0))
            } else {
                None
            };
            if let Some((kind, figure)) = halt {
                t.halted = true;
                halts.push(MHalt {
                    task: t.id.clone(),
                    kind,
                    figure,
                });
            }
        }
        halts
    }
}

fn observed(h: &Halt) -> MHalt {
    let figure = match &h.reason {
        HaltReason::ToolCallLimit { actual, .. } => *actual as f64,
        HaltReason::TokenSpendLimit { actual_cents, .. } => *actual_cents,
        HaltReason::DurationLimit { actual_secs, .. } => *actual_secs,
        HaltReason::IdleTimeout { idle_secs, .. } => *idle_secs,
        HaltReason::OutputLoop {
            similarity_jaccard, ..
        } => *similarity_jaccard,
    };
    MHalt {
        task: h.task_id.clone(),
        kind: h.reason.kind(),
        figure,
    }
}

fn compare_snapshot(
    real: &BudgetSnapshot,
    model: &Model,
    now: u64,
    ctx: &str,
) -> Result<(), TestCaseError> {
    let got: Vec<(String, u64, f64, f64, f64, bool)> = real
        .tasks
        .iter()
        .map(|t| {
            (
                t.task_id.clone(),
                t.tool_calls,
                t.spend_cents,
                t.duration_secs,
                t.idle_secs,
                t.halted,
            )
        })
        .collect();
    let want: Vec<(String, u64, f64, f64, f64, bool)> = model
        .tasks
        .iter()
        .map(|t| {
            let idle_since = if t.id == SESSION {
                model.last_event.unwrap_or(t.last_event)
            } else {
                t.last_event
            };
            (
                t.id.clone(),
                t.tools,
                t.cents as f64,
                (now - t.started) as f64 / 1000.0,
                (now - idle_since) as f64 / 1000.0,
                t.halted,
            )
        })
        .collect();
    prop_assert_eq!(got, want, "{}: tasks", ctx);
    prop_assert_eq!(&real.stack, &model.stack, "{}: stack", ctx);
    prop_assert_eq!(real.ignored_events, model.ignored, "{}: ignoredEvents", ctx);
    Ok(())
}

#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    tool_halts: u64,
    spend_halts: u64,
    loop_halts: u64,
    duration_halts: u64,
    idle_halts: u64,
    session_halts: u64,
    events_after_halt: u64,
    reopened_after_halt: u64,
}

fn run(p: &Params, ops: &[Op], reached: &mut Reached) -> Result<(), TestCaseError> {
    let clock = ManualClock::shared(0);
    let real = BudgetBreaker::with_clock(p.config(), clock.clone()).unwrap();
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&delivered);
    real.add_listener(Arc::new(move |e: &Event| {
        if let Event::Halt { halt, .. } = e {
            sink.lock().unwrap().push(halt.clone());
        }
        Ok(())
    }));
    let mut model = Model::default();
    // Tasks halted while open (model-independent bookkeeping): cleared when a task closes.
    let mut halted_open: BTreeSet<String> = BTreeSet::new();
    // Tasks closed after their halt (for the statistics).
    let mut closed_after_halt: BTreeSet<String> = BTreeSet::new();
    let mut previous = real.snapshot();
    for (step, op) in ops.iter().enumerate() {
        let now = clock.now();
        let ctx = format!("step {step} {op:?} at t={now}");
        let (got, want): (Vec<Halt>, Vec<MHalt>) = match op {
            Op::Ingest { kind, task } => {
                let id = task.map(|i| TASKS[i]);
                // Heartbeats need a taskId; one without is malformed (and changes nothing).
                let heartbeat = matches!(kind, Kind::Starting | Kind::Done | Kind::Error);
                if heartbeat && id.is_none() {
                    let e = real.ingest(&event_json(kind, None)).unwrap_err();
                    prop_assert_eq!(e.code(), "INVALID_EVENT", "{}", ctx);
                    (Vec::new(), Vec::new())
                } else {
                    let target_halted = id
                        .map(str::to_string)
                        .or_else(|| model.stack.last().cloned())
                        .or_else(|| Some(SESSION.to_string()))
                        .and_then(|t| model.tasks.iter().find(|x| x.id == t).map(|x| x.halted))
                        .unwrap_or(false);
                    if target_halted && !heartbeat && !matches!(kind, Kind::Unknown) {
                        reached.events_after_halt += 1;
                    }
                    if matches!(kind, Kind::Starting)
                        && id.is_some_and(|t| !model.tasks.iter().any(|x| x.id == t))
                        && id.is_some_and(|t| closed_after_halt.contains(t))
                    {
                        reached.reopened_after_halt += 1;
                    }
                    let halt = real.ingest(&event_json(kind, id)).unwrap();
                    let want = model.ingest(p, kind, id, now);
                    (halt.into_iter().collect(), want.into_iter().collect())
                }
            }
            Op::Tick => (real.tick(), model.tick(p, now)),
            Op::Advance(ms) => {
                clock.advance(*ms);
                (Vec::new(), Vec::new())
            }
            Op::Reset => {
                real.reset();
                model = Model::default();
                halted_open.clear();
                previous = real.snapshot();
                (Vec::new(), Vec::new())
            }
        };
        let now = clock.now();
        let got_m: Vec<MHalt> = got.iter().map(observed).collect();
        prop_assert_eq!(&got_m, &want, "{}: halts", ctx);
        let events: Vec<Halt> = std::mem::take(&mut *delivered.lock().unwrap());
        prop_assert_eq!(&events, &got, "{}: one halt event per halt", ctx);
        let snap = real.snapshot();
        compare_snapshot(&snap, &model, now, &ctx)?;

        // ---- invariants on the real breaker alone ----
        for h in &got {
            prop_assert!(
                halted_open.insert(h.task_id.clone()),
                "{}: task {} halted twice while open",
                ctx,
                h.task_id
            );
            match &h.reason {
                HaltReason::ToolCallLimit { actual, limit } => {
                    prop_assert_eq!(*actual, limit + 1, "{}", ctx);
                    reached.tool_halts += 1;
                }
                HaltReason::TokenSpendLimit { .. } => reached.spend_halts += 1,
                HaltReason::OutputLoop { .. } => reached.loop_halts += 1,
                HaltReason::DurationLimit { .. } => reached.duration_halts += 1,
                HaltReason::IdleTimeout { .. } => reached.idle_halts += 1,
            }
            if h.task_id == SESSION {
                reached.session_halts += 1;
            }
        }
        let open: BTreeSet<&str> = snap.tasks.iter().map(|t| t.task_id.as_str()).collect();
        for t in &halted_open {
            if !open.contains(t.as_str()) {
                closed_after_halt.insert(t.clone());
            }
        }
        halted_open.retain(|t| open.contains(t.as_str()));
        for t in &snap.tasks {
            if let Some(before) = previous.tasks.iter().find(|b| b.task_id == t.task_id) {
                prop_assert!(
                    t.tool_calls >= before.tool_calls,
                    "{}: tool calls fell",
                    ctx
                );
                prop_assert!(t.spend_cents >= before.spend_cents, "{}: spend fell", ctx);
                if before.halted {
                    prop_assert!(t.halted, "{}: {} un-halted while open", ctx, t.task_id);
                    prop_assert_eq!(
                        (t.tool_calls, t.spend_cents),
                        (before.tool_calls, before.spend_cents),
                        "{}: a halted task's counters moved",
                        ctx
                    );
                }
            }
        }
        previous = snap;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: support::cases(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn budget_breaker_matches_the_model(p in params(), ops in prop::collection::vec(op(), 1..80)) {
        run(&p, &ops, &mut Reached::default())?;
    }
}

/// Every kind of halt, halts of the implicit session, events sent to halted tasks and tasks
/// reopened after a halt all occur (fixed seed).
#[test]
fn generator_reaches_every_halt() {
    let mut total = Reached::default();
    let strategy = (params(), prop::collection::vec(op(), 1..80));
    support::sample(&strategy, 200, |(p, ops)| {
        run(&p, &ops, &mut total).unwrap()
    });
    eprintln!("{total:#?}");
    support::assert_reached(
        10,
        [
            ("tool-call halts", total.tool_halts),
            ("spend halts", total.spend_halts),
            ("output-loop halts", total.loop_halts),
            ("duration halts", total.duration_halts),
            ("idle halts", total.idle_halts),
            ("session halts", total.session_halts),
            ("events after a halt", total.events_after_halt),
            ("tasks reopened after a halt", total.reopened_after_halt),
        ],
    );
}

/// The model against contract §4's worked example: the 51st tool call halts with `tool calls: 51 of
/// 50`, and two empty outputs compare as 1.0.
#[test]
fn model_matches_the_spec_examples() {
    let p = Params {
        max_tools: 50,
        max_cents: 5000,
        max_duration_secs: 1800,
        max_idle_secs: 300,
        jaccard: 0.95,
        window: 3,
    };
    let mut m = Model::default();
    for _ in 0..50 {
        assert_eq!(m.ingest(&p, &Kind::Tool, Some("t1"), 0), None);
    }
    assert_eq!(
        m.ingest(&p, &Kind::Tool, Some("t1"), 0),
        Some(MHalt {
            task: "t1".into(),
            kind: "ToolCallLimit",
            figure: 51.0
        })
    );
    assert_eq!(m.ingest(&p, &Kind::Tool, Some("t1"), 0), None);
    assert_eq!(m.tasks[0].tools, 51);
    let empty = BTreeSet::new();
    assert_eq!(jaccard(&empty, &empty), 1.0);
    assert_eq!(m.ingest(&p, &Kind::Say(3), None, 0), None);
    assert_eq!(m.ingest(&p, &Kind::Say(4), None, 0), None);
    assert_eq!(
        m.ingest(&p, &Kind::Say(3), None, 0)
            .map(|h| (h.task, h.kind)),
        Some(("session".into(), "OutputLoop"))
    );
}

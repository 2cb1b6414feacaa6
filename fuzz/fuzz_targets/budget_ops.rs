//! The structured variant of `budget_event`: a small config and a sequence of operations built
//! from the bytes (typed events through `ingest_event`, ticks, clock moves, resets). Each typed
//! event is also written as the JSON a binding would send, which must parse to the same event.
#![no_main]

use agentbreaker::{
    AgentEvent, BudgetBreaker, BudgetConfig, EventKind, ManualClock, Phase, Price, Usage,
};
use agentbreaker_fuzz::{BudgetWatch, check_error};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// A few task ids, so events meet the same tasks again; index 4 and up: no taskId.
const TASKS: [&str; 4] = ["t1", "t2", "session", "t\u{e9}\u{1f600}"];
/// A few words, so outputs repeat and output loops happen.
const WORDS: [&str; 8] = [
    "I", "will", "try", "again", "the", "build", "failed", "\u{e9}",
];
/// Models: one with its own price, one falling back to `"*"`.
const MODELS: [&str; 2] = ["cheap", "other"];

#[derive(Debug, Arbitrary)]
struct Input {
    tool_cap: u8,
    cost_cap: u16,
    duration_secs: u16,
    idle_secs: u16,
    jaccard_percent: u8,
    loop_window: u8,
    max_tokens: u8,
    ops: Vec<Op>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    Event { task: u8, kind: Kind },
    Tick,
    Advance(u32),
    Reset,
}

#[derive(Debug, Arbitrary)]
enum Kind {
    Starting,
    Done,
    Error,
    Assistant(Vec<u8>),
    Tool,
    Usage {
        model: Option<bool>,
        input: u64,
        output: u32,
        cache_write: u32,
        cache_read: u16,
    },
    Unknown,
}

fn event(task: u8, kind: &Kind) -> (AgentEvent, Value) {
    let task_id = TASKS.get(task as usize).map(|t| t.to_string());
    let (kind, mut value) = match kind {
        Kind::Starting | Kind::Done | Kind::Error => {
            let (phase, name) = match kind {
                Kind::Starting => (Phase::Starting, "starting"),
                Kind::Done => (Phase::Done, "done"),
                _ => (Phase::Error, "error"),
            };
            (
                EventKind::Heartbeat(phase),
                json!({"type": "heartbeat", "phase": name}),
            )
        }
        Kind::Assistant(words) => {
            let text: Vec<&str> = words
                .iter()
                .map(|&w| WORDS[w as usize % WORDS.len()])
                .collect();
            let text = text.join(" ");
            (
                EventKind::Assistant(text.clone()),
                json!({"type": "assistant", "text": text}),
            )
        }
        Kind::Tool => (
            EventKind::ToolUse("Bash".into()),
            json!({"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}),
        ),
        Kind::Usage {
            model,
            input,
            output,
            cache_write,
            cache_read,
        } => {
            let model = model.map(|m| MODELS[usize::from(m)].to_string());
            let usage = Usage {
                input_tokens: *input,
                output_tokens: u64::from(*output),
                cache_creation_input_tokens: u64::from(*cache_write),
                cache_read_input_tokens: u64::from(*cache_read),
            };
            let value = json!({"type": "usage", "model": model, "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                "cache_read_input_tokens": usage.cache_read_input_tokens,
                "service_tier": "standard"}});
            (EventKind::Usage { model, usage }, value)
        }
        Kind::Unknown => (
            EventKind::Unknown("system".into()),
            json!({"type": "system"}),
        ),
    };
    if let Some(id) = &task_id {
        value["taskId"] = json!(id);
    }
    (AgentEvent { task_id, kind }, value)
}

fuzz_target!(|input: Input| {
    let mut config = BudgetConfig {
        max_tool_calls_per_task: u64::from(input.tool_cap).max(1),
        max_token_spend_cents_per_task: u64::from(input.cost_cap).max(1),
        max_task_duration_secs: u64::from(input.duration_secs).max(1),
        max_idle_secs: u64::from(input.idle_secs).max(1),
        similarity_jaccard_threshold: f64::from(input.jaccard_percent.clamp(1, 100)) / 100.0,
        loop_window: u32::from(input.loop_window).clamp(2, 8),
        max_tokens_per_output: u32::from(input.max_tokens).max(1),
        ..BudgetConfig::default()
    };
    config.prices.insert(
        MODELS[0].into(),
        Price {
            input: 1.0,
            output: 2.0,
            cache_write: 0.5,
            cache_read: 0.0,
        },
    );
    let clock = ManualClock::shared(0);
    let breaker = BudgetBreaker::with_clock(config, clock.clone()).expect("a valid config");
    let mut watch = BudgetWatch::default();
    for op in input.ops.iter().take(4096) {
        match op {
            Op::Event { task, kind } => {
                let (typed, json) = event(*task, kind);
                match AgentEvent::from_json(&json) {
                    Ok(parsed) => assert_eq!(parsed, typed, "{json}"),
                    Err(e) => {
                        // Only a heartbeat without a taskId is malformed.
                        check_error(&e, "INVALID_EVENT");
                        assert!(typed.task_id.is_none(), "{json}: {e}");
                        assert!(matches!(typed.kind, EventKind::Heartbeat(_)), "{json}: {e}");
                        continue;
                    }
                }
                match breaker.ingest_event(&typed) {
                    Ok(Some(h)) => watch.halt(&h),
                    Ok(None) => {}
                    Err(e) => panic!("a few tasks are never too many: {e}"),
                }
            }
            Op::Tick => {
                for h in breaker.tick() {
                    watch.halt(&h);
                }
            }
            Op::Advance(ms) => clock.advance(u64::from(*ms)),
            Op::Reset => {
                breaker.reset();
                watch.reset();
            }
        }
        watch.snapshot(&breaker);
    }
});

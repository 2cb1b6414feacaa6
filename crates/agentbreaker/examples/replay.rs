//! Replays the seeds' worked examples through the breakers and prints where each one halts:
//!
//! 1. seed 004 — the path-hallucination loop: an agent guesses script paths that do not exist; the
//!    FailureBreaker warns at 3 failures, opens at 5 and blocks the 6th attempt.
//! 2. seed 003 — "deep competitor research on the top 200 real estate brokerages in LA": the
//!    research specialist keeps scraping; the BudgetBreaker halts it at its 51st tool call. A
//!    parallel sibling task keeps its own counters (the seed's known limitation, fixed).
//! 3. seeds 000–002 — a Ralph-style loop whose agent stops making progress: the Loop coordinator
//!    exits with `circuit_open` after the StagnationBreaker's watchful iteration.
//!
//! Run: `cargo run -q -p agentbreaker --example replay` (or `make demo`).

use std::sync::Arc;

use agentbreaker::{
    BudgetBreaker, BudgetConfig, Event, FailureBreaker, FailureConfig, Loop, LoopConfig,
    ManualClock, Observation, SharedClock,
};
use serde_json::json;

fn main() -> Result<(), agentbreaker::Error> {
    path_hallucination()?;
    println!();
    runaway_research()?;
    println!();
    stalled_loop()?;
    Ok(())
}

fn print_events(event: &Event) -> agentbreaker::ListenerResult {
    match event {
        Event::Warning { message, .. } => println!("[Circuit Breaker] {message}"),
        Event::StateChange { to, reason, .. } => {
            println!("[Circuit Breaker] {to}: {reason}")
        }
        Event::Halt { halt, .. } => println!("[Budget] halt: {}", halt.reason.message()),
        Event::Verdict { verdict, .. } => {
            println!(
                "[Monitor] {}: {}",
                verdict.action.as_str(),
                verdict.message.as_deref().unwrap_or("")
            )
        }
    }
    Ok(())
}

/// Seed 004: six guesses at a script path, every one "Path not found".
fn path_hallucination() -> Result<(), agentbreaker::Error> {
    println!("== seed 004: path-hallucination loop (FailureBreaker, seed defaults) ==");
    let clock = ManualClock::shared(0);
    let breaker = FailureBreaker::with_clock(FailureConfig::default(), clock.clone())?;
    // Print each event the way the seed's Lua breaker did ("[Circuit Breaker] OPENED: ...").
    breaker.add_listener(Arc::new(|event: &Event| {
        if let Some((_, line)) = agentbreaker::seed_log_line(event, 5) {
            println!("{line}");
        }
        Ok(())
    }));
    let guesses = [
        "ServerScriptService.MainScript",
        "ServerScriptService.Main",
        "ServerScriptService.Scripts.Main",
        "ServerScriptService.Core.Main",
        "ServerScriptService.MainHandler",
        "ServerScriptService.MainController",
    ];
    for (i, path) in guesses.iter().enumerate() {
        // One guess every 4 s; the 6th is an immediate retry right after the 5th failed.
        clock.set(i.min(4) as u64 * 4_000);
        println!("[Iteration {}] AI: Read script \"{path}\"", i + 1);
        let permission = breaker.should_allow_operation();
        if !permission.allowed {
            println!("[Tool] Blocked: {}", permission.message.unwrap_or_default());
            println!(
                "-> halted at iteration {} after {} consecutive failures; the 6th call never ran.",
                i + 1,
                breaker.status().consecutive_failures
            );
            break;
        }
        println!("[Tool] Error: Path not found");
        breaker.record_failure(&format!("Path not found: {path}"));
    }
    // The user provides the right path; after the 30 s cooldown one test operation is allowed.
    clock.advance(30_000);
    let probe = breaker.should_allow_operation();
    println!(
        "after the cooldown: allowed={} ({})",
        probe.allowed,
        probe.message.unwrap_or_default()
    );
    println!("[Iteration 7] AI: Read script \"ServerScriptService.Main.server\" -> ok");
    breaker.record_success();
    println!("state now {}", breaker.state());
    Ok(())
}

/// Seed 003: a research specialist scraping without end, beside a parallel sibling.
fn runaway_research() -> Result<(), agentbreaker::Error> {
    println!("== seed 003: runaway research task (BudgetBreaker, seed defaults) ==");
    let clock = ManualClock::shared(0);
    let budget = BudgetBreaker::with_clock(BudgetConfig::default(), clock.clone())?;
    for task in ["research", "outline"] {
        budget.ingest(&json!({"type": "heartbeat", "taskId": task, "phase": "starting"}))?;
    }
    let mut halted = None;
    for call in 1..=200u64 {
        clock.set(call * 2_000);
        let event = json!({"type": "tool_use", "taskId": "research", "name": "web_fetch",
            "input": {"url": format!("https://example.com/brokerage/{call}")}});
        budget.ingest(
            &json!({"type": "usage", "taskId": "research", "model": "claude-sonnet-4",
            "usage": {"input_tokens": 4_000, "output_tokens": 300}}),
        )?;
        // The sibling works at the same time and must not be charged for research's calls.
        if call % 10 == 0 {
            budget.ingest(&json!({"type": "tool_use", "taskId": "outline", "name": "write"}))?;
        }
        if let Some(halt) = budget.ingest(&event)? {
            halted = Some((call, halt));
            break;
        }
    }
    let snapshot = budget.snapshot();
    for t in &snapshot.tasks {
        println!(
            "task {:<9} tool calls {:>3}  spend {:>7.2}¢  running {:>5.0}s  halted {}",
            t.task_id, t.tool_calls, t.spend_cents, t.duration_secs, t.halted
        );
    }
    if let Some((call, halt)) = halted {
        println!(
            "-> halted {} at lookup {call}: {} ({})",
            halt.task_id,
            halt.reason.message(),
            halt.reason.slug()
        );
        println!("   {}", serde_json::to_string(&halt).unwrap_or_default());
    }
    Ok(())
}

/// Seeds 000–002: a loop whose agent keeps answering without changing anything.
fn stalled_loop() -> Result<(), agentbreaker::Error> {
    println!("== seeds 000-002: a stalled Ralph-style loop (Loop, defaults) ==");
    let clock: SharedClock = ManualClock::shared(0);
    let agent_loop = Loop::with_clock(LoopConfig::default(), clock)?;
    agent_loop.add_listener(Arc::new(print_events));
    let outputs = [
        ("Implemented the parser; 12 tests passed.", 2, 12),
        ("Fixed the tokenizer edge case; 14 tests passed.", 1, 14),
        ("Looking into the failing integration test again.", 0, 14),
        ("Still looking into the integration test.", 0, 14),
        ("Trying the integration test once more.", 0, 14),
        ("The integration test still fails.", 0, 14),
        ("Trying again.", 0, 14),
    ];
    for (output, files, tests) in outputs {
        let decision = agent_loop.observe(&Observation {
            output: output.to_string(),
            files_changed: files,
            tests_passing: tests,
            ..Observation::default()
        })?;
        println!(
            "[Iteration {}] {:<50} -> {:?} (stagnation {})",
            decision.iteration, output, decision.action, decision.breaker.state
        );
        if let Some(reason) = decision.reason {
            let outcome = match decision.outcome {
                Some(agentbreaker::Outcome::Success) => "success",
                _ => "failure",
            };
            println!(
                "-> loop exited after {} iterations: {reason} ({outcome})",
                decision.iteration
            );
            break;
        }
    }
    Ok(())
}

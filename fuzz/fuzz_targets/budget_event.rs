//! Any bytes as a stream of JSON events (one per line) into a BudgetBreaker, through `ingest`, the
//! JSON path every binding uses. The first line may instead be the breaker's config. An event may
//! carry `"advanceMs": n` (ignored by the breaker) to move the clock before it is ingested; a line
//! `reset` resets the breaker. After every line the breaker is ticked and its snapshot checked.
#![no_main]

use agentbreaker::{AgentEvent, BudgetBreaker, BudgetConfig, ManualClock};
use agentbreaker_fuzz::{BudgetWatch, check_error};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let mut lines = data.split(|&b| b == b'\n').peekable();
    let mut config = BudgetConfig::default();
    if let Some(Ok(value)) = lines.peek().map(|l| serde_json::from_slice::<Value>(l)) {
        match BudgetConfig::from_json(&value) {
            Ok(c) => {
                // A config reads back from its own JSON.
                let again = serde_json::to_value(&c).expect("a config serializes");
                assert_eq!(BudgetConfig::from_json(&again).expect("round trip"), c);
                config = c;
                lines.next();
            }
            Err(e) => check_error(&e, "INVALID_CONFIG"),
        }
    }
    let clock = ManualClock::shared(0);
    let breaker = BudgetBreaker::with_clock(config, clock.clone()).expect("a validated config");
    let mut watch = BudgetWatch::default();
    for line in lines {
        if line == b"reset" {
            breaker.reset();
            watch.reset();
            continue;
        }
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let Some(ms) = event.get("advanceMs").and_then(Value::as_u64) {
            clock.advance(ms);
        }
        let parsed = AgentEvent::from_json(&event);
        match breaker.ingest(&event) {
            Ok(halt) => {
                assert!(parsed.is_ok(), "ingest accepted what from_json rejects");
                if let Some(h) = halt {
                    watch.halt(&h);
                }
            }
            Err(e) => {
                // Malformed, or one task too many: both are INVALID_EVENT.
                check_error(&e, "INVALID_EVENT");
            }
        }
        for h in breaker.tick() {
            watch.halt(&h);
        }
        watch.snapshot(&breaker);
    }
});

//! Any bytes as an agent's output stream, one line at a time, through the CLI's stream parser in
//! each format (auto, Claude stream-json, Codex `exec --json`, SPEC events) and on into the
//! breakers through `Feed`, as `agentbreaker run` and `replay` do.
#![no_main]

use agentbreaker::{BudgetBreaker, BudgetConfig, ManualClock, StagnationBreaker, StagnationConfig};
use agentbreaker_cli::stream::{Feed, Format, Signal, StreamParser};
use libfuzzer_sys::fuzz_target;

const FORMATS: [Format; 4] = [Format::Auto, Format::Claude, Format::Codex, Format::Events];

fuzz_target!(|data: &[u8]| {
    for format in FORMATS {
        let clock = ManualClock::shared(0);
        let budget = BudgetBreaker::with_clock(BudgetConfig::default(), clock.clone())
            .expect("default config");
        let stagnation = StagnationBreaker::with_clock(
            StagnationConfig {
                repeat_threshold: 3,
                cycle_repeats: 2,
                fail_streak_threshold: 4,
                fail_window: 6,
                ..StagnationConfig::default()
            },
            clock.clone(),
        )
        .expect("config");
        let mut parser = StreamParser::new(format);
        let mut feed = Feed::new(true);
        let mut lines = 0u64;
        for line in data.split(|&b| b == b'\n') {
            lines += 1;
            clock.advance(1000);
            let signals = parser.parse_line(line);
            for s in &signals {
                if let Signal::Event(e) = s
                    && let Some(id) = &e.task_id
                {
                    assert!(!id.is_empty() && id.len() <= 256, "{id:?}");
                }
            }
            if let Some(stop) = feed.feed(signals, &budget, &stagnation) {
                assert!(!stop.slug().is_empty());
                assert!(stop.exit_code() != 0);
                break;
            }
        }
        assert!(parser.lines <= lines && parser.malformed <= parser.lines);
        assert!(feed.errors.len() <= 32);
        serde_json::to_string(&budget.snapshot()).expect("snapshot serializes");
        serde_json::to_string(&stagnation.status()).expect("status serializes");
    }
});

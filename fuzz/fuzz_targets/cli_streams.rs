//! Any bytes as an agent's output stream, one line at a time, through the CLI's stream parser in
//! each format (auto, Claude stream-json, Codex `exec --json`, Monitor events) and on into a
//! Monitor through `Watch`, with the one-second clock walk between lines, as `agentbreaker run`
//! and `replay` do.
#![no_main]

use agentbreaker::{ManualClock, MonitorConfig};
use agentbreaker_cli::stream::{Format, StreamParser};
use agentbreaker_cli::timeline::walk;
use agentbreaker_cli::watch::Watch;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

const FORMATS: [Format; 4] = [Format::Auto, Format::Claude, Format::Codex, Format::Events];

fuzz_target!(|data: &[u8]| {
    for format in FORMATS {
        let clock = ManualClock::shared(0);
        // Low thresholds, so that the rules trip on short inputs too.
        let config = MonitorConfig::from_json(&json!({
            "stagnation": {"repeatThreshold": 3, "cycleRepeats": 2, "failStreakThreshold": 4,
                           "failWindow": 6},
            "budget": {"maxIdleSecs": 5, "maxToolCallsPerTask": 40},
        }))
        .expect("config");
        let mut watch = Watch::new(config, clock.clone()).expect("watch");
        let mut parser = StreamParser::new(format);
        let mut lines = 0u64;
        for line in data.split(|&b| b == b'\n') {
            lines += 1;
            let events = parser.parse_line(line);
            for e in &events {
                assert!(e["type"].is_string(), "{e}");
                if let Some(id) = e.get("taskId").and_then(|t| t.as_str()) {
                    assert!(!id.is_empty() && id.len() <= 256, "{id:?}");
                }
            }
            let target = clock.now() + 1000;
            let ticked = walk(&clock, &watch.monitor, target);
            watch.record_all(ticked);
            watch.observe(&events);
            if let Some(halt) = &watch.halt {
                assert!(halt.reason.is_some());
                assert!(halt.message.is_some() && halt.nudge.is_some());
                break;
            }
        }
        let rest = parser.finish();
        watch.observe(&rest);
        assert!(parser.lines <= lines && parser.malformed <= parser.lines);
        assert!(watch.errors.len() <= 32);
        assert!(watch.invalid_samples.len() <= 8);
        // Events from the Claude and Codex parsers are always ones the Monitor takes (short of
        // 4096 subagent tasks open at once, which an input this size cannot hold).
        if matches!(format, Format::Claude | Format::Codex) && data.len() <= 65_536 {
            assert_eq!(watch.invalid, 0, "{:?}", watch.invalid_samples);
        }
        serde_json::to_string(&watch.status()).expect("status serializes");
        serde_json::to_string(&watch.monitor.snapshot()).expect("snapshot serializes");
    }
});

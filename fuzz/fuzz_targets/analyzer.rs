//! Any text into the response analyzer: the result stays in range, is deterministic, and reads
//! back from its own JSON. If the bytes are JSON, they are also read as a recorded analysis
//! (`Analysis::from_json`), which must round-trip when accepted.
#![no_main]

use agentbreaker::analyzer::is_status_line;
use agentbreaker::{Analysis, ExitStrategy, State, StrategyConfig, analyze};
use agentbreaker_fuzz::{check_error, text};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn check(a: &Analysis) {
    assert!(a.confidence <= 100, "{a:?}");
    assert_eq!(a.confidence, a.completion_signal.confidence, "{a:?}");
    let json = serde_json::to_value(a).expect("an analysis serializes");
    assert_eq!(&Analysis::from_json(&json).expect("reads back"), a);
}

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let a = analyze(&text);
    check(&a);
    if a.exit_signal == Some(false) {
        assert!(!a.completion_signal.detected && a.confidence == 0, "{a:?}");
    }
    if a.exit_signal == Some(true) && !a.completion_signal.detected {
        panic!("EXIT_SIGNAL: true without a veto must be detected: {a:?}");
    }
    if !a.completion_signal.detected {
        assert!(
            a.completion_signal.phrases.is_empty() || a.exit_signal == Some(false),
            "{a:?}"
        );
    }
    assert_eq!(analyze(&text), a, "analyze is deterministic");
    for line in text.lines().take(64) {
        is_status_line(line);
    }
    // The default strategy over the analysis.
    let strategy = ExitStrategy::new(StrategyConfig::default());
    let decision = strategy.should_exit(&a, State::Closed);
    assert_eq!(
        decision.exit,
        a.completion_signal.detected && a.confidence >= 70
    );

    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        match Analysis::from_json(&value) {
            Ok(recorded) => check(&recorded),
            Err(e) => check_error(&e, "INVALID_ARGUMENT"),
        }
    }
});

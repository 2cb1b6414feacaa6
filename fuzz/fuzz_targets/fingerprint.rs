//! Any text into the error fingerprints (exact, normalized, template, key_line): bounded output,
//! no digits left where numbers are replaced, whitespace collapsed, only the first 4096 bytes
//! counting; and the same text through the breakers that count fingerprints.
#![no_main]

use agentbreaker::fingerprint::{ErrorMatch, key_line};
use agentbreaker::text::{MAX_ERROR_BYTES, cap_error};
use agentbreaker::{
    FailureBreaker, FailureConfig, ManualClock, StagnationBreaker, StagnationConfig,
};
use agentbreaker_fuzz::text;
use libfuzzer_sys::fuzz_target;

const MODES: [ErrorMatch; 4] = [
    ErrorMatch::Exact,
    ErrorMatch::Normalized,
    ErrorMatch::Template,
    ErrorMatch::KeyLine,
];

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let capped = cap_error(&text);
    assert!(capped.len() <= MAX_ERROR_BYTES && text.starts_with(capped));
    for mode in MODES {
        let f = agentbreaker::fingerprint(&text, mode);
        if capped.len() < text.len() {
            let again = agentbreaker::fingerprint(capped, mode);
            assert_eq!(again, f, "only the first 4096 bytes count");
        }
        match mode {
            ErrorMatch::Exact => assert_eq!(f, capped.trim()),
            _ => {
                // Template turns a short path into `<path>`: at most a few times longer.
                assert!(f.len() <= 3 * MAX_ERROR_BYTES, "{mode}: {} bytes", f.len());
                assert!(
                    !f.bytes().any(|b| b.is_ascii_digit()),
                    "{mode}: digits left in {f:?}"
                );
                let collapsed = f.split_whitespace().collect::<Vec<_>>().join(" ");
                if mode != ErrorMatch::Template {
                    assert_eq!(collapsed, f, "{mode}: whitespace not collapsed");
                    assert!(f.len() <= MAX_ERROR_BYTES, "{mode}: {} bytes", f.len());
                }
            }
        }
    }
    let key = key_line(capped);
    assert!(capped.contains(key));
    assert!(!key.contains('\n'));

    // The breakers count by fingerprint: the same text twice is the same error (in one mode per
    // input, picked by its length: the regexes dominate the cost of every run).
    {
        let mode = MODES[data.len() % MODES.len()];
        let clock = ManualClock::shared(0);
        let stagnation = StagnationBreaker::with_clock(
            StagnationConfig {
                same_error_threshold: 2,
                error_match: mode,
                ..StagnationConfig::default()
            },
            clock.clone(),
        )
        .expect("config");
        stagnation.record_error(&text, false);
        stagnation.record_error(&text, false);
        let status = stagnation.status();
        assert_eq!(status.error_counts.values().sum::<u64>(), 2, "{status:?}");
        assert!(
            !stagnation.check().allow_continue,
            "the same error twice opens"
        );

        let failure = FailureBreaker::with_clock(
            FailureConfig {
                failure_threshold: 10,
                identical_error_threshold: 2,
                error_match: mode,
                ..FailureConfig::default()
            },
            clock,
        )
        .expect("config");
        failure.record_failure(&text);
        failure.record_failure(&text);
        assert_eq!(
            failure.state(),
            agentbreaker::State::Open,
            "identical errors trip"
        );
        for record in failure.status().failure_history {
            assert!(record.error.len() <= MAX_ERROR_BYTES);
        }
    }
});

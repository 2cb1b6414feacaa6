//! What the model-based tests (`model_*.rs`) share: their case count, and the check that their
//! generators reach the situations the models are about.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

/// Cases per property: `default`, or `PROPTEST_CASES` for a longer search.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `run` on `samples` values of `strategy`, drawn with a fixed seed.
pub fn sample<S: Strategy>(strategy: &S, samples: usize, mut run: impl FnMut(S::Value)) {
    let mut runner = TestRunner::deterministic();
    for _ in 0..samples {
        run(strategy.new_tree(&mut runner).unwrap().current());
    }
}

/// Fails unless every situation was reached at least `min` times.
pub fn assert_reached<'a>(min: u64, counts: impl IntoIterator<Item = (&'a str, u64)>) {
    for (what, n) in counts {
        assert!(n >= min, "the generator reached {what} only {n} times");
    }
}

//! Model-based test of the StagnationBreaker's counters (contract §3, contract §6 "the error map at 1024
//! keys (oldest evicted)", decisions "Error counts"): random sequences of iterations with and
//! without progress, errors (single ones, repeats, and floods of hundreds of distinct ones that
//! push the map past its cap), transient errors, `check` and `reset`, against a reference model of
//! the error map as an insertion-ordered map that evicts the key inserted earliest.
//!
//! After every step the error counts, `consecutiveNoProgress`, the state and `check()` agree with
//! the model, and on the real breaker alone: the map never holds more than 1024 keys, no count is
//! 0, and the counts sum to the non-transient errors recorded since the last progress minus what
//! eviction dropped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, VecDeque};

use agentbreaker::{IterationMetrics, ManualClock, StagnationBreaker, StagnationConfig, State};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

mod support;

const CAP: usize = 1024;
/// Distinct error texts available: more than the cap.
const POOL: usize = 1500;

/// The `i`-th error text. Letters only (g..v), so that the normalized fingerprint is the text
/// itself (contract §6 replaces digits and hex ids).
fn error_text(mut i: usize) -> String {
    let mut w = String::from("error ");
    loop {
        w.push((b'g' + (i % 16) as u8) as char);
        i /= 16;
        if i == 0 {
            return w;
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// One iteration; `progress` as files changed.
    Iteration {
        progress: bool,
    },
    /// One error.
    Error(usize),
    /// `n` distinct errors in a row, from `from` on (wrapping in the pool).
    Flood {
        from: usize,
        n: usize,
    },
    Transient(usize),
    Check,
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<bool>().prop_map(|progress| Op::Iteration { progress }),
        // Mostly a few hot errors, so repeats add up.
        6 => prop_oneof![3 => 0usize..4, 1 => 0..POOL].prop_map(Op::Error),
        2 => (0..POOL, prop_oneof![2 => 1usize..50, 1 => 300usize..1100])
            .prop_map(|(from, n)| Op::Flood { from, n }),
        1 => (0..POOL).prop_map(Op::Transient),
        2 => Just(Op::Check),
        3 => Just(Op::Reset),
    ]
}

#[derive(Debug, Default)]
struct Model {
    state: State,
    no_progress: u64,
    /// Keys in insertion order, and their counts.
    order: VecDeque<String>,
    counts: BTreeMap<String, u64>,
    /// Non-transient errors recorded, and counts dropped by eviction, since the map was last
    /// cleared.
    recorded: u64,
    evicted: u64,
}

impl Model {
    fn error(&mut self, text: String, same_error_threshold: u64) {
        self.recorded += 1;
        let count = match self.counts.get_mut(&text) {
            Some(c) => {
                *c += 1;
                *c
            }
            None => {
                if self.order.len() == CAP {
                    let oldest = self.order.pop_front().unwrap();
                    self.evicted += self.counts.remove(&oldest).unwrap();
                }
                self.order.push_back(text.clone());
                self.counts.insert(text, 1);
                1
            }
        };
        if count >= same_error_threshold {
            self.state = State::Open;
        }
    }

    fn clear_errors(&mut self) {
        self.order.clear();
        self.counts.clear();
        self.recorded = 0;
        self.evicted = 0;
    }

    /// One iteration with a steady output length (so output decline never decides).
    fn iteration(&mut self, progress: bool, no_progress_threshold: u64) {
        if progress {
            self.no_progress = 0;
            self.clear_errors();
        } else {
            self.no_progress += 1;
        }
        match self.state {
            State::Closed if self.no_progress >= no_progress_threshold => {
                self.state = State::HalfOpen
            }
            State::HalfOpen => {
                self.state = if progress { State::Closed } else { State::Open };
            }
            _ => {}
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Reached {
    evictions: u64,
    full_maps: u64,
    opens_by_error: u64,
    recounted_after_eviction: u64,
}

fn run(
    no_progress_threshold: u32,
    same_error_threshold: u32,
    ops: &[Op],
    reached: &mut Reached,
) -> Result<(), TestCaseError> {
    let real = StagnationBreaker::with_clock(
        StagnationConfig {
            no_progress_threshold,
            same_error_threshold,
            ..StagnationConfig::default()
        },
        ManualClock::shared(0),
    )
    .unwrap();
    let mut model = Model::default();
    let threshold = u64::from(same_error_threshold);
    // Keys the model evicted since the map was last cleared.
    let mut evicted_keys: std::collections::BTreeSet<String> = Default::default();
    for (step, op) in ops.iter().enumerate() {
        let ctx = format!("step {step} {op:?}");
        let state_before = model.state;
        let mut errors = Vec::new();
        match op {
            Op::Iteration { progress } => {
                real.record_progress(IterationMetrics {
                    files_changed: u64::from(*progress),
                    tests_passing: 0,
                    output_length: 100,
                });
                model.iteration(*progress, u64::from(no_progress_threshold));
                if *progress {
                    evicted_keys.clear();
                }
            }
            Op::Error(i) => errors.push(*i),
            Op::Flood { from, n } => errors.extend((0..*n).map(|k| (from + k) % POOL)),
            Op::Transient(i) => real.record_error(&error_text(*i), true),
            Op::Check => {
                let d = real.check();
                prop_assert_eq!(d.state, model.state, "{}", ctx);
                prop_assert_eq!(d.allow_continue, model.state != State::Open, "{}", ctx);
                prop_assert_eq!(d.reason.is_none(), model.state == State::Closed, "{}", ctx);
            }
            Op::Reset => {
                real.reset();
                model = Model::default();
                evicted_keys.clear();
            }
        }
        for i in errors {
            let text = error_text(i);
            if evicted_keys.remove(&text) {
                reached.recounted_after_eviction += 1;
            }
            real.record_error(&text, false);
            let evicted_before = model.order.front().cloned();
            let len_before = model.order.len();
            model.error(text, threshold);
            if len_before == CAP
                && model.order.len() == CAP
                && model.order.front() != evicted_before.as_ref()
            {
                reached.evictions += 1;
                evicted_keys.insert(evicted_before.unwrap());
            }
        }
        if state_before != State::Open
            && model.state == State::Open
            && !matches!(op, Op::Iteration { .. })
        {
            reached.opens_by_error += 1;
        }

        let s = real.status();
        prop_assert_eq!(s.state, model.state, "{}: state", ctx);
        prop_assert_eq!(
            s.consecutive_no_progress,
            model.no_progress,
            "{}: consecutiveNoProgress",
            ctx
        );
        prop_assert_eq!(&s.error_counts, &model.counts, "{}: errorCounts", ctx);

        // ---- on the real breaker alone ----
        prop_assert!(
            s.error_counts.len() <= CAP,
            "{}: {} keys",
            ctx,
            s.error_counts.len()
        );
        prop_assert!(
            s.error_counts.values().all(|&c| c > 0),
            "{}: a zero count",
            ctx
        );
        let sum: u64 = s.error_counts.values().sum();
        prop_assert_eq!(sum, model.recorded - model.evicted, "{}: counts sum", ctx);
        if s.error_counts.len() == CAP {
            reached.full_maps += 1;
        }
    }
    Ok(())
}

fn thresholds() -> impl Strategy<Value = (u32, u32)> {
    (
        1u32..=5,
        prop_oneof![3 => 1u32..=6, 1 => Just(1_000_000u32)],
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: support::cases(64),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn error_counts_follow_the_model_past_the_cap(
        (no_progress, same_error) in thresholds(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run(no_progress, same_error, &ops, &mut Reached::default())?;
    }
}

/// Evictions, full maps, errors counted again from 1 after their eviction, and opens by a
/// repeated error all occur (fixed seed).
#[test]
fn generator_reaches_eviction() {
    let mut total = Reached::default();
    let strategy = (thresholds(), prop::collection::vec(op(), 1..40));
    support::sample(&strategy, 100, |((a, b), ops)| {
        run(a, b, &ops, &mut total).unwrap();
    });
    eprintln!("{total:#?}");
    support::assert_reached(
        10,
        [
            ("evictions", total.evictions),
            ("full maps", total.full_maps),
            ("opens by a repeated error", total.opens_by_error),
            (
                "errors counted again after eviction",
                total.recounted_after_eviction,
            ),
        ],
    );
}

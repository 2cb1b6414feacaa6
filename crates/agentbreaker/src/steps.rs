//! Step detectors of the StagnationBreaker: patterns in what an agent *does*, one step (one model
//! call and the tool calls it made) at a time, in the spirit of OpenHands' and Gemini CLI's stuck
//! detectors. All are off unless configured (see `StagnationConfig`):
//!
//! - **repeat**: the same action with the same result `repeatThreshold` times in a row;
//! - **cycle**: a cycle of 2..=`maxCycleLength` steps repeated `cycleRepeats` times in a row;
//! - **fail streak**: `failStreakThreshold` failed steps in a row with at most
//!   `failStreakDistinct` distinct error fingerprints;
//! - **fail window**: `failWindow` steps since the last progress, of which at least
//!   `failWindowPercent` percent failed.
//!
//! Actions and results are compared by fingerprint (numbers, ids, timestamps normalized; see
//! SPEC 6); failed results by the breaker's `errorMatch` for the fail streak.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::fingerprint::key_line;
use crate::json::Fields;
use crate::text::truncate;

/// The largest value any step threshold may take (it bounds the history kept).
pub const MAX_STEP_THRESHOLD: u32 = 1000;
/// The longest cycle looked for.
pub const MAX_CYCLE_LENGTH: u32 = 20;

/// One agent step: the action it took (e.g. its tool calls, or its text when it called no tool)
/// and the result it got.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentStep {
    /// What the agent did, as text (`"bash: pytest -q"`).
    pub action: String,
    /// What came back (a tool result, an error message).
    pub result: String,
    /// Whether the step failed (an error result, a rejected command).
    pub failed: bool,
}

impl AgentStep {
    /// Reads `{action, result?, failed?}`; wrong types are `INVALID_ARGUMENT`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let f = Fields::new(
            value,
            "step",
            Error::InvalidArgument,
            &["action", "result", "failed"],
        )?;
        Ok(AgentStep {
            action: f.str_req("action")?.to_string(),
            result: f.str_opt("result")?.unwrap_or("").to_string(),
            failed: f.bool_or("failed", false)?,
        })
    }
}

/// The step rules, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepRules {
    pub repeat: u32,
    pub cycle_repeats: u32,
    pub max_cycle: u32,
    pub fail_streak: u32,
    pub fail_distinct: u32,
    pub fail_window: u32,
    pub fail_window_percent: u32,
}

impl StepRules {
    /// How many steps the rules look back at.
    fn history_len(&self) -> usize {
        [
            self.repeat,
            self.cycle_repeats.saturating_mul(self.max_cycle),
            self.fail_streak,
            self.fail_window,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
        .max(1) as usize
    }

    /// Whether any step rule is on.
    pub(crate) fn any(&self) -> bool {
        self.repeat > 0 || self.cycle_repeats > 0 || self.fail_streak > 0 || self.fail_window > 0
    }
}

/// A step as remembered: fingerprint hashes only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StepRecord {
    signature: u64,
    failed: bool,
    error: u64,
}

/// The recent steps of one breaker.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepHistory {
    steps: VecDeque<StepRecord>,
    since_progress: u64,
}

pub(crate) fn hash_of(parts: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

impl StepHistory {
    /// Records a step (its fingerprints already taken) and returns the reason a rule fired, if
    /// one did.
    pub(crate) fn record(
        &mut self,
        rules: &StepRules,
        signature: u64,
        error: Option<u64>,
        step: &AgentStep,
    ) -> Option<String> {
        let cap = rules.history_len();
        while self.steps.len() >= cap {
            self.steps.pop_front();
        }
        self.steps.push_back(StepRecord {
            signature,
            failed: step.failed,
            error: error.unwrap_or(0),
        });
        self.since_progress = self.since_progress.saturating_add(1);
        self.repeat(rules, step)
            .or_else(|| self.cycle(rules))
            .or_else(|| self.fail_streak(rules, step))
            .or_else(|| self.fail_window(rules))
    }

    /// Progress happened: the fail window starts again.
    pub(crate) fn progress(&mut self) {
        self.since_progress = 0;
    }

    fn repeat(&self, rules: &StepRules, step: &AgentStep) -> Option<String> {
        if rules.repeat == 0 {
            return None;
        }
        let last = self.steps.back()?.signature;
        let run = self
            .steps
            .iter()
            .rev()
            .take_while(|s| s.signature == last)
            .count();
        (run >= rules.repeat as usize).then(|| {
            format!(
                "Same step repeated {} times: {}",
                rules.repeat,
                truncate(key_line(&step.action), 200)
            )
        })
    }

    fn cycle(&self, rules: &StepRules) -> Option<String> {
        if rules.cycle_repeats == 0 {
            return None;
        }
        let sigs: Vec<u64> = self.steps.iter().map(|s| s.signature).collect();
        for period in 2..=rules.max_cycle as usize {
            let n = period * rules.cycle_repeats as usize;
            if sigs.len() < n {
                break;
            }
            let tail = &sigs[sigs.len() - n..];
            let periodic = (0..n - period).all(|j| tail[j] == tail[j + period]);
            // A cycle has at least two different steps (one step again and again is a repeat),
            // and is not itself made of a shorter cycle (found at that shorter period already).
            let distinct = tail[..period].iter().any(|&s| s != tail[0]);
            if periodic && distinct {
                return Some(format!(
                    "A cycle of {period} steps repeated {} times",
                    rules.cycle_repeats
                ));
            }
        }
        None
    }

    fn fail_streak(&self, rules: &StepRules, step: &AgentStep) -> Option<String> {
        if rules.fail_streak == 0 {
            return None;
        }
        let n = rules.fail_streak as usize;
        let streak: Vec<u64> = self
            .steps
            .iter()
            .rev()
            .take_while(|s| s.failed)
            .take(n)
            .map(|s| s.error)
            .collect();
        if streak.len() < n {
            return None;
        }
        let mut distinct = streak.clone();
        distinct.sort_unstable();
        distinct.dedup();
        (distinct.len() <= rules.fail_distinct as usize).then(|| {
            format!(
                "{n} failed steps in a row with {} distinct error{}: \"{}\"",
                distinct.len(),
                if distinct.len() == 1 { "" } else { "s" },
                truncate(key_line(&step.result), 200)
            )
        })
    }

    fn fail_window(&self, rules: &StepRules) -> Option<String> {
        if rules.fail_window == 0 || self.since_progress < u64::from(rules.fail_window) {
            return None;
        }
        let w = rules.fail_window as usize;
        let failed = self.steps.iter().rev().take(w).filter(|s| s.failed).count();
        (failed * 100 >= rules.fail_window_percent as usize * w)
            .then(|| format!("{failed} of the last {w} steps failed without progress"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: StepRules = StepRules {
        repeat: 0,
        cycle_repeats: 0,
        max_cycle: 5,
        fail_streak: 0,
        fail_distinct: 2,
        fail_window: 0,
        fail_window_percent: 90,
    };

    fn step(action: &str, result: &str, failed: bool) -> AgentStep {
        AgentStep {
            action: action.into(),
            result: result.into(),
            failed,
        }
    }

    fn feed(rules: &StepRules, steps: &[(&str, &str, bool)]) -> Vec<Option<String>> {
        let mut h = StepHistory::default();
        steps
            .iter()
            .map(|&(a, r, f)| {
                let s = step(a, r, f);
                h.record(rules, hash_of(&[a, r]), f.then(|| hash_of(&[r])), &s)
            })
            .collect()
    }

    #[test]
    fn repeats_fire_at_the_threshold() {
        let rules = StepRules { repeat: 3, ..RULES };
        let out = feed(
            &rules,
            &[("ls", "a", false), ("ls", "a", false), ("ls", "a", false)],
        );
        assert_eq!(out[1], None);
        assert_eq!(out[2].as_deref(), Some("Same step repeated 3 times: ls"));
        // The same action with another result is not a repeat.
        let out = feed(
            &rules,
            &[("ls", "a", false), ("ls", "b", false), ("ls", "a", false)],
        );
        assert!(out.iter().all(Option::is_none));
    }

    #[test]
    fn cycles_of_two_to_five_steps() {
        let rules = StepRules {
            cycle_repeats: 3,
            ..RULES
        };
        let abab: Vec<(&str, &str, bool)> = ["a", "b", "a", "b", "a", "b"]
            .iter()
            .map(|&x| (x, "r", false))
            .collect();
        let out = feed(&rules, &abab);
        assert!(out[..5].iter().all(Option::is_none));
        assert_eq!(
            out[5].as_deref(),
            Some("A cycle of 2 steps repeated 3 times")
        );
        let out = feed(
            &rules,
            &[
                ("a", "", false),
                ("b", "", false),
                ("c", "", false),
                ("a", "", false),
                ("b", "", false),
                ("c", "", false),
                ("a", "", false),
                ("b", "", false),
                ("c", "", false),
            ],
        );
        assert_eq!(
            out[8].as_deref(),
            Some("A cycle of 3 steps repeated 3 times")
        );
        // The same step over and over is a repeat, not a cycle.
        let same: Vec<(&str, &str, bool)> = (0..6).map(|_| ("a", "r", false)).collect();
        assert!(feed(&rules, &same).iter().all(Option::is_none));
    }

    #[test]
    fn fail_streaks_count_distinct_errors() {
        let rules = StepRules {
            fail_streak: 3,
            fail_distinct: 1,
            ..RULES
        };
        let out = feed(
            &rules,
            &[
                ("a", "E1", true),
                ("b", "E1", true),
                ("c", "E2", true),
                ("d", "E2", true),
            ],
        );
        assert!(out.iter().all(Option::is_none));
        let out = feed(
            &rules,
            &[("a", "E1", true), ("b", "E1", true), ("c", "E1", true)],
        );
        assert_eq!(
            out[2].as_deref(),
            Some("3 failed steps in a row with 1 distinct error: \"E1\"")
        );
        // A success breaks the streak.
        let out = feed(
            &rules,
            &[
                ("a", "E1", true),
                ("b", "ok", false),
                ("c", "E1", true),
                ("d", "E1", true),
            ],
        );
        assert!(out.iter().all(Option::is_none));
    }

    #[test]
    fn fail_window_counts_since_progress() {
        let rules = StepRules {
            fail_window: 4,
            fail_window_percent: 75,
            ..RULES
        };
        let mut h = StepHistory::default();
        let fire = |h: &mut StepHistory, i: u32, failed: bool| {
            let s = step(&format!("a{i}"), "r", failed);
            h.record(&rules, hash_of(&[&s.action]), Some(1), &s)
        };
        assert!(fire(&mut h, 1, true).is_none());
        assert!(fire(&mut h, 2, false).is_none());
        assert!(fire(&mut h, 3, true).is_none());
        h.progress();
        assert!(fire(&mut h, 4, true).is_none());
        assert!(fire(&mut h, 5, true).is_none());
        assert!(fire(&mut h, 6, false).is_none());
        assert_eq!(
            fire(&mut h, 7, true).as_deref(),
            Some("3 of the last 4 steps failed without progress")
        );
    }

    #[test]
    fn history_is_bounded_by_the_rules() {
        let rules = StepRules {
            repeat: 4,
            cycle_repeats: 3,
            ..RULES
        };
        let mut h = StepHistory::default();
        for i in 0..10_000u32 {
            let s = step(&i.to_string(), "", false);
            h.record(&rules, u64::from(i), None, &s);
        }
        assert_eq!(h.steps.len(), 15);
    }

    #[test]
    fn steps_from_json() {
        let s = AgentStep::from_json(&serde_json::json!({"action": "ls", "failed": true})).unwrap();
        assert_eq!(s, step("ls", "", true));
        for bad in [
            serde_json::json!({"result": "x"}),
            serde_json::json!({"action": 1}),
            serde_json::json!({"action": "a", "failed": "yes"}),
            serde_json::json!({"action": "a", "extra": 1}),
        ] {
            assert_eq!(
                AgentStep::from_json(&bad).unwrap_err().code(),
                "INVALID_ARGUMENT"
            );
        }
    }
}

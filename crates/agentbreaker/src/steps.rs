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
//! contract §6); failed results by the breaker's `errorMatch` for the fail streak.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::fingerprint::key_line;
use crate::interop::Fields;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StepRecord {
    /// The hash of the step's action and result.
    #[serde(with = "hex_u64")]
    pub(crate) signature: u64,
    pub(crate) failed: bool,
    /// The hash of the failed result's error fingerprint (0 for a step that did not fail).
    #[serde(with = "hex_u64")]
    pub(crate) error: u64,
}

/// 64-bit hashes as 16 hex digits in JSON: a number above 2^53 would lose bits in JavaScript and
/// LuaJIT, which carry snapshots as host values.
pub(crate) mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:016x}"))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if text.len() != 16 {
            return Err(serde::de::Error::custom("a hash is 16 hex digits"));
        }
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

/// Lists of 64-bit hashes as lists of 16-hex-digit strings (see [`hex_u64`]).
pub(crate) mod hex_u64_vec {
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for h in v {
            seq.serialize_element(&format!("{h:016x}"))?;
        }
        seq.end()
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let texts = Vec::<std::borrow::Cow<'de, str>>::deserialize(d)?;
        texts
            .iter()
            .map(|t| {
                if t.len() != 16 {
                    return Err(serde::de::Error::custom("a hash is 16 hex digits"));
                }
                u64::from_str_radix(t, 16).map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

/// Which step rule fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepRule {
    Repeat,
    Cycle,
    FailStreak,
    FailWindow,
}

impl StepRule {
    /// The rule's slug (the Monitor's names).
    pub(crate) fn slug(self) -> &'static str {
        match self {
            StepRule::Repeat => "repeated_step",
            StepRule::Cycle => "cycle",
            StepRule::FailStreak => "fail_streak",
            StepRule::FailWindow => "fail_window",
        }
    }
}

/// Where each step rule stands after a step: the counts the rules compare with their thresholds
/// (the Monitor's warning ladder reads them too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StepCounts {
    /// The same step this many times in a row (0 when the last step differs from the one before).
    pub(crate) repeat: u32,
    /// The length of the cycle the last steps repeat (0 when none).
    pub(crate) cycle_length: u32,
    /// Complete rounds of that cycle in a row (0 when fewer than two).
    pub(crate) cycle_repeats: u32,
    /// Failed steps in a row with at most `failStreakDistinct` distinct errors.
    pub(crate) fail_streak: u32,
    /// The distinct errors of that streak.
    pub(crate) fail_streak_distinct: u32,
    /// Failed steps among the last `failWindow` steps since the last progress.
    pub(crate) fail_window_failed: u32,
    /// Steps since the last progress.
    pub(crate) since_progress: u64,
}

impl StepCounts {
    /// The failed steps the fail window needs: `failWindowPercent` of `failWindow`, rounded up.
    pub(crate) fn fail_window_needed(rules: &StepRules) -> u32 {
        (rules.fail_window * rules.fail_window_percent).div_ceil(100)
    }

    /// The first rule (in the order repeat, cycle, fail streak, fail window) whose count reached
    /// its threshold.
    pub(crate) fn fired(&self, rules: &StepRules) -> Option<StepRule> {
        if rules.repeat > 0 && self.repeat >= rules.repeat {
            Some(StepRule::Repeat)
        } else if rules.cycle_repeats > 0 && self.cycle_repeats >= rules.cycle_repeats {
            Some(StepRule::Cycle)
        } else if rules.fail_streak > 0 && self.fail_streak >= rules.fail_streak {
            Some(StepRule::FailStreak)
        } else if rules.fail_window > 0
            && self.since_progress >= u64::from(rules.fail_window)
            && self.fail_window_failed >= Self::fail_window_needed(rules)
        {
            Some(StepRule::FailWindow)
        } else {
            None
        }
    }
}

/// The recent steps of one breaker (or one Monitor task).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
    /// Records a step (its fingerprints already taken) and returns the rule that fired, if one
    /// did, with its reason in words.
    pub(crate) fn record(
        &mut self,
        rules: &StepRules,
        signature: u64,
        error: Option<u64>,
        step: &AgentStep,
    ) -> Option<(StepRule, String)> {
        let counts = self.push(rules, signature, step.failed, error.unwrap_or(0));
        let rule = counts.fired(rules)?;
        Some((
            rule,
            match rule {
                StepRule::Repeat => format!(
                    "Same step repeated {} times: {}",
                    rules.repeat,
                    truncate(key_line(&step.action), 200)
                ),
                StepRule::Cycle => format!(
                    "A cycle of {} steps repeated {} times",
                    counts.cycle_length, rules.cycle_repeats
                ),
                StepRule::FailStreak => {
                    let distinct = self.distinct_errors(rules.fail_streak as usize);
                    format!(
                        "{} failed steps in a row with {distinct} distinct error{}: \"{}\"",
                        rules.fail_streak,
                        if distinct == 1 { "" } else { "s" },
                        truncate(key_line(&step.result), 200)
                    )
                }
                StepRule::FailWindow => format!(
                    "{} of the last {} steps failed without progress",
                    self.failed_in_last(rules.fail_window as usize),
                    rules.fail_window
                ),
            },
        ))
    }

    /// Records a step by its hashes and returns where every rule stands.
    pub(crate) fn push(
        &mut self,
        rules: &StepRules,
        signature: u64,
        failed: bool,
        error: u64,
    ) -> StepCounts {
        let cap = rules.history_len();
        while self.steps.len() >= cap {
            self.steps.pop_front();
        }
        self.steps.push_back(StepRecord {
            signature,
            failed,
            error: if failed { error } else { 0 },
        });
        self.since_progress = self.since_progress.saturating_add(1);
        self.counts(rules)
    }

    /// Progress happened: the fail window starts again.
    pub(crate) fn progress(&mut self) {
        self.since_progress = 0;
    }

    /// Steps kept (for bounds checks of restored state).
    pub(crate) fn len(&self) -> usize {
        self.steps.len()
    }

    /// Drops the oldest steps beyond what `rules` look at (a restored history under other rules).
    pub(crate) fn fit(&mut self, rules: &StepRules) {
        let cap = rules.history_len();
        while self.steps.len() > cap {
            self.steps.pop_front();
        }
    }

    /// Where every rule stands on the steps recorded so far.
    pub(crate) fn counts(&self, rules: &StepRules) -> StepCounts {
        let (cycle_length, cycle_repeats) = self.cycle(rules);
        let (fail_streak, fail_streak_distinct) = self.fail_streak(rules);
        let window = (rules.fail_window as usize).min(self.since_progress as usize);
        StepCounts {
            repeat: self.repeat(),
            cycle_length,
            cycle_repeats,
            fail_streak,
            fail_streak_distinct,
            fail_window_failed: if rules.fail_window == 0 {
                0
            } else {
                self.failed_in_last(window)
            },
            since_progress: self.since_progress,
        }
    }

    fn repeat(&self) -> u32 {
        let Some(last) = self.steps.back() else {
            return 0;
        };
        let run = self
            .steps
            .iter()
            .rev()
            .take_while(|s| s.signature == last.signature)
            .count() as u32;
        if run >= 2 { run } else { 0 }
    }

    /// The cycle with the most complete rounds at the end of the history (the shortest such
    /// length on a tie): (length, rounds), or (0, 0) when no cycle has two rounds.
    fn cycle(&self, rules: &StepRules) -> (u32, u32) {
        if rules.cycle_repeats == 0 {
            return (0, 0);
        }
        let n = self.steps.len();
        let sig = |i: usize| self.steps[i].signature;
        let mut best = (0, 0);
        for period in 2..=(rules.max_cycle as usize).min(n / 2) {
            // A cycle has at least two different steps (one step again and again is a repeat).
            if (n - period..n).all(|i| sig(i) == sig(n - 1)) {
                continue;
            }
            // The longest tail with this period.
            let mut tail = period;
            while tail < n && sig(n - 1 - tail) == sig(n - 1 - tail + period) {
                tail += 1;
            }
            let rounds = (tail / period) as u32;
            if rounds >= 2 && rounds > best.1 {
                best = (period as u32, rounds);
            }
        }
        best
    }

    /// The failed steps in a row at the end with at most `failStreakDistinct` distinct errors,
    /// and how many distinct errors they have.
    fn fail_streak(&self, rules: &StepRules) -> (u32, u32) {
        if rules.fail_streak == 0 {
            return (0, 0);
        }
        let mut distinct: Vec<u64> = Vec::new();
        let mut count = 0u32;
        for s in self.steps.iter().rev().take_while(|s| s.failed) {
            if !distinct.contains(&s.error) {
                if distinct.len() >= rules.fail_distinct as usize {
                    break;
                }
                distinct.push(s.error);
            }
            count += 1;
        }
        (count, distinct.len() as u32)
    }

    fn distinct_errors(&self, last: usize) -> usize {
        let mut errors: Vec<u64> = self
            .steps
            .iter()
            .rev()
            .take(last)
            .map(|s| s.error)
            .collect();
        errors.sort_unstable();
        errors.dedup();
        errors.len()
    }

    fn failed_in_last(&self, w: usize) -> u32 {
        self.steps.iter().rev().take(w).filter(|s| s.failed).count() as u32
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
                    .map(|(_, why)| why)
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
                .map(|(_, why)| why)
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

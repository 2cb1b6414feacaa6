//! Named configurations of the three breakers.
//!
//! - `seed`: every default of the seeds (the contract's defaults): the behaviour the conformance suite
//!   describes.
//! - `coding-agent`: recommended for coding agents watched step by step (one model call and its
//!   tool calls per step). The step detectors are on, the per-iteration rules that misfire on
//!   single steps are relaxed, and the budgets fit a whole session. Chosen by measurement on real
//!   trajectories: `docs/detection.md` has the figures and the command that reproduces them.

use serde::Serialize;

use crate::budget::BudgetConfig;
use crate::failure::FailureConfig;
use crate::fingerprint::ErrorMatch;
use crate::stagnation::StagnationConfig;

/// A named configuration of the three breakers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// The profile's name.
    pub name: &'static str,
    /// What it is for.
    pub description: &'static str,
    /// The FailureBreaker config.
    pub failure: FailureConfig,
    /// The StagnationBreaker config.
    pub stagnation: StagnationConfig,
    /// The BudgetBreaker config.
    pub budget: BudgetConfig,
}

/// The names [`profile`] knows.
pub const PROFILE_NAMES: [&str; 2] = ["seed", "coding-agent"];

/// The profile called `name`.
pub fn profile(name: &str) -> Option<Profile> {
    match name {
        "seed" => Some(Profile {
            name: "seed",
            description: "the seeds' defaults (the contract's defaults)",
            failure: FailureConfig::default(),
            stagnation: StagnationConfig::default(),
            budget: BudgetConfig::default(),
        }),
        "coding-agent" => Some(coding_agent()),
        _ => None,
    }
}

fn coding_agent() -> Profile {
    Profile {
        name: "coding-agent",
        description: "a coding agent watched step by step: the same action and result 5 times, a \
                      2-5 step cycle 3 times, 5 failures in a row with at most 2 distinct errors, \
                      9 of 10 steps failing without progress, or 15 steps without progress doing \
                      at most 3 different things stop it; the seeds' rules stay on as looser \
                      backstops, and the budgets fit a whole session",
        failure: FailureConfig {
            // Consecutive failures alone are common in healthy exploration (a search with no
            // match, a failing test run); fail streaks are judged by their distinct errors.
            failure_threshold: 12,
            warning_threshold: Some(8),
            ..FailureConfig::default()
        },
        stagnation: StagnationConfig {
            // A step is one model call: many steps without a file change are normal while an
            // agent explores, so no progress alone stops nothing; 15 steps without progress in
            // which it did at most 3 different things (the same command re-run, the same file
            // scrolled) do.
            no_progress_threshold: 15,
            no_progress_distinct_actions: 3,
            // Errors are counted since the last progress, not in a row: loose as a backstop.
            same_error_threshold: 12,
            error_match: ErrorMatch::KeyLine,
            repeat_threshold: 5,
            cycle_repeats: 3,
            max_cycle_length: 5,
            fail_streak_threshold: 5,
            fail_streak_distinct: 2,
            fail_window: 10,
            fail_window_percent: 90,
            ..StagnationConfig::default()
        },
        budget: BudgetConfig {
            // A whole session is one task unless the agent splits it into subagents; healthy
            // Claude Code sessions make 40-70 tool calls.
            max_tool_calls_per_task: 200,
            max_task_duration_secs: 3 * 3600,
            max_idle_secs: 900,
            // Eight near-identical answers in a row: repeated tool steps are the repeat
            // detector's; this catches agents that only talk.
            loop_window: 8,
            ..BudgetConfig::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_profile_is_valid() {
        for name in PROFILE_NAMES {
            let p = profile(name).unwrap();
            assert_eq!(p.name, name);
            p.failure.validate().unwrap();
            p.stagnation.validate().unwrap();
            p.budget.validate().unwrap();
        }
        assert!(profile("nope").is_none());
        assert_eq!(
            profile("seed").unwrap().stagnation,
            StagnationConfig::default()
        );
    }
}

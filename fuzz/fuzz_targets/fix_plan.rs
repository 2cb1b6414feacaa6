//! Any text as fix-plan markdown: `FixPlan::from_markdown` and the `fix_plan` strategy config.
//! Steps are bounded, one per checklist line, and a plan run to its end exits exactly when contract §5
//! says: after every open step was tried `maxAttempts` times (plan_exhausted) or completed once
//! (plan_complete).
#![no_main]

use agentbreaker::strategy::{MAX_PLAN_STEPS, MAX_STEP_DESCRIPTION_BYTES};
use agentbreaker::{ExitReason, ExitStrategy, FixPlan, State, StrategyConfig, analyze};
use agentbreaker_fuzz::{check_error, text};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// Plans with more open steps than this are not run to the end (it would only take longer).
const MAX_RUN_STEPS: usize = 40;

fuzz_target!(|data: &[u8]| {
    let text = text(data);
    let max_attempts = 1 + (data.first().copied().unwrap_or(0) % 4) as u32;
    let plan = match FixPlan::from_markdown(&text, max_attempts) {
        Ok(plan) => plan,
        Err(e) => {
            check_error(&e, "INVALID_CONFIG");
            assert!(text.lines().count() > MAX_PLAN_STEPS);
            return;
        }
    };
    assert!(plan.steps.len() <= MAX_PLAN_STEPS);
    assert!(plan.steps.len() <= text.lines().count());
    for step in &plan.steps {
        assert!(
            step.description.len() <= MAX_STEP_DESCRIPTION_BYTES,
            "{step:?}"
        );
        assert!(!step.description.contains('\n'), "{step:?}");
        assert_eq!(step.description.trim(), step.description, "{step:?}");
        assert!(!step.skipped && step.attempts == 0 && step.max_attempts == max_attempts);
    }
    serde_json::to_string(&plan).expect("a plan serializes");

    // The config path the bindings use reads the same steps.
    let config =
        StrategyConfig::fix_plan_from_json(&json!({"markdown": text, "maxAttempts": max_attempts}))
            .expect("a plan that parses is a valid config");
    let StrategyConfig::FixPlan(same) = &config else {
        panic!("not a fix plan: {config:?}");
    };
    assert_eq!(same, &plan);

    let open = plan.steps.iter().filter(|s| !s.completed).count();
    if open > MAX_RUN_STEPS {
        return;
    }
    for (response, done) in [("", false), ("All tasks complete.", true)] {
        let analysis = analyze(response);
        assert_eq!(analysis.completion_signal.detected, done);
        let strategy = ExitStrategy::new(config.clone());
        let expected_iterations = if done {
            open
        } else {
            open * max_attempts as usize
        };
        let mut iterations = 0;
        let decision = loop {
            iterations += 1;
            let d = strategy.should_exit(&analysis, State::Closed);
            if d.exit || iterations > expected_iterations + 1 {
                break d;
            }
        };
        assert!(decision.exit, "no exit after {iterations} iterations");
        assert_eq!(iterations, expected_iterations.max(1));
        let reason = if done || open == 0 {
            ExitReason::PlanComplete
        } else {
            ExitReason::PlanExhausted
        };
        assert_eq!(decision.reason, Some(reason));
        let status = strategy.plan_status().expect("a fix plan has a status");
        assert_eq!(status.steps.len(), plan.steps.len());
    }
});

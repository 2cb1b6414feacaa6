//! The response analyzer, exit strategies and fix plans, and error fingerprints
//! (contract sections 5 and 6).

use agentbreaker::Analysis;
use agentbreaker::interop::{self, ArgKind};
use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use serde_json::json;

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{opt_json, opt_string, result, string};
use crate::error::{self, Arg, Failure, run};

functions! {
    "Analyzes an agent's response: completion signals, confidence (0..100), the `EXIT_SIGNAL`"
    "line and test summaries."
    fn analyze(text) "text: string" -> "Analysis"
        = |env| result(env, &agentbreaker::analyze(&string(text.as_ref(), "text")?));
    "The fingerprint of an error text under `errorMatch` (`'exact'`, `'normalized'` (default) or"
    "`'template'`): errors with the same fingerprint count as the same error."
    fn fingerprint(error, mode) "error: string, mode?: ErrorMatch | null" -> "string" = |env| {
        let error = string(error.as_ref(), "error")?;
        let mode = interop::error_match(opt_string(mode.as_ref(), "mode")?.as_deref())?;
        Ok(agentbreaker::fingerprint(&error, mode))
    };
}

/// `shouldExit(analysis, circuitState?)` of a strategy and of a plan: the analysis (what
/// `analyze()` returns) and the circuit state (the core's default when left out).
fn should_exit<'e>(
    env: &'e Env,
    strategy: &agentbreaker::ExitStrategy,
    analysis: Arg<'_>,
    circuit_state: Arg<'_>,
) -> Result<Unknown<'e>, Failure> {
    let analysis = opt_json(analysis.as_ref(), ArgKind::Argument, "analysis")?;
    let state = opt_string(circuit_state.as_ref(), "circuitState")?;
    let analysis = Analysis::from_json(&analysis)?;
    let state = interop::state(state.as_deref())?;
    result(env, &strategy.should_exit(&analysis, state))
}

/// A stateful exit strategy: `{type: 'auto'}` (default), `'done_signals'`, `'fix_plan'`,
/// `'circuit_breaker'` or `'composite'`.
#[napi]
#[derive(Debug)]
pub struct ExitStrategy(agentbreaker::ExitStrategy);

methods!(ExitStrategy(agentbreaker::ExitStrategy) emits ["warning"] {
    "A strategy from its config (default `{type: 'auto'}`); the clock stamps a fix plan's warnings."
    fn new("config?: StrategyConfig | null, clock?: Clock | null");
    "The fix plan's progress for a `fix_plan` strategy, `null` for any other."
    fn plan_status() -> "PlanStatus | null" = plan_status;
    "Forgets everything seen."
    fn reset() = reset;
});

/// A fix plan on its own: steps worked on in order, each completed by a response that
/// signals completion or skipped after `maxAttempts` responses that do not.
#[napi]
#[derive(Debug)]
pub struct FixPlan(agentbreaker::ExitStrategy);

#[napi]
impl FixPlan {
    /// A plan read from a markdown checklist (`- [ ]` open, `- [x]` done; other lines ignored).
    #[napi(
        factory,
        catch_unwind,
        ts_args_type = "markdown: string, maxAttempts?: number | null, clock?: Clock | null"
    )]
    pub fn from_markdown(
        env: &Env,
        markdown: Arg<'_>,
        max_attempts: Arg<'_>,
        clock: ClockArg<'_>,
    ) -> error::Result<Self> {
        run(env, || {
            let markdown = string(markdown.as_ref(), "markdown")?;
            let max_attempts = opt_json(max_attempts.as_ref(), ArgKind::Config, "maxAttempts")?;
            let config = json!({"markdown": markdown, "maxAttempts": max_attempts});
            Ok(interop::fix_plan(&config, shared_clock(&clock)?)?.into())
        })
    }
}

methods!(FixPlan(agentbreaker::ExitStrategy) emits ["warning"] {
    "A plan from `{steps: [{description, ...}]}` or `{markdown}`, with an optional `maxAttempts`."
    fn new("config: FixPlanConfig, clock?: Clock | null") = |c, clock| interop::fix_plan(c, clock);
    "The steps and the index of the step being worked on (`null` when none is left)."
    fn get_status() -> "PlanStatus" = plan_status;
    "Back to the plan as configured."
    fn reset() = reset;
});

methods!(ExitStrategy {
    "Sees one iteration's analysis (from `analyze()`) and the circuit state (default `'CLOSED'`)."
    fn should_exit(analysis, circuit_state) "analysis: Analysis, circuitState?: CircuitState | null"
        -> "ExitDecision" = |s, env| should_exit(env, s, analysis, circuit_state);
});

methods!(FixPlan {
    "Sees one iteration's analysis: a detected completion completes the step, else an attempt."
    fn should_exit(analysis, circuit_state) "analysis: Analysis, circuitState?: CircuitState | null"
        -> "ExitDecision" = |s, env| should_exit(env, s, analysis, circuit_state);
});

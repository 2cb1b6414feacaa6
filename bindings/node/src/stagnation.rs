//! `StagnationBreaker` (contract section 3).

use agentbreaker::interop::{ArgKind, option_flag};
use agentbreaker::{AgentStep, IterationMetrics};
use napi_derive::napi;

use crate::convert::{opt_json, string};
use crate::error::Failure;

/// Detects a loop that stopped making progress: no progress for a number of iterations, the
/// same error again and again, or declining output.
#[napi]
#[derive(Debug)]
pub struct StagnationBreaker(agentbreaker::StagnationBreaker);

methods!(StagnationBreaker(agentbreaker::StagnationBreaker) emits ["stateChange"] {
    "Records one iteration: `{filesChanged, testsPassing, outputLength}` (whole numbers >= 0;"
    "missing keys are 0)."
    fn record_progress(metrics) "metrics: IterationMetrics" -> "void" = |b, env| {
        let metrics = opt_json(metrics.as_ref(), ArgKind::Argument, "metrics")?;
        Ok(IterationMetrics::from_json(&metrics).map(|m| b.record_progress(m))?)
    };
    "Records an error; `{transient: true}` (rate limits, 5xx, timeouts) never counts."
    fn record_error(error, options) "error: string, options?: RecordErrorOptions | null" -> "void"
        = |b, env| {
            let error = string(error.as_ref(), "error")?;
            let options = opt_json(options.as_ref(), ArgKind::Argument, "options")?;
            let transient = option_flag(&options, "options", "transient", true);
            transient.map(|t| b.record_error(&error, t)).map_err(Failure::Type)
        };
    "Records one agent step `{action, result?, failed?}` for the step detectors (repeats,"
    "cycles, fail streaks, the fail window; all off by default, see `profile('coding-agent')`)."
    fn record_step(step) "step: AgentStep" -> "void" = |b, env| {
        let step = opt_json(step.as_ref(), ArgKind::Argument, "step")?;
        Ok(AgentStep::from_json(&step).map(|s| b.record_step(&s))?)
    };
    "The current state."
    fn state() [getter] -> "CircuitState" = |b, env| Ok(b.state().as_str());
    "A breaker with the given config (omitted keys take the defaults) on the given clock."
    fn new("config?: StagnationConfig | null, clock?: Clock | null");
    "Replaces the state with a snapshot's (OPEN stays OPEN, HALF_OPEN comes back CLOSED)."
    fn restore(snapshot: Snapshot "snapshot: StagnationSnapshot") = restore_json;
    "Whether the loop may continue: `{allowContinue, state, reason}`."
    fn check() -> "StagnationDecision" = check;
    "The status object: state, counters, error counts, the output trend."
    fn get_status() -> "StagnationStatus" = status;
    "Back to CLOSED with every counter cleared."
    fn reset() = reset;
    "The persistent form of the state."
    fn snapshot() -> "StagnationSnapshot" = snapshot;
});

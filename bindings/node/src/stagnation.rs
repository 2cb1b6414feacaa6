//! `StagnationBreaker` (contract section 3).

use agentbreaker::interop::ArgKind;
use agentbreaker::{AgentStep, IterationMetrics};
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use serde_json::Value;

use crate::convert::{cut, opt_json, string, wrong_type};
use crate::error::Failure;
use crate::listeners::{JsListeners, flag};

/// Detects a loop that stopped making progress: no progress for a number of iterations, the
/// same error again and again, or declining output.
#[napi]
#[derive(Debug)]
pub struct StagnationBreaker(agentbreaker::StagnationBreaker, JsListeners);

/// `{transient}` of `recordError`: `undefined`/`null` is `{}`; another key is refused so that a
/// misspelt option is not silently ignored.
fn transient_option(options: Option<&Unknown<'_>>) -> Result<bool, Failure> {
    let (kind, what) = (ArgKind::Argument, "options");
    let map = match opt_json(options, kind, what)? {
        Value::Null => return Ok(false),
        Value::Object(map) => map,
        _ => return Err(wrong_type(kind, what, "an object", options)),
    };
    if let Some(key) = map.keys().find(|k| *k != "transient") {
        let key = cut(format!("{key:?}"));
        let message = format_args!("{what}: unknown key {key} (allowed: transient)");
        return Err(kind.error(message).into());
    }
    flag(map.get("transient"), "options.transient")
}

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
            transient_option(options.as_ref()).map(|t| b.record_error(&error, t))
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

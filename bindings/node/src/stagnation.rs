//! `StagnationBreaker` (contract section 3).

use agentbreaker::interop::{ArgKind, type_name};
use agentbreaker::{AgentStep, IterationMetrics, StagnationConfig};
use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use serde_json::Value;

use crate::convert::{cut, opt_json, string, wrong_type};
use crate::error::{self, Arg, Failure, run};
use crate::listeners::JsListeners;

/// Detects a loop that stopped making progress: no progress for a number of iterations, the
/// same error again and again, or declining output.
#[napi]
#[derive(Debug)]
pub struct StagnationBreaker {
    inner: agentbreaker::StagnationBreaker,
    listeners: JsListeners,
}

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
        return Err(kind
            .error(format_args!(
                "{what}: unknown key {key} (allowed: transient)"
            ))
            .into());
    }
    match map.get("transient") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(Failure::Type(kind.wrong_type(
            "options.transient",
            "a boolean",
            type_name(v),
        ))),
    }
}

#[napi]
impl StagnationBreaker {
    /// Records one iteration: `{filesChanged, testsPassing, outputLength}` (whole numbers >= 0;
    /// missing keys are 0).
    #[napi(catch_unwind, ts_args_type = "metrics: IterationMetrics")]
    pub fn record_progress(&self, env: &Env, metrics: Arg<'_>) -> error::Result<()> {
        run(env, || {
            let metrics = opt_json(metrics.as_ref(), ArgKind::Argument, "metrics")?;
            let metrics = IterationMetrics::from_json(&metrics)?;
            self.inner.record_progress(metrics);
            Ok(())
        })
    }

    /// Records an error; `{transient: true}` (rate limits, 5xx, timeouts) never counts.
    #[napi(
        catch_unwind,
        ts_args_type = "error: string, options?: RecordErrorOptions | null"
    )]
    pub fn record_error(&self, env: &Env, error: Arg<'_>, options: Arg<'_>) -> error::Result<()> {
        run(env, || {
            let error = string(error.as_ref(), "error")?;
            let transient = transient_option(options.as_ref())?;
            self.inner.record_error(&error, transient);
            Ok(())
        })
    }

    /// Records one agent step `{action, result?, failed?}` for the step detectors (repeats,
    /// cycles, fail streaks, the fail window; all off by default, see `profile('coding-agent')`).
    #[napi(catch_unwind, ts_args_type = "step: AgentStep")]
    pub fn record_step(&self, env: &Env, step: Arg<'_>) -> error::Result<()> {
        run(env, || {
            let step = opt_json(step.as_ref(), ArgKind::Argument, "step")?;
            self.inner.record_step(&AgentStep::from_json(&step)?);
            Ok(())
        })
    }

    /// The current state.
    #[napi(getter, catch_unwind, ts_return_type = "CircuitState")]
    pub fn state(&self) -> &'static str {
        self.inner.state().as_str()
    }
}

methods!(StagnationBreaker(agentbreaker::StagnationBreaker) emits ["stateChange"] {
    "A breaker with the given config (omitted keys take the defaults) on the given clock."
    fn new("config?: StagnationConfig | null, clock?: Clock | null") = |config, clock| {
        agentbreaker::StagnationBreaker::with_clock(StagnationConfig::from_json(config)?, clock)
    };
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

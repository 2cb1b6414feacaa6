//! `StagnationBreaker` (contract section 3).

use agentbreaker::interop::ArgKind;
use agentbreaker::{AgentStep, IterationMetrics, StagnationConfig};
use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use serde_json::Value;

use crate::clock::{ClockArg, construct};
use crate::convert::{cut, opt_json, string, wrong_type};
use crate::error::{self, Arg, Failure, run};
use crate::listeners::{JsListeners, event_source};

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
    let what = "options";
    let map = match opt_json(options, ArgKind::Argument, what)? {
        Value::Null => return Ok(false),
        Value::Object(map) => map,
        _ => return Err(wrong_type(ArgKind::Argument, what, "an object", options)),
    };
    if let Some(key) = map.keys().find(|k| k.as_str() != "transient") {
        let shown = cut(format!("{key:?}"));
        let message = format_args!("options: unknown key {shown} (allowed: transient)");
        return Err(ArgKind::Argument.error(message).into());
    }
    match map.get("transient") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => {
            let got = agentbreaker::interop::type_name(other);
            let e = ArgKind::Argument.wrong_type("options.transient", "a boolean", got);
            Err(Failure::Type(e))
        }
    }
}

#[napi]
impl StagnationBreaker {
    /// A breaker with the given config (omitted keys take the defaults) on the given clock.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: StagnationConfig | null, clock?: Clock | null"
    )]
    pub fn new(env: &Env, config: Arg<'_>, clock: ClockArg<'_>) -> error::Result<Self> {
        construct(env, &config, &clock, |config, clock| {
            let config = StagnationConfig::from_json(config)?;
            agentbreaker::StagnationBreaker::with_clock(config, clock)
        })
    }

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

core_methods!(StagnationBreaker {
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

event_source!(StagnationBreaker(agentbreaker::StagnationBreaker) emits ["stateChange"]);

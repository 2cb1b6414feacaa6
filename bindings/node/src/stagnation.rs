//! `StagnationBreaker` (SPEC 3).

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use serde_json::Value;

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{describe, from_js_opt, result, string_arg};
use crate::error::{Code, Context, Failure, run};
use crate::listeners::{EventSource, EventTypes, JsListeners, ListenerArg};

const EVENTS: EventTypes = &["stateChange"];

/// Detects a loop that stopped making progress: no progress for a number of iterations, the same
/// error again and again, or declining output (seeds 000/001).
#[napi]
#[derive(Debug)]
pub struct StagnationBreaker {
    inner: agentbreaker::StagnationBreaker,
    listeners: JsListeners,
}

/// `{transient}` of `recordError`: `undefined`/`null` is `{}`; other keys are refused so that a
/// misspelt option is not silently ignored.
fn transient_option(options: Option<&Unknown<'_>>) -> Result<bool, Failure> {
    let options = from_js_opt(options, Context::Argument, "options")?;
    let map = match &options {
        Value::Null => return Ok(false),
        Value::Object(map) => map,
        other => {
            return Err(Context::Argument.type_error(format!(
                "options must be an object, not {}",
                describe(other)
            )));
        }
    };
    if let Some(key) = map.keys().find(|k| k.as_str() != "transient") {
        return Err(Failure::Core(agentbreaker::Error::InvalidArgument(
            format!(
                "options: unknown key {} (allowed: transient)",
                crate::convert::shown(&Value::String(key.clone()))
            ),
        )));
    }
    match map.get("transient") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(Context::Argument.type_error(format!(
            "options.transient must be a boolean, not {}",
            describe(other)
        ))),
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
    pub fn new(
        env: &Env,
        config: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let config = from_js_opt(config.as_ref(), Context::Config, "config")?;
            let config = agentbreaker::StagnationConfig::from_json(&config)?;
            let inner = agentbreaker::StagnationBreaker::with_clock(config, shared_clock(&clock)?)?;
            Ok(StagnationBreaker {
                inner,
                listeners: JsListeners::default(),
            })
        })
    }

    /// Records one iteration: `{filesChanged, testsPassing, outputLength}` (whole numbers >= 0;
    /// missing keys are 0).
    #[napi(
        catch_unwind,
        ts_args_type = "metrics: IterationMetrics",
        ts_return_type = "void"
    )]
    pub fn record_progress(
        &self,
        env: &Env,
        metrics: Option<Unknown<'_>>,
    ) -> napi::Result<(), Code> {
        run(env, || {
            let metrics = from_js_opt(metrics.as_ref(), Context::Argument, "metrics")?;
            self.inner
                .record_progress(agentbreaker::IterationMetrics::from_json(&metrics)?);
            Ok(())
        })
    }

    /// Records an error; `{transient: true}` (rate limits, 5xx, timeouts) never counts.
    #[napi(
        catch_unwind,
        ts_args_type = "error: string, options?: RecordErrorOptions | null",
        ts_return_type = "void"
    )]
    pub fn record_error(
        &self,
        env: &Env,
        error: Option<Unknown<'_>>,
        options: Option<Unknown<'_>>,
    ) -> napi::Result<(), Code> {
        run(env, || {
            let error = string_arg(error.as_ref(), "error")?;
            let transient = transient_option(options.as_ref())?;
            self.inner.record_error(&error, transient);
            Ok(())
        })
    }

    /// Records one agent step `{action, result?, failed?}` for the step detectors (repeats,
    /// cycles, fail streaks, the fail window; all off by default, see `profile('coding-agent')`).
    #[napi(
        catch_unwind,
        ts_args_type = "step: AgentStep",
        ts_return_type = "void"
    )]
    pub fn record_step(&self, env: &Env, step: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            let step = from_js_opt(step.as_ref(), Context::Argument, "step")?;
            self.inner
                .record_step(&agentbreaker::AgentStep::from_json(&step)?);
            Ok(())
        })
    }

    /// Whether the loop may continue: `{allowContinue, state, reason}`.
    #[napi(catch_unwind, ts_return_type = "StagnationDecision")]
    pub fn check<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.check()))
    }

    /// The status object of SPEC 3.
    #[napi(catch_unwind, ts_return_type = "StagnationStatus")]
    pub fn get_status<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.status()))
    }

    /// Back to CLOSED with every counter cleared.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: &Env) -> napi::Result<(), Code> {
        run(env, || {
            self.inner.reset();
            Ok(())
        })
    }

    /// The persistent form of the state.
    #[napi(catch_unwind, ts_return_type = "StagnationSnapshot")]
    pub fn snapshot<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.snapshot()))
    }

    /// Replaces the state with a snapshot's (OPEN stays OPEN; HALF_OPEN comes back CLOSED).
    #[napi(
        catch_unwind,
        ts_args_type = "snapshot: StagnationSnapshot",
        ts_return_type = "void"
    )]
    pub fn restore(&self, env: &Env, snapshot: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            let snapshot = from_js_opt(snapshot.as_ref(), Context::Snapshot, "snapshot")?;
            Ok(self.inner.restore_json(&snapshot)?)
        })
    }

    /// The current state.
    #[napi(getter, catch_unwind, ts_return_type = "CircuitState")]
    pub fn state(&self) -> &'static str {
        self.inner.state().as_str()
    }

    /// Listener calls that threw.
    #[napi(getter, catch_unwind)]
    pub fn listener_errors(&self) -> f64 {
        self.inner.errors() as f64
    }

    #[doc(hidden)]
    #[napi(js_name = "_addListener", catch_unwind, skip_typescript)]
    pub fn add_js_listener(
        &self,
        env: &Env,
        kind: Unknown<'_>,
        listener: ListenerArg<'_>,
    ) -> napi::Result<u32, Code> {
        run(env, || {
            self.listeners.add(&self.inner, EVENTS, &kind, &listener)
        })
    }

    #[doc(hidden)]
    #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
    pub fn remove_js_listener(
        &self,
        env: &Env,
        id: Option<Unknown<'_>>,
    ) -> napi::Result<bool, Code> {
        run(env, || self.listeners.remove(&self.inner, id.as_ref()))
    }
}

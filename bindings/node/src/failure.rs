//! `FailureBreaker` (SPEC 2). `call(fn, ...args)`, `on()` and `off()` are added in
//! `agentbreaker.js` on top of `tryAcquire`, `recordSuccess`, `recordFailure` and the listener
//! hooks here.

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{from_js_opt, result, string_arg};
use crate::error::{Code, Context, run};
use crate::listeners::{EventSource, EventTypes, JsListeners, ListenerArg};

const EVENTS: EventTypes = &["stateChange", "warning"];

/// Consecutive failures open the circuit; after a cooldown one probe decides whether it closes
/// again (seed 004).
#[napi]
#[derive(Debug)]
pub struct FailureBreaker {
    inner: agentbreaker::FailureBreaker,
    listeners: JsListeners,
}

#[napi]
impl FailureBreaker {
    /// A breaker with the given config (camelCase keys; omitted keys take the defaults) on the
    /// given clock (default: the system clock). With `statePath`, the state file is loaded now.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "config?: FailureConfig | null, clock?: Clock | null"
    )]
    pub fn new(
        env: &Env,
        config: Option<Unknown<'_>>,
        clock: ClockArg<'_>,
    ) -> napi::Result<Self, Code> {
        run(env, || {
            let config = from_js_opt(config.as_ref(), Context::Config, "config")?;
            let config = agentbreaker::FailureConfig::from_json(&config)?;
            let inner = agentbreaker::FailureBreaker::with_clock(config, shared_clock(&clock)?)?;
            Ok(FailureBreaker {
                inner,
                listeners: JsListeners::default(),
            })
        })
    }

    /// Records a success: the count returns to 0; in HALF_OPEN the circuit closes.
    #[napi(catch_unwind)]
    pub fn record_success(&self, env: &Env) -> napi::Result<(), Code> {
        run(env, || {
            self.inner.record_success();
            Ok(())
        })
    }

    /// Records a failure with its error text.
    #[napi(catch_unwind, ts_args_type = "error: string", ts_return_type = "void")]
    pub fn record_failure(&self, env: &Env, error: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            self.inner
                .record_failure(&string_arg(error.as_ref(), "error")?);
            Ok(())
        })
    }

    /// Whether an operation may run now; in OPEN with the cooldown over this call is the probe.
    #[napi(catch_unwind, ts_return_type = "Permission")]
    pub fn should_allow_operation<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.should_allow_operation()))
    }

    /// `shouldAllowOperation()` that throws a `CIRCUIT_OPEN` error (with the refusal message)
    /// when refused. After it returns, run the operation and record its outcome.
    #[napi(catch_unwind, ts_return_type = "Permission")]
    pub fn try_acquire<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.try_acquire()?))
    }

    /// The status object of SPEC 2.
    #[napi(catch_unwind, ts_return_type = "FailureStatus")]
    pub fn get_status<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.status()))
    }

    /// Lifetime counters (never reset).
    #[napi(catch_unwind, ts_return_type = "FailureMetrics")]
    pub fn metrics<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.metrics()))
    }

    /// Back to CLOSED with zeroed counters, history and backoff.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: &Env) -> napi::Result<(), Code> {
        run(env, || {
            self.inner.reset();
            Ok(())
        })
    }

    /// The persistent form of the state.
    #[napi(catch_unwind, ts_return_type = "FailureSnapshot")]
    pub fn snapshot<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>, Code> {
        run(env, || result(env, &self.inner.snapshot()))
    }

    /// Replaces the state with a snapshot's (an OPEN snapshot stays OPEN; HALF_OPEN comes back
    /// CLOSED). A malformed snapshot is `INVALID_SNAPSHOT` and changes nothing.
    #[napi(
        catch_unwind,
        ts_args_type = "snapshot: FailureSnapshot",
        ts_return_type = "void"
    )]
    pub fn restore(&self, env: &Env, snapshot: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            let snapshot = from_js_opt(snapshot.as_ref(), Context::Snapshot, "snapshot")?;
            Ok(self.inner.restore_json(&snapshot)?)
        })
    }

    /// Writes the snapshot to `path` atomically.
    #[napi(catch_unwind, ts_args_type = "path: string", ts_return_type = "void")]
    pub fn save(&self, env: &Env, path: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            Ok(self.inner.save(string_arg(path.as_ref(), "path")?)?)
        })
    }

    /// Restores from `path`; false (and no change) when the file does not exist.
    #[napi(
        catch_unwind,
        ts_args_type = "path: string",
        ts_return_type = "boolean"
    )]
    pub fn load(&self, env: &Env, path: Option<Unknown<'_>>) -> napi::Result<bool, Code> {
        run(env, || {
            Ok(self.inner.load(string_arg(path.as_ref(), "path")?)?)
        })
    }

    /// The current state (without the lazy OPEN→HALF_OPEN move).
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

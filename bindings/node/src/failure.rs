//! `FailureBreaker` (SPEC 2). `call(fn, ...args)`, `on()` and `off()` are added in
//! `agentbreaker.js` on top of `recordFailure`, the listener hooks and the bound functions of
//! `_fastPath` here.
//!
//! The hot path: a napi-rs class method pays for unwrapping `this` (a type-tag check) and for
//! registering a borrow of the instance (a global table, an allocation) on every call, several
//! times the cost of the breaker's own work. `_fastPath()` hands JavaScript plain functions bound
//! to the core breaker (closures over an `Arc`), which cross without either: `agentbreaker.js`
//! uses them for `call()`, `shouldAllowOperation()` and `recordSuccess()`.

use std::sync::Arc;

use napi::bindgen_prelude::{FunctionCallContext, JsObjectValue, Object, Unknown};
use napi::{Env, Status};
use napi_derive::napi;

use crate::clock::{ClockArg, shared_clock};
use crate::convert::{from_js_opt, result, string_arg};
use crate::error::{Code, Context, JsResult, run};
use crate::listeners::{EventSource, EventTypes, JsListeners, ListenerArg};

const EVENTS: EventTypes = &["stateChange", "warning"];

/// Consecutive failures open the circuit; after a cooldown one probe decides whether it closes
/// again (seed 004).
#[napi]
#[derive(Debug)]
pub struct FailureBreaker {
    inner: Arc<agentbreaker::FailureBreaker>,
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
                inner: Arc::new(inner),
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
            self.listeners.add(&*self.inner, EVENTS, &kind, &listener)
        })
    }

    #[doc(hidden)]
    #[napi(js_name = "_removeListener", catch_unwind, skip_typescript)]
    pub fn remove_js_listener(
        &self,
        env: &Env,
        id: Option<Unknown<'_>>,
    ) -> napi::Result<bool, Code> {
        run(env, || self.listeners.remove(&*self.inner, id.as_ref()))
    }

    /// `{acquire, permit, success}`: functions bound to this breaker, for `agentbreaker.js`.
    /// `acquire()` is `tryAcquire()` without its result (`undefined`, or the `CIRCUIT_OPEN`
    /// error); `permit()` is `shouldAllowOperation()` with the closed-circuit answer
    /// (`{allowed: true, message: null}`) as `null` and any other as `[allowed, message]`;
    /// `success()` is `recordSuccess()`.
    #[doc(hidden)]
    #[napi(js_name = "_fastPath", catch_unwind, skip_typescript)]
    pub fn fast_path<'e>(&self, env: &'e Env) -> napi::Result<Object<'e>, Code> {
        run(env, || {
            let mut functions = Object::new(env)?;
            let breaker = Arc::clone(&self.inner);
            let acquire = env.create_function_from_closure::<(), _, _>("acquire", move |ctx| {
                bound(ctx, || {
                    breaker.try_acquire()?;
                    Ok(())
                })
            })?;
            functions.set_named_property("acquire", acquire)?;
            let breaker = Arc::clone(&self.inner);
            let permit = env.create_function_from_closure::<(), _, _>("permit", move |ctx| {
                bound(ctx, || {
                    let permission = breaker.should_allow_operation();
                    Ok(match permission {
                        agentbreaker::Permission {
                            allowed: true,
                            message: None,
                        } => None,
                        other => Some((other.allowed, other.message)),
                    })
                })
            })?;
            functions.set_named_property("permit", permit)?;
            let breaker = Arc::clone(&self.inner);
            let success = env.create_function_from_closure::<(), _, _>("success", move |ctx| {
                bound(ctx, || {
                    breaker.record_success();
                    Ok(())
                })
            })?;
            functions.set_named_property("success", success)?;
            Ok(functions)
        })
    }
}

/// The body of a bound function: [`run`] (listeners, panics, error codes), with its error thrown
/// here, where the `Code` is known (the closure trampoline only throws `Status` errors).
fn bound<T>(
    ctx: FunctionCallContext<'_>,
    work: impl FnOnce() -> Result<T, crate::error::Failure>,
) -> napi::Result<T> {
    let env: &Env = ctx.env;
    let outcome: JsResult<T> = run(env, work);
    outcome.map_err(|error| {
        if error.status.as_ref() != crate::error::PENDING.as_ref() {
            // On failure to throw there is nothing better to report: the trampoline throws
            // the status error below instead.
            let _ = env.throw(napi::Error::new(error.status, error.reason.clone()));
        }
        napi::Error::new(Status::PendingException, error.reason)
    })
}

//! `FailureBreaker` (contract section 2). `call(fn, ...args)`, `on()` and `off()`
//! are added in `agentbreaker.js` on top of `recordFailure`, the listener methods and the bound
//! functions of `_fastPath` here.
//!
//! The hot path: a napi-rs class method pays for unwrapping `this` (a type-tag check) and for
//! registering a borrow of the instance (a global table, an allocation) on every call, several
//! times the cost of the breaker's own work. `_fastPath()` hands JavaScript plain functions bound
//! to the core breaker (closures over an `Arc`), which cross without either: `agentbreaker.js`
//! uses them for `call()`, `shouldAllowOperation()` and `recordSuccess()` (issue 9's goal, a
//! guarded call at least 5 times faster than opossum's `fire()`).

use std::sync::Arc;

use agentbreaker::Permission;
use napi::bindgen_prelude::{JsObjectValue, Object, ToNapiValue};
use napi::{Env, Status};
use napi_derive::napi;

use crate::convert::{result, string};
use crate::error::{self, Failure, PENDING, run};

/// Consecutive failures open the circuit; after a cooldown one probe decides whether it
/// closes again.
#[napi]
#[derive(Debug)]
pub struct FailureBreaker(Arc<agentbreaker::FailureBreaker>);

#[napi]
impl FailureBreaker {
    /// `{acquire, permit, success}`: functions bound to this breaker, for `agentbreaker.js`.
    /// `acquire()` is `tryAcquire()` without its result (`undefined`, or the `CIRCUIT_OPEN`
    /// error); `permit()` is `shouldAllowOperation()` with the closed-circuit answer
    /// (`{allowed: true, message: null}`) as `null` and any other as `[allowed, message]`;
    /// `success()` is `recordSuccess()`.
    #[doc(hidden)]
    #[napi(js_name = "_fastPath", catch_unwind, skip_typescript)]
    pub fn fast_path<'e>(&self, env: &'e Env) -> error::Result<Object<'e>> {
        run(env, || {
            let mut functions = Object::new(env)?;
            let breaker = Arc::clone(&self.0);
            bind(env, &mut functions, "acquire", move || {
                Ok(breaker.try_acquire().map(drop)?)
            })?;
            let breaker = Arc::clone(&self.0);
            bind(env, &mut functions, "permit", move || {
                Ok(match breaker.should_allow_operation() {
                    Permission {
                        allowed: true,
                        message: None,
                    } => None,
                    other => Some((other.allowed, other.message)),
                })
            })?;
            let breaker = Arc::clone(&self.0);
            bind(env, &mut functions, "success", move || {
                breaker.record_success();
                Ok(())
            })?;
            Ok(functions)
        })
    }
}

methods!(FailureBreaker(agentbreaker::FailureBreaker) emits ["stateChange", "warning"] {
    "Records a failure with its error text."
    fn record_failure(error) "error: string" -> "void"
        = |b, env| string(error.as_ref(), "error").map(|e| b.record_failure(&e));
    "`shouldAllowOperation()` that throws a `CIRCUIT_OPEN` error (with the refusal message)"
    "when refused. After it returns, run the operation and record its outcome."
    fn try_acquire() "" -> "Permission" = |b, env| result(env, &b.try_acquire()?);
    "Writes the snapshot to `path` atomically."
    fn save(path) "path: string" -> "void"
        = |b, env| Ok(b.save(string(path.as_ref(), "path")?)?);
    "Restores from `path`; false (and no change) when the file does not exist."
    fn load(path) "path: string" -> "boolean"
        = |b, env| Ok(b.load(string(path.as_ref(), "path")?)?);
    "The current state (without the lazy OPEN→HALF_OPEN move)."
    fn state() [getter] -> "CircuitState" = |b, env| Ok(b.state().as_str());
    "A breaker from its config (omitted keys: the defaults); with `statePath` it loads that file now."
    fn new("config?: FailureConfig | null, clock?: Clock | null");
    "Replaces the state with a snapshot's (OPEN stays OPEN, HALF_OPEN comes back CLOSED)."
    fn restore(snapshot: Snapshot "snapshot: FailureSnapshot") = restore_json;
    "Records a success: the count returns to 0; in HALF_OPEN the circuit closes."
    fn record_success() = record_success;
    "Whether an operation may run now; in OPEN with the cooldown over this call is the probe."
    fn should_allow_operation() -> "Permission" = should_allow_operation;
    "The status object: state, counts, the failure history, the cooldown."
    fn get_status() -> "FailureStatus" = status;
    "Lifetime counters (never reset)."
    fn metrics() -> "FailureMetrics" = metrics;
    "Back to CLOSED with zeroed counters, history and backoff."
    fn reset() = reset;
    "The persistent form of the state."
    fn snapshot() -> "FailureSnapshot" = snapshot;
    "With `store`: where the state lives now, the URL without its password, outages; else `null`."
    fn store_status() -> "StoreStatus | null" = store_status;
});

/// Sets `functions[name]` to a function bound to `work`, which runs as an export does ([`run`]:
/// listeners, panics, error codes), its error thrown here, where the `Code` is known (the closure
/// trampoline only throws `Status` errors).
fn bind<T: ToNapiValue>(
    env: &Env,
    functions: &mut Object<'_>,
    name: &str,
    work: impl Fn() -> Result<T, Failure> + 'static,
) -> napi::Result<()> {
    let function = env.create_function_from_closure::<(), _, _>(name, move |ctx| {
        let env: &Env = ctx.env;
        run(env, &work).map_err(|error| {
            if error.status != PENDING {
                // Failing to throw leaves nothing better: the trampoline throws the status error.
                let _ = env.throw(napi::Error::new(error.status, error.reason.clone()));
            }
            napi::Error::new(Status::PendingException, error.reason)
        })
    })?;
    functions.set_named_property(name, function)
}

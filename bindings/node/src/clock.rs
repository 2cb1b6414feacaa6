//! Clocks (SPEC 1): `ManualClock` for deterministic tests, `SystemClock` (the default).

use std::sync::Arc;

use agentbreaker::{Clock, SharedClock};
use napi::Env;
use napi::bindgen_prelude::{Either3, Unknown};
use napi_derive::napi;

use crate::convert::{describe, from_js_named, millis_arg};
use crate::error::{Code, Context, Failure, run};

/// A clock that only moves when told to. Hand it to breakers to test your own loops
/// deterministically; one clock may drive many breakers.
#[napi]
#[derive(Debug)]
pub struct ManualClock {
    pub(crate) inner: Arc<agentbreaker::ManualClock>,
}

#[napi]
impl ManualClock {
    /// A clock reading `startMs` (default 0).
    #[napi(constructor, catch_unwind, ts_args_type = "startMs?: number")]
    pub fn new(env: &Env, start_ms: Option<Unknown<'_>>) -> napi::Result<Self, Code> {
        run(env, || {
            let start = match start_ms.as_ref() {
                None => 0,
                Some(v) => millis_arg(Some(v), "startMs")?,
            };
            Ok(ManualClock {
                inner: agentbreaker::ManualClock::shared(start),
            })
        })
    }

    /// Sets the time in ms. Going backwards is allowed: breakers treat it as no time passing.
    #[napi(catch_unwind, ts_args_type = "ms: number", ts_return_type = "void")]
    pub fn set(&self, env: &Env, ms: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            self.inner.set(millis_arg(ms.as_ref(), "ms")?);
            Ok(())
        })
    }

    /// Moves the time forward by `ms`.
    #[napi(catch_unwind, ts_args_type = "ms: number", ts_return_type = "void")]
    pub fn advance(&self, env: &Env, ms: Option<Unknown<'_>>) -> napi::Result<(), Code> {
        run(env, || {
            self.inner.advance(millis_arg(ms.as_ref(), "ms")?);
            Ok(())
        })
    }

    /// The current time in ms.
    #[napi(catch_unwind)]
    pub fn now(&self) -> f64 {
        self.inner.now() as f64
    }
}

/// The default clock: monotonic within the process, expressed as Unix-epoch milliseconds.
#[napi]
#[derive(Debug, Default)]
pub struct SystemClock {}

#[napi]
impl SystemClock {
    /// A handle to the process clock.
    #[napi(constructor, catch_unwind)]
    pub fn new() -> Self {
        SystemClock {}
    }

    /// The current time in ms.
    #[napi(catch_unwind)]
    pub fn now(&self) -> f64 {
        agentbreaker::SystemClock.now_ms() as f64
    }
}

/// The `clock` argument of a constructor.
pub type ClockArg<'a> = Option<Either3<&'a ManualClock, &'a SystemClock, Unknown<'a>>>;

/// The core clock for a `clock` argument: `undefined`/`null` is the system clock.
pub fn shared_clock(clock: &ClockArg<'_>) -> Result<SharedClock, Failure> {
    match clock {
        None => Ok(agentbreaker::SystemClock::shared()),
        Some(Either3::A(manual)) => Ok(manual.inner.clone()),
        Some(Either3::B(_)) => Ok(agentbreaker::SystemClock::shared()),
        Some(Either3::C(other)) => {
            let value = from_js_named(other, Context::Argument, "clock")?;
            if value.is_null() {
                return Ok(agentbreaker::SystemClock::shared());
            }
            Err(Context::Argument.type_error(format!(
                "clock must be a ManualClock or a SystemClock, not {}",
                describe(&value)
            )))
        }
    }
}

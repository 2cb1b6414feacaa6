//! Clocks: `ManualClock` for deterministic tests, `SystemClock` (the default).

use std::sync::Arc;

use agentbreaker::interop::ArgKind;
use agentbreaker::{Clock, SharedClock};
use napi::bindgen_prelude::{Either3, JsObjectValue, JsValue, Reference, Unknown};
use napi::{Env, ValueType};
use napi_derive::napi;

use crate::convert::{millis, wrong_type};
use crate::error::{self, Arg, Failure, run};

/// A clock that only moves when told to. Hand it to breakers to test your own loops
/// deterministically; one clock may drive many breakers.
#[napi]
#[derive(Debug)]
pub struct ManualClock(Arc<agentbreaker::ManualClock>);

#[napi]
impl ManualClock {
    /// A clock reading `startMs` (default 0).
    #[napi(constructor, catch_unwind, ts_args_type = "startMs?: number")]
    pub fn new(env: &Env, start_ms: Arg<'_>) -> error::Result<Self> {
        run(env, || {
            let start = start_ms
                .as_ref()
                .map_or(Ok(0), |v| millis(Some(v), "startMs"))?;
            Ok(ManualClock(agentbreaker::ManualClock::shared(start)))
        })
    }
}

methods!(ManualClock {
    "Sets the time in ms. Going backwards is allowed: breakers treat it as no time passing."
    fn set(ms) "ms: number" -> "void" = |c, env| millis(ms.as_ref(), "ms").map(|ms| c.set(ms));
    "Moves the time forward by `ms`."
    fn advance(ms) "ms: number" -> "void"
        = |c, env| millis(ms.as_ref(), "ms").map(|ms| c.advance(ms));
    "The current time in ms."
    fn now() "" -> "number" = |c, env| Ok(c.now() as f64);
});

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

const CLOCKS: &str = "a ManualClock or a SystemClock";

/// The `clock` argument of a constructor.
pub type ClockArg<'a> = Option<Either3<&'a ManualClock, &'a SystemClock, Unknown<'a>>>;

/// The core clock for a `clock` argument: left out, `undefined` and `null` are the system clock.
pub fn shared_clock(clock: &ClockArg<'_>) -> Result<SharedClock, Failure> {
    match clock {
        None | Some(Either3::B(_)) => Ok(agentbreaker::SystemClock::shared()),
        Some(Either3::A(manual)) => Ok(manual.0.clone()),
        Some(Either3::C(other)) => Err(wrong_type(ArgKind::Argument, "clock", CLOCKS, Some(other))),
    }
}

/// The clock an options object holds as `clock`; `None` when it holds none (or is no object).
/// Read as references: `&ManualClock` can only be borrowed while napi converts arguments.
pub fn clock_in(options: Option<&Unknown<'_>>) -> Result<Option<SharedClock>, Failure> {
    let Some(options) = options.filter(|o| o.get_type().ok() == Some(ValueType::Object)) else {
        return Ok(None);
    };
    let object = options.coerce_to_object()?;
    let clock: Unknown<'_> = object.get_named_property("clock")?;
    if matches!(clock.get_type()?, ValueType::Undefined | ValueType::Null) {
        Ok(None)
    } else if let Ok(manual) =
        object.get_named_property_unchecked::<Reference<ManualClock>>("clock")
    {
        Ok(Some(manual.0.clone()))
    } else if object
        .get_named_property_unchecked::<Reference<SystemClock>>("clock")
        .is_ok()
    {
        Ok(Some(agentbreaker::SystemClock::shared()))
    } else {
        let what = "config.clock";
        Err(wrong_type(ArgKind::Argument, what, CLOCKS, Some(&clock)))
    }
}

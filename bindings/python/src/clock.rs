//! `ManualClock` and `SystemClock` (contract section 1), and the `clock=` keyword every breaker
//! takes.

use std::sync::Arc;

use agentbreaker::interop::ArgKind;
use agentbreaker::{Clock, SharedClock};
use pyo3::prelude::*;

use crate::convert::{Arg, arg_ms, type_name};
use crate::errors::{IntoPyResult, boundary};

/// A clock that only moves when told to: `set(ms)`, `advance(ms)`, `now()`. Share one between
/// breakers to test a loop deterministically.
#[pyclass(frozen, module = "agentbreaker")]
#[derive(Debug)]
pub struct ManualClock {
    inner: Arc<agentbreaker::ManualClock>,
}

#[pymethods]
impl ManualClock {
    #[new]
    #[pyo3(signature = (start_ms = None), text_signature = "(start_ms=0)")]
    fn new(py: Python<'_>, start_ms: Arg) -> PyResult<Self> {
        boundary(py, || {
            let start = start_ms.map_or(Ok(0), |v| arg_ms(v, "start_ms"));
            let inner = agentbreaker::ManualClock::shared(start.or_raise(py)?);
            Ok(ManualClock { inner })
        })
    }

    /// Sets the time in ms (going backwards is allowed; breakers count it as no time passing).
    fn set(&self, py: Python<'_>, ms: &Bound<'_, PyAny>) -> PyResult<()> {
        let set = |ms| self.inner.set(ms);
        boundary(py, || arg_ms(ms, "ms").map(set).or_raise(py))
    }

    /// Moves the time forward by `ms`.
    fn advance(&self, py: Python<'_>, ms: &Bound<'_, PyAny>) -> PyResult<()> {
        let advance = |ms| self.inner.advance(ms);
        boundary(py, || arg_ms(ms, "ms").map(advance).or_raise(py))
    }

    /// The current time in ms.
    fn now(&self) -> u64 {
        self.inner.now()
    }

    fn __repr__(&self) -> String {
        format!("ManualClock(now={})", self.inner.now())
    }
}

/// The default clock: monotonic within the process, as Unix-epoch milliseconds.
#[pyclass(frozen, module = "agentbreaker")]
#[derive(Debug)]
pub struct SystemClock;

#[pymethods]
impl SystemClock {
    #[new]
    fn new() -> Self {
        SystemClock
    }

    /// The current time in ms since the Unix epoch (monotonic within the process).
    fn now(&self) -> u64 {
        agentbreaker::SystemClock.now_ms()
    }

    fn __repr__(&self) -> String {
        "SystemClock()".to_string()
    }
}

/// The clock a breaker is built on: `None` is the system clock.
pub fn from_keyword(clock: Arg) -> Result<SharedClock, agentbreaker::Error> {
    let Some(c) = clock.filter(|c| !c.is_none() && !c.is_instance_of::<SystemClock>()) else {
        return Ok(agentbreaker::SystemClock::shared());
    };
    match c.cast::<ManualClock>() {
        Ok(manual) => Ok(manual.get().inner.clone()),
        Err(_) => {
            let expected = "a ManualClock, a SystemClock or None";
            Err(ArgKind::Config.wrong_type("clock", expected, &type_name(c)))
        }
    }
}

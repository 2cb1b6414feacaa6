//! `FailureBreaker` (SPEC 2). The guarded-call idioms (`@breaker`, `with`, `async with`, `call`)
//! are in the Python package, on a subclass, built on `try_acquire`/`record_success`/
//! `record_failure`.

use agentbreaker::{Error, FailureConfig, Listener, ListenerId};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::clock;
use crate::convert::{arg_path, arg_str, config_from_arguments, required, to_json, to_py};
use crate::errors::{IntoPyResult, boundary, detached, detached_result};
use crate::listeners::{EventSource, PyListeners, pymethods_with_listeners};

/// Consecutive failures open the circuit; after a cooldown a probe decides whether it closes.
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct FailureBreaker {
    inner: agentbreaker::FailureBreaker,
    listeners: PyListeners,
}

impl EventSource for FailureBreaker {
    fn py_listeners(&self) -> &PyListeners {
        &self.listeners
    }
    fn add_core_listener(&self, listener: Listener) -> ListenerId {
        self.inner.add_listener(listener)
    }
    fn remove_core_listener(&self, id: ListenerId) -> bool {
        self.inner.remove_listener(id)
    }
    fn core_listener_errors(&self) -> u64 {
        self.inner.listener_errors()
    }
}

pymethods_with_listeners!(FailureBreaker {
    #[new]
    #[pyo3(signature = (config = None, /, *, clock = None, **options))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        boundary(py, || {
            let clock = clock::from_keyword(clock).or_raise(py)?;
            let config = config_from_arguments(config, options)
                .and_then(|c| FailureConfig::from_json(&c))
                .or_raise(py)?;
            // With `state_path` this reads the file: without the GIL.
            let inner = detached_result(py, move || {
                agentbreaker::FailureBreaker::with_clock(config, clock)
            })?;
            Ok(FailureBreaker {
                inner,
                listeners: PyListeners::default(),
            })
        })
    }

    /// Records a success: the count returns to 0; in HALF_OPEN the circuit closes.
    fn record_success(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        detached(py, || inner.record_success())
    }

    /// Records a failure with the error's text.
    #[pyo3(signature = (error = None), text_signature = "($self, error)")]
    fn record_failure(&self, py: Python<'_>, error: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        boundary(py, || {
            let error = arg_str(error, "error").or_raise(py)?;
            let inner = &self.inner;
            detached(py, || inner.record_failure(&error))
        })
    }

    /// `(allowed, message)`; after the cooldown this call is the half-open probe.
    fn should_allow_operation(&self, py: Python<'_>) -> PyResult<(bool, Option<String>)> {
        let inner = &self.inner;
        let permission = detached(py, || inner.should_allow_operation())?;
        Ok((permission.allowed, permission.message))
    }

    /// The first half of a guarded call: raises `CircuitOpenError` (with the refusal message) when
    /// the breaker says no, else returns the permission's message (`None` when CLOSED). Record
    /// the outcome with `record_success`/`record_failure` afterwards.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let inner = &self.inner;
        Ok(detached_result(py, || inner.try_acquire())?.message)
    }

    /// The status dict of SPEC 2.
    fn get_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        let status = detached(py, || inner.status())?;
        to_py(py, &status)
    }

    /// Lifetime counters.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        let metrics = detached(py, || inner.metrics())?;
        to_py(py, &metrics)
    }

    /// Back to CLOSED with zeroed counters, history and backoff; metrics keep counting.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        detached(py, || inner.reset())
    }

    /// The persistent form of the state (a dict; `restore` takes it back).
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        let snapshot = detached(py, || inner.snapshot())?;
        to_py(py, &snapshot)
    }

    /// Replaces the state with a snapshot's (OPEN stays OPEN, HALF_OPEN comes back CLOSED).
    #[pyo3(signature = (snapshot = None), text_signature = "($self, snapshot)")]
    fn restore(&self, py: Python<'_>, snapshot: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        boundary(py, || {
            let snapshot = required(snapshot, "snapshot")
                .and_then(|s| to_json(s, "snapshot", Error::InvalidSnapshot))
                .or_raise(py)?;
            let inner = &self.inner;
            detached_result(py, || inner.restore_json(&snapshot))
        })
    }

    /// Writes the snapshot to `path` atomically.
    #[pyo3(signature = (path = None), text_signature = "($self, path)")]
    fn save(&self, py: Python<'_>, path: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        boundary(py, || {
            let path = required(path, "path")
                .and_then(|p| arg_path(p, "path"))
                .or_raise(py)?;
            let inner = &self.inner;
            detached_result(py, || inner.save(&path))
        })
    }

    /// Restores from `path`; False (and no change) when the file does not exist.
    #[pyo3(signature = (path = None), text_signature = "($self, path)")]
    fn load(&self, py: Python<'_>, path: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        boundary(py, || {
            let path = required(path, "path")
                .and_then(|p| arg_path(p, "path"))
                .or_raise(py)?;
            let inner = &self.inner;
            detached_result(py, || inner.load(&path))
        })
    }

    /// `"CLOSED"`, `"HALF_OPEN"` or `"OPEN"` (without the lazy OPEN → HALF_OPEN move).
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        let inner = &self.inner;
        Ok(detached(py, || inner.state())?.as_str())
    }

    /// The configuration in effect, with the SPEC's camelCase keys.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.inner.config())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let inner = &slf.get().inner;
        let status = detached(py, || inner.status())?;
        Ok(format!(
            "{}(state='{}', consecutive_failures={})",
            slf.get_type().name()?,
            status.state.as_str(),
            status.consecutive_failures
        ))
    }
});

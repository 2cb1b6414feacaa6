//! `StagnationBreaker` (contract section 3).

use agentbreaker::interop::ArgKind;
use agentbreaker::{AgentStep, IterationMetrics};
use pyo3::prelude::*;

use crate::convert::{arg_bool, arg_str, detached_py, object_of, required_json, to_py};
use crate::errors::{IntoPyResult, boundary, detached, detached_result};
use crate::listeners::PyListeners;

/// No progress, the same error again and again, or declining output: the loop is stuck.
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct StagnationBreaker {
    inner: agentbreaker::StagnationBreaker,
    listeners: PyListeners,
}

event_source_class!(StagnationBreaker {
    /// One iteration: whole numbers >= 0 (left out = 0).
    #[pyo3(
        signature = (*, files_changed = None, tests_passing = None, output_length = None),
        text_signature = "($self, *, files_changed=0, tests_passing=0, output_length=0)"
    )]
    fn record_progress(
        &self,
        py: Python<'_>,
        files_changed: Option<&Bound<'_, PyAny>>,
        tests_passing: Option<&Bound<'_, PyAny>>,
        output_length: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        boundary(py, || {
            let fields = [
                ("filesChanged", "files_changed", files_changed),
                ("testsPassing", "tests_passing", tests_passing),
                ("outputLength", "output_length", output_length),
            ];
            let metrics = object_of(&fields, ArgKind::Argument)
                .and_then(|m| IterationMetrics::from_json(&m))
                .or_raise(py)?;
            detached(py, || self.inner.record_progress(metrics))
        })
    }

    /// Records an error; `transient=True` errors (rate limits, 5xx, timeouts) never count.
    #[pyo3(
        signature = (error = None, transient = None),
        text_signature = "($self, error, transient=False)"
    )]
    fn record_error(
        &self,
        py: Python<'_>,
        error: Option<&Bound<'_, PyAny>>,
        transient: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        boundary(py, || {
            let error = arg_str(error, "error").or_raise(py)?;
            let transient = arg_bool(transient, "transient", false).or_raise(py)?;
            detached(py, || self.inner.record_error(&error, transient))
        })
    }

    /// One agent step for the step detectors (repeats, cycles, fail streaks, the fail window):
    /// what it did, what came back, whether it failed. A no-op while the detectors are off.
    #[pyo3(
        signature = (action = None, result = None, failed = None),
        text_signature = "($self, action, result='', failed=False)"
    )]
    fn record_step(
        &self,
        py: Python<'_>,
        action: Option<&Bound<'_, PyAny>>,
        result: Option<&Bound<'_, PyAny>>,
        failed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        boundary(py, || {
            let fields = [
                ("action", "action", action),
                ("result", "result", result),
                ("failed", "failed", failed),
            ];
            let step = object_of(&fields, ArgKind::Argument)
                .and_then(|s| AgentStep::from_json(&s))
                .or_raise(py)?;
            detached(py, || self.inner.record_step(&step))
        })
    }

    /// `{allowContinue, state, reason}`.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        detached_py(py, || self.inner.check())
    }

    /// `{state, consecutiveNoProgress, errorCounts, outputTrend, lastProgress}`.
    fn get_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        detached_py(py, || self.inner.status())
    }

    /// Back to CLOSED, every counter cleared.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.inner.reset())
    }

    /// The persistent form of the state.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        detached_py(py, || self.inner.snapshot())
    }

    /// Replaces the state with a snapshot's (OPEN stays OPEN, HALF_OPEN comes back CLOSED).
    #[pyo3(signature = (snapshot = None), text_signature = "($self, snapshot)")]
    fn restore(&self, py: Python<'_>, snapshot: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        boundary(py, || {
            let snapshot = required_json(snapshot, "snapshot", ArgKind::Snapshot).or_raise(py)?;
            detached_result(py, || self.inner.restore_json(&snapshot))
        })
    }

    /// `"CLOSED"`, `"HALF_OPEN"` or `"OPEN"`.
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(detached(py, || self.inner.state())?.as_str())
    }

    /// The configuration in effect, with camelCase keys.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.inner.config())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let inner = &slf.get().inner;
        let status = detached(slf.py(), || inner.status())?;
        let (state, count) = (status.state.as_str(), status.consecutive_no_progress);
        let name = slf.get_type().name()?;
        Ok(format!("{name}(state='{state}', consecutive_no_progress={count})"))
    }
});

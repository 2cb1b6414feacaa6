//! `StagnationBreaker` (contract section 3).

use agentbreaker::{AgentStep, IterationMetrics};
use pyo3::prelude::*;

use crate::convert::{Arg, arg_bool, arg_str, object_of};
use crate::errors::{IntoPyResult, boundary, detached};

event_source_class! {
    /// No progress, the same error again and again, or declining output: the loop is stuck.
    StagnationBreaker {
        /// One iteration: whole numbers >= 0 (left out = 0).
        #[pyo3(
            signature = (*, files_changed = None, tests_passing = None, output_length = None),
            text_signature = "($self, *, files_changed=0, tests_passing=0, output_length=0)"
        )]
        fn record_progress(
            &self,
            py: Python<'_>,
            files_changed: Arg,
            tests_passing: Arg,
            output_length: Arg,
        ) -> PyResult<()> {
            boundary(py, || {
                let fields = [
                    ("filesChanged", "files_changed", files_changed),
                    ("testsPassing", "tests_passing", tests_passing),
                    ("outputLength", "output_length", output_length),
                ];
                let metrics = IterationMetrics::from_json(&object_of(&fields).or_raise(py)?);
                let metrics = metrics.or_raise(py)?;
                detached(py, || self.inner.record_progress(metrics))
            })
        }

        /// Records an error; `transient=True` errors (rate limits, 5xx, timeouts) never count.
        #[pyo3(
            signature = (error = None, transient = None),
            text_signature = "($self, error, transient=False)"
        )]
        fn record_error(&self, py: Python<'_>, error: Arg, transient: Arg) -> PyResult<()> {
            boundary(py, || {
                let error = arg_str(error, "error").or_raise(py)?;
                let transient = arg_bool(transient, "transient", false).or_raise(py)?;
                detached(py, || self.inner.record_error(&error, transient))
            })
        }

        /// One agent step for the step detectors (repeats, cycles, fail streaks, the fail
        /// window): what it did, what came back, whether it failed. A no-op while the detectors
        /// are off.
        #[pyo3(
            signature = (action = None, result = None, failed = None),
            text_signature = "($self, action, result='', failed=False)"
        )]
        fn record_step(
            &self,
            py: Python<'_>,
            action: Arg,
            result: Arg,
            failed: Arg,
        ) -> PyResult<()> {
            boundary(py, || {
                let fields = [
                    ("action", "action", action),
                    ("result", "result", result),
                    ("failed", "failed", failed),
                ];
                let step = AgentStep::from_json(&object_of(&fields).or_raise(py)?).or_raise(py)?;
                detached(py, || self.inner.record_step(&step))
            })
        }

        fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
            let inner = &slf.get().inner;
            let status = detached(slf.py(), || inner.status())?;
            let (state, count) = (status.state.as_str(), status.consecutive_no_progress);
            let name = slf.get_type().name()?;
            Ok(format!(
                "{name}(state='{state}', consecutive_no_progress={count})"
            ))
        }
    }
    /// `{allowContinue, state, reason}`.
    fn check = detached_py(check);
    /// `{state, consecutiveNoProgress, errorCounts, outputTrend, lastProgress}`.
    fn get_status = detached_py(status);
    /// Back to CLOSED, every counter cleared.
    fn reset = detached_py(reset);
    /// The persistent form of the state.
    fn snapshot = detached_py(snapshot);
    /// Replaces the state with a snapshot's (OPEN stays OPEN, HALF_OPEN comes back CLOSED).
    fn restore(snapshot: required_json(Snapshot) "($self, snapshot)")
        = detached_result_py(restore_json);
    /// `"CLOSED"`, `"HALF_OPEN"` or `"OPEN"`.
    #[getter]
    fn state = detached_py(state);
    /// The configuration in effect, with camelCase keys.
    #[getter]
    fn config = attached_py(config);
}

//! `BudgetBreaker` (contract section 4).

use agentbreaker::interop::ArgKind;
use pyo3::prelude::*;

use crate::convert::{detached_py, required_json, to_py};
use crate::errors::{IntoPyResult, boundary, detached, detached_result};
use crate::listeners::PyListeners;

/// Per-task halt conditions over an agent's event stream: tool calls, spend, duration, idle
/// time and near-identical outputs.
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct BudgetBreaker {
    inner: agentbreaker::BudgetBreaker,
    listeners: PyListeners,
}

event_source_class!(BudgetBreaker {
    /// Takes one event (a dict: `heartbeat`, `assistant`, `tool_use`, `usage`, ...); returns the
    /// halt it caused, or None.
    #[pyo3(signature = (event = None), text_signature = "($self, event)")]
    fn ingest<'py>(
        &self,
        py: Python<'py>,
        event: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        boundary(py, || {
            let event = required_json(event, "event", ArgKind::Event).or_raise(py)?;
            to_py(py, &detached_result(py, || self.inner.ingest(&event))?)
        })
    }

    /// Checks duration and idle time of every open task now; returns the new halts.
    fn tick<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        detached_py(py, || self.inner.tick())
    }

    /// `{tasks, stack, ignoredEvents}`.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        detached_py(py, || self.inner.snapshot())
    }

    /// Forgets every task.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.inner.reset())
    }

    /// The configuration in effect, with camelCase keys.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.inner.config())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let inner = &slf.get().inner;
        let open_tasks = detached(slf.py(), || inner.snapshot().tasks.len())?;
        Ok(format!("{}(open_tasks={open_tasks})", slf.get_type().name()?))
    }
});

//! `BudgetBreaker` (SPEC 4).

use agentbreaker::BudgetConfig;
use agentbreaker::interop::ArgKind;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::clock;
use crate::convert::{config_from_arguments, detached_py, required_json, to_py};
use crate::errors::{IntoPyResult, boundary, detached, detached_result};
use crate::listeners::{PyListeners, pymethods_with_listeners};

/// Per-task halt conditions over an agent's event stream: tool calls, spend, duration, idle
/// time and near-identical outputs.
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct BudgetBreaker {
    inner: agentbreaker::BudgetBreaker,
    listeners: PyListeners,
}

pymethods_with_listeners!(BudgetBreaker {
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
            let inner = config_from_arguments(config, options)
                .and_then(|c| BudgetConfig::from_json(&c))
                .and_then(|c| agentbreaker::BudgetBreaker::with_clock(c, clock))
                .or_raise(py)?;
            Ok(BudgetBreaker {
                inner,
                listeners: PyListeners::default(),
            })
        })
    }

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
            let inner = &self.inner;
            let halt = detached_result(py, || inner.ingest(&event))?;
            to_py(py, &halt)
        })
    }

    /// Checks duration and idle time of every open task now; returns the new halts.
    fn tick<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        detached_py(py, || inner.tick())
    }

    /// `{tasks, stack, ignoredEvents}`.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        detached_py(py, || inner.snapshot())
    }

    /// Forgets every task.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        detached(py, || inner.reset())
    }

    /// The configuration in effect, with the SPEC's camelCase keys.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.inner.config())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let inner = &slf.get().inner;
        let snapshot = detached(py, || inner.snapshot())?;
        Ok(format!(
            "{}(open_tasks={})",
            slf.get_type().name()?,
            snapshot.tasks.len()
        ))
    }
});

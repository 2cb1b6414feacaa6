//! `Loop`, the coordinator (SPEC 5).

use agentbreaker::interop::ArgKind;
use agentbreaker::{Error, LoopConfig};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde_json::Value;

use crate::clock;
use crate::convert::{config_from_arguments, detached_py, object_of, to_json, to_py};
use crate::errors::{IntoPyResult, boundary, detached, detached_result};
use crate::listeners::{PyListeners, pymethods_with_listeners};

/// Analyzes each response, applies an exit strategy, watches for stagnation and budget halts, and
/// says continue or exit: `Loop(max_iterations=50, strategy={...}, stagnation={...},
/// budget={...})`.
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct Loop {
    inner: agentbreaker::Loop,
    listeners: PyListeners,
}

/// `events=`: a list of event dicts. An item that cannot be converted is a malformed event
/// (`INVALID_EVENT`, as the core reports a malformed event in the list); anything but a list is
/// the core's `INVALID_ARGUMENT`.
fn events_to_json(events: &Bound<'_, PyAny>) -> Result<Value, Error> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = events.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = events.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return to_json(events, "events", ArgKind::Argument);
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| to_json(item, &format!("events[{i}]"), ArgKind::Event))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

pymethods_with_listeners!(Loop {
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
                .and_then(|c| LoopConfig::from_json(&c))
                .and_then(|c| agentbreaker::Loop::with_clock(c, clock))
                .or_raise(py)?;
            Ok(Loop {
                inner,
                listeners: PyListeners::default(),
            })
        })
    }

    /// One iteration: the agent's `output`, with what changed and the budget events it produced.
    /// Returns `{action, reason, outcome, iteration, analysis, breaker, halt}`.
    #[pyo3(
        signature = (
            output = None, *, files_changed = None, tests_passing = None, error = None,
            events = None
        ),
        text_signature = "($self, output, *, files_changed=0, tests_passing=0, error=None, events=None)"
    )]
    fn observe<'py>(
        &self,
        py: Python<'py>,
        output: Option<&Bound<'py, PyAny>>,
        files_changed: Option<&Bound<'py, PyAny>>,
        tests_passing: Option<&Bound<'py, PyAny>>,
        error: Option<&Bound<'py, PyAny>>,
        events: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        boundary(py, || {
            let fields = [
                ("output", "output", output),
                ("filesChanged", "files_changed", files_changed),
                ("testsPassing", "tests_passing", tests_passing),
                ("error", "error", error),
            ];
            let mut observation = object_of(&fields, ArgKind::Argument).or_raise(py)?;
            if let (Some(events), Value::Object(map)) = (events, &mut observation) {
                map.insert("events".to_string(), events_to_json(events).or_raise(py)?);
            }
            let inner = &self.inner;
            let decision = detached_result(py, || inner.observe_json(&observation))?;
            to_py(py, &decision)
        })
    }

    /// `{iteration, exited, reason, outcome, breaker, budget}`.
    fn get_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        detached_py(py, || inner.status())
    }

    /// Starts over: iteration 0, every component reset.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        detached(py, || inner.reset())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let inner = &slf.get().inner;
        let status = detached(py, || inner.status())?;
        Ok(format!(
            "{}(iteration={}, exited={})",
            slf.get_type().name()?,
            status.iteration,
            if status.exited { "True" } else { "False" }
        ))
    }
});

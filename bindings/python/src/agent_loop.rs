//! `Loop`, the coordinator (contract section 5).

use agentbreaker::Error;
use agentbreaker::interop::ArgKind;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use serde_json::Value;

use crate::convert::{Arg, detached_result_py, object_of, to_json_in};
use crate::errors::{IntoPyResult, boundary, detached};

/// `events=`: a list of event dicts. An item that cannot be converted is a malformed event
/// (`INVALID_EVENT`, as the core reports a malformed event in the list); anything but a list is
/// the core's `INVALID_ARGUMENT`. An event sits two containers deep (the observation, the list),
/// as in the observation object the other bindings walk.
fn events_to_json(events: &Bound<'_, PyAny>) -> Result<Value, Error> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = events.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = events.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return to_json_in(events, "events", ArgKind::Argument, 1);
    };
    let items = items.iter().enumerate();
    let items = items.map(|(i, item)| to_json_in(item, &format!("events[{i}]"), ArgKind::Event, 2));
    items.collect::<Result<Vec<_>, _>>().map(Value::Array)
}

event_source_class! {
    /// Analyzes each response, applies an exit strategy, watches for stagnation and budget halts,
    /// and says continue or exit: `Loop(max_iterations=50, strategy={...}, stagnation={...},
    /// budget={...})`.
    Loop {
        /// One iteration: the agent's `output`, with what changed and the budget events it
        /// produced. Returns `{action, reason, outcome, iteration, analysis, breaker, halt}`.
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
            output: Arg,
            files_changed: Arg,
            tests_passing: Arg,
            error: Arg,
            events: Arg,
        ) -> PyResult<Bound<'py, PyAny>> {
            boundary(py, || {
                let fields = [
                    ("output", "output", output),
                    ("filesChanged", "files_changed", files_changed),
                    ("testsPassing", "tests_passing", tests_passing),
                    ("error", "error", error),
                ];
                let mut observation = object_of(&fields).or_raise(py)?;
                if let (Some(events), Value::Object(map)) = (events, &mut observation) {
                    map.insert("events".to_string(), events_to_json(events).or_raise(py)?);
                }
                detached_result_py(py, || self.inner.observe_json(&observation))
            })
        }

        fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
            let inner = &slf.get().inner;
            let status = detached(slf.py(), || inner.status())?;
            let exited = if status.exited { "True" } else { "False" };
            let (name, iteration) = (slf.get_type().name()?, status.iteration);
            Ok(format!("{name}(iteration={iteration}, exited={exited})"))
        }
    }
    /// `{iteration, exited, reason, outcome, breaker, budget}`.
    fn get_status = detached_py(status);
    /// Starts over: iteration 0, every component reset.
    fn reset = detached_py(reset);
}

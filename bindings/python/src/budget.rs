//! `BudgetBreaker` (contract section 4).

use pyo3::prelude::*;

use crate::errors::detached;

event_source_class! {
    /// Per-task halt conditions over an agent's event stream: tool calls, spend, duration, idle
    /// time and near-identical outputs.
    BudgetBreaker {
        fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
            let inner = &slf.get().inner;
            let open_tasks = detached(slf.py(), || inner.snapshot().tasks.len())?;
            Ok(format!(
                "{}(open_tasks={open_tasks})",
                slf.get_type().name()?
            ))
        }
    }
    /// Takes one event (a dict: `heartbeat`, `assistant`, `tool_use`, `usage`, ...); returns the
    /// halt it caused, or None.
    fn ingest(event: required_json(Event) "($self, event)") = detached_result_py(ingest);
    /// Checks duration and idle time of every open task now; returns the new halts.
    fn tick = detached_py(tick);
    /// `{tasks, stack, ignoredEvents}`.
    fn snapshot = detached_py(snapshot);
    /// Forgets every task.
    fn reset = detached_py(reset);
    /// The configuration in effect, with camelCase keys.
    #[getter]
    fn config = attached_py(config);
}

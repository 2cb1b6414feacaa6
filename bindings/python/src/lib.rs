//! Python bindings of agentbreaker: the native module `agentbreaker._native`, re-exported by the
//! pure-Python package `agentbreaker` (python/agentbreaker, whose `_native.pyi` stubs document
//! the API; the docstrings here are short).
//!
//! This crate converts types and errors and nothing else; every rule lives in the core, and the
//! rules of conversion in `agentbreaker::interop` (one file each here: `convert`, `errors`):
//! - keyword arguments (snake_case) become the contract's config objects (camelCase) and go
//!   through the core's `from_json` validators; arguments go through `IterationMetrics::from_json`,
//!   `Observation::from_json`, `BudgetBreaker::ingest`, `Monitor::observe`, `restore_json`, ...;
//! - results go through `serde_json::to_value` into dicts with the contract's camelCase keys;
//! - core errors become one exception class per code (`errors`);
//! - core calls run with the GIL released; listeners re-acquire it (`listeners`);
//! - every entry point is a panic boundary: a panic is an `InternalError`, never a crash.

/// `#[pymethods] impl $class` for a class over a core event source: a struct holding the core
/// object (`inner: $core`) and its Python callables (`listeners`). Adds to the methods given the
/// constructor `$class(config=None, /, *, clock=None, **options)` (`convert::construct`) and the
/// listener methods (pyo3 takes one `#[pymethods]` block per class).
macro_rules! event_source_class {
    ($class:ident { $($methods:tt)* }) => {
        #[pyo3::pymethods]
        impl $class {
            #[new]
            #[pyo3(signature = (config = None, /, *, clock = None, **options))]
            fn new(
                py: pyo3::Python<'_>,
                config: Option<&pyo3::Bound<'_, pyo3::PyAny>>,
                clock: Option<&pyo3::Bound<'_, pyo3::PyAny>>,
                options: Option<&pyo3::Bound<'_, pyo3::types::PyDict>>,
            ) -> pyo3::PyResult<Self> {
                let from_config = agentbreaker::interop::FromConfig::from_config;
                let inner = crate::convert::construct(py, config, clock, options, from_config)?;
                Ok($class { inner, listeners: Default::default() })
            }

            $($methods)*

            /// Calls `listener(event)` for every event (a dict); returns `listener`, so this
            /// works as a decorator. A listener that raises is counted in `listener_errors`.
            fn add_listener<'py>(
                &self,
                py: pyo3::Python<'py>,
                listener: &pyo3::Bound<'py, pyo3::PyAny>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                let register = |l| self.inner.add_listener(l);
                crate::errors::boundary(py, || self.listeners.add(listener, register))
            }

            /// Removes a listener added with `add_listener`; false when it was not there.
            fn remove_listener(
                &self,
                py: pyo3::Python<'_>,
                listener: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<bool> {
                let unregister = |id| self.inner.remove_listener(id);
                crate::errors::attached(py, || self.listeners.remove(listener, unregister))
            }

            /// How many listener calls raised (and were isolated).
            #[getter]
            fn listener_errors(&self) -> u64 {
                self.inner.listener_errors()
            }

            fn __traverse__(
                &self,
                visit: pyo3::gc::PyVisit<'_>,
            ) -> Result<(), pyo3::PyTraverseError> {
                self.listeners.traverse(&visit)
            }

            fn __clear__(&self) {
                self.listeners.clear(|id| self.inner.remove_listener(id))
            }
        }
    };
}

mod agent_loop;
mod budget;
mod clock;
mod convert;
mod errors;
mod failure;
mod functions;
mod listeners;
mod monitor;
mod stagnation;
mod strategy;

use pyo3::prelude::*;

/// The native part of agentbreaker. Import from `agentbreaker` instead.
#[pymodule(name = "_native")]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(module)?;
    module.add_class::<clock::ManualClock>()?;
    module.add_class::<clock::SystemClock>()?;
    module.add_class::<failure::FailureBreaker>()?;
    module.add_class::<failure::GuardedFunction>()?;
    module.add_class::<stagnation::StagnationBreaker>()?;
    module.add_class::<budget::BudgetBreaker>()?;
    module.add_class::<strategy::ExitStrategy>()?;
    module.add_class::<strategy::FixPlan>()?;
    module.add_class::<agent_loop::Loop>()?;
    module.add_class::<monitor::Monitor>()?;
    module.add_function(wrap_pyfunction!(functions::analyze, module)?)?;
    module.add_function(wrap_pyfunction!(functions::fingerprint, module)?)?;
    module.add_function(wrap_pyfunction!(functions::config_from_env, module)?)?;
    module.add_function(wrap_pyfunction!(functions::profile, module)?)?;
    module.add_function(wrap_pyfunction!(functions::profile_names, module)?)?;
    module.add_function(wrap_pyfunction!(functions::metric_definitions, module)?)?;
    module.add_function(wrap_pyfunction!(functions::metric_updates, module)?)?;
    Ok(())
}

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

/// A class over a core event source: the struct (`inner`: the core object of the same name,
/// `listeners`: its Python callables) and its one `#[pymethods]` block, which has the constructor
/// `$class(config=None, /, *, clock=None, **options)` (`convert::construct`), the listener methods,
/// the methods written out in the braces, and after them the forwarders: `fn name = how(core);`
/// is `how(py, || self.inner.core())` inside the panic boundary (`convert::detached_py` with the
/// GIL released, `convert::attached_py` with it held); `fn name(arg: conv "text signature") =
/// how(core);` first converts its one argument, declared with a `None` default, with
/// `convert::conv(arg, "arg")` (`conv(Kind)` adds an `ArgKind`) and passes it by reference.
macro_rules! event_source_class {
    (
        $(#[$doc:meta])*
        $class:ident { $($methods:tt)* }
        $(
            $(#[$m:meta])*
            fn $name:ident $(($arg:ident: $conv:ident $(($kind:ident))? $sig:literal))?
                = $how:ident($core:ident);
        )*
    ) => {
        $(#[$doc])*
        #[pyo3::pyclass(frozen, subclass, weakref, module = "agentbreaker")]
        #[derive(Debug)]
        pub struct $class {
            inner: agentbreaker::$class,
            listeners: crate::listeners::PyListeners,
        }

        #[pyo3::pymethods]
        impl $class {
            #[new]
            #[pyo3(signature = (config = None, /, *, clock = None, **options))]
            fn new(
                py: pyo3::Python<'_>,
                config: crate::convert::Arg,
                clock: crate::convert::Arg,
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

            $(
                $(#[$m])*
                $(#[pyo3(signature = ($arg = None), text_signature = $sig)])?
                fn $name<'py>(
                    &self,
                    py: pyo3::Python<'py>,
                    $($arg: crate::convert::Arg,)?
                ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::PyAny>> {
                    crate::errors::boundary(py, || {
                        $(
                            let $arg = crate::convert::$conv(
                                $arg,
                                stringify!($arg),
                                $(agentbreaker::interop::ArgKind::$kind)?
                            );
                            let $arg = crate::errors::IntoPyResult::or_raise($arg, py)?;
                        )?
                        crate::convert::$how(py, || self.inner.$core($(&$arg)?))
                    })
                }
            )*
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

/// The native part of agentbreaker. Import from `agentbreaker` instead.
#[pyo3::pymodule(name = "_native")]
mod native {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::functions::{
        analyze, config_from_env, fingerprint, metric_definitions, metric_updates, profile,
        profile_names,
    };
    #[pymodule_export]
    use crate::{
        agent_loop::Loop, budget::BudgetBreaker, clock::ManualClock, clock::SystemClock,
        failure::FailureBreaker, failure::GuardedFunction, monitor::Monitor,
        stagnation::StagnationBreaker, strategy::ExitStrategy, strategy::FixPlan,
    };

    #[pymodule_init]
    fn init(module: &Bound<'_, PyModule>) -> PyResult<()> {
        module.add("__version__", env!("CARGO_PKG_VERSION"))?;
        crate::errors::register(module)
    }
}

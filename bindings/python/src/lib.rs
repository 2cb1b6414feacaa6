//! Python bindings of agentbreaker: the native module `agentbreaker._native`, re-exported by the
//! pure-Python package `agentbreaker` (python/agentbreaker).
//!
//! This crate converts types and errors and nothing else; every rule lives in the core, and the
//! rules of conversion in `agentbreaker::interop` (one file each: `convert`, `errors`):
//! - keyword arguments (snake_case) become the contract's config objects (camelCase) and go
//!   through the core's `from_json` validators; arguments go through `IterationMetrics::from_json`,
//!   `Observation::from_json`, `BudgetBreaker::ingest`, `Monitor::observe`, `restore_json`, ...;
//! - results go through `serde_json::to_value` into dicts with the contract's camelCase keys;
//! - core errors become one exception class per code (`errors`);
//! - core calls run with the GIL released; listeners re-acquire it (`listeners`);
//! - every entry point is a panic boundary: a panic is an `InternalError`, never a crash.

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

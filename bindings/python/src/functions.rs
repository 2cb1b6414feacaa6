//! Module-level functions: `analyze` (contract section 5), `fingerprint` (section 6),
//! `config_from_env` (section 7), `profile`, and the metrics vocabulary (docs/observability.md).

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::metrics::{self, Options, Update};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::convert::{
    Arg, arg_str, arg_str_opt, detached_py, detached_result_py, json_to_py, to_json,
};
use crate::convert::{to_py, type_name};
use crate::errors::{IntoPyResult, boundary, detached};

/// Scores one agent response for completion: `{completionSignal: {detected, confidence,
/// phrases}, confidence, exitSignal, testsPassing, testsFailing}`.
#[pyfunction]
#[pyo3(signature = (text = None), text_signature = "(text)")]
pub fn analyze<'py>(py: Python<'py>, text: Arg) -> PyResult<Bound<'py, PyAny>> {
    boundary(py, || {
        let text = arg_str(text, "text").or_raise(py)?;
        detached_py(py, || agentbreaker::analyze(&text))
    })
}

/// The fingerprint of an error text under `error_match` (`"exact"`, `"normalized"`,
/// `"template"` or `"key_line"`): errors with the same fingerprint count as the same error.
#[pyfunction]
#[pyo3(
    signature = (error = None, error_match = None),
    text_signature = "(error, error_match='normalized')"
)]
pub fn fingerprint(py: Python<'_>, error: Arg, error_match: Arg) -> PyResult<String> {
    boundary(py, || {
        let error = arg_str(error, "error").or_raise(py)?;
        let mode = arg_str_opt(error_match, "error_match")
            .and_then(|m| interop::error_match(m.as_deref()))
            .or_raise(py)?;
        detached(py, || agentbreaker::fingerprint(&error, mode))
    })
}

/// A BudgetBreaker config from `AGENTBREAKER_*` (and `BB_CIRCUIT_BREAKER_*`) variables:
/// `{config, warnings}`, from `os.environ` when `env` is None, else the mapping given. Invalid
/// values fall back to the defaults, with a warning.
#[pyfunction]
#[pyo3(signature = (env = None))]
pub fn config_from_env<'py>(py: Python<'py>, env: Arg) -> PyResult<Bound<'py, PyAny>> {
    boundary(py, || {
        let Some(env) = env.filter(|e| !e.is_none()) else {
            return detached_py(py, agentbreaker::config_from_process_env);
        };
        // Keys must be `str`; values are handed on as they are, so the core reports a non-string
        // value (`INVALID_ARGUMENT`).
        let json = to_json(env, "env", ArgKind::Argument).or_raise(py)?;
        if !json.is_object() {
            let expected = "a mapping of str to str (such as os.environ)";
            let error = ArgKind::Argument.wrong_type("env", expected, &type_name(env));
            return Err(error).or_raise(py);
        }
        detached_result_py(py, || agentbreaker::config_from_env_json(&json))
    })
}

/// The named configuration of the three breakers (`"seed"`: the defaults; `"coding-agent"`: the
/// step detectors on, tuned on real trajectories), or None: `{name, description, failure,
/// stagnation, budget}`; each config goes straight into its constructor.
#[pyfunction]
#[pyo3(signature = (name = None), text_signature = "(name)")]
pub fn profile<'py>(py: Python<'py>, name: Arg) -> PyResult<Bound<'py, PyAny>> {
    boundary(py, || {
        let name = arg_str(name, "name").or_raise(py)?;
        to_py(py, &agentbreaker::profile(&name))
    })
}

/// The names `profile` knows.
#[pyfunction]
pub fn profile_names(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_py(py, &agentbreaker::PROFILE_NAMES)
}

/// The metrics vocabulary (docs/observability.md): one dict per metric, `{name, prometheusName,
/// instrument, unit, description, attributes, buckets?}`.
#[pyfunction]
pub fn metric_definitions(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    json_to_py(py, &metrics::vocabulary_json())
}

/// The metric updates of a listener event (a dict) of the breaker named `breaker` (`failure`,
/// `stagnation`, `budget`, `loop`, `monitor`): a list of `(name, value, attributes)`.
/// `task=True` adds the task attribute.
#[pyfunction]
#[pyo3(signature = (event, breaker, *, task = false))]
pub fn metric_updates<'py>(
    py: Python<'py>,
    event: &Bound<'py, PyAny>,
    breaker: &str,
    task: bool,
) -> PyResult<Bound<'py, PyList>> {
    boundary(py, || {
        let event = to_json(event, "event", ArgKind::Event).or_raise(py)?;
        let updates = metrics::json_event_updates(&event, breaker, Options { task });
        updates_to_py(py, &updates)
    })
}

/// Updates as a list of `(name, value, attributes)` tuples.
pub fn updates_to_py<'py>(py: Python<'py>, updates: &[Update]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for u in updates {
        let attributes = PyDict::new(py);
        for (k, v) in &u.attributes {
            attributes.set_item(PyString::intern(py, k), v.as_ref())?;
        }
        list.append((PyString::intern(py, u.metric.name), u.value, attributes))?;
    }
    Ok(list)
}

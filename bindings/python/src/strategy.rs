//! Exit strategies and fix plans (SPEC 5).

use agentbreaker::interop::{self, ArgKind, missing};
use agentbreaker::{Analysis, StrategyConfig, analyze};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping, PyString, PyType};

use crate::clock;
use crate::convert::{
    arg_str, arg_str_opt, config_from_arguments, detached_py, to_json, type_name,
};
use crate::errors::{IntoPyResult, boundary, detached};
use crate::listeners::{PyListeners, pymethods_with_listeners};

/// Decides when a loop is done: `ExitStrategy(type="auto", threshold=70)`, `done_signals`,
/// `fix_plan`, `circuit_breaker` or `composite` (with `mode` and `members`, a list of strategy
/// config dicts).
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct ExitStrategy {
    inner: agentbreaker::ExitStrategy,
    listeners: PyListeners,
}

impl ExitStrategy {
    fn build(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
        parse: fn(&serde_json::Value) -> agentbreaker::Result<StrategyConfig>,
    ) -> PyResult<Self> {
        let clock = clock::from_keyword(clock).or_raise(py)?;
        let config = config_from_arguments(config, options)
            .and_then(|c| parse(&c))
            .or_raise(py)?;
        Ok(ExitStrategy {
            inner: agentbreaker::ExitStrategy::with_clock(config, clock),
            listeners: PyListeners::default(),
        })
    }
}

pymethods_with_listeners!(ExitStrategy {
    #[new]
    #[pyo3(signature = (config = None, /, *, clock = None, **options))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        boundary(py, || Self::build(py, config, clock, options, StrategyConfig::from_json))
    }

    /// Sees one iteration, given as its analysis (the dict `analyze` returns) or as the response
    /// text (analyzed here), with the circuit state; decides: `{exit, reason}`.
    #[pyo3(
        signature = (response = None, circuit_state = None),
        text_signature = "($self, response, circuit_state='CLOSED')"
    )]
    fn should_exit<'py>(
        &self,
        py: Python<'py>,
        response: Option<&Bound<'py, PyAny>>,
        circuit_state: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        boundary(py, || {
            let analysis = match response {
                Some(r) if r.is_instance_of::<PyString>() => {
                    let text = arg_str(Some(r), "response").or_raise(py)?;
                    detached(py, || analyze(&text))?
                }
                Some(r) if r.cast::<PyMapping>().is_ok() => {
                    to_json(r, "response", ArgKind::Argument)
                        .and_then(|a| Analysis::from_json(&a))
                        .or_raise(py)?
                }
                Some(r) => {
                    let expected = "a str or an analysis dict";
                    let got = type_name(r);
                    return Err(ArgKind::Argument.wrong_type("response", expected, &got)).or_raise(py);
                }
                None => return Err(missing("response")).or_raise(py),
            };
            let state = arg_str_opt(circuit_state, "circuit_state")
                .and_then(|s| interop::state(s.as_deref()))
                .or_raise(py)?;
            let inner = &self.inner;
            detached_py(py, || inner.should_exit(&analysis, state))
        })
    }

    /// For a `fix_plan` strategy, `{steps, currentStep}`; None for the others.
    fn plan_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        detached_py(py, || inner.plan_status())
    }

    /// Forgets everything seen: back to the configured state.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        detached(py, || inner.reset())
    }
});

/// A `fix_plan` strategy on its own: `FixPlan(steps=[{"description": ...}, ...])`,
/// `FixPlan(markdown="- [ ] ...")` or `FixPlan.from_markdown(text)`.
#[pyclass(frozen, extends = ExitStrategy, module = "agentbreaker")]
#[derive(Debug)]
pub struct FixPlan;

#[pymethods]
impl FixPlan {
    #[new]
    #[pyo3(signature = (config = None, /, *, clock = None, **options))]
    fn new(
        py: Python<'_>,
        config: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        boundary(py, || {
            let strategy = ExitStrategy::build(
                py,
                config,
                clock,
                options,
                StrategyConfig::fix_plan_from_json,
            )?;
            Ok(PyClassInitializer::from(strategy).add_subclass(FixPlan))
        })
    }

    /// A plan from a markdown checklist (`- [ ]` / `- [x]` items).
    #[classmethod]
    #[pyo3(
        signature = (markdown = None, *, max_attempts = None, clock = None),
        text_signature = "(markdown, *, max_attempts=3, clock=None)"
    )]
    fn from_markdown<'py>(
        cls: &Bound<'py, PyType>,
        markdown: Option<&Bound<'py, PyAny>>,
        max_attempts: Option<&Bound<'py, PyAny>>,
        clock: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = cls.py();
        boundary(py, || {
            let kwargs = PyDict::new(py);
            let markdown = markdown.ok_or_else(|| missing("markdown")).or_raise(py)?;
            kwargs.set_item("markdown", markdown)?;
            if let Some(m) = max_attempts {
                kwargs.set_item("max_attempts", m)?;
            }
            if let Some(c) = clock {
                kwargs.set_item("clock", c)?;
            }
            cls.call((), Some(&kwargs))
        })
    }

    /// `{steps: [{description, completed, skipped, attempts, maxAttempts}], currentStep}`.
    fn get_status<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let inner = &slf.as_super().get().inner;
        detached_py(py, || inner.plan_status())
    }
}

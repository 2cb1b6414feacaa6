//! Exit strategies and fix plans (contract section 5).

use agentbreaker::interop::{self, ArgKind, missing};
use agentbreaker::{Analysis, StrategyConfig, analyze};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping, PyString, PyType};

use crate::convert::{arg_str, arg_str_opt, construct, detached_py, to_json, type_name};
use crate::errors::{IntoPyResult, boundary, detached};
use crate::listeners::PyListeners;

/// Decides when a loop is done: `ExitStrategy(type="auto", threshold=70)`, `done_signals`,
/// `fix_plan`, `circuit_breaker` or `composite` (with `mode` and `members`, a list of strategy
/// config dicts).
#[pyclass(frozen, subclass, module = "agentbreaker")]
#[derive(Debug)]
pub struct ExitStrategy {
    inner: agentbreaker::ExitStrategy,
    listeners: PyListeners,
}

/// The analysis `should_exit` takes: of the response text (analyzed here), or an analysis dict.
fn analysis(py: Python<'_>, response: Option<&Bound<'_, PyAny>>) -> PyResult<Analysis> {
    match response {
        Some(r) if r.is_instance_of::<PyString>() => {
            let text = arg_str(Some(r), "response").or_raise(py)?;
            detached(py, || analyze(&text))
        }
        Some(r) if r.cast::<PyMapping>().is_ok() => to_json(r, "response", ArgKind::Argument)
            .and_then(|a| Analysis::from_json(&a))
            .or_raise(py),
        Some(r) => {
            let expected = "a str or an analysis dict";
            Err(ArgKind::Argument.wrong_type("response", expected, &type_name(r))).or_raise(py)
        }
        None => Err(missing("response")).or_raise(py),
    }
}

event_source_class!(ExitStrategy {
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
            let analysis = analysis(py, response)?;
            let state = arg_str_opt(circuit_state, "circuit_state")
                .and_then(|s| interop::state(s.as_deref()))
                .or_raise(py)?;
            detached_py(py, || self.inner.should_exit(&analysis, state))
        })
    }

    /// For a `fix_plan` strategy, `{steps, currentStep}`; None for the others.
    fn plan_status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        detached_py(py, || self.inner.plan_status())
    }

    /// Forgets everything seen: back to the configured state.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.inner.reset())
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
        let inner = construct(py, config, clock, options, |config, clock| {
            let config = StrategyConfig::fix_plan_from_json(config)?;
            Ok(agentbreaker::ExitStrategy::with_clock(config, clock))
        })?;
        let strategy = ExitStrategy {
            inner,
            listeners: PyListeners::default(),
        };
        Ok(PyClassInitializer::from(strategy).add_subclass(FixPlan))
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
            if let Some(max_attempts) = max_attempts {
                kwargs.set_item("max_attempts", max_attempts)?;
            }
            if let Some(clock) = clock {
                kwargs.set_item("clock", clock)?;
            }
            cls.call((), Some(&kwargs))
        })
    }

    /// `{steps: [{description, completed, skipped, attempts, maxAttempts}], currentStep}`.
    fn get_status<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &slf.as_super().get().inner;
        detached_py(slf.py(), || inner.plan_status())
    }
}

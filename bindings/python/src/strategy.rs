//! Exit strategies and fix plans (contract section 5).

use agentbreaker::interop::{self, ArgKind};
use agentbreaker::{Analysis, StrategyConfig, analyze};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyMapping, PyString, PyType};

use crate::convert::{
    Arg, arg_str, arg_str_opt, construct, detached_py, required, to_json, type_name,
};
use crate::errors::{IntoPyResult, boundary, detached};

/// The analysis `should_exit` takes: of the response text (analyzed here), or an analysis dict.
fn analysis(py: Python<'_>, response: Arg) -> PyResult<Analysis> {
    let response = required(response, "response").or_raise(py)?;
    if response.is_instance_of::<PyString>() {
        let text = arg_str(Some(response), "response").or_raise(py)?;
        detached(py, || analyze(&text))
    } else if response.cast::<PyMapping>().is_ok() {
        let analysis = to_json(response, "response", ArgKind::Argument);
        analysis.and_then(|a| Analysis::from_json(&a)).or_raise(py)
    } else {
        let expected = "a str or an analysis dict";
        let error = ArgKind::Argument.wrong_type("response", expected, &type_name(response));
        Err(error).or_raise(py)
    }
}

event_source_class! {
    /// Decides when a loop is done: `ExitStrategy(type="auto", threshold=70)`, `done_signals`,
    /// `fix_plan`, `circuit_breaker` or `composite` (with `mode` and `members`, a list of strategy
    /// config dicts).
    ExitStrategy {
        /// Sees one iteration, given as its analysis (the dict `analyze` returns) or as the
        /// response text (analyzed here), with the circuit state; decides: `{exit, reason}`.
        #[pyo3(
            signature = (response = None, circuit_state = None),
            text_signature = "($self, response, circuit_state='CLOSED')"
        )]
        fn should_exit<'py>(
            &self,
            py: Python<'py>,
            response: Arg,
            circuit_state: Arg,
        ) -> PyResult<Bound<'py, PyAny>> {
            boundary(py, || {
                let analysis = analysis(py, response)?;
                let state = arg_str_opt(circuit_state, "circuit_state")
                    .and_then(|s| interop::state(s.as_deref()))
                    .or_raise(py)?;
                detached_py(py, || self.inner.should_exit(&analysis, state))
            })
        }
    }
    /// For a `fix_plan` strategy, `{steps, currentStep}`; None for the others.
    fn plan_status = detached_py(plan_status);
    /// Forgets everything seen: back to the configured state.
    fn reset = detached_py(reset);
}

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
        config: Arg,
        clock: Arg,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let inner = construct(py, config, clock, options, |config, clock| {
            let config = StrategyConfig::fix_plan_from_json(config)?;
            Ok(agentbreaker::ExitStrategy::with_clock(config, clock))
        })?;
        let listeners = Default::default();
        let strategy = ExitStrategy { inner, listeners };
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
        markdown: Arg<'_, 'py>,
        max_attempts: Arg<'_, 'py>,
        clock: Arg<'_, 'py>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = cls.py();
        boundary(py, || {
            let markdown = required(markdown, "markdown").or_raise(py)?;
            let kwargs = [("markdown", Some(markdown)), ("max_attempts", max_attempts)];
            let kwargs = kwargs.into_iter().chain([("clock", clock)]);
            let kwargs = kwargs
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .into_py_dict(py)?;
            cls.call((), Some(&kwargs))
        })
    }

    /// `{steps: [{description, completed, skipped, attempts, maxAttempts}], currentStep}`.
    fn get_status<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &slf.as_super().get().inner;
        detached_py(slf.py(), || inner.plan_status())
    }
}

//! `FailureBreaker` (contract section 2), and the guarded call: `call`, `with breaker:`
//! (`__enter__` / `__exit__`) and `GuardedFunction`, the callable the `@breaker` decorator
//! returns. A guarded call crosses into the native module once: the core's `try_acquire`, the
//! Python callable, then the core's `record_success` or `record_failure`. The decorator itself and
//! the async forms are in the Python package, on a subclass, built on these.
//!
//! The hot path (permission in CLOSED, a success) holds the GIL: those core calls take well under
//! a microsecond, never wait for Python and do no I/O, so releasing the GIL would cost more than
//! it saves (`make bench-python`'s goal: a guarded no-op call at least 10x cheaper than
//! pybreaker's). A breaker with `state_path` may write its file on a transition, so its calls
//! release the GIL, as does recording a failure (the error text is fingerprinted). A breaker with
//! `store` answers the hot path from its view of the shared state under the GIL (the core's
//! `*_without_waiting`: they never wait) and releases the GIL for every call that may wait for
//! the store (a round trip of up to `store_timeout_ms`).

use agentbreaker::Permission;
use agentbreaker::interop::ArgKind;
use pyo3::PyTraverseError;
use pyo3::exceptions::{PyBaseException, PyException};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::convert::{callable, type_name};
use crate::errors::{IntoPyResult, attached, detached};

/// `(True, None)`, the answer of `should_allow_operation` in CLOSED: built once, not per call.
static ALLOWED: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();

/// `types.MethodType`, for `GuardedFunction.__get__`.
static METHOD_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The text a failure is recorded with: `str(exc)`, or the exception's class name when that is
/// empty or cannot be computed (a broken `__str__` must not hide the failure). Lone surrogates
/// are replaced, so every exception can be recorded.
fn error_text(exception: &Bound<'_, PyAny>) -> String {
    let text = exception.str().map(|s| s.to_string_lossy().into_owned());
    let text = text.ok().filter(|t| !t.is_empty());
    text.unwrap_or_else(|| type_name(exception))
}

impl FailureBreaker {
    /// The breaker may write its state file on a transition: every call releases the GIL.
    fn writes_a_file(&self) -> bool {
        self.inner.config().state_path.is_some()
    }

    /// The first half of a guarded call: `CircuitOpenError` with the refusal message, or the
    /// permission. Under the GIL when the core can answer without waiting (always without a
    /// store), else without it.
    fn acquire(&self, py: Python<'_>) -> PyResult<Permission> {
        if !self.writes_a_file()
            && let Some(answer) = attached(py, || self.inner.try_acquire_without_waiting())?
        {
            return answer.or_raise(py);
        }
        detached(py, || self.inner.try_acquire())?.or_raise(py)
    }

    /// Records a success: under the GIL when no round trip to a store is needed.
    fn success(&self, py: Python<'_>) -> PyResult<()> {
        if !self.writes_a_file() && attached(py, || self.inner.record_success_without_waiting())? {
            return Ok(());
        }
        detached(py, || self.inner.record_success())
    }

    /// Records the outcome of a guarded call: a success when `exception` is None, a failure (with
    /// its text) when it is an `Exception`, nothing for other `BaseException`s (a cancelled task,
    /// `KeyboardInterrupt`, `SystemExit` say nothing about the service).
    fn record_outcome(&self, py: Python<'_>, exception: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        match exception {
            None => self.success(py),
            Some(e) if e.is_instance_of::<PyException>() => {
                let text = error_text(e);
                detached(py, || self.inner.record_failure(&text))
            }
            Some(_) => Ok(()),
        }
    }

    /// `func(*args, **kwargs)` through the breaker (contract section 2, "Guarded calls").
    fn guarded_call<'py>(
        &self,
        py: Python<'py>,
        func: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.acquire(py)?;
        match func.call(args, kwargs) {
            Ok(result) => self.success(py).map(|()| result),
            Err(error) => {
                let exception = error.value(py).clone().into_any();
                if let Err(internal) = self.record_outcome(py, Some(&exception)) {
                    // Only a bug in the core gets here; the caller's exception stays attached.
                    internal.set_cause(py, Some(error));
                    return Err(internal);
                }
                Err(error)
            }
        }
    }
}

event_source_class! {
    /// Consecutive failures open the circuit; after a cooldown a probe decides whether it closes.
    FailureBreaker {
        /// Records a success: the count returns to 0; in HALF_OPEN the circuit closes.
        fn record_success(&self, py: Python<'_>) -> PyResult<()> {
            self.success(py)
        }

        /// `(allowed, message)`; after the cooldown this call is the half-open probe.
        fn should_allow_operation<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
            let permission = if self.writes_a_file() {
                detached(py, || self.inner.should_allow_operation())?
            } else if self.inner.config().store.is_none() {
                attached(py, || self.inner.should_allow_operation())?
            } else {
                // With a store: the view's CLOSED answer under the GIL, anything else without it.
                match attached(py, || self.inner.try_acquire_without_waiting())? {
                    Some(Ok(permission)) => permission,
                    _ => detached(py, || self.inner.should_allow_operation())?,
                }
            };
            if permission.allowed && permission.message.is_none() {
                let init = || (true, py.None()).into_pyobject(py).map(Bound::unbind);
                return Ok(ALLOWED.get_or_try_init(py, init)?.bind(py).clone());
            }
            (permission.allowed, permission.message).into_pyobject(py)
        }

        /// The first half of a guarded call: raises `CircuitOpenError` (with the refusal message)
        /// when the breaker says no, else returns the permission's message (`None` when CLOSED).
        /// Record the outcome with `record_success`/`record_failure` afterwards.
        fn try_acquire(&self, py: Python<'_>) -> PyResult<Option<String>> {
            Ok(self.acquire(py)?.message)
        }

        /// Runs `func(*args, **kwargs)` through the breaker and returns its result: raises
        /// `CircuitOpenError` without running it when refused; records a success when it returns
        /// and a failure (`str(exc)`, or the class name when that is empty) when it raises an
        /// `Exception`, which propagates unchanged. Other `BaseException`s record nothing.
        #[pyo3(signature = (func, /, *args, **kwargs))]
        fn call<'py>(
            &self,
            py: Python<'py>,
            func: &Bound<'py, PyAny>,
            args: &Bound<'py, PyTuple>,
            kwargs: Option<&Bound<'py, PyDict>>,
        ) -> PyResult<Bound<'py, PyAny>> {
            callable(func, "func").or_raise(py)?;
            self.guarded_call(py, func, args, kwargs)
        }

        /// `with breaker:` asks for permission (raising `CircuitOpenError` when refused, so the
        /// body never runs) ...
        fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
            slf.get().acquire(slf.py())?;
            Ok(slf)
        }

        /// ... and records the block's outcome as `call` does; the exception (if any) propagates.
        #[pyo3(signature = (exc_type, exc, traceback))]
        fn __exit__(
            &self,
            py: Python<'_>,
            exc_type: &Bound<'_, PyAny>,
            exc: &Bound<'_, PyAny>,
            traceback: &Bound<'_, PyAny>,
        ) -> PyResult<()> {
            let _ = (exc_type, traceback);
            if !exc.is_none() && !exc.is_instance_of::<PyBaseException>() {
                let got = type_name(exc);
                return Err(ArgKind::Argument.wrong_type("exc", "an exception or None", &got))
                    .or_raise(py);
            }
            self.record_outcome(py, (!exc.is_none()).then_some(exc))
        }

        fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
            let inner = &slf.get().inner;
            let status = detached(slf.py(), || inner.status())?;
            let (state, count) = (status.state.as_str(), status.consecutive_failures);
            let name = slf.get_type().name()?;
            Ok(format!(
                "{name}(state='{state}', consecutive_failures={count})"
            ))
        }
    }
    /// Records a failure with the error's text.
    fn record_failure(error: arg_str "($self, error)") = detached_py(record_failure);
    /// The status dict (contract section 2).
    fn get_status = detached_py(status);
    /// Lifetime counters.
    fn metrics = detached_py(metrics);
    /// Back to CLOSED with zeroed counters, history and backoff; metrics keep counting.
    fn reset = detached_py(reset);
    /// The persistent form of the state (a dict; `restore` takes it back).
    fn snapshot = detached_py(snapshot);
    /// Replaces the state with a snapshot's (OPEN stays OPEN, HALF_OPEN comes back CLOSED).
    fn restore(snapshot: required_json(Snapshot) "($self, snapshot)")
        = detached_result_py(restore_json);
    /// Writes the snapshot to `path` atomically.
    fn save(path: arg_path "($self, path)") = detached_result_py(save);
    /// Restores from `path`; False (and no change) when the file does not exist.
    fn load(path: arg_path "($self, path)") = detached_result_py(load);
    /// `"CLOSED"`, `"HALF_OPEN"` or `"OPEN"` (without the lazy OPEN → HALF_OPEN move).
    #[getter]
    fn state = detached_py(state);
    /// The configuration in effect, with camelCase keys.
    #[getter]
    fn config = attached_py(config);
    /// With `store`: `{url, key, mode, outages, lastError}` (where the state lives now —
    /// `"shared"`, `"local"` or `"refusing"` — the URL without its password, the key, the
    /// outages so far and the last error); `None` without a store.
    fn store_status = attached_py(store_status);
}

/// What `@breaker` returns for a (non-coroutine) function: calling it is `breaker.call(func,
/// *args, **kwargs)` without a Python frame in between. Like a function it binds as a method
/// (`__get__`), can be weakly referenced and has a `__dict__`, so `functools.update_wrapper` gives
/// it the function's name, doc, signature and `__wrapped__`.
#[pyclass(frozen, dict, weakref, module = "agentbreaker._native")]
#[derive(Debug)]
pub struct GuardedFunction {
    breaker: Py<FailureBreaker>,
    func: Py<PyAny>,
}

#[pymethods]
impl GuardedFunction {
    #[new]
    fn new(breaker: Bound<'_, FailureBreaker>, func: Bound<'_, PyAny>) -> PyResult<Self> {
        callable(&func, "a guarded function").or_raise(func.py())?;
        let (breaker, func) = (breaker.unbind(), func.unbind());
        Ok(GuardedFunction { breaker, func })
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let func = self.func.bind(py);
        self.breaker.get().guarded_call(py, func, args, kwargs)
    }

    /// A method of a class binds its instance, as a plain function does.
    fn __get__<'py>(
        slf: Bound<'py, Self>,
        instance: Option<Bound<'py, PyAny>>,
        _owner: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match instance {
            Some(instance) if !instance.is_none() => {
                let method_type = METHOD_TYPE.import(slf.py(), "types", "MethodType")?;
                method_type.call1((slf, instance))
            }
            _ => Ok(slf.into_any()),
        }
    }

    /// Pickled by reference, as a function is: the name it is found under in its module (so a
    /// decorated module-level function can go to another process, as with `multiprocessing`).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.getattr("__qualname__")
    }

    /// The breaker guarding the calls.
    #[getter]
    fn breaker(&self, py: Python<'_>) -> Py<FailureBreaker> {
        self.breaker.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("<guarded {}>", self.func.bind(py).repr()?))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.breaker)?;
        visit.call(&self.func)
    }
}

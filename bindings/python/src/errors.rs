//! The exception hierarchy (`AgentBreakerError` and one subclass per core error code), the one
//! conversion from a core [`Error`] to a Python exception, and the panic boundary: no panic ever
//! reaches Python as a `PanicException`; `agentbreaker::interop` turns it into `INTERNAL`
//! (`InternalError`).

use std::panic::{AssertUnwindSafe, catch_unwind};

use agentbreaker::Error;
use agentbreaker::interop::{catch, panic_error};
use pyo3::PyTypeInfo;
use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The module the exception classes say they belong to (where users import them from).
const EXCEPTIONS_MODULE: &str = "agentbreaker.exceptions";

/// One class per code of `agentbreaker::ERROR_CODES`, with its docstring.
const CLASSES: [(&str, &str, &str); 8] = [
    (
        "INVALID_CONFIG",
        "InvalidConfigError",
        "A configuration value has the wrong type, is out of range, or is an unknown keyword.",
    ),
    (
        "INVALID_ARGUMENT",
        "InvalidArgumentError",
        "An argument has the wrong type or value, or the operation is not allowed now.",
    ),
    (
        "INVALID_EVENT",
        "InvalidEventError",
        "An event (BudgetBreaker.ingest, Monitor.observe) is malformed.",
    ),
    (
        "INVALID_SNAPSHOT",
        "InvalidSnapshotError",
        "A snapshot or state file is malformed, of another kind, or of an unknown version.",
    ),
    (
        "IO",
        "PersistenceError",
        "Reading or writing a state file failed (code IO).",
    ),
    (
        "INTERNAL",
        "InternalError",
        "A bug in agentbreaker: a panic caught at the language boundary.",
    ),
    (
        "CIRCUIT_OPEN",
        "CircuitOpenError",
        "A guarded call was refused because the circuit is open; the message says why.",
    ),
    (
        "HALTED",
        "AgentHalted",
        "A Monitor halted the task: raise it with the halt verdict to stop the agent's code; \
         `verdict` holds the verdict dict, str(error) its message.",
    ),
];

/// What `AgentHalted` adds to a plain class: it is built from the halt verdict (or, when a core
/// error carries only the message, from that) and keeps it; it pickles with it.
const AGENT_HALTED_BODY: &std::ffi::CStr = c"
def __init__(self, verdict, /):
    if isinstance(verdict, str):
        verdict = {'action': 'halt', 'reason': None, 'message': verdict, 'nudge': None,
                   'taskId': None, 'step': 0, 'detail': None}
    elif not isinstance(verdict, dict):
        raise TypeError(f'AgentHalted takes the halt verdict (a dict), not {type(verdict).__name__}')
    self._verdict = verdict
    AgentBreakerError.__init__(self, verdict.get('message') or 'the task was halted')

def verdict(self):
    '''The halt verdict: {action, reason, message, nudge, taskId, step, detail}.'''
    return self._verdict

verdict = property(verdict)

def __reduce__(self):
    return (type(self), (self._verdict,))
";

struct Classes {
    base: Py<PyType>,
    by_code: Vec<(&'static str, Py<PyType>)>,
}

static EXCEPTIONS: PyOnceLock<Classes> = PyOnceLock::new();

/// The Python builtins a class also derives from, so `except ValueError` and `except TypeError`
/// work where Python users expect them to.
fn builtin_bases<'py>(py: Python<'py>, code: &str) -> Vec<Bound<'py, PyType>> {
    match code {
        "INVALID_CONFIG" | "INVALID_ARGUMENT" => {
            vec![PyValueError::type_object(py), PyTypeError::type_object(py)]
        }
        "INVALID_EVENT" | "INVALID_SNAPSHOT" => vec![PyValueError::type_object(py)],
        "IO" => vec![PyOSError::type_object(py)],
        "INTERNAL" => vec![PyRuntimeError::type_object(py)],
        _ => Vec::new(),
    }
}

fn new_class<'py>(
    py: Python<'py>,
    (code, name, doc): (&str, &str, &str),
    bases: Vec<Bound<'py, PyType>>,
    namespace: Bound<'py, PyDict>,
) -> PyResult<Py<PyType>> {
    namespace.set_item("__module__", EXCEPTIONS_MODULE)?;
    namespace.set_item("__doc__", doc)?;
    namespace.set_item("code", code)?;
    let bases = PyTuple::new(py, bases)?;
    let class = py.get_type::<PyType>().call1((name, bases, namespace))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

fn create(py: Python<'_>) -> PyResult<Classes> {
    let base = new_class(
        py,
        (
            "",
            "AgentBreakerError",
            "Base class of every agentbreaker error; `code` names the kind (a subclass per code).",
        ),
        vec![PyException::type_object(py)],
        PyDict::new(py),
    )?;
    let mut by_code = Vec::with_capacity(CLASSES.len());
    for class in CLASSES {
        let mut bases = vec![base.bind(py).clone()];
        bases.extend(builtin_bases(py, class.0));
        let namespace = PyDict::new(py);
        if class.0 == "HALTED" {
            let globals = PyDict::new(py);
            globals.set_item("AgentBreakerError", base.bind(py))?;
            py.run(AGENT_HALTED_BODY, Some(&globals), Some(&namespace))?;
        }
        by_code.push((class.0, new_class(py, class, bases, namespace)?));
    }
    Ok(Classes { base, by_code })
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    EXCEPTIONS.get_or_try_init(py, || create(py))
}

/// Adds the exception classes to the native module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let classes = classes(py)?;
    module.add("AgentBreakerError", classes.base.bind(py))?;
    for ((_, name, _), (_, class)) in CLASSES.iter().zip(&classes.by_code) {
        module.add(*name, class.bind(py))?;
    }
    Ok(())
}

/// The Python exception for a core error: the subclass of its code, with the message (without
/// the `CODE: ` prefix; the class and its `code` attribute carry the code).
pub fn to_py(py: Python<'_>, error: &Error) -> PyErr {
    match classes(py) {
        Ok(classes) => {
            let class = classes
                .by_code
                .iter()
                .find(|(code, _)| *code == error.code())
                .map_or(&classes.base, |(_, class)| class);
            PyErr::from_type(class.bind(py).clone(), error.message().to_string())
        }
        Err(e) => e,
    }
}

/// `Result` of a core error, as Python sees it.
pub trait IntoPyResult<T> {
    /// Converts the error (if any) into its Python exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}

/// The language boundary of a method that holds the GIL: a panic becomes `InternalError`.
pub fn boundary<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(to_py(py, &panic_error(&*payload))))
}

/// Runs a short core call (no I/O, no waiting, a few hundred nanoseconds) with the GIL held,
/// turning a panic into `InternalError`. Releasing and re-taking the GIL would cost more than the
/// call itself. Safe because the core never waits for Python while it holds a lock of its own:
/// listeners run after its locks are released (on this thread the GIL is then already held).
pub fn attached<T>(py: Python<'_>, f: impl FnOnce() -> T) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| to_py(py, &panic_error(&*payload)))
}

/// Runs core code with the GIL released (a breaker may wait for its lock, and listeners re-acquire
/// the GIL), turning a panic into `InternalError`.
pub fn detached<T: Send>(py: Python<'_>, f: impl Send + FnOnce() -> T) -> PyResult<T> {
    py.detach(|| catch(|| Ok(f()))).or_raise(py)
}

/// [`detached`] for core calls that return a core `Result`.
pub fn detached_result<T: Send>(
    py: Python<'_>,
    f: impl Send + FnOnce() -> Result<T, Error>,
) -> PyResult<T> {
    detached(py, f)?.or_raise(py)
}

//! The exception hierarchy (`AgentBreakerError` and one subclass per core error code), the one
//! conversion from a core [`Error`] to a Python exception, and the panic boundary: no panic ever
//! reaches Python as a `PanicException`; `agentbreaker::interop` turns it into `INTERNAL`
//! (`InternalError`).

use std::panic::{AssertUnwindSafe, catch_unwind};

use agentbreaker::Error;
use agentbreaker::interop::{catch, panic_error};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// One class per code of `agentbreaker::ERROR_CODES`: code, name, the builtins it also derives
/// from (so `except ValueError` works where Python users expect it to), docstring.
const CLASSES: [(&str, &str, &str, &str); 8] = [
    (
        "INVALID_CONFIG",
        "InvalidConfigError",
        "ValueError TypeError",
        "A configuration value has the wrong type, is out of range, or is an unknown keyword.",
    ),
    (
        "INVALID_ARGUMENT",
        "InvalidArgumentError",
        "ValueError TypeError",
        "An argument has the wrong type or value, or the operation is not allowed now.",
    ),
    (
        "INVALID_EVENT",
        "InvalidEventError",
        "ValueError",
        "An event (BudgetBreaker.ingest, Monitor.observe) is malformed.",
    ),
    (
        "INVALID_SNAPSHOT",
        "InvalidSnapshotError",
        "ValueError",
        "A snapshot or state file is malformed, of another kind, or of an unknown version.",
    ),
    (
        "IO",
        "PersistenceError",
        "OSError",
        "Reading or writing a state file failed (code IO).",
    ),
    (
        "INTERNAL",
        "InternalError",
        "RuntimeError",
        "A bug in agentbreaker: a panic caught at the language boundary.",
    ),
    (
        "CIRCUIT_OPEN",
        "CircuitOpenError",
        "",
        "A guarded call was refused because the circuit is open; the message says why.",
    ),
    (
        "HALTED",
        "AgentHalted",
        "",
        "A Monitor halted the task: raise it with the halt verdict to stop the agent's code; \
         `verdict` holds the verdict dict, str(error) its message.",
    ),
];

/// The base class.
const BASE: (&str, &str, &str) = (
    "",
    "AgentBreakerError",
    "Base class of every agentbreaker error; `code` names the kind (a subclass per code).",
);

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

/// `AgentBreakerError`, then the class of each code in the order of [`CLASSES`].
static EXCEPTIONS: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// A class in `agentbreaker.exceptions` (where users import them from).
fn new_class<'py>(
    (code, name, doc): (&str, &str, &str),
    bases: Vec<Bound<'py, PyAny>>,
    namespace: Bound<'py, PyDict>,
) -> PyResult<Py<PyType>> {
    let py = namespace.py();
    namespace.set_item("__module__", "agentbreaker.exceptions")?;
    namespace.set_item("__doc__", doc)?;
    namespace.set_item("code", code)?;
    let class = py
        .get_type::<PyType>()
        .call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

fn classes(py: Python<'_>) -> PyResult<&[Py<PyType>]> {
    let classes = EXCEPTIONS.get_or_try_init(py, || {
        let builtins = py.import("builtins")?;
        let exception = builtins.getattr("Exception")?;
        let base = new_class(BASE, vec![exception], PyDict::new(py))?;
        let mut classes = vec![base.clone_ref(py)];
        for (code, name, builtin_bases, doc) in CLASSES {
            let mut bases = vec![base.bind(py).clone().into_any()];
            for builtin in builtin_bases.split_whitespace() {
                bases.push(builtins.getattr(builtin)?);
            }
            let namespace = PyDict::new(py);
            if code == "HALTED" {
                let globals = PyDict::new(py);
                globals.set_item("AgentBreakerError", base.bind(py))?;
                py.run(AGENT_HALTED_BODY, Some(&globals), Some(&namespace))?;
            }
            classes.push(new_class((code, name, doc), bases, namespace)?);
        }
        Ok::<_, PyErr>(classes)
    })?;
    Ok(classes)
}

/// Adds the exception classes to the native module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let classes = classes(module.py())?;
    let names = std::iter::once("AgentBreakerError").chain(CLASSES.iter().map(|c| c.1));
    for (name, class) in names.zip(classes) {
        module.add(name, class)?;
    }
    Ok(())
}

/// The Python exception for a core error: the subclass of its code, with the message (without
/// the `CODE: ` prefix; the class and its `code` attribute carry the code).
pub fn exception(py: Python<'_>, error: &Error) -> PyErr {
    match classes(py) {
        Ok(classes) => {
            let index = CLASSES.iter().position(|c| c.0 == error.code());
            let class = classes[index.map_or(0, |i| i + 1)].bind(py).clone();
            PyErr::from_type(class, error.message().to_string())
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
        self.map_err(|e| exception(py, &e))
    }
}

/// The language boundary of a method that holds the GIL: a panic becomes `InternalError`.
pub fn boundary<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|payload| Err(exception(py, &panic_error(&*payload))))
}

/// Runs a short core call (no I/O, no waiting, a few hundred nanoseconds) with the GIL held,
/// turning a panic into `InternalError`. Releasing and re-taking the GIL would cost more than the
/// call itself. Safe because the core never waits for Python while it holds a lock of its own:
/// listeners run after its locks are released (on this thread the GIL is then already held).
pub fn attached<T>(py: Python<'_>, f: impl FnOnce() -> T) -> PyResult<T> {
    boundary(py, || Ok(f()))
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
    py.detach(|| catch(f)).or_raise(py)
}

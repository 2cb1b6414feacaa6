//! The exception hierarchy (`AgentBreakerError` and one subclass per core error code), the one
//! conversion from a core [`Error`] to a Python exception, and the panic boundary: no panic ever
//! reaches Python as a `PanicException`; `agentbreaker::interop` turns it into `INTERNAL`
//! (`InternalError`).

use std::panic::{AssertUnwindSafe, catch_unwind};

use agentbreaker::interop::{catch, panic_error};
use agentbreaker::{ERROR_CODES, Error};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

/// The classes, defined once (run by [`classes`] with `__name__` = `agentbreaker.exceptions`,
/// where users import them from): one per code of `agentbreaker::ERROR_CODES`, also deriving from
/// the builtins a Python user would catch for it. `AgentHalted` is built from the halt verdict
/// (or, when a core error carries only the message, from that), keeps it and pickles with it.
/// `CLASSES` lists them in the order of `ERROR_CODES`, after the base class.
const SOURCE: &std::ffi::CStr = c"
class AgentBreakerError(Exception):
    '''Base class of every agentbreaker error; `code` names the kind (a subclass per code).'''
    code = ''

class InvalidConfigError(AgentBreakerError, ValueError, TypeError):
    '''A configuration value has the wrong type, is out of range, or is an unknown keyword.'''
    code = 'INVALID_CONFIG'

class InvalidArgumentError(AgentBreakerError, ValueError, TypeError):
    '''An argument has the wrong type or value, or the operation is not allowed now.'''
    code = 'INVALID_ARGUMENT'

class InvalidEventError(AgentBreakerError, ValueError):
    '''An event (BudgetBreaker.ingest, Monitor.observe) is malformed.'''
    code = 'INVALID_EVENT'

class InvalidSnapshotError(AgentBreakerError, ValueError):
    '''A snapshot or state file is malformed, of another kind, or of an unknown version.'''
    code = 'INVALID_SNAPSHOT'

class PersistenceError(AgentBreakerError, OSError):
    '''Reading or writing a state file failed (code IO).'''
    code = 'IO'

class InternalError(AgentBreakerError, RuntimeError):
    '''A bug in agentbreaker: a panic caught at the language boundary.'''
    code = 'INTERNAL'

class CircuitOpenError(AgentBreakerError):
    '''A guarded call was refused because the circuit is open; the message says why.'''
    code = 'CIRCUIT_OPEN'

class AgentHalted(AgentBreakerError):
    '''A Monitor halted the task: raise it with the halt verdict to stop the agent's code; \
       `verdict` holds the verdict dict, str(error) its message.'''
    code = 'HALTED'

    def __init__(self, verdict, /):
        if isinstance(verdict, str):
            verdict = {'action': 'halt', 'reason': None, 'message': verdict, 'nudge': None,
                       'taskId': None, 'step': 0, 'detail': None}
        elif not isinstance(verdict, dict):
            raise TypeError('AgentHalted takes the halt verdict (a dict), '
                            f'not {type(verdict).__name__}')
        self._verdict = verdict
        AgentBreakerError.__init__(self, verdict.get('message') or 'the task was halted')

    @property
    def verdict(self):
        '''The halt verdict: {action, reason, message, nudge, taskId, step, detail}.'''
        return self._verdict

    def __reduce__(self):
        return (type(self), (self._verdict,))

CLASSES = [AgentBreakerError, InvalidConfigError, InvalidArgumentError, InvalidEventError,
           InvalidSnapshotError, PersistenceError, InternalError, CircuitOpenError, AgentHalted]
";

/// `AgentBreakerError`, then the class of each code in the order of `ERROR_CODES`.
static EXCEPTIONS: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&[Py<PyType>]> {
    let classes = EXCEPTIONS.get_or_try_init(py, || {
        let globals = PyDict::new(py);
        globals.set_item("__name__", "agentbreaker.exceptions")?;
        py.run(SOURCE, Some(&globals), None)?;
        globals.as_any().get_item("CLASSES")?.extract()
    })?;
    Ok(classes)
}

/// Adds the exception classes to the native module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    for class in classes(module.py())? {
        module.add(class.bind(module.py()).name()?, class)?;
    }
    Ok(())
}

/// The Python exception for a core error: the subclass of its code, with the message (without
/// the `CODE: ` prefix; the class and its `code` attribute carry the code).
pub fn exception(py: Python<'_>, error: &Error) -> PyErr {
    match classes(py) {
        Ok(classes) => {
            let index = ERROR_CODES.iter().position(|c| *c == error.code());
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
